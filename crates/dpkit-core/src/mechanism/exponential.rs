//! The exponential mechanism over a finite candidate set.

use rand_core::CryptoRng;

use super::CALIBRATION_MARGIN;
use crate::accounting::PrivacyLoss;
use crate::error::{Error, Result, require_positive};
use crate::rng::with_thread_secure_rng;

/// Selection weights are kept at or above 2⁻³⁰ of the largest.
pub(crate) const LOG_WEIGHT_FLOOR: f64 = -30.0 * std::f64::consts::LN_2;
/// Integer weights are the floored weights times 2⁶², so each is ≥ 2³².
const WEIGHT_SCALE: f64 = 4_611_686_018_427_387_904.0; // 2^62
/// Bound on the relative error of an integer weight: rounding (2⁻³³), `exp`
/// (2⁻⁵¹) and the log-weight's own rounding (1e-14).
const WEIGHT_LOG_ERROR: f64 = 2.4e-10;

/// Choose candidate `a` with probability ∝ `exp(ε·u(a)/(2Δu))`
/// (reference §Exponential mechanism).
///
/// # Privacy
/// Exactly ε-DP, numerically safe for any finite utilities (tens of thousands
/// included): weights are computed relative to the largest (log-sum-exp), so
/// nothing overflows. To keep every candidate reachable, whatever the data, a
/// weight is never below 2⁻³⁰ of the largest: `log w = max(l, l_max − 30 ln 2)`
/// is 1-Lipschitz in the utilities, so the floor costs no privacy. Weights are
/// turned into integers (relative error ≤ 2.4e-10) and the candidate is drawn
/// exactly in proportion to them; the calibration leaves room for that error.
///
/// ```
/// use dpkit_core::mechanism::ExponentialMechanism;
/// use dpkit_core::rng::InsecureSeededRng;
/// let mechanism = ExponentialMechanism::new(1.0, 1.0).unwrap();
/// let counts = [22_379.0, 15_340.0, 6_633.0]; // utilities in the tens of thousands
/// // Another candidate comes up with probability 2⁻²⁹; the seed fixes it.
/// let mut rng = InsecureSeededRng::from_seed_for_testing(7);
/// assert_eq!(mechanism.select_with_rng(&counts, &mut rng).unwrap(), 0);
/// ```
#[derive(Debug, Clone)]
pub struct ExponentialMechanism {
    epsilon: f64,
    utility_sensitivity: f64,
    /// ε used for the weights, leaving room for the integer rounding.
    inner_epsilon: f64,
}

impl ExponentialMechanism {
    /// ε-DP selection for a utility of sensitivity `utility_sensitivity`.
    pub fn new(epsilon: f64, utility_sensitivity: f64) -> Result<Self> {
        let epsilon = require_positive("epsilon", epsilon)?;
        let utility_sensitivity = require_positive("utility sensitivity", utility_sensitivity)?;
        let inner_epsilon = epsilon * (1.0 - CALIBRATION_MARGIN) - 4.0 * WEIGHT_LOG_ERROR;
        if inner_epsilon <= 0.0 {
            return Err(Error::InvalidParameter {
                name: "epsilon",
                reason: format!(
                    "must be at least 1e-8 for the exponential mechanism, got {epsilon}"
                ),
            });
        }
        Ok(Self {
            epsilon,
            utility_sensitivity,
            inner_epsilon,
        })
    }

    /// The ε its weights use (a little below ε, for the integer rounding).
    pub(crate) fn weight_epsilon(&self) -> f64 {
        self.inner_epsilon
    }

    /// ε.
    pub fn privacy(&self) -> PrivacyLoss {
        PrivacyLoss::pure(self.epsilon).expect("validated at construction")
    }

    fn integer_weights(&self, utilities: &[f64]) -> Result<Vec<u64>> {
        if utilities.is_empty() {
            return Err(Error::EmptyCandidates);
        }
        if utilities.iter().any(|u| !u.is_finite()) {
            return Err(Error::NonFiniteValue);
        }
        let factor = self.inner_epsilon / (2.0 * self.utility_sensitivity);
        let best = utilities.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Ok(utilities
            .iter()
            // Subtracting before scaling keeps the log-weight's rounding error
            // below 1e-14 wherever the floor does not apply.
            .map(|&u| {
                let log_weight = ((u - best) * factor).max(LOG_WEIGHT_FLOOR);
                (log_weight.exp() * WEIGHT_SCALE).round() as u64
            })
            .collect())
    }

    /// The exact probability with which each candidate is chosen.
    pub fn selection_probabilities(&self, utilities: &[f64]) -> Result<Vec<f64>> {
        let weights = self.integer_weights(utilities)?;
        let total: u128 = weights.iter().map(|&w| u128::from(w)).sum();
        Ok(weights.iter().map(|&w| w as f64 / total as f64).collect())
    }

    /// The index of the chosen candidate, using `rng`.
    pub fn select_with_rng<R: CryptoRng + ?Sized>(
        &self,
        utilities: &[f64],
        rng: &mut R,
    ) -> Result<usize> {
        let weights = self.integer_weights(utilities)?;
        let total: u128 = weights.iter().map(|&w| u128::from(w)).sum();
        let mut target = uniform_u128_below(total, rng);
        for (index, &weight) in weights.iter().enumerate() {
            let weight = u128::from(weight);
            if target < weight {
                return Ok(index);
            }
            target -= weight;
        }
        unreachable!("target < total = sum of weights")
    }

    /// The index of the chosen candidate, with this thread's OS-seeded generator.
    pub fn select(&self, utilities: &[f64]) -> Result<usize> {
        with_thread_secure_rng(|rng| self.select_with_rng(utilities, rng))?
    }
}

/// Exactly uniform in `0..bound` (`bound ≥ 1`) by masking and rejection.
fn uniform_u128_below<R: CryptoRng + ?Sized>(bound: u128, rng: &mut R) -> u128 {
    let mask = u128::MAX >> (bound - 1).leading_zeros().min(127);
    loop {
        let candidate = ((u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64())) & mask;
        if candidate < bound {
            return candidate;
        }
    }
}
