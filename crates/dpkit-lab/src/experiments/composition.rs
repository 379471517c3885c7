//! Experiment 6: sequential composition as Near & Abuah's *Programming
//! Differential Privacy* shows it: the count of people older than 50 in the
//! Adult training file (`age > 50`) released with Laplace noise by ε₁ = 0.1
//! and ε₂ = 0.2 mechanisms, their average, and one ε = 0.3 release, with the
//! accountant's total for each.

use std::path::Path;

use dpkit_core::accounting::{PrivacyLoss, sequential_composition};
use dpkit_core::accuracy::NoiseAccuracy;
use dpkit_core::mechanism::{Laplace, RealMechanism};
use dpkit_plot::{Axis, Curve, CurveStyle, LineFigure};

use super::mean_and_sd;
use crate::Context;
use crate::adult::integer_column;
use crate::error::Result;
use crate::output::{Section, markdown_table, significant};

/// The four releases compared.
pub const RELEASES: [&str; 4] = [
    "ε₁ = 0.1 release",
    "ε₂ = 0.2 release",
    "average of the two",
    "one ε = 0.3 release",
];
/// The book's query counts the people strictly older than this.
pub const AGE_ABOVE: i64 = 50;
/// ε₁, ε₂ and the single release's ε₁ + ε₂.
const EPSILONS: [f64; 3] = [0.1, 0.2, 0.3];

/// The number of people older than [`AGE_ABOVE`] in the Adult training file
/// in `data` (6,460).
pub fn people_over_fifty(data: &Path) -> Result<i64> {
    let ages = integer_column(data, &["adult.data.csv"], "age")?;
    Ok(ages.iter().filter(|&&age| age > AGE_ABOVE).count() as i64)
}

/// `E|(X₁ + X₂)/2|` for independent Laplace noises of scales `a` and `b`:
/// the density of `X₁ + X₂` is `(a²·L_a − b²·L_b)/(a² − b²)`, `L_s` the
/// Laplace density of scale `s`, so `E|X₁ + X₂| = (a² + ab + b²)/(a + b)`
/// (`3a/2` when `a = b`).
pub fn average_expected_absolute_error(a: f64, b: f64) -> f64 {
    (a * a + a * b + b * b) / (2.0 * (a + b))
}

/// The released errors and what the theory says about them.
struct Results {
    count: i64,
    draws: usize,
    /// released − true count, per release and draw.
    errors: [Vec<f64>; 4],
    /// The accountant's ε for each release.
    totals: [f64; 4],
    closed_sd: [f64; 4],
    closed_abs: [f64; 4],
}

