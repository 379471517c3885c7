//! The experiments, one module each.

pub mod accuracy;
pub mod composition;
pub mod densities;
pub mod exponential;
pub mod histogram;
pub mod mean_height;
pub mod speed;

/// `count` values evenly spaced in log scale from `low` to `high`, plus
/// `extra` values, sorted and without repeats.
pub fn log_grid(low: f64, high: f64, count: usize, extra: &[f64]) -> Vec<f64> {
    let (a, b) = (low.ln(), high.ln());
    let mut grid: Vec<f64> = (0..count)
        .map(|k| (a + (b - a) * k as f64 / (count.max(2) - 1) as f64).exp())
        .chain(extra.iter().copied())
        .collect();
    grid.sort_by(f64::total_cmp);
    grid.dedup_by(|x, y| (*x / *y - 1.0).abs() < 1e-9);
    grid
}

/// Mean and sample standard deviation.
pub fn mean_and_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (mean, variance.sqrt())
}
