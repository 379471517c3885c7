//! The discrete Gaussian, sampled by rejection from a discrete Laplace.

use rand_core::Rng;

use super::{ExactBernoulli, TwoSidedGeometricSampler};
use crate::error::{Result, require_positive};

/// `P(Y = y) ∝ e^(−y²/(2σ²))` on the integers (Canonne, Kamath & Steinke 2020, Algorithm 3).
///
/// A proposal `Y` from a discrete Laplace of scale `t = ⌊σ⌋ + 1` is accepted
/// with probability `exp(−(|Y| − σ²/t)² / (2σ²))`. The acceptance coin is an
/// [`ExactBernoulli`] of the `f64` value of that exponential, so the realised
/// pmf differs from the ideal one by a factor within `e^(±2⁻⁵⁰)` (the error of
/// `exp`) times the proposal's own bounded spread, wherever `exp` does not
/// underflow, i.e. for `|y| < 38σ`; beyond, the probability is below 1e-300.
///
/// ```
/// use dpkit_core::sampling::DiscreteGaussianSampler;
/// use dpkit_core::rng::InsecureSeededRng;
/// let gaussian = DiscreteGaussianSampler::new(3.0).unwrap();
/// let mut rng = InsecureSeededRng::from_seed_for_testing(2);
/// let n = 20_000;
/// let variance = (0..n).map(|_| (gaussian.sample(&mut rng) as f64).powi(2)).sum::<f64>() / n as f64;
/// assert!((variance - 9.0).abs() < 0.5);
/// ```
#[derive(Debug, Clone)]
pub struct DiscreteGaussianSampler {
    sigma: f64,
    proposal_scale: f64,
    proposal: TwoSidedGeometricSampler,
}

impl DiscreteGaussianSampler {
    /// A discrete Gaussian with parameter `sigma` (> 0).
    pub fn new(sigma: f64) -> Result<Self> {
        let sigma = require_positive("sigma", sigma)?;
        let proposal_scale = sigma.floor() + 1.0;
        Ok(Self {
            sigma,
            proposal_scale,
            proposal: TwoSidedGeometricSampler::new(1.0 / proposal_scale)?,
        })
    }

    /// The parameter σ.
    pub fn sigma(&self) -> f64 {
        self.sigma
    }

    /// Upper bound on `|ln(realised pmf / ideal pmf)|` differences between any
    /// two points within `|y| < 38σ` (twice the one-point error).
    pub fn log_spread_bound(&self) -> f64 {
        // Proposal spread over magnitudes up to 38σ (a shift of that many units
        // minus its exact part), plus the acceptance coin's `exp` error twice.
        let reach = (38.0 * self.sigma).ceil() as u64 + 1;
        let proposal_spread =
            self.proposal.log_ratio_bound(reach) - reach as f64 * self.proposal.unit_log_ratio();
        proposal_spread.max(0.0) + 4.0 * f64::EPSILON + 1e-15
    }

    /// One draw.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> i64 {
        let shift = self.sigma * self.sigma / self.proposal_scale;
        let two_variance = 2.0 * self.sigma * self.sigma;
        loop {
            let candidate = self.proposal.sample(rng);
            let distance = candidate.unsigned_abs() as f64 - shift;
            let accept = (-(distance * distance) / two_variance).exp();
            let coin =
                ExactBernoulli::new(accept).expect("exp of a non-positive number is in [0, 1]");
            if coin.sample(rng) {
                return candidate;
            }
        }
    }
}
