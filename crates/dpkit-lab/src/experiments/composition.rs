//! Experiment 6: a count released by ε₁ = 0.1 and ε₂ = 0.2 mechanisms, their
//! average, and one ε = 0.3 release, with the accountant's total for each.

use dpkit_core::accounting::{PrivacyLoss, sequential_composition};
use dpkit_core::accuracy::NoiseAccuracy;
use dpkit_core::mechanism::{IntegerMechanism, TwoSidedGeometric};
use dpkit_plot::{HistogramFigure, HistogramSeries};

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

/// Runs the experiment.
pub fn run(context: &mut Context) -> Result<Section> {
    let settings = context.settings;
    let ages = integer_column(&settings.data, &["adult.data.csv"], "age")?;
    let count = ages.iter().filter(|&&age| age >= 50).count() as i64;
    let draws = settings.pick(1_000, 300);
    let first = TwoSidedGeometric::new(0.1, 1)?;
    let second = TwoSidedGeometric::new(0.2, 1)?;
    let single = TwoSidedGeometric::new(0.3, 1)?;
    let bar = context.progress(draws as u64, "composition");
    let mut errors: [Vec<f64>; 4] = Default::default();
    for _ in 0..draws {
        let a = first.privatize_with_rng(count, &mut context.rng) - count;
        let b = second.privatize_with_rng(count, &mut context.rng) - count;
        let c = single.privatize_with_rng(count, &mut context.rng) - count;
        errors[0].push(a as f64);
        errors[1].push(b as f64);
        errors[2].push((a + b) as f64 / 2.0);
        errors[3].push(c as f64);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let loss = |e: f64| PrivacyLoss::pure(e);
    let totals = [
        sequential_composition(&[loss(0.1)?]),
        sequential_composition(&[loss(0.2)?]),
        sequential_composition(&[loss(0.1)?, loss(0.2)?]),
        sequential_composition(&[loss(0.3)?]),
    ];
    let closed_sd = [
        first.variance().sqrt(),
        second.variance().sqrt(),
        ((first.variance() + second.variance()) / 4.0).sqrt(),
        single.variance().sqrt(),
    ];

    let mut pooled: Vec<f64> = errors.iter().flatten().copied().collect();
    pooled.sort_by(f64::total_cmp);
    let low = pooled[pooled.len() / 200].floor() - 0.5;
    let high = pooled[pooled.len() - 1 - pooled.len() / 200].ceil() + 0.5;
    let bins = 40usize;
    let width = (high - low) / bins as f64;
    let series = errors
        .iter()
        .zip(RELEASES)
        .zip(&totals)
        .map(|((sample, name), total)| {
            let mut counts = vec![0usize; bins];
            for &e in sample {
                if e >= low && e < high {
                    counts[(((e - low) / width) as usize).min(bins - 1)] += 1;
                }
            }
            HistogramSeries {
                name: format!(
                    "{name} (accountant: ε = {})",
                    significant(total.epsilon(), 2)
                ),
                bins: counts
                    .iter()
                    .enumerate()
                    .map(|(i, &c)| {
                        (
                            low + i as f64 * width,
                            low + (i + 1) as f64 * width,
                            c as f64 / draws as f64,
                        )
                    })
                    .collect(),
            }
        })
        .collect();
    let png = context.out.figure(
        "composition",
        &HistogramFigure {
            title: format!("Error of a released count ({draws} draws each)"),
            x_label: "released − true count (people)".into(),
            y_label: "share of draws".into(),
            series,
            highlight: vec![],
            highlight_label: String::new(),
        },
    )?;
    let mut csv_rows = Vec::new();
    for (index, sample) in errors.iter().enumerate() {
        for (draw, e) in sample.iter().enumerate() {
            csv_rows.push(vec![
                RELEASES[index].into(),
                totals[index].epsilon().to_string(),
                draw.to_string(),
                e.to_string(),
            ]);
        }
    }
    let csv = context.out.csv(
        "composition",
        &["release", "accountant_epsilon", "draw", "error"],
        &csv_rows,
    )?;
    let stats: Vec<(f64, f64)> = errors.iter().map(|e| mean_and_sd(e)).collect();
    let mean_abs: Vec<f64> = errors
        .iter()
        .map(|e| e.iter().map(|x| x.abs()).sum::<f64>() / e.len() as f64)
        .collect();
    let table_rows: Vec<Vec<String>> = (0..4)
        .map(|i| {
            vec![
                RELEASES[i].into(),
                significant(totals[i].epsilon(), 2),
                significant(stats[i].1, 3),
                significant(closed_sd[i], 3),
                significant(mean_abs[i], 3),
            ]
        })
        .collect();
    let paragraphs = vec![
        format!(
            "The true count is the {count} people aged 50 or over in the Adult training file; \
             each release adds two-sided geometric noise (Δ = 1). The accountant charges the two \
             releases and their average ε = {both} by sequential composition, the same as the \
             single release. For the same budget, the single ε = 0.3 release had a standard \
             deviation of {s3:.2} people against {s2:.2} for the average ({ratio:.2}×): spending \
             the budget in one release beats splitting it and averaging.",
            both = significant(totals[2].epsilon(), 2),
            s3 = stats[3].1,
            s2 = stats[2].1,
            ratio = stats[2].1 / stats[3].1,
        ),
        "Table: standard deviation measured over the draws and in closed form (for the average, \
         (Var₁ + Var₂)/4), and the mean absolute error."
            .into(),
    ];
    Ok(Section {
        title: "Composition".into(),
        figures: vec![(png, "errors of the four releases".into())],
        tables: vec![markdown_table(
            &[
                "release",
                "accountant's ε",
                "sd (measured)",
                "sd (closed form)",
                "mean |error|",
            ],
            &table_rows,
        )],
        paragraphs,
        csv_files: vec![csv],
    })
}
