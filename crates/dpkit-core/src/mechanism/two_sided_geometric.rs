//! The two-sided geometric (discrete Laplace) mechanism for integer queries.

use rand_core::CryptoRng;

use super::{
    CALIBRATION_MARGIN, IntegerMechanism, require_integer_sensitivity, require_within_declared,
    saturating_release,
};
use crate::accounting::PrivacyLoss;
use crate::accuracy::{NoiseAccuracy, require_alpha, smallest_integer_with_tail_below};
use crate::error::{Result, require_positive};
use crate::sampling::TwoSidedGeometricSampler;

/// `P(Z = k) = (1 − α)/(1 + α)·α^|k|`, `α = e^(−ε/Δ)`, for integer queries of
/// integer sensitivity Δ ≥ 1 (reference §Two-sided geometric).
///
/// The universally optimal noise for counts (Ghosh, Roughgarden &
/// Sundararajan 2009): no integer-valued ε-DP noise has a smaller `E|Z|`.
///
/// # Privacy
/// Exactly ε-DP: integer in, integer out, and the sampler's realised loss,
/// deviations included, is proven ≤ ε at construction.
///
/// ```
/// use dpkit_core::mechanism::{IntegerMechanism, TwoSidedGeometric};
/// use dpkit_core::accuracy::NoiseAccuracy;
/// let count = TwoSidedGeometric::new(1.0, 1).unwrap();
/// let noisy = count.privatize(1_234).unwrap();
/// assert!((noisy - 1_234).abs() < 100);
/// assert!((count.expected_absolute_error() - 1.0 / 1f64.sinh()).abs() < 1e-5);
/// ```
#[derive(Debug, Clone)]
pub struct TwoSidedGeometric {
    epsilon: f64,
    sensitivity: u64,
    noise: TwoSidedGeometricSampler,
}

impl TwoSidedGeometric {
    /// ε-DP integer noise for a query of integer L1 sensitivity `sensitivity ≥ 1`.
    pub fn new(epsilon: f64, sensitivity: u64) -> Result<Self> {
        let epsilon = require_positive("epsilon", epsilon)?;
        require_integer_sensitivity(sensitivity)?;
        let noise = TwoSidedGeometricSampler::new(
            epsilon * (1.0 - CALIBRATION_MARGIN) / sensitivity as f64,
        )?;
        require_within_declared(noise.log_ratio_bound(sensitivity), epsilon)?;
        Ok(Self {
            epsilon,
            sensitivity,
            noise,
        })
    }

    /// `α = e^(−ε/Δ)`.
    pub fn ratio(&self) -> f64 {
        self.noise.ratio()
    }

    /// The proven upper bound on the realised privacy loss (≤ ε).
    pub fn realised_epsilon_bound(&self) -> f64 {
        self.noise.log_ratio_bound(self.sensitivity)
    }

    /// The noise distribution, with its closed forms.
    pub fn noise(&self) -> &TwoSidedGeometricSampler {
        &self.noise
    }
}

impl IntegerMechanism for TwoSidedGeometric {
    #[inline]
    fn privatize_with_rng<R: CryptoRng + ?Sized>(&self, value: i64, rng: &mut R) -> i64 {
        saturating_release(value, self.noise.sample(rng))
    }

    fn privatize_slice_with_rng<R: CryptoRng + ?Sized>(&self, values: &mut [i64], rng: &mut R) {
        self.noise.add_into(values, rng);
    }

    fn privacy(&self) -> PrivacyLoss {
        PrivacyLoss::pure(self.epsilon).expect("validated at construction")
    }
}

impl NoiseAccuracy for TwoSidedGeometric {
    fn expected_absolute_error(&self) -> f64 {
        self.noise.expected_absolute_value()
    }

    fn variance(&self) -> f64 {
        self.noise.variance()
    }

    fn confidence_half_width(&self, alpha: f64) -> Result<f64> {
        let alpha = require_alpha(alpha)?;
        Ok(smallest_integer_with_tail_below(alpha, |t| self.noise.tail_probability(t)) as f64)
    }
}
