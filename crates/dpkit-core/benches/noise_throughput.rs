//! Nanoseconds per noisy value for every mechanism, with the OS-seeded secure
//! generator, next to a plain f64 inverse-CDF Laplace on the same generator,
//! all in one run. Each batch releases a buffer of values in place; each
//! scalar call releases one value.
//!
//! `cargo bench -p dpkit-core --bench noise_throughput` prints a table;
//! `-- --quick` runs fewer values; `-- --tsv` prints tab-separated rows for
//! `docs/bench/samplers.py`, which times numpy in the same run and prints
//! the ratios the book shows (docs/book/src/speed/noise.md).

#[path = "../tests/support/naive_laplace.rs"]
mod naive_laplace;

use std::hint::black_box;
use std::time::Instant;

use dpkit_core::mechanism::{
    DiscreteGaussian, DiscreteStaircase, Gaussian, IntegerMechanism, Laplace, RealMechanism,
    Staircase, StaircaseGamma, TwoSidedGeometric,
};
use dpkit_core::rng::SecureRng;
use naive_laplace::NaiveFloatLaplace;

/// One mechanism's figures, and the numpy call that is its peer.
struct Row {
    name: String,
    /// `laplace` or `geometric:<p>` (numpy's geometric with success probability p).
    peer: String,
    batch: f64,
    scalar: f64,
}

struct Run {
    values: usize,
    repeats: usize,
    rng: SecureRng,
}

fn median_ns_per_value(repeats: usize, values: usize, mut run: impl FnMut()) -> f64 {
    run(); // warm-up
    let mut timings: Vec<f64> = (0..repeats)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed().as_nanos() as f64 / values as f64
        })
        .collect();
    timings.sort_by(f64::total_cmp);
    timings[repeats / 2]
}

impl Run {
    fn real(&mut self, name: &str, mechanism: &impl RealMechanism) -> Row {
        let (n, repeats, rng) = (self.values, self.repeats, &mut self.rng);
        let mut buffer: Vec<f64> = (0..n).map(|i| i as f64 * 0.25).collect();
        let batch = median_ns_per_value(repeats, n, || {
            mechanism
                .privatize_slice_with_rng(&mut buffer, rng)
                .unwrap();
            black_box(&buffer);
        });
        let scalar = median_ns_per_value(repeats, n, || {
            for i in 0..n {
                let value = black_box(i as f64 * 0.25);
                black_box(mechanism.privatize_with_rng(value, rng).unwrap());
            }
        });
        row(name, "laplace", batch, scalar)
    }

    fn integer(&mut self, name: &str, peer: &str, mechanism: &impl IntegerMechanism) -> Row {
        let (n, repeats, rng) = (self.values, self.repeats, &mut self.rng);
        let mut buffer: Vec<i64> = (0..n as i64).collect();
        let batch = median_ns_per_value(repeats, n, || {
            mechanism.privatize_slice_with_rng(&mut buffer, rng);
            black_box(&buffer);
        });
        let scalar = median_ns_per_value(repeats, n, || {
            for i in 0..n as i64 {
                black_box(mechanism.privatize_with_rng(black_box(i), rng));
            }
        });
        row(name, peer, batch, scalar)
    }

    /// The plain f64 inverse-CDF Laplace (`q + λ·ln(2u)` etc.) on the same
    /// secure generator: what a float implementation costs, with no defence.
    fn naive(&mut self) -> Row {
        let (n, repeats, rng) = (self.values, self.repeats, &mut self.rng);
        let naive = NaiveFloatLaplace { scale: 1.0 };
        let mut buffer: Vec<f64> = (0..n).map(|i| i as f64 * 0.25).collect();
        let batch = median_ns_per_value(repeats, n, || {
            buffer
                .iter_mut()
                .for_each(|v| *v = naive.privatize(*v, &mut *rng));
            black_box(&buffer);
        });
        let scalar = median_ns_per_value(repeats, n, || {
            for i in 0..n {
                black_box(naive.privatize(black_box(i as f64 * 0.25), &mut *rng));
            }
        });
        row("plain f64 Laplace (no defence)", "laplace", batch, scalar)
    }
}

fn row(name: &str, peer: &str, batch: f64, scalar: f64) -> Row {
    Row {
        name: name.into(),
        peer: peer.into(),
        batch,
        scalar,
    }
}

/// numpy's geometric peer for a two-sided geometric of ratio `e^(−ε/Δ)`:
/// `Generator.geometric(p)` counts trials, so `p = 1 − e^(−ε/Δ)`.
fn geometric_peer(epsilon: f64, sensitivity: u64) -> String {
    let p = -(-epsilon / sensitivity as f64).exp_m1();
    format!("geometric:{p:e}")
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn rows(run: &mut Run, epsilon: f64) -> Vec<Row> {
    let mut rows = vec![
        run.naive(),
        run.real("Laplace", &Laplace::new(epsilon, 1.0).unwrap()),
        run.real("Laplace ε=0.01", &Laplace::new(0.01, 1.0).unwrap()),
        run.real("staircase (L1 γ)", &Staircase::new(epsilon, 1.0).unwrap()),
        run.real(
            "staircase (L2 γ)",
            &Staircase::with_gamma(epsilon, 1.0, StaircaseGamma::L2Optimal).unwrap(),
        ),
        run.real(
            "Gaussian δ=1e-6",
            &Gaussian::new(epsilon, 1e-6, 1.0).unwrap(),
        ),
    ];
    for sensitivity in [1, 100, 10_000, 1_000_000, 100_000_000, 10_000_000_000] {
        rows.push(run.integer(
            &format!("two-sided geometric Δ={sensitivity}"),
            &geometric_peer(epsilon, sensitivity),
            &TwoSidedGeometric::new(epsilon, sensitivity).unwrap(),
        ));
    }
    rows.push(run.integer(
        "discrete staircase Δ=5",
        "laplace",
        &DiscreteStaircase::new(epsilon, 5).unwrap(),
    ));
    rows.push(run.integer(
        "discrete Gaussian δ=1e-6",
        "laplace",
        &DiscreteGaussian::new(epsilon, 1e-6, 1).unwrap(),
    ));
    rows
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let tsv = std::env::args().any(|a| a == "--tsv");
    let (values, repeats) = if quick { (200_000, 5) } else { (1_000_000, 11) };
    let mut run = Run {
        values,
        repeats,
        rng: SecureRng::from_os().expect("OS randomness"),
    };
    let epsilon = 1.0;
    let rows = rows(&mut run, epsilon);
    if tsv {
        println!("cpu\t{}", cpu_model());
        println!("values\t{values}\t{repeats}");
        for row in &rows {
            println!(
                "row\t{}\t{}\t{}\t{}",
                row.name, row.peer, row.batch, row.scalar
            );
        }
        return;
    }
    println!("{}", cpu_model());
    println!(
        "ε = {epsilon}, Δ = 1 unless shown, {values} values × {repeats} repeats, median; SecureRng (ChaCha12, OS-seeded)"
    );
    println!(
        "{:<34} {:>14} {:>15} {:>17}",
        "mechanism", "batch ns/value", "scalar ns/value", "batch / plain f64"
    );
    let plain = rows[0].batch;
    for row in &rows {
        println!(
            "{:<34} {:>14.1} {:>15.1} {:>17.2}",
            row.name,
            row.batch,
            row.scalar,
            row.batch / plain
        );
    }
}
