//! Zero-concentrated differential privacy (zCDP): the form in which many
//! Gaussian releases add up tightly (docs/mechanisms.md, "Many releases").
//!
//! A mechanism is ρ-zCDP (Bun & Steinke 2016, Definition 1.1) when, for
//! any two neighbouring inputs and every order α > 1, the Rényi divergence
//! of order α between its two output distributions is at most ρ·α. ρ adds
//! under composition (Bun & Steinke 2016), and so under a filter whose running
//! ρ never passes a bound fixed in advance (Whitehouse, Ramdas, Rogers &
//! Wu 2023, "Fully-adaptive composition in differential privacy", their
//! zCDP filter; see [`super::filter`]).
//!
//! * An ε-DP mechanism is (ε²/2)-zCDP (Bun & Steinke 2016, Proposition 1.4).
//! * Gaussian noise of standard deviation σ on a query of L2 sensitivity Δ
//!   is (Δ²/(2σ²))-zCDP (their Proposition 1.6), and so is the discrete
//!   Gaussian of parameter σ on an integer query of integer L2 sensitivity
//!   Δ, and a vector of them on a query of that L2 sensitivity (Canonne,
//!   Kamath & Steinke 2020, "The discrete Gaussian for differential
//!   privacy", Theorem 4 and its multivariate form).
//! * ρ-zCDP gives (ε, δ)-DP with ε = min over α > 1 of
//!   `α·ρ + ln(1 − 1/α) − (ln δ + ln α)/(α − 1)` (Canonne, Kamath & Steinke
//!   2020, Proposition 12, with the Rényi curve `α·ρ`; the same conversion
//!   as Google's `dp-accounting`). Any α gives a valid ε, so a search that
//!   misses the best α is looser, never unsafe; [`epsilon_of`] searches
//!   finely and rounds its result up.
//!
//! dpkit's samplers realise these mechanisms exactly for the pure ones
//! (exact Bernoulli coins and exact grids), and within a known spread for
//! the discrete Gaussian (see [`ConcentratedLoss`]): that is counted apart
//! from ρ, so that the argument for the ideal mechanism stays the cited one.

use super::PrivacyLoss;
use crate::error::{Error, Result, require_positive};

/// One release's loss in concentrated form: the ρ of the ideal mechanism,
/// and how far the realised sampler can be from the ideal one.
///
/// * `spread`: a bound on `|ln(realised / ideal)|` of the probability of
///   any one outcome of the release whose noise draws all lie within their
///   sampler's window (for the discrete Gaussian, `|y| < 38σ` per draw;
///   the bound is the sum of the draws' bounds).
/// * `tail`: a bound on the probability, under the realised or the ideal
///   sampler, that some draw falls outside its window.
/// * `keys`: for a release whose keys pass a threshold, a bound on the
///   probability that any of the keys one person alone holds (up to the
///   groups a person may touch) is released (the threshold's δ; see
///   [`ConcentratedLoss::with_keys`]). 0 otherwise.
///
/// ```
/// use dpkit_core::accounting::ConcentratedLoss;
/// let laplace = ConcentratedLoss::pure(0.1).unwrap();
/// assert!((laplace.rho() - 0.005).abs() < 1e-15);
/// let gaussian = ConcentratedLoss::gaussian(1.0, 10.0, 0.0, 0.0).unwrap();
/// assert!((gaussian.rho() - 0.005).abs() < 1e-15);
/// assert!((laplace.and(gaussian).rho() - 0.01).abs() < 1e-15);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ConcentratedLoss {
    rho: f64,
    spread: f64,
    tail: f64,
    keys: f64,
}

impl ConcentratedLoss {
    /// The loss of an ε-DP mechanism whose sampler is exact: ρ = ε²/2
    /// (Bun & Steinke 2016, Proposition 1.4).
    pub fn pure(epsilon: f64) -> Result<Self> {
        let epsilon = require_positive("epsilon", epsilon)?;
        Ok(Self {
            rho: (epsilon * epsilon / 2.0).next_up(),
            spread: 0.0,
            tail: 0.0,
            keys: 0.0,
        })
    }

