//! What MST and AIM share to measure marginals: exact counts checked,
//! discrete Gaussian noise added, the budget's rounding room.

use dpkit_core::accounting::concentrated::rho_within;
use dpkit_core::accounting::{ConcentratedLoss, Cost, PrivacyLoss};
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

/// A mechanism made by `make` at nearly the largest ρ whose whole loss
/// (`make` gives it with the mechanism) is (ε, δ)-DP, and what a ledger
/// charges for it: (ε, δ) for plain sums, which bounds that loss, and the
/// loss in concentrated form.
///
/// ρ is at most `rho_within(ε, δ₀)` with δ₀ = δ(1 − r), the conversion of
/// the ideal mechanism, for the least room r of 10⁻⁹, 10⁻⁶ and 10⁻³ that
/// fits; [`ConcentratedLoss::approximate`] turns the whole loss (the
/// samplers' spread and tail included) into (ε′, δ′)-DP, and a bisection
/// keeps the largest ρ it tried whose (ε′, δ′) ≤ (ε, δ).
pub(crate) fn within<S>(
    epsilon: f64,
    delta: f64,
    make: impl Fn(f64) -> Result<(S, ConcentratedLoss)>,
) -> Result<(S, Cost)> {
    for room in [1e-9, 1e-6, 1e-3] {
        let inner_delta = delta * (1.0 - room);
        let fits = |rho: f64| -> Result<Option<(S, ConcentratedLoss)>> {
            let (mechanism, concentrated) = make(rho)?;
            let loss = concentrated.approximate(inner_delta)?;
            let fits = loss.epsilon() <= epsilon && loss.delta() <= delta;
            Ok(fits.then_some((mechanism, concentrated)))
        };
        let mut high = rho_within(epsilon, inner_delta)?;
        let mut best = fits(high)?;
        let mut low = 0.0;
        for _ in 0..60 {
            if best.is_some() && best_is(high, low) {
                break;
            }
            let middle = (low + high) / 2.0;
            // A ρ too small for a mechanism to be made does not fit either.
            match fits(middle).unwrap_or(None) {
                Some(found) => {
                    low = middle;
                    best = Some(found);
                }
                None => high = middle,
            }
        }
        if let Some((mechanism, concentrated)) = best {
            let loss = PrivacyLoss::approximate(epsilon, delta)?;
            let concentrated = Some(concentrated);
            return Ok((mechanism, Cost { loss, concentrated }));
        }
    }
    Err(Error::InvalidParameter {
        name: "epsilon",
        reason: format!("no ρ fits (ε, δ) = ({epsilon}, {delta:e}) on this domain"),
    })
}

/// Whether the bisection is done: the first try fitted (`low` is 0), or
/// the fitting `low` is within 10⁻⁹ of `high`.
fn best_is(high: f64, low: f64) -> bool {
    low == 0.0 || high - low <= 1e-9 * high
}
