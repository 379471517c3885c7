//! Splitting one ε over several releases.
//!
//! # Privacy
//! Whatever the shares, they are non-negative and add up to at most ε, so by
//! sequential composition the releases together cost at most ε. The shares
//! must be chosen from public facts only (bounds, mechanisms, weights that
//! do not look at the data); these functions see nothing else. Each share is
//! rounded down by a few ulps so that the floating-point sum of the shares
//! never exceeds ε.
//!
//! # Accuracy
//! An answer built from several noisy releases (an average is a noisy sum
//! over a noisy count) errs, to first order, by `Σ wᵢ·Zᵢ`, with `Zᵢ` the
//! noise of release `i` and `wᵢ ≥ 0` how far the answer moves per unit of
//! it. `E|Σ wᵢZᵢ| ≤ Σ wᵢ·E|Zᵢ|`. When `E|Zᵢ|` at `εᵢ` is `eᵢ·ε/εᵢ` (`eᵢ` its
//! value at the whole ε), as for Laplace noise exactly and for the geometric
//! and staircase noises at the small ε where sums are noisy, the bound
//! `Σ wᵢeᵢ·ε/εᵢ` under `Σ εᵢ = ε` is least at `εᵢ ∝ √(wᵢeᵢ)` (Cauchy–Schwarz:
//! `(Σ aᵢ/εᵢ)(Σ εᵢ) ≥ (Σ √aᵢ)²`, with equality exactly there), where it
//! equals `(Σ √(wᵢeᵢ))²`.

use crate::error::{Error, Result};

/// Rounds every share down so that their floating-point sum stays ≤ ε:
/// each product and the running sum err by at most one ulp per term. One
/// share is ε itself.
fn rounded_down(shares: Vec<f64>) -> Vec<f64> {
    if shares.len() == 1 {
        return shares;
    }
    let slack = 1.0 - 4.0 * (shares.len() as f64 + 1.0) * f64::EPSILON;
    shares.into_iter().map(|share| share * slack).collect()
}

fn require_epsilon(epsilon: f64) -> Result<f64> {
    if epsilon.is_finite() && epsilon > 0.0 {
        Ok(epsilon)
    } else {
        Err(Error::InvalidParameter {
            name: "epsilon",
            reason: format!("must be positive and finite, got {epsilon}"),
        })
    }
}

/// ε shared equally by `parts` releases.
///
/// ```
/// use dpkit_core::accounting::split;
/// let shares = split::evenly(1.0, 4).unwrap();
/// assert_eq!(shares.len(), 4);
/// assert!(shares.iter().sum::<f64>() <= 1.0);
/// assert!((shares[0] - 0.25).abs() < 1e-12);
/// ```
pub fn evenly(epsilon: f64, parts: usize) -> Result<Vec<f64>> {
    let epsilon = require_epsilon(epsilon)?;
    if parts == 0 {
        return Err(Error::InvalidParameter {
            name: "parts",
            reason: "there must be at least one release to share ε".into(),
        });
    }
    Ok(rounded_down(vec![epsilon / parts as f64; parts]))
}

/// ε shared by releases whose weighted errors at the whole ε are
/// `weighted_errors` (`wᵢ·E|Zᵢ|`, each positive and finite), so that the
/// bound on the combined expected error is least (see the module's
/// argument): shares proportional to `√(wᵢ·eᵢ)`.
///
/// ```
/// use dpkit_core::accounting::split;
/// // A noisy sum whose error at ε is 9 times the weighted count's.
/// let shares = split::for_accuracy(1.0, &[9.0, 1.0]).unwrap();
/// assert!((shares[0] - 0.75).abs() < 1e-12 && (shares[1] - 0.25).abs() < 1e-12);
/// assert!(shares.iter().sum::<f64>() <= 1.0);
/// ```
pub fn for_accuracy(epsilon: f64, weighted_errors: &[f64]) -> Result<Vec<f64>> {
    let epsilon = require_epsilon(epsilon)?;
    if weighted_errors.is_empty() {
        return evenly(epsilon, 0);
    }
    if weighted_errors.iter().any(|&e| !e.is_finite() || e <= 0.0) {
        return Err(Error::InvalidParameter {
            name: "weighted errors",
            reason: "must be positive and finite".into(),
        });
    }
    let roots: Vec<f64> = weighted_errors.iter().map(|e| e.sqrt()).collect();
    let total: f64 = roots.iter().sum();
    Ok(rounded_down(
        roots.iter().map(|root| epsilon * root / total).collect(),
    ))
}

/// The bound `Σ wᵢ·eᵢ·ε/εᵢ` on the combined expected error at `shares`,
/// under the module's `1/ε` model (for reports and tests of the split).
///
/// ```
/// use dpkit_core::accounting::split;
/// let at_best = split::error_bound(1.0, &[9.0, 1.0], &[0.75, 0.25]).unwrap();
/// assert!((at_best - 16.0).abs() < 1e-9); // (√9 + √1)²
/// assert!(split::error_bound(1.0, &[9.0, 1.0], &[0.5, 0.5]).unwrap() > at_best);
/// ```
pub fn error_bound(epsilon: f64, weighted_errors: &[f64], shares: &[f64]) -> Result<f64> {
    let epsilon = require_epsilon(epsilon)?;
    if shares.len() != weighted_errors.len() || shares.iter().any(|&s| s.is_nan() || s <= 0.0) {
        return Err(Error::InvalidParameter {
            name: "shares",
            reason: "one positive share per release".into(),
        });
    }
    Ok(weighted_errors
        .iter()
        .zip(shares)
        .map(|(e, s)| e * epsilon / s)
        .sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_never_add_up_to_more_than_epsilon() {
        for epsilon in [1e-6, 0.1, 1.0, 3.0, 999.0] {
            for errors in [&[1.0][..], &[1.0, 2.0], &[5e4, 1.0, 7.0], &[1e-9, 1e9]] {
                let shares = for_accuracy(epsilon, errors).unwrap();
                assert!(shares.iter().sum::<f64>() <= epsilon);
                assert!(shares.iter().all(|&s| s > 0.0));
            }
            for parts in 1..50 {
                assert!(evenly(epsilon, parts).unwrap().iter().sum::<f64>() <= epsilon);
            }
        }
    }

    #[test]
    fn the_square_root_rule_is_the_least_bound_on_a_grid_of_other_splits() {
        let errors = [40.0, 3.0];
        let best = error_bound(1.0, &errors, &for_accuracy(1.0, &errors).unwrap()).unwrap();
        for step in 1..100 {
            let t = f64::from(step) / 100.0;
            let other = error_bound(1.0, &errors, &[t, 1.0 - t]).unwrap();
            assert!(other >= best * (1.0 - 1e-12), "t = {t}: {other} < {best}");
        }
    }

    #[test]
    fn bad_inputs_are_refused() {
        assert!(for_accuracy(1.0, &[1.0, 0.0]).is_err());
        assert!(for_accuracy(1.0, &[f64::NAN]).is_err());
        assert!(for_accuracy(0.0, &[1.0]).is_err());
        assert!(for_accuracy(1.0, &[]).is_err());
        assert!(evenly(f64::INFINITY, 2).is_err());
        assert!(error_bound(1.0, &[1.0], &[0.0]).is_err());
    }
}
