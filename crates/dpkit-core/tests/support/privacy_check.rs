//! A statistical privacy check: for neighbouring inputs, no output event's
//! probability ratio may provably exceed e^ε.
#![allow(dead_code)]

use super::stats::binomial_bounds;

/// The largest ε the samples *prove* (at confidence 1 − 4e-8 per event) over
/// the events "output ≤ t" and "output > t" for thresholds t at the sample
/// quantiles of both runs.
pub fn proven_epsilon_lower_bound(first: &[f64], second: &[f64]) -> f64 {
    let mut a = first.to_vec();
    let mut b = second.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let mut thresholds = Vec::new();
    for sorted in [&a, &b] {
        for q in 1..40 {
            thresholds.push(sorted[sorted.len() * q / 40]);
        }
        for q in [1usize, 3, 10, 30, 100, 300] {
            if q < sorted.len() {
                thresholds.push(sorted[q]);
                thresholds.push(sorted[sorted.len() - 1 - q]);
            }
        }
    }
    let count_at_most = |sorted: &[f64], t: f64| sorted.partition_point(|&x| x <= t) as u64;
    let (n_a, n_b) = (a.len() as u64, b.len() as u64);
    let mut best = 0.0f64;
    for &t in &thresholds {
        let (below_a, below_b) = (count_at_most(&a, t), count_at_most(&b, t));
        for (in_a, in_b) in [(below_a, below_b), (n_a - below_a, n_b - below_b)] {
            let (low_a, high_a) = binomial_bounds(in_a, n_a);
            let (low_b, high_b) = binomial_bounds(in_b, n_b);
            if high_b > 0.0 && low_a > 0.0 {
                best = best.max((low_a / high_b).ln());
            }
            if high_a > 0.0 && low_b > 0.0 {
                best = best.max((low_b / high_a).ln());
            }
        }
    }
    best
}
