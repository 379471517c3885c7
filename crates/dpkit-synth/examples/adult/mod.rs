//! What the Adult examples share: arguments, the data, the metric of issue 64.

use std::path::{Path, PathBuf};
use std::time::Instant;

use dpkit_core::accounting::concentrated::rho_within;
use dpkit_core::rng::InsecureSeededRng;
use dpkit_synth::{Domain, Marginals, Release, Sampling, Synthesizer, Table};

type Failure = Box<dyn std::error::Error>;

/// The privacy setting and the seed, from `--epsilon` (default 1),
/// `--delta` (default 1e-9) and `--seed` (default 0).
pub struct Setting {
    pub epsilon: f64,
    pub delta: f64,
    pub rho: f64,
    pub seed: u64,
}

pub fn setting() -> Result<Setting, Failure> {
    let epsilon: f64 = argument("--epsilon", "1").parse()?;
    let delta: f64 = argument("--delta", "1e-9").parse()?;
    let seed: u64 = argument("--seed", "0").parse()?;
    let rho = rho_within(epsilon, delta)?;
    Ok(Setting {
        epsilon,
        delta,
        rho,
        seed,
    })
}

/// A run: the release, its synthetic rows, and the seconds to the fitted
/// model and to the rows.
pub struct Run<R> {
    pub release: R,
    pub synthetic: Table,
    pub fitted: f64,
    pub elapsed: f64,
}

/// Runs `synthesizer` on `table` with a generator keyed by `seed`, then
/// samples as many rows as the model estimates (its noisy total), as
/// Private-PGM does, and prints the run's first line.
pub fn synthesize<S: Synthesizer>(
    name: &str,
    synthesizer: &S,
    table: &mut Table,
    setting: &Setting,
) -> Result<Run<S::Release>, Failure> {
    let started = Instant::now();
    let mut rng = InsecureSeededRng::from_seed_for_testing(setting.seed);
    let release = synthesizer.run_with_rng(table, &mut rng)?;
    let fitted = started.elapsed().as_secs_f64();
    let synthetic = release.sample_with_rng(release.estimated_rows(), Sampling::Round, &mut rng)?;
    let elapsed = started.elapsed().as_secs_f64();
    let Setting {
        epsilon,
        delta,
        rho,
        seed,
    } = setting;
    println!(
        "{name} on Adult ({} rows, {} columns), ε = {epsilon}, δ = {delta:e}, ρ = {rho:.6}, seed {seed}",
        table.rows(),
        table.domain().width()
    );
    Ok(Run {
        release,
        synthetic,
        fitted,
        elapsed,
    })
}

/// The value after `name` on the command line, or `default`.
pub fn argument(name: &str, default: &str) -> String {
    let arguments: Vec<String> = std::env::args().collect();
    arguments
        .iter()
        .position(|a| a == name)
        .and_then(|i| arguments.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

/// The table in `directory` (adult.csv) over its domain (adult-domain.json).
fn load(directory: &Path) -> Result<Table, Failure> {
    let domain_text = std::fs::read_to_string(directory.join("adult-domain.json"))?;
    let domain_json: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&domain_text)?;
    let csv = std::fs::read_to_string(directory.join("adult.csv"))?;
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().ok_or("empty csv")?.split(',').collect();
    let sizes = header
        .iter()
        .map(|name| {
            domain_json
                .get(*name)
                .and_then(serde_json::Value::as_u64)
                .map(|n| n as usize)
                .ok_or_else(|| format!("column {name} has no domain"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut columns = vec![Vec::new(); header.len()];
    for line in lines.filter(|l| !l.is_empty()) {
        for (column, value) in line.split(',').enumerate() {
            columns
                .get_mut(column)
                .ok_or("ragged row")?
                .push(value.trim().parse::<u32>()?);
        }
    }
    Ok(Table::new(Domain::new(sizes)?, columns)?)
}

/// ½‖p − p̂‖₁ of the two tables' marginals over `columns`, each normalised.
fn total_variation(truth: &mut Table, synthetic: &mut Table, columns: &[usize]) -> f64 {
    let x = truth.counts(columns).expect("valid columns");
    let y = synthetic.counts(columns).expect("valid columns");
    let (nx, ny) = (truth.rows() as f64, synthetic.rows() as f64);
    0.5 * x
        .iter()
        .zip(&y)
        .map(|(&a, &b)| (a as f64 / nx - b as f64 / ny).abs())
        .sum::<f64>()
}

fn summary(errors: &[f64]) -> (f64, f64) {
    let mean = errors.iter().sum::<f64>() / errors.len() as f64;
    (mean, errors.iter().copied().fold(0.0, f64::max))
}

/// The folder of the pre-discretised Adult table of the repository.
fn folder() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/adult-discretised")
}

/// The pre-discretised Adult table of the repository.
pub fn adult() -> Result<Table, Failure> {
    load(&folder())
}

/// Writes `synthetic` as a CSV of codes with Adult's header to the path
/// after `--out`, if one is given (so that another program, such as
/// docs/bench/synth_vs_pgm.py, can score it); the run's time is taken
/// before this.
pub fn save(synthetic: &Table) -> Result<(), Failure> {
    let path = argument("--out", "");
    if path.is_empty() {
        return Ok(());
    }
    let csv = std::fs::read_to_string(folder().join("adult.csv"))?;
    let header = csv.lines().next().ok_or("empty csv")?;
    let width = synthetic.domain().width();
    let mut text = String::with_capacity(synthetic.rows() * width * 3 + header.len() + 1);
    text.push_str(header);
    text.push('\n');
    for row in 0..synthetic.rows() {
        for column in 0..width {
            if column > 0 {
                text.push(',');
            }
            text.push_str(&synthetic.column(column)[row].to_string());
        }
        text.push('\n');
    }
    std::fs::write(&path, text)?;
    println!("  synthetic rows written to {path}");
    Ok(())
}

/// Prints the mean and max total-variation distance of `synthetic`
/// against `truth` over all 2-way marginals and all 3-way marginals of at
/// most 10,000 cells.
pub fn report(truth: &mut Table, synthetic: &mut Table) {
    let domain = truth.domain().clone();
    let r = domain.width();
    let mut two = Vec::new();
    let mut three = Vec::new();
    for a in 0..r {
        for b in a + 1..r {
            two.push(total_variation(truth, synthetic, &[a, b]));
            for c in b + 1..r {
                if domain.size(a) * domain.size(b) * domain.size(c) <= 10_000 {
                    three.push(total_variation(truth, synthetic, &[a, b, c]));
                }
            }
        }
    }
    let (two_mean, two_max) = summary(&two);
    let (three_mean, three_max) = summary(&three);
    println!(
        "  2-way TV over {}: mean {two_mean:.4}, max {two_max:.4}",
        two.len()
    );
    println!(
        "  3-way TV over {} (≤ 10,000 cells): mean {three_mean:.4}, max {three_max:.4}",
        three.len()
    );
}
