//! The accuracy table in the book (docs/book/src/query/releases.md): mean
//! |error| of typical Adult queries at ε = 1, each aggregate alone in its
//! query (so it gets the whole ε), against the exact answers computed here
//! from the CSV, with the theoretical floor where one is known.
//!
//! ```sh
//! cargo run -q -p dpkit-query --example accuracy_table -- [runs]
//! ```
//!
//! It uses only the engine's public API (plan, exact, plan_noise, release),
//! so the same file runs against earlier versions of dpkit for a
//! before/after comparison; aggregates a version cannot plan print "—". For
//! the same reason it reads the CSV itself rather than through the tests'
//! `support/adult_rows.rs`, which earlier versions lack.

use std::collections::HashMap;
use std::path::Path;

use dpkit_core::rng::InsecureSeededRng;
use dpkit_query::{Description, MechanismChoice, QueryEngine, ReleaseSettings};
use dpkit_release::{Cell, plan_noise, release};

type Row = HashMap<String, String>;

fn rows(folder: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(folder.join("adult.data.csv")).expect("the Adult CSV");
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split(',')
        .map(String::from)
        .collect();
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(String::from))
                .collect()
        })
        .collect()
}

/// The exact answer per marital status of a statistic of each row's number.
fn truth(
    rows: &[Row],
    number: &dyn Fn(&Row) -> f64,
    statistic: &dyn Fn(&mut [f64]) -> f64,
) -> HashMap<String, f64> {
    let mut groups: HashMap<String, Vec<f64>> = HashMap::new();
    for row in rows {
        groups
            .entry(row["marital-status"].clone())
            .or_default()
            .push(number(row));
    }
    groups
        .into_iter()
        .map(|(k, mut v)| (k, statistic(&mut v)))
        .collect()
}

fn sum(v: &mut [f64]) -> f64 {
    v.iter().sum()
}

fn mean(v: &mut [f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn sample_variance(v: &mut [f64]) -> f64 {
    let m = mean(v);
    v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() as f64 - 1.0)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() as f64 * 0.5).ceil() as usize - 1]
}

/// Mean |error| over `runs` releases and every group, or None if this
/// version of dpkit cannot plan the query.
fn mean_error(
    engine: &QueryEngine,
    sql: &str,
    truth: &HashMap<String, f64>,
    runs: usize,
) -> Option<f64> {
    let query = engine.plan(sql).ok()?;
    let exact = dpkit_query::internals::exact(engine, &query).ok()?;
    let settings = ReleaseSettings {
        epsilon: 1.0,
        delta: 0.0,
        mechanism: MechanismChoice::Auto,
        confidence: 0.95,
    };
    let noise = plan_noise(&query.measured, &settings).ok()?;
    let mut rng = InsecureSeededRng::from_seed_for_testing(2026);
    let (mut total, mut count) = (0.0, 0usize);
    for _ in 0..runs {
        let answer = release(&query.measured, &noise, &exact, 0.95, &mut rng).ok()?;
        for row in &answer.rows {
            let (Cell::Key(key), Cell::Value { value, .. }) = (&row[0], &row[1]) else {
                return None;
            };
            total += (value - truth.get(key)?).abs();
            count += 1;
        }
    }
    Some(total / count as f64)
}

/// The least E|X| of any ε-DP additive noise for a whole-number statistic
/// one row moves by at most Δ: the two-sided geometric for Δ = 1 (Ghosh,
/// Roughgarden and Sundararajan 2009), the discrete staircase's optimum
/// otherwise (Geng and Viswanath 2014), as dpkit-core computes them.
fn floor(sensitivity: u64) -> String {
    use dpkit_core::accuracy::NoiseAccuracy;
    let error = if sensitivity == 1 {
        dpkit_core::mechanism::TwoSidedGeometric::new(1.0, 1).map(|m| m.expected_absolute_error())
    } else {
        dpkit_core::mechanism::DiscreteStaircase::new(1.0, sensitivity)
            .map(|m| m.expected_absolute_error())
    };
    error.map_or("—".into(), |e| format!("{e:.3}"))
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/adult");
    let engine =
        QueryEngine::open(Description::load(&folder.join("adult.toml")).expect("adult.toml"))
            .expect("the engine");
    let rows = rows(&folder);
    let field = |name: &'static str| move |r: &Row| r[name].parse::<f64>().unwrap_or(0.0);
    let female = |r: &Row| f64::from(u8::from(r["sex"] == "Female"));
    let one = |_: &Row| 1.0;
    let none = || "—".to_string();
    let cases: Vec<(&str, String, HashMap<String, f64>, String)> = vec![
        (
            "COUNT(*)",
            "COUNT(*)".into(),
            truth(&rows, &one, &sum),
            floor(1),
        ),
        (
            "SUM over a 0/1 column",
            "SUM(CASE WHEN sex = 'Female' THEN 1 ELSE 0 END)".into(),
            truth(&rows, &female, &sum),
            floor(1),
        ),
        (
            "SUM(capital-gain)",
            "SUM(\"capital-gain\")".into(),
            truth(&rows, &field("capital-gain"), &sum),
            floor(99_999),
        ),
        (
            "AVG(capital-gain)",
            "AVG(\"capital-gain\")".into(),
            truth(&rows, &field("capital-gain"), &mean),
            none(),
        ),
        (
            "AVG(age)",
            "AVG(age)".into(),
            truth(&rows, &field("age"), &mean),
            none(),
        ),
        (
            "VAR(age)",
            "VAR(age)".into(),
            truth(&rows, &field("age"), &sample_variance),
            none(),
        ),
        (
            "STDDEV(age)",
            "STDDEV(age)".into(),
            truth(&rows, &field("age"), &|v| sample_variance(v).sqrt()),
            none(),
        ),
        (
            "MEDIAN(age)",
            "MEDIAN(age)".into(),
            truth(&rows, &field("age"), &median),
            none(),
        ),
    ];
    println!("| aggregate (by marital status, ε = 1) | mean abs error | floor |");
    println!("|---|---|---|");
    for (name, aggregate, truth, floor) in cases {
        let sql = format!(
            "SELECT \"marital-status\", {aggregate} AS v FROM adult GROUP BY \"marital-status\""
        );
        let shown = mean_error(&engine, &sql, &truth, runs)
            .map_or("—".to_string(), |e| format!("{e:.3}"));
        println!("| {name} | {shown} | {floor} |");
    }
}
