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
/// ρ goes down from `rho_within(ε, δ)` (the ideal mechanism's conversion)
/// in steps that grow by half each time, from 10⁻⁷ of it. At each ρ, δ₀ is
/// what δ leaves once the samplers' spread η and tail τ are counted,
/// `(δ(1 − 10⁻⁹) − (1 + e^(ε+η))·τ)/e^η`, and
/// [`ConcentratedLoss::approximate`] at δ₀ must be within (ε, δ). The
/// samplers' spread moves with σ in jumps, so the search never bisects: the
/// first ρ that fits is within a step of the largest one on the way down.
pub(crate) fn within<S>(
    epsilon: f64,
    delta: f64,
    make: impl Fn(f64) -> Result<(S, ConcentratedLoss)>,
) -> Result<(S, Cost)> {
    let top = rho_within(epsilon, delta)?;
    let mut step = 1e-7;
    while step < 1.0 {
        let rho = top * (1.0 - step);
        step *= 1.5;
        // A ρ too small for a mechanism to be made does not fit either.
        let Ok((mechanism, concentrated)) = make(rho) else {
            continue;
        };
        let (spread, tail) = (concentrated.spread(), concentrated.tail());
        let tails = tail * (1.0 + (epsilon + spread).exp());
        let inner_delta = (delta * (1.0 - 1e-9) - tails) / spread.exp();
        if !(inner_delta > 0.0 && inner_delta.is_finite()) {
            continue;
        }
        let Ok(loss) = concentrated.approximate(inner_delta) else {
            continue;
        };
        if loss.epsilon() <= epsilon && loss.delta() <= delta {
            let loss = PrivacyLoss::approximate(epsilon, delta)?;
            let concentrated = Some(concentrated);
            return Ok((mechanism, Cost { loss, concentrated }));
        }
    }
    Err(Error::InvalidParameter {
        name: "epsilon",
        reason: format!(
            "no ρ fits (ε, δ) = ({epsilon}, {delta:e}) with the samplers' spread and tail \
             on this domain (ε beyond about 700 leaves no room for their tails)"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Aim, Domain, Mst};

    #[test]
    fn the_rho_found_is_nearly_the_largest_the_budget_allows() {
        // Adult's codes, and small and large domains: the samplers' spread
        // moves in jumps with σ, which a bisection mistook for the edge
        // (it kept 0.08% of ρ for Adult at ε = 0.05).
        let adult = vec![26, 8, 6, 3, 17, 17, 26, 8, 16, 6, 7, 3, 10];
        for sizes in [adult, vec![50, 10], vec![300, 300], vec![2, 2, 2]] {
            let domain = Domain::new(sizes.clone()).unwrap();
            for (epsilon, delta) in [
                (0.04, 1e-9),
                (0.05, 1e-9),
                (0.11, 1e-9),
                (1.0, 1e-9),
                (3.0, 1e-7),
                (20.0, 1e-6),
            ] {
                let most = rho_within(epsilon, delta).unwrap();
                let (mst, cost) = Mst::within(epsilon, delta, 1.0, &domain).unwrap();
                let rho = mst.cost(&domain).unwrap().rho();
                assert!(
                    rho >= 0.99 * most,
                    "{sizes:?} at {epsilon}: {rho} of {most}"
                );
                assert_eq!(cost.concentrated.map(|c| c.rho()), Some(rho));
                let (aim, _) = Aim::within(epsilon, delta, 1.0, |aim| aim).unwrap();
                let rho = aim.cost_bound().unwrap().rho();
                assert!(
                    rho >= 0.99 * most,
                    "AIM {sizes:?} at {epsilon}: {rho} of {most}"
                );
            }
        }
    }
}
