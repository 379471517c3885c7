//! Sensitivity sampling (Rubinstein & Aldà, ICML 2017).
//!
//! When a query's global sensitivity is unbounded or wildly pessimistic, draw
//! many pairs of neighbouring datasets from a model of the data, measure how
//! far the query's answers move, and take a high order statistic of those
//! distances. The result gives *random* DP, with confidence parameters, and
//! the mean distance shows the "typical" sensitivity.

use rand::RngExt;
use rand_core::Rng;

use crate::error::{Error, Result, require_open_unit_interval, require_positive};

/// Which norm measures the distance between two answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Norm {
    /// Sum of absolute differences (for Laplace-type noise).
    L1,
    /// Euclidean distance (for Gaussian noise).
    L2,
}

impl Norm {
    fn distance(self, a: &[f64], b: &[f64]) -> f64 {
        let pairs = a.iter().zip(b);
        match self {
            Norm::L1 => pairs.map(|(x, y)| (x - y).abs()).sum(),
            Norm::L2 => pairs.map(|(x, y)| (x - y).powi(2)).sum::<f64>().sqrt(),
        }
    }
}

/// A mixture of normal distributions: a simple data model to draw records from.
///
/// ```
/// use dpkit_core::sensitivity::GaussianMixture;
/// use dpkit_core::rng::InsecureSeededRng;
/// // Heights (cm): an equal mix of N(178, 7²) and N(162, 6.5²) (reference §Sensitivity sampling)
/// let heights = GaussianMixture::new(&[(0.5, 178.0, 7.0), (0.5, 162.0, 6.5)]).unwrap();
/// let mut rng = InsecureSeededRng::from_seed_for_testing(1);
/// let mean = (0..10_000).map(|_| heights.sample(&mut rng)).sum::<f64>() / 10_000.0;
/// assert!((mean - 170.0).abs() < 0.5);
/// ```
#[derive(Debug, Clone)]
pub struct GaussianMixture {
    /// (cumulative weight, mean, standard deviation)
    components: Vec<(f64, f64, f64)>,
}

impl GaussianMixture {
    /// Components as `(weight, mean, standard deviation)`; weights are normalised.
    pub fn new(components: &[(f64, f64, f64)]) -> Result<Self> {
        if components.is_empty() {
            return Err(Error::InvalidParameter {
                name: "components",
                reason: "a mixture needs at least one component".into(),
            });
        }
        let mut total = 0.0;
        for &(weight, mean, sd) in components {
            require_positive("mixture weight", weight)?;
            require_positive("standard deviation", sd)?;
            if !mean.is_finite() {
                return Err(Error::InvalidParameter {
                    name: "mean",
                    reason: format!("must be finite, got {mean}"),
                });
            }
            total += weight;
        }
        let mut cumulative = 0.0;
        let components = components
            .iter()
            .map(|&(weight, mean, sd)| {
                cumulative += weight / total;
                (cumulative, mean, sd)
            })
            .collect();
        Ok(Self { components })
    }

    /// One draw (Box–Muller; this simulates data, it protects nothing).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let pick: f64 = rng.random();
        let &(_, mean, sd) = self
            .components
            .iter()
            .find(|(cumulative, _, _)| pick < *cumulative)
            .unwrap_or_else(|| self.components.last().expect("non-empty"));
        let u1: f64 = 1.0 - rng.random::<f64>(); // (0, 1]
        let u2: f64 = rng.random();
        mean + sd * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// The mean of the mixture.
    pub fn mean(&self) -> f64 {
        let mut previous = 0.0;
        self.components
            .iter()
            .map(|&(cumulative, mean, _)| {
                let weight = cumulative - previous;
                previous = cumulative;
                weight * mean
            })
            .sum()
    }
}

/// The outcome of sensitivity sampling.
#[derive(Debug, Clone, PartialEq)]
pub struct SampledSensitivity {
    /// The order statistic used as sensitivity: with probability ≥ 1 − ρ over
    /// the sampling, at most a γ share of neighbouring pairs exceed it.
    pub sensitivity: f64,
    /// The mean of the sampled distances: the "typical" sensitivity.
    pub mean_distance: f64,
    /// The sampled distances, sorted ascending.
    pub distances: Vec<f64>,
    /// γ: the share of neighbouring pairs allowed above the sensitivity.
    pub gamma: f64,
    /// ρ: the probability that the sampling itself misleads.
    pub rho: f64,
}

/// Draws `samples` pairs of neighbouring datasets of `dataset_size` records
/// (the second replaces one record of the first by a fresh draw), measures
/// `‖f(D) − f(D')‖` in `norm`, and returns the order statistic
/// `k = ⌈m(1 − γ + √(ln(1/ρ)/(2m)))⌉` (the DKW inequality) with the mean distance.
///
/// ```
/// use dpkit_core::sensitivity::{GaussianMixture, Norm, sample_sensitivity};
/// use dpkit_core::rng::InsecureSeededRng;
/// let heights = GaussianMixture::new(&[(0.5, 178.0, 7.0), (0.5, 162.0, 6.5)]).unwrap();
/// let mut rng = InsecureSeededRng::from_seed_for_testing(9);
/// let mean_height = |people: &[f64]| vec![people.iter().sum::<f64>() / people.len() as f64];
/// let result = sample_sensitivity(|r: &mut InsecureSeededRng| heights.sample(r), mean_height,
///     100, Norm::L1, 2_000, 0.05, 0.05, &mut rng).unwrap();
/// assert!(result.sensitivity > result.mean_distance);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn sample_sensitivity<T: Clone, R: Rng + ?Sized>(
    mut draw_record: impl FnMut(&mut R) -> T,
    query: impl Fn(&[T]) -> Vec<f64>,
    dataset_size: usize,
    norm: Norm,
    samples: usize,
    gamma: f64,
    rho: f64,
    rng: &mut R,
) -> Result<SampledSensitivity> {
    let gamma = require_open_unit_interval("gamma", gamma)?;
    let rho = require_open_unit_interval("rho", rho)?;
    if dataset_size == 0 || samples == 0 {
        return Err(Error::TooFewSamples {
            reason: "need at least one record and one sample".into(),
        });
    }
    let m = samples as f64;
    let slack = ((1.0 / rho).ln() / (2.0 * m)).sqrt();
    let rank = (m * (1.0 - gamma + slack)).ceil();
    if rank > m {
        let needed = ((1.0 / rho).ln() / (2.0 * gamma * gamma)).ceil();
        return Err(Error::TooFewSamples {
            reason: format!(
                "γ = {gamma}, ρ = {rho} need more than {needed} samples, got {samples}"
            ),
        });
    }
    let mut distances = Vec::with_capacity(samples);
    for _ in 0..samples {
        let mut dataset: Vec<T> = (0..dataset_size).map(|_| draw_record(rng)).collect();
        let before = query(&dataset);
        dataset[0] = draw_record(rng);
        let after = query(&dataset);
        let distance = norm.distance(&before, &after);
        require_finite_distance(distance)?;
        distances.push(distance);
    }
    distances.sort_by(f64::total_cmp);
    let mean_distance = distances.iter().sum::<f64>() / m;
    Ok(SampledSensitivity {
        sensitivity: distances[(rank as usize).max(1) - 1],
        mean_distance,
        distances,
        gamma,
        rho,
    })
}

fn require_finite_distance(distance: f64) -> Result<()> {
    if distance.is_finite() {
        Ok(())
    } else {
        Err(Error::NonFiniteValue)
    }
}
