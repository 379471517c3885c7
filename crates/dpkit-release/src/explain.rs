//! What `--explain` prints of the release: each measurement's mechanism,
//! ε, sensitivity and expected error, how keys are chosen and why each
//! charge holds.

use crate::measured::{AggregateKind, KeySelection, MeasuredQuery, QuantileRole};
use crate::{NoisePlan, ReleaseSettings};

/// How a quantile is chosen, and what its interval promises.
fn quantile_line(query: &MeasuredQuery, noise: &NoisePlan, a: usize) -> Option<String> {
    let AggregateKind::Quantile { grid, p, .. } = &query.aggregates[a].kind else {
        return None;
    };
    let ends = &query.measurement_of[a];
    let point = &noise.noises[ends[0]];
    let end = |role: QuantileRole, m: usize, bound: f64| {
        if role.is_bound(*p) {
            format!("is the bound {bound}")
        } else {
            format!(
                "aims {:.1} ranks beyond it",
                noise.noises[m].half_width + 1.0
            )
        }
    };
    let alpha = alpha_of(query, a);
    Some(format!(
        "  {:<24} = a cell of {} (width {}) over [{}, {}] whose ranks are nearest p·n + ½ − p (p = {p}), \
         by the exponential mechanism (E|error| and half-widths above are in ranks: \
         the answer is within {:.1} ranks of it with probability ≥ 1 − {alpha}/3);\n  {:<24}   \
         the interval's lower end {} and its upper end {}, on either side of the true quantile \
         with probability ≥ 1 − {alpha}\n",
        "",
        grid.cells,
        grid.width,
        grid.low,
        grid.high,
        point.half_width,
        "",
        end(QuantileRole::Lower, ends[1], grid.low),
        end(QuantileRole::Upper, ends[2], grid.high),
    ))
}

/// The α aggregate `a`'s interval is at: α, or α/j when a combined column
/// of j aggregates uses it.
fn alpha_of(query: &MeasuredQuery, a: usize) -> String {
    match query.interval_divisor(a) {
        1 => "α".to_string(),
        j => format!("α/{j}"),
    }
}

/// What each combined column computes, and its interval's level.
fn combined_lines(query: &MeasuredQuery) -> String {
    let names: Vec<String> = query.aggregates.iter().map(|a| a.name.clone()).collect();
    let mut text = String::new();
    for (name, output) in &query.outputs {
        let crate::measured::OutputColumn::Combined(c) = output else {
            continue;
        };
        let combination = &query.combinations[*c];
        let j = combination.aggregates().len();
        text.push_str(&format!(
            "  {name:<24} = {}: arithmetic on the released values, which costs nothing more; \
             its {j} aggregate(s) each have their interval at 1 − α/{j}, so that the interval \
             computed from theirs by interval arithmetic holds with probability ≥ 1 − α\n",
            combination.describe(&names)
        ));
    }
    text
}

/// How a composite aggregate is formed from its measurements, its expected
/// error and its ε split; `None` for a single release.
fn composite(query: &MeasuredQuery, noise: &NoisePlan, a: usize) -> Option<String> {
    let (formula, bounds) = match &query.aggregates[a].kind {
        AggregateKind::Avg { bounds, centre, .. } => {
            (format!("{centre} + noisy sum / noisy count"), *bounds)
        }
        AggregateKind::Dispersion {
            bounds, dispersion, ..
        } => {
            let divisor = if dispersion.sample { "n − 1" } else { "n" };
            let root = if dispersion.root { "the root of " } else { "" };
            (
                format!("{root}(sum of squares − sum²/n) / ({divisor})"),
                *bounds,
            )
        }
        _ => return None,
    };
    let shares: Vec<String> = query.measurement_of[a]
        .iter()
        .map(|&m| format!("{:.4}", noise.noises[m].epsilon))
        .collect();
    let parts = query.measurement_of[a].len() * query.interval_divisor(a);
    let numerator = crate::composite_error(query, noise, a);
    let per_root = if matches!(
        query.aggregates[a].kind,
        AggregateKind::Dispersion { dispersion, .. } if dispersion.root
    ) {
        " (of the variance; the deviation's is that over 2σ)"
    } else {
        ""
    };
    Some(format!(
        "  {:<24} = {formula}, within [{}, {}]; each interval at α/{parts}, ε split {} to make \
         its error least;\n  {:<24}   E|error| ≈ {numerator:.4}/n{per_root} for a group of n rows \
         whose mean lies anywhere in the bounds ({:.4} at n = 1000)\n",
        "",
        bounds.0,
        bounds.1,
        shares.join(" : "),
        "",
        numerator / 1000.0,
    ))
}

