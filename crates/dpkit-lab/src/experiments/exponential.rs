//! Experiment 5: the exponential mechanism picks the most common marital
//! status in the Adult census, with the seed notebook's settings: utility
//! count/1000, declared Δu = 1, ε = 1 (Near & Abuah, *Programming
//! Differential Privacy*, §The exponential mechanism).

use dpkit_core::mechanism::ExponentialMechanism;
use dpkit_plot::{Axis, BarFigure, BarGroup, Curve, CurveStyle, LineFigure};

use super::log_grid;
use crate::Context;
use crate::adult::{ADULT_FILES, text_column};
use crate::error::Result;
use crate::output::{Section, markdown_table, significant};

/// The seed's utility of a status is its count divided by this.
pub const UTILITY_SCALE: f64 = 1000.0;
/// The utility sensitivity the seed declares to the mechanism. The utility's
/// true sensitivity is `1 / UTILITY_SCALE`, so this is 1000× cautious: the
/// selection is in fact `ε / 1000`-DP.
pub const DECLARED_SENSITIVITY: f64 = 1.0;
/// The seed's ε.
pub const SEED_EPSILON: f64 = 1.0;
/// The smaller ε whose selections are drawn next to the exact curves.
const MEASURED_AT: [f64; 4] = [0.01, 0.03, 0.1, 0.3];

/// Marital statuses and their counts, most common first.
pub fn marital_status_counts(statuses: &[String]) -> Vec<(String, f64)> {
    let mut counts: Vec<(String, f64)> = Vec::new();
    for status in statuses {
        match counts.iter_mut().find(|(name, _)| name == status) {
            Some((_, count)) => *count += 1.0,
            None => counts.push((status.clone(), 1.0)),
        }
    }
    counts.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    counts
}

/// The seed's utilities: each count divided by [`UTILITY_SCALE`].
pub fn seed_utilities(counts: &[(String, f64)]) -> Vec<f64> {
    counts.iter().map(|(_, c)| c / UTILITY_SCALE).collect()
}

/// The exact probability of choosing the most common status with the seed's
/// settings, for the statuses in `statuses`.
pub fn seed_top_probability(statuses: &[String]) -> Result<f64> {
    let utilities = seed_utilities(&marital_status_counts(statuses));
    let mechanism = ExponentialMechanism::new(SEED_EPSILON, DECLARED_SENSITIVITY)?;
    Ok(mechanism.selection_probabilities(&utilities)?[0])
}

/// How often each candidate was chosen in `draws` selections.
fn observed_frequencies(
    mechanism: &ExponentialMechanism,
    utilities: &[f64],
    draws: usize,
    context: &mut Context,
) -> Result<Vec<f64>> {
    let mut chosen = vec![0usize; utilities.len()];
    for _ in 0..draws {
        chosen[mechanism.select_with_rng(utilities, &mut context.rng)?] += 1;
    }
    Ok(chosen
        .into_iter()
        .map(|c| c as f64 / draws as f64)
        .collect())
}

/// Selection probabilities at one ε and Δu, with observed frequencies where drawn.
struct Selection {
    epsilon: f64,
    sensitivity: f64,
    exact: Vec<f64>,
    observed: Option<Vec<f64>>,
}

