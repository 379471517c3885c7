//! MST on the pre-discretised UCI Adult (data/adult-discretised/), measured
//! as issue 64 measures Private-PGM: wall time, and the mean and max
//! total-variation distance ½‖p − p̂‖₁ (normalised) between the true and
//! the synthetic marginals over all 2-way marginals and over all 3-way
//! marginals with at most 10,000 cells.
//!
//! ```text
//! cargo run --release -p dpkit-synth --example adult_mst -- --epsilon 1 --delta 1e-9 --seed 0
//! ```
//!
//! The seed keys a reproducible generator: this is an experiment on public
//! data, never a release about real people (that is `Mst::run`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use dpkit_core::accounting::concentrated::rho_within;
use dpkit_core::rng::InsecureSeededRng;
use dpkit_synth::{Domain, Marginals, Mst, Sampling, Table};

fn argument(name: &str, default: &str) -> String {
    let arguments: Vec<String> = std::env::args().collect();
    arguments
        .iter()
        .position(|a| a == name)
        .and_then(|i| arguments.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

fn load(directory: &Path) -> Result<Table, Box<dyn std::error::Error>> {
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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let epsilon: f64 = argument("--epsilon", "1").parse()?;
    let delta: f64 = argument("--delta", "1e-9").parse()?;
    let seed: u64 = argument("--seed", "0").parse()?;
    let iterations: usize = argument("--iterations", "3000").parse()?;
    let directory = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/adult-discretised");
    let mut table = load(&directory)?;
    let domain = table.domain().clone();

    let started = Instant::now();
    let rho = rho_within(epsilon, delta)?;
    let mst = Mst::new(rho, 1.0)?.with_iterations(iterations, 1_000);
    let mut rng = InsecureSeededRng::from_seed_for_testing(seed);
    let release = mst.run_with_rng(&mut table, &mut rng)?;
    let fitted = started.elapsed();
    // As many rows as the model estimates (its noisy total), as Private-PGM does.
    let mut synthetic =
        release.sample_with_rng(release.estimated_rows(), Sampling::Round, &mut rng)?;
    let elapsed = started.elapsed();

    let r = domain.width();
    let mut two = Vec::new();
    let mut three = Vec::new();
    for a in 0..r {
        for b in a + 1..r {
            two.push(total_variation(&mut table, &mut synthetic, &[a, b]));
            for c in b + 1..r {
                if domain.size(a) * domain.size(b) * domain.size(c) <= 10_000 {
                    three.push(total_variation(&mut table, &mut synthetic, &[a, b, c]));
                }
            }
        }
    }
    let (two_mean, two_max) = summary(&two);
    let (three_mean, three_max) = summary(&three);
    let (sigma_one, sigma_two) = release.sigmas();
    println!(
        "MST on Adult ({} rows, {r} columns), ε = {epsilon}, δ = {delta:e}, ρ = {rho:.6}, seed {seed}",
        table.rows()
    );
    println!(
        "  charged ρ = {:.6} (spread {:.1e}, tail {:.1e}); σ 1-way {sigma_one:.1}, 2-way {sigma_two:.1}",
        release.cost().rho(),
        release.cost().spread(),
        release.cost().tail()
    );
    println!("  pairs: {:?}", release.pairs());
    println!(
        "  time: {:.2} s ({:.2} s to the fitted model, {iterations} mirror-descent steps)",
        elapsed.as_secs_f64(),
        fitted.as_secs_f64()
    );
    println!(
        "  2-way TV over {}: mean {two_mean:.4}, max {two_max:.4}",
        two.len()
    );
    println!(
        "  3-way TV over {} (≤ 10,000 cells): mean {three_mean:.4}, max {three_max:.4}",
        three.len()
    );
    Ok(())
}
