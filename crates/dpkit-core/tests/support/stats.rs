//! Statistical checks with thresholds set so that a correct implementation
//! fails less than once in 10⁶ runs of the whole suite (each check below
//! fails with probability at most about 1e-8).
#![allow(dead_code)]

/// |z| threshold: two-sided normal tail 3.8e-8.
pub const Z_THRESHOLD: f64 = 5.5;
/// Failure probability allowed per bound (KS via DKW, binomial via Chernoff).
pub const FAILURE_PROBABILITY: f64 = 1e-8;

/// Asserts the sample mean of `values` is within `Z_THRESHOLD` standard errors of `expected`.
pub fn assert_mean(label: &str, values: &[f64], expected: f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let standard_error = (variance / n).sqrt().max(1e-300);
    let z = (mean - expected) / standard_error;
    assert!(
        z.abs() <= Z_THRESHOLD,
        "{label}: sample mean {mean} vs closed form {expected} (z = {z:.2}, n = {n})"
    );
}

/// Asserts `E|X|` and `Var X` (mean zero) of `noise` match the closed forms.
pub fn assert_moments(label: &str, noise: &[f64], expected_abs: f64, expected_variance: f64) {
    let absolute: Vec<f64> = noise.iter().map(|x| x.abs()).collect();
    let squares: Vec<f64> = noise.iter().map(|x| x * x).collect();
    assert_mean(&format!("{label} E|X|"), &absolute, expected_abs);
    assert_mean(&format!("{label} Var"), &squares, expected_variance);
    assert_mean(&format!("{label} mean"), noise, 0.0);
}

/// Kolmogorov–Smirnov with the DKW bound (valid for discrete distributions
/// too): asserts `sup_k |F_n(k) − F(k)| ≤ √(ln(2/p)/(2n))` over all integers.
/// Between consecutive sample values `F_n` is flat and `F` rises, so the
/// supremum is reached at a sample value or just below one.
pub fn assert_ks_integer(label: &str, samples: &[i64], cdf: impl Fn(i64) -> f64) {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let n = sorted.len() as f64;
    let bound = ((2.0 / FAILURE_PROBABILITY).ln() / (2.0 * n)).sqrt();
    let mut worst: (f64, i64) = (0.0, sorted[0]);
    let mut start = 0usize;
    while start < sorted.len() {
        let value = sorted[start];
        let end = sorted.partition_point(|&x| x <= value);
        let below = (start as f64 / n - cdf(value - 1)).abs();
        let at = (end as f64 / n - cdf(value)).abs();
        for (distance, k) in [(below, value - 1), (at, value)] {
            if distance > worst.0 {
                worst = (distance, k);
            }
        }
        start = end;
    }
    assert!(
        worst.0 <= bound,
        "{label}: KS distance {} at {} exceeds the DKW bound {bound} (n = {n})",
        worst.0,
        worst.1
    );
}

/// Chernoff (relative-entropy) confidence bounds on a binomial proportion:
/// `[lower, upper]` holds the truth with probability ≥ 1 − 2·FAILURE_PROBABILITY.
pub fn binomial_bounds(successes: u64, trials: u64) -> (f64, f64) {
    dpkit_core::statistics::binomial_bounds(successes, trials, FAILURE_PROBABILITY)
}

/// Asserts `count` of `trials` is consistent with probability `p`.
pub fn assert_frequency(label: &str, count: u64, trials: u64, p: f64) {
    let (lower, upper) = binomial_bounds(count, trials);
    assert!(
        lower <= p && p <= upper,
        "{label}: observed {count}/{trials}, expected probability {p} outside [{lower}, {upper}]"
    );
}