/// The statuses, their utilities and every computed selection.
struct Results {
    people: usize,
    names: Vec<String>,
    counts: Vec<f64>,
    utilities: Vec<f64>,
    draws: usize,
    /// ε = 1 with the declared Δu, then [`MEASURED_AT`]; all with frequencies.
    measured: Vec<Selection>,
    /// ε = 1 with the utility's true sensitivity 1/1000.
    calibrated: Selection,
    sweep: Vec<Selection>,
    /// P(leader) on each Adult file alone.
    per_file: Vec<(&'static str, f64)>,
}

fn exact(epsilon: f64, sensitivity: f64, utilities: &[f64]) -> Result<Selection> {
    Ok(Selection {
        epsilon,
        sensitivity,
        exact: ExponentialMechanism::new(epsilon, sensitivity)?
            .selection_probabilities(utilities)?,
        observed: None,
    })
}

fn compute(context: &mut Context) -> Result<Results> {
    let settings = context.settings;
    let statuses = text_column(&settings.data, &ADULT_FILES, "marital-status")?;
    let counts = marital_status_counts(&statuses);
    let utilities = seed_utilities(&counts);
    let draws = settings.pick(10_000, 2_000);
    let bar = context.progress((1 + MEASURED_AT.len()) as u64, "exponential");
    let mut measured = Vec::with_capacity(1 + MEASURED_AT.len());
    for epsilon in std::iter::once(SEED_EPSILON).chain(MEASURED_AT) {
        let mechanism = ExponentialMechanism::new(epsilon, DECLARED_SENSITIVITY)?;
        let mut selection = exact(epsilon, DECLARED_SENSITIVITY, &utilities)?;
        selection.observed = Some(observed_frequencies(
            &mechanism, &utilities, draws, context,
        )?);
        measured.push(selection);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let sweep = log_grid(1e-2, 10.0, settings.pick(31, 6), &[0.01, 0.1])
        .into_iter()
        .map(|epsilon| exact(epsilon, DECLARED_SENSITIVITY, &utilities))
        .collect::<Result<_>>()?;
    let mut per_file = Vec::new();
    for file in ADULT_FILES {
        let statuses = text_column(&settings.data, &[file], "marital-status")?;
        per_file.push((file, seed_top_probability(&statuses)?));
    }
    Ok(Results {
        people: statuses.len(),
        names: counts.iter().map(|(n, _)| n.clone()).collect(),
        counts: counts.iter().map(|(_, c)| *c).collect(),
        calibrated: exact(SEED_EPSILON, 1.0 / UTILITY_SCALE, &utilities)?,
        utilities,
        draws,
        measured,
        sweep,
        per_file,
    })
}

/// One CSV row per (ε, Δu, status); frequencies only where they were drawn.
fn write_csv(results: &Results, context: &Context) -> Result<String> {
    let mut rows = Vec::new();
    let selections = results
        .sweep
        .iter()
        .chain(&results.measured)
        .chain(std::iter::once(&results.calibrated));
    for selection in selections {
        for (index, name) in results.names.iter().enumerate() {
            let observed = selection.observed.as_ref();
            rows.push(vec![
                selection.epsilon.to_string(),
                selection.sensitivity.to_string(),
                name.clone(),
                results.counts[index].to_string(),
                results.utilities[index].to_string(),
                selection.exact[index].to_string(),
                observed.map_or(String::new(), |f| f[index].to_string()),
                observed.map_or(String::new(), |_| results.draws.to_string()),
            ]);
        }
    }
    context.out.csv(
        "exponential",
        &[
            "epsilon",
            "utility_sensitivity",
            "marital_status",
            "count",
            "utility",
            "exact_probability",
            "observed_frequency",
            "draws",
        ],
        &rows,
    )
}

fn draw_bars(results: &Results, context: &Context) -> Result<String> {
    let seed = &results.measured[0];
    context.out.figure(
        "exponential_at_epsilon_1",
        &BarFigure {
            title: format!(
                "Marital status chosen at ε = 1, utility count/1000, Δu = 1: {} selections",
                results.draws
            ),
            value_label: "probability of being chosen".into(),
            categories: results.names.clone(),
            groups: vec![
                BarGroup {
                    name: "observed frequency".into(),
                    values: seed.observed.clone().unwrap_or_default(),
                    ranges: vec![],
                },
                BarGroup {
                    name: "exact probability".into(),
                    values: seed.exact.clone(),
                    ranges: vec![],
                },
            ],
        },
    )
}

fn draw_sweep(results: &Results, context: &Context) -> Result<String> {
    let mut curves = Vec::new();
    for (index, name) in results.names.iter().enumerate() {
        curves.push(Curve {
            name: name.clone(),
            colour_index: index,
            style: CurveStyle::Line,
            points: results
                .sweep
                .iter()
                .map(|s| (s.epsilon, s.exact[index]))
                .collect(),
            band: vec![],
        });
        curves.push(Curve {
            name: if index == 0 {
                format!("observed ({} draws)", results.draws)
            } else {
                String::new()
            },
            colour_index: index,
            style: CurveStyle::Markers,
            points: results
                .measured
                .iter()
                .filter_map(|s| Some((s.epsilon, s.observed.as_ref()?[index])))
                .collect(),
            band: vec![],
        });
    }
    context.out.figure(
        "exponential_against_epsilon",
        &LineFigure {
            title: "Probability of choosing each marital status (utility = count/1000, Δu = 1)"
                .into(),
            x_label: "privacy parameter ε (log scale)".into(),
            y_label: "probability of being chosen".into(),
            x_axis: Axis::Log,
            y_axis: Axis::Linear,
            curves,
        },
    )
}

fn table(results: &Results) -> String {
    let seed = &results.measured[0];
    let observed = seed.observed.as_deref().unwrap_or_default();
    let rows: Vec<Vec<String>> = results
        .names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            vec![
                name.clone(),
                results.counts[i].to_string(),
                significant(results.utilities[i], 4),
                significant(seed.exact[i], 4),
                significant(observed.get(i).copied().unwrap_or(f64::NAN), 4),
                significant(results.calibrated.exact[i], 4),
            ]
        })
        .collect();
    markdown_table(
        &[
            "marital status",
            "count",
            "utility (count/1000)",
            "exact P, ε = 1, Δu = 1 (seed)",
            "observed, ε = 1, Δu = 1",
            "exact P, ε = 1, Δu = 1/1000",
        ],
        &rows,
    )
}

