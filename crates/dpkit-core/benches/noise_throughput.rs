//! Nanoseconds per noisy value for every mechanism, with the OS-seeded secure
//! generator, next to a naive f64 inverse-CDF Laplace on the same generator,
//! all in one run. `cargo bench -p dpkit-core --bench noise_throughput`
//! (add `-- --quick` for a short run).

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

struct Row {
    name: String,
    batch: f64,
    scalar: f64,
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

fn real_row(
    name: &str,
    mechanism: &impl RealMechanism,
    n: usize,
    repeats: usize,
    rng: &mut SecureRng,
) -> Row {
    let mut buffer = vec![0.0; n];
    let batch = median_ns_per_value(repeats, n, || {
        buffer
            .iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = i as f64 * 0.25);
        mechanism
            .privatize_slice_with_rng(&mut buffer, rng)
            .unwrap();
        black_box(&buffer);
    });
    let scalar = median_ns_per_value(repeats, n, || {
        for i in 0..n {
            black_box(
                mechanism
                    .privatize_with_rng(black_box(i as f64 * 0.25), rng)
                    .unwrap(),
            );
        }
    });
    Row {
        name: name.into(),
        batch,
        scalar,
    }
}

fn integer_row(
    name: &str,
    mechanism: &impl IntegerMechanism,
    n: usize,
    repeats: usize,
    rng: &mut SecureRng,
) -> Row {
    let mut buffer = vec![0i64; n];
    let batch = median_ns_per_value(repeats, n, || {
        buffer
            .iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = i as i64);
        mechanism.privatize_slice_with_rng(&mut buffer, rng);
        black_box(&buffer);
    });
    let scalar = median_ns_per_value(repeats, n, || {
        for i in 0..n {
            black_box(mechanism.privatize_with_rng(black_box(i as i64), rng));
        }
    });
    Row {
        name: name.into(),
        batch,
        scalar,
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (n, repeats) = if quick { (200_000, 5) } else { (2_000_000, 11) };
    let mut rng = SecureRng::from_os().expect("OS randomness");
    let epsilon = 1.0;

    let naive = NaiveFloatLaplace {
        scale: 1.0 / epsilon,
    };
    let mut buffer = vec![0.0; n];
    let naive_batch = median_ns_per_value(repeats, n, || {
        buffer
            .iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = naive.privatize(i as f64 * 0.25, &mut rng));
        black_box(&buffer);
    });
    let naive_scalar = median_ns_per_value(repeats, n, || {
        for i in 0..n {
            black_box(naive.privatize(black_box(i as f64 * 0.25), &mut rng));
        }
    });
    let mut rows = vec![Row {
        name: "naive f64 Laplace (insecure)".into(),
        batch: naive_batch,
        scalar: naive_scalar,
    }];

    rows.push(real_row(
        "Laplace",
        &Laplace::new(epsilon, 1.0).unwrap(),
        n,
        repeats,
        &mut rng,
    ));
    rows.push(real_row(
        "Laplace eps=0.01",
        &Laplace::new(0.01, 1.0).unwrap(),
        n,
        repeats,
        &mut rng,
    ));
    rows.push(real_row(
        "staircase (L1 gamma)",
        &Staircase::new(epsilon, 1.0).unwrap(),
        n,
        repeats,
        &mut rng,
    ));
    rows.push(real_row(
        "staircase (L2 gamma)",
        &Staircase::with_gamma(epsilon, 1.0, StaircaseGamma::L2Optimal).unwrap(),
        n,
        repeats,
        &mut rng,
    ));
    rows.push(real_row(
        "Gaussian delta=1e-6",
        &Gaussian::new(epsilon, 1e-6, 1.0).unwrap(),
        n,
        repeats,
        &mut rng,
    ));
    rows.push(integer_row(
        "two-sided geometric",
        &TwoSidedGeometric::new(epsilon, 1).unwrap(),
        n,
        repeats,
        &mut rng,
    ));
    rows.push(integer_row(
        "discrete staircase D=5",
        &DiscreteStaircase::new(epsilon, 5).unwrap(),
        n,
        repeats,
        &mut rng,
    ));
    rows.push(integer_row(
        "discrete Gaussian delta=1e-6",
        &DiscreteGaussian::new(epsilon, 1e-6, 1).unwrap(),
        n,
        repeats,
        &mut rng,
    ));

    println!(
        "epsilon = {epsilon}, sensitivity 1, {n} values x {repeats} repeats, median; SecureRng (ChaCha12, OS-seeded)"
    );
    println!(
        "{:<30} {:>14} {:>15} {:>16} {:>15}",
        "mechanism", "batch ns/value", "scalar ns/value", "batch / naive", "scalar / batch"
    );
    for row in &rows {
        println!(
            "{:<30} {:>14.1} {:>15.1} {:>16.2} {:>15.2}",
            row.name,
            row.batch,
            row.scalar,
            row.batch / naive_batch,
            row.scalar / row.batch
        );
    }
}