/// `--explain`'s account of the release: each measurement's mechanism, ε,
/// sensitivity and error, how keys are chosen, the privacy argument and
/// the total cost. The planner puts what computes the measurements above it.
pub fn explanation(query: &MeasuredQuery, noise: &NoisePlan, settings: &ReleaseSettings) -> String {
    let mut text = String::new();
    text.push_str(&format!(
        "\nReleases ({}% intervals):\n",
        settings.confidence * 100.0
    ));
    text.push_str(&format!(
        "  {:<24} {:<30} {:<20} {:>10} {:>12} {:>12} {:>12}\n",
        "column", "measurement", "mechanism", "ε", "sensitivity", "E|error|", "± half-width"
    ));
    for (a, aggregate) in query.aggregates.iter().enumerate() {
        for (position, &m) in query.measurement_of[a].iter().enumerate() {
            let planned = &noise.noises[m];
            text.push_str(&format!(
                "  {:<24} {:<30} {:<20} {:>10.4} {:>12} {:>12.4} {:>12.4}\n",
                aggregate.name,
                aggregate.kind.measurement_label(position),
                planned.mechanism(),
                planned.epsilon,
                planned.sensitivity,
                planned.expected_absolute_error,
                planned.half_width
            ));
        }
        if let Some(line) = composite(query, noise, a).or_else(|| quantile_line(query, noise, a)) {
            text.push_str(&line);
        }
    }
    text.push_str(&combined_lines(query));
    let combined: std::collections::BTreeSet<usize> = query
        .combinations
        .iter()
        .flat_map(crate::combined::Combination::aggregates)
        .collect();
    let hidden: Vec<&str> = (0..query.aggregates.len())
        .filter(|a| {
            !combined.contains(a)
                && !query
                    .outputs
                    .iter()
                    .any(|(_, o)| *o == crate::measured::OutputColumn::Aggregate(*a))
        })
        .map(|a| query.aggregates[a].name.as_str())
        .collect();
    if !hidden.is_empty() {
        text.push_str(&format!(
            "  not shown, measured and charged for HAVING: {}\n",
            hidden.join(", ")
        ));
    }
    match &query.keys {
        KeySelection::Single => text.push_str("\nKeys: none (one row)\n"),
        KeySelection::Domain(cells) => text.push_str(&format!(
            "\nKeys: the public domain, {} combination(s), released whether or not they occur\n",
            cells.len()
        )),
        KeySelection::Threshold => {
            if let (Some(index), Some(threshold)) = (query.threshold_measurement, noise.threshold) {
                let planned = &noise.noises[index];
                text.push_str(&format!(
                    "\nKeys: no public domain, so only keys whose noisy row count ({}, ε = {:.4}) \
                     reaches τ = {threshold} are released (δ = {:e})\n",
                    planned.mechanism(),
                    planned.epsilon,
                    noise.threshold_delta
                ));
            }
        }
    }
    if let Some(having) = &query.having {
        text.push_str(&format!(
            "HAVING {}: compared on the released values (post-processing: nothing more is \
             spent, and a group near the cut may fall either side of it)\n",
            having.describe(
                &query.group_names,
                &query
                    .aggregates
                    .iter()
                    .map(|a| a.name.clone())
                    .collect::<Vec<_>>()
            )
        ));
    }
    for note in &query.notes {
        text.push_str(&format!("Note: {note}\n"));
    }
    text.push_str(&privacy_argument(query, noise));
    text.push_str(&format!(
        "Total cost: ε = {}, δ = {} (nothing is spent by --explain)\n",
        noise.cost.epsilon(),
        noise.cost.delta()
    ));
    text
}

/// Why each measurement's noise costs what it is charged: dpkit-core's
/// privacy map for each, with the neighbouring definition it holds for.
fn privacy_argument(query: &MeasuredQuery, noise: &NoisePlan) -> String {
    let neighbours = match query.neighbouring {
        dpkit_core::sensitivity::Neighbouring::AddRemove => "one person added or removed",
        dpkit_core::sensitivity::Neighbouring::Replace => {
            "one person added, removed or replaced by another"
        }
    };
    let c = query.contribution;
    let rows = match query.joins.is_empty() {
        true => format!(
            "each person has at most {} row(s), capped on the table scan",
            c.rows
        ),
        false => format!(
            "each person has at most {} row(s) after the joins ({}), capped on the table scan \
             before them",
            c.rows,
            query.joins.join("; ")
        ),
    };
    let rows = match (c.groups < c.rows, c.rows_per_group < c.rows) {
        (false, false) => rows,
        _ => format!(
            "{rows}, then kept in at most {} group(s) and to at most {} row(s) in each, \
             before the aggregate",
            c.groups, c.rows_per_group
        ),
    };
    let released = query.released_contribution().groups;
    let rows = match released < c.groups {
        true => format!(
            "{rows}; the keys are a public domain, so one person reaches at most {released} of \
             the released groups"
        ),
        false => rows,
    };
    let mut text =
        format!("Privacy: ε holds for neighbouring tables that differ in {neighbours}; {rows}.\n");
    for (index, planned) in noise.noises.iter().enumerate() {
        text.push_str(&format!(
            "  measurement {index}: {} at ε = {:.6}, Δ = {}: {}\n",
            planned.mechanism(),
            planned.noise_epsilon,
            planned.sensitivity,
            planned.argument
        ));
        if planned.considered.len() > 1 {
            let options: Vec<String> = planned
                .considered
                .iter()
                .map(|(name, error)| format!("{name} {error:.4}"))
                .collect();
            text.push_str(&format!(
                "    auto: the least E|error| of {}\n",
                options.join(", ")
            ));
        }
    }
    text
}
