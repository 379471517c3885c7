//! Accuracy with bounds per group against the single per-person cap, in one
//! run, on two workloads of counts per month, where one person's 12 kept
//! rows fall in up to 12 months. The single cap must allow all 12 in one
//! month (L1 = L2 = 12); bounds per group (L0 = g months, L∞ = r rows in
//! each) give L1 = min(12, g·r) and L2 = √g·r, and leave out the rows they
//! cut. Reports the mean absolute error per month, against the exact counts
//! of the rows the single cap keeps, over many answers at ε = 1, with
//! Laplace noise (δ = 0) and Gaussian noise (δ = 10⁻⁶).
//!
//! * The bundled clinic's visits: people visit in few months, often twice
//!   in one, so truncation leaves rows out.
//! * A generated subscription: each of 20,000 people pays at most once a
//!   month, in a run of 1 to 12 months, so people touch many groups with
//!   one row in each and nothing is cut at g = 12, r = 1.
//!
//! `cargo bench --workspace --profile dev --bench group_bounds`.

use std::collections::BTreeMap;
use std::path::Path;

use dpkit_core::rng::InsecureSeededRng;
use dpkit_query::{Description, Ledger, MechanismChoice, QueryEngine, ReleaseSettings};
use dpkit_release::Cell;

const ANSWERS: usize = 300;
const PAYERS: u64 = 20_000;

/// One workload: its description (text and folder), its query, and the
/// bounds per group to try.
struct Workload {
    name: &'static str,
    description: String,
    folder: std::path::PathBuf,
    sql: &'static str,
    bounds: &'static [(u32, u32)],
}

impl Workload {
    fn engine(&self, bounds: &str) -> QueryEngine {
        let text = self.description.replace(
            "max_rows_per_person = 1\n",
            &format!("max_rows_per_person = 1\n{bounds}"),
        );
        QueryEngine::open(Description::from_toml(&text, &self.folder).unwrap()).unwrap()
    }
}

fn clinic() -> Workload {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/clinic");
    Workload {
        name: "clinic visits",
        description: std::fs::read_to_string(folder.join("clinic.toml")).unwrap(),
        folder,
        sql: "SELECT v.month, COUNT(*) AS visits FROM people p JOIN visits v \
              ON v.person = p.id GROUP BY v.month",
        bounds: &[(12, 1), (12, 2), (4, 2)],
    }
}

/// 20,000 payers; each pays in months `start..start + length` (within the
/// year), once a month. A fixed xorshift keeps the table the same each run.
fn subscription() -> Workload {
    let folder = std::env::temp_dir().join(format!("dpkit-subscription-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let mut people = String::from("id\n");
    let mut payments = String::from("person,month\n");
    for id in 1..=PAYERS {
        people.push_str(&format!("{id}\n"));
        let start = 1 + next(12);
        let length = 1 + next(12);
        for month in start..(start + length).min(13) {
            payments.push_str(&format!("{id},{month}\n"));
        }
    }
    std::fs::write(folder.join("people.csv"), people).unwrap();
    std::fs::write(folder.join("payments.csv"), payments).unwrap();
    let description = "[table]\nname = \"people\"\nfile = \"people.csv\"\n\n\
        [privacy_unit]\nkind = \"id\"\ncolumn = \"id\"\nmax_rows_per_person = 1\n\n\
        [budget]\nepsilon = 10.0\ndelta = 1e-5\n\n[columns.id]\ntype = \"integer\"\n\n\
        [private.payments]\nfile = \"payments.csv\"\nperson = \"person\"\n\
        max_rows_per_person = 12\n\n[private.payments.columns.person]\ntype = \"integer\"\n\n\
        [private.payments.columns.month]\ntype = \"integer\"\nbounds = [1, 12]\n";
    Workload {
        name: "subscription payments",
        description: description.into(),
        folder,
        sql: "SELECT m.month, COUNT(*) AS payments FROM people p JOIN payments m \
              ON m.person = p.id GROUP BY m.month",
        bounds: &[(12, 1), (6, 1)],
    }
}

/// Each month's answers, `count` times at `epsilon` (at most 1,000 in all).
fn answers(
    engine: &QueryEngine,
    (sql, epsilon, count): (&str, f64, usize),
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
        let answer = engine.answer(sql, &settings, &ledger, &mut rng).unwrap();
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

fn report(workload: &Workload) {
    // The exact counts of the kept rows: at ε = 1000 a count's noise is nil
    // but with a chance of about e^(-1000/12).
    let single = workload.engine("");
    let exact = answers(&single, (workload.sql, 1000.0, 1), false, 1);
    println!("\n{}: {}", workload.name, workload.sql);
    for (noise, gaussian) in [("Laplace", false), ("Gaussian", true)] {
        let base = mean_error(
            &answers(&single, (workload.sql, 1.0, ANSWERS), gaussian, 2),
            &exact,
        );
        println!(
            "{noise:<12} {:<36} {base:>12.2}  {:>8}",
            "single cap: k = 12", "1"
        );
        for (g, r) in workload.bounds {
            let bounds = format!("max_groups_per_person = {g}\nmax_rows_per_group = {r}\n");
            let query = (workload.sql, 1.0, ANSWERS);
            let error = mean_error(
                &answers(&workload.engine(&bounds), query, gaussian, 3),
                &exact,
            );
            let setting = format!("bounds per group: g = {g}, r = {r}");
            println!(
                "{noise:<12} {setting:<36} {error:>12.2}  {:>8.3}",
                error / base
            );
        }
    }
}

fn main() {
    println!(
        "{ANSWERS} answers at ε = 1 for each, error per month against the exact counts of the \
         rows the single cap (k = 12) keeps"
    );
    println!(
        "{:<12} {:<36} {:>12}  {:>8}",
        "noise", "contribution", "mean |error|", "ratio"
    );
    report(&clinic());
    let subscription = subscription();
    report(&subscription);
    let _ = std::fs::remove_dir_all(&subscription.folder);
}
