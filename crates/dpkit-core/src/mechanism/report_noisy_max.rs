//! Report-noisy-max: the exponential mechanism's close relative.

use rand_core::CryptoRng;

use super::{CALIBRATION_MARGIN, require_within_declared};
use crate::accounting::PrivacyLoss;
use crate::error::{Error, Result, require_positive};
use crate::lattice::Lattice;
use crate::rng::with_thread_secure_rng;
use crate::sampling::TwoSidedGeometricSampler;

/// Add independent Laplace-shaped noise to every utility and report the index
/// of the largest (ties go to the lowest index).
///
/// # Privacy
/// Exactly ε-DP. Utilities are rounded to a grid `g ≤ Δu/4096`, so
/// neighbouring data move each by at most `d = ⌈Δu/g⌉` steps, and each gets
/// discrete-Laplace noise with `P(Z = z) ∝ e^(−s|z|)`, `s = ε/(2d + 1)`. If
/// candidate `i` wins (even on a tie) on one dataset, raising its noise by
/// `2d + 1` makes it win strictly on the neighbour, so
/// `P(i) ≤ e^(s(2d+1))·P'(i) = e^ε·P'(i)`; the sampler's proven bound is used.
///
/// ```
/// use dpkit_core::mechanism::ReportNoisyMax;
/// let mechanism = ReportNoisyMax::new(2.0, 1.0).unwrap();
/// assert_eq!(mechanism.select(&[5.0, 900.0, 12.0]).unwrap(), 1);
/// ```
#[derive(Debug, Clone)]
pub struct ReportNoisyMax {
    epsilon: f64,
    lattice: Lattice,
    noise: TwoSidedGeometricSampler,
}

impl ReportNoisyMax {
    /// ε-DP report-noisy-max for utilities of sensitivity `utility_sensitivity`.
    pub fn new(epsilon: f64, utility_sensitivity: f64) -> Result<Self> {
        let epsilon = require_positive("epsilon", epsilon)?;
        let utility_sensitivity = require_positive("utility sensitivity", utility_sensitivity)?;
        let lattice = Lattice::finer_than(utility_sensitivity, 12)?;
        let steps = 2 * lattice.index_sensitivity(utility_sensitivity) + 1;
        let noise =
            TwoSidedGeometricSampler::new(epsilon * (1.0 - CALIBRATION_MARGIN) / steps as f64)?;
        require_within_declared(noise.log_ratio_bound(steps), epsilon)?;
        Ok(Self {
            epsilon,
            lattice,
            noise,
        })
    }

    /// ε.
    pub fn privacy(&self) -> PrivacyLoss {
        PrivacyLoss::pure(self.epsilon).expect("validated at construction")
    }

    /// The index of the noisy maximum, using `rng`.
    pub fn select_with_rng<R: CryptoRng + ?Sized>(
        &self,
        utilities: &[f64],
        rng: &mut R,
    ) -> Result<usize> {
        if utilities.is_empty() {
            return Err(Error::EmptyCandidates);
        }
        let indices = utilities
            .iter()
            .map(|&u| self.lattice.index_of(u))
            .collect::<Result<Vec<_>>>()?;
        let mut best = (i64::MIN, 0usize);
        for (candidate, index) in indices.into_iter().enumerate() {
            let noisy = index.saturating_add(self.noise.sample(rng));
            if noisy > best.0 {
                best = (noisy, candidate);
            }
        }
        Ok(best.1)
    }

    /// The index of the noisy maximum, with this thread's OS-seeded generator.
    pub fn select(&self, utilities: &[f64]) -> Result<usize> {
        with_thread_secure_rng(|rng| self.select_with_rng(utilities, rng))?
    }
}