    /// The loss of Gaussian noise of standard deviation (or discrete
    /// parameter) `sigma` on a query of L2 sensitivity `l2_sensitivity`:
    /// ρ = Δ²/(2σ²) (Bun & Steinke 2016, Proposition 1.6; Canonne, Kamath
    /// & Steinke 2020, Theorem 4), with the realised sampler's
    /// `spread` and `tail` (see the type).
    pub fn gaussian(l2_sensitivity: f64, sigma: f64, spread: f64, tail: f64) -> Result<Self> {
        let sensitivity = require_positive("sensitivity", l2_sensitivity)?;
        let sigma = require_positive("sigma", sigma)?;
        let ratio = (sensitivity / sigma).next_up();
        Self::from_parts((ratio * ratio / 2.0).next_up(), spread, tail)
    }

    /// A loss as a ledger stored it: ρ, spread and tail, each finite and ≥ 0.
    pub fn from_parts(rho: f64, spread: f64, tail: f64) -> Result<Self> {
        Ok(Self {
            rho: part("rho", rho)?,
            spread: part("spread", spread)?,
            tail: part("tail", tail)?,
            keys: 0.0,
        })
    }

    /// This loss for a release that also chooses its keys by a threshold
    /// which the keys one person alone holds (any of them) pass with
    /// probability at most `keys` (the threshold's δ, > 0), added to what
    /// it counted before.
    ///
    /// The argument, for neighbours D and D′: let the *withheld* release on
    /// either be the real one with every key the two do not share withheld
    /// (the keys only the person added, removed or replaced holds). Each
    /// key's noise is drawn apart from the others', so the real release
    /// differs from the withheld one only when such a key passes: the real
    /// release's probability of any set of outcomes is at most the
    /// withheld one's plus `keys`, and the withheld one's at most the
    /// real's times 1/(1 − `keys`). The withheld releases on D and D′ are
    /// neighbours of the ρ this loss counts: ρ, spread and tail are those
    /// of the values released for the shared keys. How a filter spends
    /// `keys` is in [`super::filter`].
    ///
    /// ```
    /// use dpkit_core::accounting::ConcentratedLoss;
    /// let grouped = ConcentratedLoss::pure(0.1).unwrap().with_keys(1e-9).unwrap();
    /// assert_eq!((grouped.keys(), grouped.rho()), (1e-9, ConcentratedLoss::pure(0.1).unwrap().rho()));
    /// assert!(ConcentratedLoss::pure(0.1).unwrap().with_keys(1.0).is_err());
    /// assert!(ConcentratedLoss::pure(0.1).unwrap().with_keys(0.0).is_err());
    /// ```
    pub fn with_keys(self, keys: f64) -> Result<Self> {
        // A threshold's δ is never 0; a 0 here would read as no threshold.
        if !(keys > 0.0 && keys < 1.0) {
            return Err(Error::InvalidParameter {
                name: "keys",
                reason: format!("must lie in (0, 1), got {keys}"),
            });
        }
        Ok(Self {
            keys: up(self.keys, keys),
            ..self
        })
    }

    /// Both releases, one after the other: each part adds (ρ by
    /// composition; spreads and tails as bounds on a product and a union),
    /// rounded up.
    pub fn and(self, other: Self) -> Self {
        Self {
            rho: up(self.rho, other.rho),
            spread: up(self.spread, other.spread),
            tail: up(self.tail, other.tail),
            keys: up(self.keys, other.keys),
        }
    }

    /// A bound on the exact sum of `terms` nonnegative losses that were
    /// added up in doubles, each addition rounded to nearest, and showed
    /// this: each part times `1 + (terms + 1)·2⁻⁵²` (each addition errs by at
    /// most half an ulp of a running sum no larger than the exact total).
    ///
    /// ```
    /// use dpkit_core::accounting::ConcentratedLoss;
    /// let shown = ConcentratedLoss::from_parts(0.5, 0.0, 0.0).unwrap();
    /// assert!(shown.at_most(1_000).rho() > 0.5);
    /// ```
    pub fn at_most(self, terms: u64) -> Self {
        let factor = 1.0 + (terms as f64 + 1.0) * f64::EPSILON;
        let up = |part: f64| {
            if part == 0.0 {
                0.0
            } else {
                (part * factor).next_up()
            }
        };
        Self {
            rho: up(self.rho),
            spread: up(self.spread),
            tail: up(self.tail),
            keys: up(self.keys),
        }
    }

    /// ρ of the ideal mechanism.
    pub fn rho(&self) -> f64 {
        self.rho
    }

    /// The bound on `|ln(realised / ideal)|` within the windows.
    pub fn spread(&self) -> f64 {
        self.spread
    }

    /// The bound on the probability of a draw outside its window.
    pub fn tail(&self) -> f64 {
        self.tail
    }

