//! How privacy losses add up (reference §Composition and other properties).

use super::PrivacyLoss;
use crate::error::{Error, Result};

/// Mechanisms run one after another on the same data: ε and δ add.
///
/// ```
/// use dpkit_core::accounting::{PrivacyLoss, sequential_composition};
/// let total = sequential_composition(&[PrivacyLoss::pure(0.1).unwrap(), PrivacyLoss::pure(0.2).unwrap()]);
/// assert!((total.epsilon() - 0.3).abs() < 1e-12);
/// ```
pub fn sequential_composition(losses: &[PrivacyLoss]) -> PrivacyLoss {
    let epsilon = losses.iter().map(PrivacyLoss::epsilon).sum();
    let delta = losses.iter().map(PrivacyLoss::delta).sum();
    PrivacyLoss::from_parts(epsilon, delta)
}

/// Mechanisms each run on one of several disjoint parts of the data (every
/// person in at most one part): the largest ε and the largest δ.
///
/// ```
/// use dpkit_core::accounting::{PrivacyLoss, parallel_composition};
/// let total = parallel_composition(&[PrivacyLoss::pure(0.1).unwrap(), PrivacyLoss::pure(0.2).unwrap()]);
/// assert_eq!(total.epsilon(), 0.2);
/// ```
pub fn parallel_composition(losses: &[PrivacyLoss]) -> PrivacyLoss {
    let epsilon = losses.iter().map(PrivacyLoss::epsilon).fold(0.0, f64::max);
    let delta = losses.iter().map(PrivacyLoss::delta).fold(0.0, f64::max);
    PrivacyLoss::from_parts(epsilon, delta)
}

/// The guarantee for a group of `k` people when one person has `loss`:
/// `(kε, k·e^((k−1)ε)·δ)`.
///
/// ```
/// use dpkit_core::accounting::{PrivacyLoss, group_privacy};
/// let family = group_privacy(PrivacyLoss::pure(0.5).unwrap(), 4).unwrap();
/// assert_eq!(family.epsilon(), 2.0);
/// ```
pub fn group_privacy(loss: PrivacyLoss, group_size: u32) -> Result<PrivacyLoss> {
    if group_size == 0 {
        return Err(Error::InvalidParameter {
            name: "group size",
            reason: "must be at least 1".into(),
        });
    }
    let k = f64::from(group_size);
    let delta = if loss.delta() == 0.0 {
        0.0
    } else {
        k * ((k - 1.0) * loss.epsilon()).exp() * loss.delta()
    };
    Ok(PrivacyLoss::from_parts(k * loss.epsilon(), delta))
}

/// Advanced composition (Dwork, Rothblum & Vadhan 2010) of `steps` runs of a
/// (ε, δ) mechanism, with extra slack `delta_slack`:
/// `ε' = √(2k ln(1/δ'))·ε + k·ε·(e^ε − 1)`, `δ_total = k·δ + δ'`.
/// Returns the smaller of that and plain sequential composition.
///
/// ```
/// use dpkit_core::accounting::{PrivacyLoss, advanced_composition};
/// let step = PrivacyLoss::pure(0.01).unwrap();
/// let total = advanced_composition(step, 1000, 1e-6).unwrap();
/// assert!(total.epsilon() < 10.0); // sequential would give 10
/// ```
pub fn advanced_composition(
    step: PrivacyLoss,
    steps: u64,
    delta_slack: f64,
) -> Result<PrivacyLoss> {
    if !(delta_slack > 0.0 && delta_slack < 1.0) {
        return Err(Error::InvalidParameter {
            name: "delta slack",
            reason: format!("must lie strictly between 0 and 1, got {delta_slack}"),
        });
    }
    if steps == 0 {
        return Ok(PrivacyLoss::zero());
    }
    let k = steps as f64;
    let eps = step.epsilon();
    let advanced = (2.0 * k * (1.0 / delta_slack).ln()).sqrt() * eps + k * eps * eps.exp_m1();
    let sequential = k * eps;
    if advanced < sequential {
        Ok(PrivacyLoss::from_parts(
            advanced,
            k * step.delta() + delta_slack,
        ))
    } else {
        Ok(PrivacyLoss::from_parts(sequential, k * step.delta()))
    }
}
