//! The exponential mechanism over a finite candidate set.

use rand_core::CryptoRng;

use super::CALIBRATION_MARGIN;
use crate::accounting::{ConcentratedLoss, PrivacyLoss};
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

    /// Its loss in concentrated form: ρ = ε²/8, a quarter of the ε²/2 that
    /// any ε-DP mechanism has.
    ///
    /// # Privacy
    /// The exponential mechanism is ε-bounded-range (Durfee & Rogers 2019):
    /// between neighbours D and D′, each candidate's log-weight moves by
    /// `ε′·(u(a, D′) − u(a, D))/(2Δu)`, which lies in `[−ε′/2, ε′/2]`, so
    /// the log-ratios `ln P(a | D)/P(a | D′)` of all candidates lie in an
    /// interval of width ε′ (the normaliser shifts them all alike). The floor
    /// `max(l, l_max − 30 ln 2)` moves each log-weight by an amount between
    /// the smallest and the largest of those moves, so the width stays
    /// within ε′; the integer rounding widens it by at most 4·2.4e-10, and
    /// ε′ + 4·2.4e-10 ≤ ε by construction. An ε-bounded-range mechanism is
    /// ε²/8-zCDP (Cesar & Rogers 2021, "Bounding, concentrating, and
    /// truncating: unifying privacy loss composition for data analytics").
    /// The sampler is exact, so spread and tail are 0.
    ///
    /// ```
    /// use dpkit_core::mechanism::ExponentialMechanism;
    /// let pick = ExponentialMechanism::new(0.2, 1.0).unwrap();
    /// assert!((pick.concentrated().rho() - 0.005).abs() < 1e-15);
    /// ```
    pub fn concentrated(&self) -> ConcentratedLoss {
        ConcentratedLoss::from_parts((self.epsilon * self.epsilon / 8.0).next_up(), 0.0, 0.0)
            .expect("ε is finite and positive")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The Rényi divergence of order α between two selection laws.
    fn renyi(p: &[f64], q: &[f64], alpha: f64) -> f64 {
        let sum: f64 = p
            .iter()
            .zip(q)
            .map(|(&p, &q)| p.powf(alpha) * q.powf(1.0 - alpha))
            .sum();
        sum.ln() / (alpha - 1.0)
    }

    #[test]
    fn the_concentrated_loss_bounds_the_renyi_divergence_of_the_realised_selection() {
        // Neighbours moving utilities in opposite directions by Δ: the
        // worst case for bounded range. At α → 1 the divergence approaches
        // its KL, about ε²/8 for two candidates; ε²/2 would be 4 times looser.
        let epsilon = 0.5;
        let mechanism = ExponentialMechanism::new(epsilon, 1.0).unwrap();
        let rho = mechanism.concentrated().rho();
        for (here, there) in [
            (vec![0.0, 0.0], vec![1.0, -1.0]),
            (vec![3.0, 3.0, 0.0], vec![4.0, 2.0, 1.0]),
            (vec![10.0, 9.5], vec![9.0, 10.5]),
        ] {
            let p = mechanism.selection_probabilities(&here).unwrap();
            let q = mechanism.selection_probabilities(&there).unwrap();
            for alpha in [1.01, 1.5, 2.0, 5.0, 20.0] {
                for (a, b) in [(&p, &q), (&q, &p)] {
                    let divergence = renyi(a, b, alpha);
                    assert!(
                        divergence <= alpha * rho,
                        "α={alpha}: {divergence} > {}",
                        alpha * rho
                    );
                }
            }
        }
        // The first pair is nearly tight: its KL (α → 1) is 0.0310 against
        // ε²/8 = 0.03125, so ρ cannot be much smaller.
        let p = mechanism.selection_probabilities(&[0.0, 0.0]).unwrap();
        let q = mechanism.selection_probabilities(&[1.0, -1.0]).unwrap();
        let kl: f64 = p.iter().zip(&q).map(|(&p, &q)| p * (p / q).ln()).sum();
        assert!(kl > 0.98 * rho && kl <= rho, "{kl} against {rho}");
    }
}