    /// The bound on the probability that a key held by one person alone is
    /// released (thresholds' δ; 0 without thresholds).
    pub fn keys(&self) -> f64 {
        self.keys
    }

    /// The (ε, δ)-DP that a release of this loss gives on its own, with
    /// `inner_delta` for the ideal mechanism's conversion: the filter's
    /// argument ([`super::filter`]) for one release, `(ε₀ + 2η + κ′,
    /// e^η·δ₀ + (1 + e^(ε₀+η))·τ + κ)` with ε₀ = [`epsilon_of`]`(ρ, δ₀)`,
    /// η the spread, τ the tail, κ the keys and κ′ = κ/(1 − κ), each
    /// rounded up. What a release charged as one whole (a synthetic table)
    /// costs a budget kept in plain sums.
    ///
    /// ```
    /// use dpkit_core::accounting::ConcentratedLoss;
    /// use dpkit_core::accounting::concentrated::epsilon_of;
    /// let ideal = ConcentratedLoss::from_parts(0.05, 0.0, 0.0).unwrap();
    /// let plain = ideal.approximate(1e-9).unwrap();
    /// assert_eq!((plain.epsilon(), plain.delta()), (epsilon_of(0.05, 1e-9).unwrap(), 1e-9));
    /// let realised = ConcentratedLoss::from_parts(0.05, 1e-6, 1e-20).unwrap();
    /// assert!(realised.approximate(1e-9).unwrap().epsilon() >= plain.epsilon() + 2e-6);
    /// ```
    pub fn approximate(&self, inner_delta: f64) -> Result<PrivacyLoss> {
        let inner = epsilon_of(self.rho, inner_delta)?;
        let keys_epsilon = match self.keys {
            0.0 => 0.0,
            keys => (keys / (1.0 - keys)).next_up(),
        };
        let spreads = match self.spread {
            0.0 => 0.0,
            spread => (2.0 * spread).next_up(),
        };
        let epsilon = up(up(inner, spreads), keys_epsilon);
        let tails = match self.tail {
            0.0 => 0.0,
            tail => (tail * (1.0 + (inner + self.spread).exp()).next_up()).next_up(),
        };
        if !tails.is_finite() {
            return Err(Error::InvalidParameter {
                name: "epsilon",
                reason: format!("{inner} is too large to bound the samplers' tails at"),
            });
        }
        let shifted = match self.spread {
            0.0 => inner_delta,
            spread => (spread.exp().next_up() * inner_delta).next_up(),
        };
        PrivacyLoss::approximate(epsilon, up(up(shifted, tails), self.keys))
    }
}

/// `value` if it is finite and ≥ 0, else an error naming it.
fn part(name: &'static str, value: f64) -> Result<f64> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(Error::InvalidParameter {
            name,
            reason: format!("must be finite and ≥ 0, got {value}"),
        })
    }
}

/// `a + b` rounded up (exact when either is 0).
fn up(a: f64, b: f64) -> f64 {
    match (a, b) {
        (a, 0.0) => a,
        (0.0, b) => b,
        (a, b) => (a + b).next_up(),
    }
}

/// Orders α searched: `α = 1 + e^t` for `t` on a grid over `[T_LOW, T_HIGH]`,
/// then refined around the best (α from 1 + 2·10⁻⁹ to 1 + 5·10⁸).
const T_LOW: f64 = -20.0;
const T_HIGH: f64 = 20.0;
const GRID: usize = 4_000;
/// Rounding of the bound's three terms, each below 2⁵³ ulps: the result is
/// raised by this much (relative) plus as much absolutely.
const ROUNDING: f64 = 1e-12;

/// The conversion's ε at order `alpha` for ρ-zCDP at `delta`.
fn epsilon_at(rho: f64, delta: f64, alpha: f64) -> f64 {
    let below = alpha - 1.0;
    alpha * rho + (-1.0 / alpha).ln_1p() - (delta.ln() + alpha.ln()) / below
}

