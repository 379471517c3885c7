//! Accuracy with bounds per group against the single per-person cap, in one
//! run, on the bundled clinic: visits per month, where one person's 12 kept
//! visits fall in up to 12 months. The single cap must allow all 12 in one
//! month (L1 = L2 = 12); bounds per group (L0 = g months, L∞ = r visits in
//! each) give L1 = min(12, g·r) and L2 = √g·r, and leave out the rows they
//! cut. Reports the mean absolute error per month, against the exact counts
//! of the kept visits, over many answers at ε = 1, with Laplace noise (δ =
//! 0) and Gaussian noise (δ = 10⁻⁶).
//! `cargo bench --workspace --profile dev --bench group_bounds`.

use std::collections::BTreeMap;
use std::path::Path;

use dpkit_core::rng::InsecureSeededRng;
use dpkit_query::{Description, Ledger, MechanismChoice, QueryEngine, ReleaseSettings};
use dpkit_release::Cell;

const ANSWERS: usize = 300;
const SQL: &str = "SELECT v.month, COUNT(*) AS visits FROM people p JOIN visits v \
                   ON v.person = p.id GROUP BY v.month";

fn engine(bounds: &str) -> QueryEngine {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/clinic");
    let text = std::fs::read_to_string(folder.join("clinic.toml"))
        .unwrap()
        .replace(
            "max_rows_per_person = 1\n",
            &format!("max_rows_per_person = 1\n{bounds}"),
        );
    QueryEngine::open(Description::from_toml(&text, &folder).unwrap()).unwrap()
}

/// Each month's answers, `count` times at `epsilon` (at most 1,000 in all).
fn answers(
    engine: &QueryEngine,
    (epsilon, count): (f64, usize),
    gaussian: bool,
    seed: u64,
) -> BTreeMap<String, Vec<f64>> {
    let path =
        std::env::temp_dir().join(format!("dpkit-group-bounds-{seed}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let ledger = Ledger::open(&path, dpkit_ledger::MAX_EPSILON, 0.01).unwrap();
    let settings = ReleaseSettings {
        epsilon,
        delta: if gaussian { 1e-6 } else { 0.0 },
        mechanism: match gaussian {
            true => MechanismChoice::Gaussian,
            false => MechanismChoice::Laplace,
        },
        confidence: 0.95,
    };
    let mut rng = InsecureSeededRng::from_seed_for_testing(seed);
    let mut months: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for _ in 0..count {
        let answer = engine.answer(SQL, &settings, &ledger, &mut rng).unwrap();
        for row in &answer.rows {
            let (Cell::Key(month), Cell::Value { value, .. }) = (&row[0], &row[1]) else {
                panic!("a month and its count");
            };
            months.entry(month.clone()).or_default().push(*value);
        }
    }
    let _ = std::fs::remove_file(&path);
    months
}

/// Mean |answer − exact| over every month and answer.
fn mean_error(answers: &BTreeMap<String, Vec<f64>>, exact: &BTreeMap<String, Vec<f64>>) -> f64 {
    let errors: Vec<f64> = answers
        .iter()
        .flat_map(|(month, values)| values.iter().map(move |v| (v - exact[month][0]).abs()))
        .collect();
    errors.iter().sum::<f64>() / errors.len() as f64
}

fn main() {
    // The exact counts of the kept visits: at ε = 1000 a count's noise is
    // nil but with a chance of about e^(-1000/12).
    let single = engine("");
    let exact = answers(&single, (1000.0, 1), false, 1);
    println!(
        "{SQL}\n{ANSWERS} answers at ε = 1 for each, error per month against the exact counts of the kept visits (k = 12)\n"
    );
    println!(
        "{:<12} {:<36} {:>12}  {:>8}",
        "noise", "contribution", "mean |error|", "ratio"
    );
    for (noise, gaussian) in [("Laplace", false), ("Gaussian", true)] {
        let base = mean_error(&answers(&single, (1.0, ANSWERS), gaussian, 2), &exact);
        println!(
            "{noise:<12} {:<36} {base:>12.2}  {:>8}",
            "single cap: k = 12 (today)", "1"
        );
        for (g, r) in [(12, 1), (12, 2), (4, 2)] {
            let bounds = format!("max_groups_per_person = {g}\nmax_rows_per_group = {r}\n");
            let bounded = answers(&engine(&bounds), (1.0, ANSWERS), gaussian, 3);
            let error = mean_error(&bounded, &exact);
            let setting = format!("bounds per group: g = {g}, r = {r}");
            println!(
                "{noise:<12} {setting:<36} {error:>12.2}  {:>8.3}",
                error / base
            );
        }
    }
}