/// The ε at which selections were drawn, ascending, as text.
fn measured_epsilons(results: &Results) -> String {
    let mut epsilons: Vec<f64> = results.measured.iter().map(|s| s.epsilon).collect();
    epsilons.sort_by(f64::total_cmp);
    let text: Vec<String> = epsilons.iter().map(f64::to_string).collect();
    text.join(", ")
}

fn paragraphs(results: &Results) -> Vec<String> {
    let seed = &results.measured[0];
    let top = &results.names[0];
    let gap = results.utilities[0] - results.utilities.get(1).copied().unwrap_or(0.0);
    let top_at = |epsilon: f64| {
        results
            .sweep
            .iter()
            .find(|s| (s.epsilon / epsilon - 1.0).abs() < 1e-9)
            .map_or(f64::NAN, |s| s.exact[0])
    };
    let per_file: Vec<String> = results
        .per_file
        .iter()
        .map(|(file, p)| format!("{p:.4} on {file} alone"))
        .collect();
    vec![
        format!(
            "The {people} people of both Adult files have {k} marital statuses; the most common, \
             {top}, leads the next by {gap_people} people. As the seed notebook does (Near & \
             Abuah, Programming Differential Privacy, §The exponential mechanism), the utility \
             is the count divided by 1000 and the mechanism is told Δu = 1, at ε = 1: it chooses \
             {top} with probability exp(ε·u/(2Δu)) / Σ exp(ε·u'/(2Δu)) = {p:.4} on both files \
             together ({per_file}), and in {draws} selections it chose it {observed:.4} of the \
             time.",
            people = results.people,
            k = results.names.len(),
            gap_people = results.counts[0] - results.counts.get(1).copied().unwrap_or(0.0),
            p = seed.exact[0],
            per_file = per_file.join(", "),
            draws = results.draws,
            observed = seed.observed.as_ref().map_or(f64::NAN, |f| f[0]),
        ),
        format!(
            "One person changes one count by one, so the true sensitivity of count/1000 is \
             1/1000: declaring Δu = 1 is 1000× cautious. The selection is in fact ε/1000 = 0.001-DP \
             (the same as the count as utility at ε = 0.001), while the accountant charges ε = 1. \
             Calibrated to the true Δu = 1/1000, ε = 1 chooses {top} with probability \
             1 − {miss}: each other status keeps only dpkit's floor of 2⁻³⁰ of the leader's \
             weight, which keeps every candidate reachable whatever the data and costs no \
             privacy (it is 1-Lipschitz in the utilities).",
            miss = significant(results.calibrated.exact[1..].iter().sum::<f64>(), 2),
        ),
        format!(
            "The choice only becomes uncertain when ε·gap/(2Δu) is near 1 (the utility gap is \
             {gap:.3}): at ε = 0.1 the leader is chosen with probability {p1:.3}, and at \
             ε = 0.01 with {p2:.3}, close to the uniform 1/{k}. The markers are observed \
             frequencies over {draws} selections at each of ε = {measured}.",
            p1 = top_at(0.1),
            measured = measured_epsilons(results),
            p2 = top_at(0.01),
            k = results.names.len(),
            draws = results.draws,
        ),
    ]
}

/// Runs the experiment.
pub fn run(context: &mut Context) -> Result<Section> {
    let results = compute(context)?;
    let csv = write_csv(&results, context)?;
    let bars_png = draw_bars(&results, context)?;
    let sweep_png = draw_sweep(&results, context)?;
    Ok(Section {
        title: "Exponential mechanism: the most common marital status".into(),
        figures: vec![
            (
                bars_png,
                "observed and exact selection probabilities at ε = 1".into(),
            ),
            (sweep_png, "selection probabilities against ε".into()),
        ],
        tables: vec![table(&results)],
        paragraphs: paragraphs(&results),
        csv_files: vec![csv],
    })
}
