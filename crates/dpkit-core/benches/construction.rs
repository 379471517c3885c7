//! How long building each mechanism takes, in one run: *cold* at parameters
//! never built before in this process (every table is made), and *warm* at
//! parameters already built once (tables shared through the cache).
//!
//! `cargo bench -p dpkit-core --bench construction`

use std::hint::black_box;
use std::time::Instant;

use dpkit_core::mechanism::{
    DiscreteGaussian, DiscreteStaircase, Gaussian, Laplace, Staircase, TwoSidedGeometric,
};

/// Median µs per construction over `runs` batches of `per_batch`.
fn median_us(runs: usize, per_batch: usize, mut build: impl FnMut(usize)) -> f64 {
    let mut times = Vec::with_capacity(runs);
    let mut counter = 0;
    for _ in 0..runs {
        let start = Instant::now();
        for _ in 0..per_batch {
            build(counter);
            counter += 1;
        }
        times.push(start.elapsed().as_secs_f64() * 1e6 / per_batch as f64);
    }
    times.sort_by(f64::total_cmp);
    times[runs / 2]
}

/// A distinct ε near `epsilon` for each `i` (never built before).
fn fresh(epsilon: f64, i: usize) -> f64 {
    epsilon * (1.0 + (i as f64 + 1.0) * 1e-7)
}

fn row(name: &str, build: impl Fn(f64) + Copy, epsilon: f64) {
    let cold = median_us(7, 20, |i| build(fresh(epsilon, i + 1_000_000)));
    build(epsilon);
    let warm = median_us(7, 200, |_| build(epsilon));
    println!(
        "| {name} | {epsilon} | {cold:.1} | {warm:.2} | {:.0}× |",
        cold / warm
    );
}

fn main() {
    println!("| mechanism | ε | cold µs | warm µs | cold / warm |");
    println!("|---|---|---|---|---|");
    for epsilon in [0.01, 1.0, 10.0] {
        row(
            "Laplace Δ=1",
            |e| drop(black_box(Laplace::new(e, 1.0).unwrap())),
            epsilon,
        );
        row(
            "staircase Δ=1",
            |e| drop(black_box(Staircase::new(e, 1.0).unwrap())),
            epsilon,
        );
        row(
            "geometric Δ=1",
            |e| drop(black_box(TwoSidedGeometric::new(e, 1).unwrap())),
            epsilon,
        );
        row(
            "geometric Δ=10⁴",
            |e| drop(black_box(TwoSidedGeometric::new(e, 10_000).unwrap())),
            epsilon,
        );
        row(
            "discrete staircase Δ=5",
            |e| drop(black_box(DiscreteStaircase::new(e, 5).unwrap())),
            epsilon,
        );
        row(
            "Gaussian δ=1e-6",
            |e| drop(black_box(Gaussian::new(e, 1e-6, 1.0).unwrap())),
            epsilon,
        );
        row(
            "discrete Gaussian δ=1e-6",
            |e| drop(black_box(DiscreteGaussian::new(e, 1e-6, 1).unwrap())),
            epsilon,
        );
    }
}