fn compute(context: &mut Context) -> Result<Results> {
    let count = people_over_fifty(&context.settings.data)?;
    let draws = context.settings.pick(1_000, 300);
    let [first, second, single] = EPSILONS.map(|epsilon| Laplace::new(epsilon, 1.0));
    let (first, second, single) = (first?, second?, single?);
    let bar = context.progress(draws as u64, "composition");
    let value = count as f64;
    let mut errors: [Vec<f64>; 4] = Default::default();
    for _ in 0..draws {
        let a = first.privatize_with_rng(value, &mut context.rng)? - value;
        let b = second.privatize_with_rng(value, &mut context.rng)? - value;
        let c = single.privatize_with_rng(value, &mut context.rng)? - value;
        for (sample, error) in errors.iter_mut().zip([a, b, (a + b) / 2.0, c]) {
            sample.push(error);
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let loss = PrivacyLoss::pure;
    let totals = [
        sequential_composition(&[loss(EPSILONS[0])?]),
        sequential_composition(&[loss(EPSILONS[1])?]),
        sequential_composition(&[loss(EPSILONS[0])?, loss(EPSILONS[1])?]),
        sequential_composition(&[loss(EPSILONS[2])?]),
    ]
    .map(|total| total.epsilon());
    Ok(Results {
        count,
        draws,
        errors,
        totals,
        closed_sd: [
            first.variance().sqrt(),
            second.variance().sqrt(),
            ((first.variance() + second.variance()) / 4.0).sqrt(),
            single.variance().sqrt(),
        ],
        closed_abs: [
            first.expected_absolute_error(),
            second.expected_absolute_error(),
            average_expected_absolute_error(first.scale(), second.scale()),
            single.expected_absolute_error(),
        ],
    })
}

/// The four error distributions as frequency polygons (each bin's share
/// at its centre, joined): four overlaid filled histograms blur into one
/// colour.
fn draw_histogram(results: &Results, context: &Context) -> Result<String> {
    let mut pooled: Vec<f64> = results.errors.iter().flatten().copied().collect();
    pooled.sort_by(f64::total_cmp);
    let low = pooled[pooled.len() / 200].floor();
    let high = pooled[pooled.len() - 1 - pooled.len() / 200].ceil();
    let bins = 40usize;
    let width = (high - low) / bins as f64;
    let curves = results
        .errors
        .iter()
        .zip(RELEASES)
        .zip(results.totals)
        .enumerate()
        .map(|(index, ((sample, name), total))| {
            let mut counts = vec![0usize; bins];
            for &e in sample {
                if e >= low && e < high {
                    counts[(((e - low) / width) as usize).min(bins - 1)] += 1;
                }
            }
            let centre = |i: usize| low + (i as f64 + 0.5) * width;
            Curve {
                name: format!("{name} (accountant: ε = {})", significant(total, 2)),
                colour_index: index,
                style: CurveStyle::Line,
                points: (counts.iter().enumerate())
                    .map(|(i, &c)| (centre(i), c as f64 / results.draws as f64))
                    .collect(),
                band: vec![],
            }
        })
        .collect();
    context.out.figure(
        "composition",
        &LineFigure {
            title: format!(
                "Error of the released count of people over 50 ({} draws each)",
                results.draws
            ),
            x_label: format!(
                "released − true count (people; bins {} wide)",
                significant(width, 2)
            ),
            y_label: "share of draws".into(),
            x_axis: Axis::Linear,
            y_axis: Axis::Linear,
            curves,
        },
    )
}

fn write_csv(results: &Results, context: &Context) -> Result<String> {
    let mut rows = Vec::new();
    for (index, sample) in results.errors.iter().enumerate() {
        for (draw, e) in sample.iter().enumerate() {
            rows.push(vec![
                RELEASES[index].into(),
                results.totals[index].to_string(),
                draw.to_string(),
                results.count.to_string(),
                (results.count as f64 + e).to_string(),
                e.to_string(),
            ]);
        }
    }
    context.out.csv(
        "composition",
        &[
            "release",
            "accountant_epsilon",
            "draw",
            "true_count",
            "released",
            "error",
        ],
        &rows,
    )
}

fn mean_absolute(sample: &[f64]) -> f64 {
    sample.iter().map(|x| x.abs()).sum::<f64>() / sample.len() as f64
}

fn table(results: &Results) -> String {
    let rows: Vec<Vec<String>> = (0..4)
        .map(|i| {
            vec![
                RELEASES[i].into(),
                significant(results.totals[i], 2),
                significant(mean_and_sd(&results.errors[i]).1, 3),
                significant(results.closed_sd[i], 3),
                significant(mean_absolute(&results.errors[i]), 3),
                significant(results.closed_abs[i], 3),
            ]
        })
        .collect();
    markdown_table(
        &[
            "release",
            "accountant's ε",
            "sd (measured)",
            "sd (closed form)",
            "mean \\|error\\| (measured)",
            "E\\|error\\| (closed form)",
        ],
        &rows,
    )
}

fn paragraphs(results: &Results) -> Vec<String> {
    let (average, single) = (
        mean_absolute(&results.errors[2]),
        mean_absolute(&results.errors[3]),
    );
    vec![
        format!(
            "The true count is the {count} people older than {AGE_ABOVE} in the Adult training \
             file (`age > {AGE_ABOVE}`, the query of Near & Abuah's Programming Differential \
             Privacy); each release adds Laplace noise of scale Δ/ε (Δ = 1), dpkit's exact \
             Laplace on a fine grid. The accountant charges the two releases and their average \
             ε = {both} by sequential composition, the same as the single release. For the same \
             budget, the single ε = 0.3 release had a mean absolute error of {single:.2} people \
             against {average:.2} for the average of the two ({ratio:.2}×; closed forms {c3:.2} \
             and {c2:.2}): spending the budget in one release beats splitting it and averaging.",
            count = results.count,
            both = significant(results.totals[2], 2),
            ratio = average / single,
            c3 = results.closed_abs[3],
            c2 = results.closed_abs[2],
        ),
        format!(
            "Table: over {draws} draws, the standard deviation and mean absolute error measured \
             and in closed form: Var = 2λ² and E|X| = λ = 1/ε for one release; for the average, \
             (Var₁ + Var₂)/4 and (λ₁² + λ₁λ₂ + λ₂²)/(2(λ₁ + λ₂)).",
            draws = results.draws,
        ),
    ]
}

/// Runs the experiment.
pub fn run(context: &mut Context) -> Result<Section> {
    let results = compute(context)?;
    let png = draw_histogram(&results, context)?;
    let csv = write_csv(&results, context)?;
    Ok(Section {
        title: "Composition".into(),
        figures: vec![(png, "errors of the four releases".into())],
        tables: vec![table(&results)],
        paragraphs: paragraphs(&results),
        csv_files: vec![csv],
    })
}