/// ε such that ρ-zCDP gives (ε, δ)-DP: the conversion of Canonne, Kamath &
/// Steinke (2020, Proposition 12), minimised over the order α and rounded
/// up. ε is never below the true privacy loss of a ρ-zCDP mechanism at δ.
///
/// ```
/// use dpkit_core::accounting::concentrated::epsilon_of;
/// // Bun & Steinke's simpler ρ + 2√(ρ ln(1/δ)) is looser.
/// let (rho, delta) = (0.01747, 1e-6);
/// let simple = rho + 2.0 * (rho * (1.0 / delta as f64).ln()).sqrt();
/// let tight = epsilon_of(rho, delta).unwrap();
/// assert!(tight < simple && simple < 1.001);
/// ```
pub fn epsilon_of(rho: f64, delta: f64) -> Result<f64> {
    if !(rho.is_finite() && rho >= 0.0) {
        return Err(Error::InvalidParameter {
            name: "rho",
            reason: format!("must be finite and ≥ 0, got {rho}"),
        });
    }
    if !(delta > 0.0 && delta < 1.0) {
        return Err(Error::InvalidParameter {
            name: "delta",
            reason: format!("must lie in (0, 1), got {delta}"),
        });
    }
    let at = |t: f64| epsilon_at(rho, delta, 1.0 + t.exp());
    let step = (T_HIGH - T_LOW) / GRID as f64;
    let best = (0..=GRID)
        .map(|i| T_LOW + step * i as f64)
        .min_by(|&a, &b| at(a).total_cmp(&at(b)))
        .unwrap_or(0.0);
    // Golden-section search between the best point's neighbours.
    let (mut low, mut high) = (best - step, best + step);
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..60 {
        let (a, b) = (high - ratio * (high - low), low + ratio * (high - low));
        if at(a) < at(b) {
            high = b;
        } else {
            low = a;
        }
    }
    let epsilon = at(best).min(at((low + high) / 2.0)).max(0.0);
    Ok(epsilon + ROUNDING * (1.0 + epsilon))
}

/// The largest ρ whose conversion at `delta` ([`epsilon_of`]) is at most
/// `epsilon`: what a budget of (ε, δ) allows in concentrated form. Found by
/// bisection, keeping the end that fits.
///
/// ```
/// use dpkit_core::accounting::concentrated::{epsilon_of, rho_within};
/// let rho = rho_within(1.0, 1e-6).unwrap();
/// assert!(epsilon_of(rho, 1e-6).unwrap() <= 1.0);
/// // Bun & Steinke's conversion allows (√(ε + ln(1/δ)) − √(ln(1/δ)))² = 0.01747.
/// assert!(rho > 0.01747 && rho < 0.025);
/// ```
pub fn rho_within(epsilon: f64, delta: f64) -> Result<f64> {
    let epsilon = require_positive("epsilon", epsilon)?;
    let fits = |rho: f64| epsilon_of(rho, delta).map(|e| e <= epsilon);
    if !fits(0.0)? {
        return Err(Error::InvalidParameter {
            name: "epsilon",
            reason: format!("{epsilon:e} is too small for any ρ at δ = {delta:e}"),
        });
    }
    // `low` always fits. `high` need not fail: were it to fit, the answer
    // would be `high`, looser than the best but never unsafe.
    let (mut low, mut high) = (0.0, epsilon + (1.0 / delta).ln() + 2.0);
    for _ in 0..100 {
        let middle = (low + high) / 2.0;
        if fits(middle)? {
            low = middle;
        } else {
            high = middle;
        }
    }
    Ok(low)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conversion_is_at_least_the_best_order_on_a_fine_grid_and_rounded_up() {
        for (rho, delta) in [(1e-6, 1e-6), (0.01747, 1e-6), (0.5, 1e-9), (5.0, 1e-3)] {
            let found = epsilon_of(rho, delta).unwrap();
            let grid = (1..200_000)
                .map(|i| 1.0 + i as f64 * 1e-3)
                .map(|alpha| epsilon_at(rho, delta, alpha))
                .fold(f64::INFINITY, f64::min);
            // As good as the best order on a fine grid (the search is
            // continuous, so it may be a little better).
            assert!(
                found <= grid * (1.0 + 1e-6) + 1e-9,
                "{found} against {grid}"
            );
        }
    }

    #[test]
    fn the_budget_in_concentrated_form_converts_back_within_it() {
        for (epsilon, delta) in [(0.1, 1e-6), (1.0, 1e-6), (1.0, 5e-7), (8.0, 1e-10)] {
            let rho = rho_within(epsilon, delta).unwrap();
            assert!(epsilon_of(rho, delta).unwrap() <= epsilon);
            assert!(epsilon_of(rho * (1.0 + 1e-6), delta).unwrap() > epsilon * (1.0 - 1e-6));
        }
        assert!(rho_within(1.0, 0.0).is_err() && rho_within(-1.0, 1e-6).is_err());
    }
}
