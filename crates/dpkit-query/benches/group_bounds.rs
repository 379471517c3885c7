//! Accuracy with bounds per group against the single per-person cap, in one
//! run, on the bundled clinic: visits per month, where one person's 12 kept
//! visits fall in up to 12 months. The single cap scales each month's noise
//! to all 12; bounds per group (L0 = g months, L∞ = r visits in each)
//! scale it to g·r and leave out what they cut. Reports the mean absolute
//! error per month, against the exact counts of the kept visits, over many
//! answers at ε = 1. `cargo bench -p dpkit-query --bench group_bounds`.

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

/// Each month's answers, `ANSWERS` times at `epsilon`.
fn answers(engine: &QueryEngine, epsilon: f64, seed: u64) -> BTreeMap<String, Vec<f64>> {
    let path =
        std::env::temp_dir().join(format!("dpkit-group-bounds-{seed}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let ledger = Ledger::open(&path, 1e9, 0.0).unwrap();
    let settings = ReleaseSettings {
        epsilon,
        delta: 0.0,
        mechanism: MechanismChoice::Auto,
        confidence: 0.95,
    };
    let mut rng = InsecureSeededRng::from_seed_for_testing(seed);
    let mut months: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for _ in 0..ANSWERS {
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
    // The exact counts of the kept visits: at ε = 10⁶ the noise is nil.
    let single = engine("");
    let exact = answers(&single, 1e6, 1);
    let capped = answers(&single, 1.0, 2);
    println!(
        "{SQL}\n{ANSWERS} answers at ε = 1 for each setting, error per month against the exact counts of the kept visits (k = 12)\n"
    );
    let base = mean_error(&capped, &exact);
    println!(
        "{:<44} {:>12}  {:>8}",
        "contribution", "mean |error|", "ratio"
    );
    println!(
        "{:<44} {:>12.2}  {:>8}",
        "single cap: k = 12 (today)", base, "1"
    );
    for (g, r) in [(4, 2), (4, 1), (2, 1)] {
        let bounds = format!("max_groups_per_person = {g}\nmax_rows_per_group = {r}\n");
        let bounded = answers(&engine(&bounds), 1.0, 3);
        let error = mean_error(&bounded, &exact);
        println!(
            "{:<44} {:>12.2}  {:>8.3}",
            format!("bounds per group: g = {g}, r = {r}"),
            error,
            error / base
        );
    }
}
