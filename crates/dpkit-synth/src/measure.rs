//! What MST and AIM share to measure marginals: exact counts checked,
//! discrete Gaussian noise added, the budget's rounding room.

use dpkit_core::mechanism::{ConcentratedDiscreteGaussian, ExponentialMechanism};
use rand_core::CryptoRng;

use crate::error::{Error, Result};
use crate::marginals::Marginals;

/// ρ is split with this relative room, so that the rounded-up sum of the
/// parts' losses stays within it.
pub(crate) const SPLIT_ROOM: f64 = 1e-9;

/// The noise variance used as the measurement's weight (1 when noiseless).
pub(crate) fn variance(sigma: f64) -> f64 {
    if sigma > 0.0 { sigma * sigma } else { 1.0 }
}

/// The counts over `columns`, checked to have the marginal's length.
pub(crate) fn checked_counts<M: Marginals + ?Sized>(
    data: &mut M,
    columns: &[usize],
) -> Result<Vec<u64>> {
    let expected = data.domain().cells(columns)?;
    let counts = data.counts(columns)?;
    if counts.len() != expected {
        return Err(Error::WrongCountLength {
            columns: columns.to_vec(),
            found: counts.len(),
            expected,
        });
    }
    Ok(counts)
}

/// The counts with independent noise on each (none when `noise` is `None`,
/// the test-only noiseless path).
pub(crate) fn add_noise<R: CryptoRng + ?Sized>(
    counts: &[u64],
    noise: Option<&ConcentratedDiscreteGaussian>,
    rng: &mut R,
) -> Result<Vec<f64>> {
    let mut values = counts
        .iter()
        .map(|&c| i64::try_from(c))
        .collect::<std::result::Result<Vec<i64>, _>>()
        .map_err(|_| Error::InvalidParameter {
            name: "counts",
            reason: "a count exceeds 2⁶³ − 1".into(),
        })?;
    if let Some(noise) = noise {
        noise.add_into(&mut values, rng);
    }
    Ok(values.into_iter().map(|v| v as f64).collect())
}

/// The exponential mechanism at the largest ε whose zCDP loss, as core
/// rounds it up (ε²/8), is within `rho`, for utilities of sensitivity
/// `utility_sensitivity`.
pub(crate) fn selection_within(rho: f64, utility_sensitivity: f64) -> Result<ExponentialMechanism> {
    let mut epsilon = (8.0 * rho).sqrt();
    // ε²/8 is rounded up by a few ulps at most: a few steps down suffice.
    for _ in 0..64 {
        let mechanism = ExponentialMechanism::new(epsilon, utility_sensitivity)?;
        if mechanism.concentrated().rho() <= rho {
            return Ok(mechanism);
        }
        epsilon = epsilon.next_down();
    }
    Err(Error::InvalidParameter {
        name: "rho",
        reason: format!("no ε has ε²/8 within ρ = {rho:e}"),
    })
}
