//! A privacy filter: which charges a budget admits when each query, and
//! its cost, may be chosen after seeing the earlier answers.
//!
//! A budget of (ε, δ) with δ > 0 is kept by two accountants at once, and a
//! charge is admitted while **either** would still keep the budget after
//! it; every charge is recorded by both.
//!
//! * **Sums** of (εᵢ, δᵢ), within (ε, δ/2). Valid for adaptively chosen
//!   costs: Rogers, Roth, Ullman & Vadhan 2016, "Privacy odometers and
//!   filters: pay-as-you-go composition", their filter for basic
//!   composition. It is the tighter of the two for a few queries.
//! * **Concentrated**: the ρᵢ of the ideal mechanisms add up within a ρ
//!   fixed when the filter is made, and the realised samplers' spreads and
//!   tails within bounds fixed alike (see [`ConcentratedLoss`]). The ideal
//!   mechanisms under that filter are ρ-zCDP (Whitehouse, Ramdas, Rogers &
//!   Wu 2023, "Fully-adaptive composition in differential privacy", the
//!   zCDP filter), so (ε₀, δ₀)-DP with ε₀ from [`epsilon_of`]. The realised
//!   interaction differs from the ideal one by a factor within e^±η on
//!   every transcript whose draws stay in their windows (the product of the
//!   releases' ratios, η the spreads' bound), and those windows are missed
//!   with probability at most τ (the tails' bound), realised or ideal; so
//!   for any set S of transcripts, P′(S) ≤ e^η·P(S) + τ and
//!   P(S) ≤ e^ε₀·Q(S) + δ₀ ≤ e^ε₀·(e^η·Q′(S) + τ) + δ₀, that is
//!   (ε₀ + 2η, e^η·δ₀ + (1 + e^(ε₀+η))·τ)-DP.
//!
//!   **Thresholds** (keys chosen by a noisy count, see
//!   [`ConcentratedLoss::with_keys`]) add a third bound κ, on the sum of
//!   the releases' `keys`. For neighbours D and D′, let the *withheld*
//!   interaction on either be the real one with every key that the two do
//!   not share withheld (under add/remove, D′ = D less one person, the
//!   keys only that person holds in D; under replace, on each side the keys
//!   only its changed person holds). Its releases are those the bounds
//!   above count, over the shared keys. Each key's noise is drawn apart
//!   from every other's, so on either side the real and the withheld
//!   interactions can be coupled (in distribution) to agree until a
//!   withheld key passes; the chance of that in round i, given the rounds
//!   before, is at most that round's `keys`, and the filter keeps their
//!   sum within κ on every transcript, so the real interaction gives any
//!   set at most κ more than the withheld one. The withheld one gives a
//!   transcript at most Π 1/(1 − keysᵢ) ≤ e^κ′ times the real one's,
//!   κ′ = κ/(1 − κ) (as −ln(1 − x) ≤ x/(1 − x)). Chaining real → withheld
//!   on one side, the bounds above between the withheld interactions, and
//!   withheld → real on the other: (ε₀ + 2η + κ′,
//!   e^η·δ₀ + (1 + e^(ε₀+η))·τ + κ)-DP, in each direction.
//!
//!   The filter takes η = ε/1000, κ a quarter of δ/2 (none on accounts made
//!   before thresholds were counted here: [`Filter::without_thresholds`]),
//!   and chooses ε₀ and δ₀ so that this is (ε, δ/2). It is the tighter for
//!   many queries, above all Gaussian ones.
//!
//! **Why either may admit.** Let X be the transcripts in which every
//! admitted charge fit the sums accountant, and Y those in which every one
//! fit the concentrated one; every transcript is in X or Y (sums only grow,
//! a refunded charge counting as never made, so
//! the accountant that admitted the last charge admitted every charge; a
//! transcript holds each refusal too, and a refusal is a function of the
//! transcript before it).
//! The interaction stopped by the sums accountant alone gives exactly the
//! transcripts in X the same probability, and it is (ε, δ/2)-DP; likewise
//! Y with the concentrated accountant alone. So for any set S,
//! P(S) = P(S ∩ X) + P(S ∩ (Y \ X)) ≤ e^ε·Q(S ∩ X) + δ/2 + e^ε·Q(S ∩ (Y \ X)) + δ/2
//! = e^ε·Q(S) + δ. Both accountants are fixed when the budget is made,
//! from the budget alone, never from answers. (A ledger refunds a charge
//! only when its query failed before releasing anything, for a reason no
//! one's data decides: that release never happened.)
//!
//! The concentrated sums are kept in doubles: every term is rounded up, a
//! ledger only ever adds to them (a refunded charge stays counted there),
//! and a running sum of n terms is taken as at most `(1 + (n + 1)·2⁻⁵²)`
//! times what it shows ([`ConcentratedLoss::at_most`]).
//!
//! A budget with δ = 0 is kept by the sums alone, as is one made with
//! [`Filter::sums_only`] (the ledgers made before the concentrated
//! accountant existed).

use super::PrivacyLoss;
use super::concentrated::{ConcentratedLoss, epsilon_of, rho_within};
use crate::error::Result;
use crate::shared_tables::SharedTables;

/// The share of ε the concentrated accountant keeps for the samplers'
/// spreads (η = ε·SPREAD_SHARE; twice it is spent, see the module).
const SPREAD_SHARE: f64 = 1e-3;
/// The share of its δ the concentrated accountant keeps for the samplers'
/// tails.
const TAIL_SHARE: f64 = 1e-6;
/// The share of its δ the concentrated accountant keeps for thresholds
/// (κ; see the module), by the version a ledger stores with each account:
/// 0 keeps none (accounts made before), 1 a quarter, which costs the
/// budget's ρ about 2.4% at (1, 10⁻⁶). A later share must be a new
/// version: an account keeps the accountant it was granted with.
const THRESHOLD_SHARES: [f64; 2] = [0.0, 0.25];
const _: () = assert!(THRESHOLD_SHARES.len() == Filter::THRESHOLDS_VERSION as usize + 1);

/// What a budget admits. Made from the total alone.
///
/// ```
/// use dpkit_core::accounting::{ConcentratedLoss, Filter, PrivacyLoss};
/// let filter = Filter::new(PrivacyLoss::approximate(1.0, 1e-6).unwrap()).unwrap();
/// // 100 Gaussian counts of σ = 54 (Δ = 1) fit in concentrated form,
/// // where plain sums of their (ε, δ) would not.
/// let count = ConcentratedLoss::gaussian(1.0, 54.0, 0.0, 0.0).unwrap();
/// let mut spent = Some(ConcentratedLoss::default());
/// for _ in 0..100 {
///     assert!(filter.concentrated_fits(spent, Some(count)));
///     spent = spent.map(|s| s.and(count));
/// }
/// assert!(!filter.concentrated_fits(spent, Some(ConcentratedLoss::pure(0.5).unwrap())));
/// assert_eq!(filter.sums_delta(), 5e-7);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Filter {
    total: PrivacyLoss,
    concentrated: Option<Bounds>,
}

/// The concentrated accountant's bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bounds {
    rho: f64,
    spread: f64,
    tail: f64,
    /// κ, the bound on the thresholds' `keys` (0: none is admitted).
    keys: f64,
    /// δ₀, at which ρ converts to ε₀.
    inner_delta: f64,
}

/// What a release costs, in each form it has: its (ε, δ), and its loss in
/// concentrated form where it has one.
///
/// ```
/// use dpkit_core::accounting::{Cost, PrivacyLoss};
/// let cost: Cost = PrivacyLoss::pure(0.5).unwrap().into();
/// assert_eq!(cost.concentrated, None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    /// (ε, δ): what the sums accountant counts.
    pub loss: PrivacyLoss,
    /// What the concentrated accountant counts; `None` closes it.
    pub concentrated: Option<ConcentratedLoss>,
}

impl From<PrivacyLoss> for Cost {
    fn from(loss: PrivacyLoss) -> Self {
        Self {
            loss,
            concentrated: None,
        }
    }
}

impl Filter {
    /// Both accountants for a total of (ε, δ); the sums alone when δ = 0.
    /// The bounds are a pure function of the total, found once per total
    /// and shared (a search of a few milliseconds).
    pub fn new(total: PrivacyLoss) -> Result<Self> {
        Self::of_version(total, Self::THRESHOLDS_VERSION)
    }

    /// The version of the share of δ kept for thresholds that
    /// [`Filter::new`] uses, which a ledger stores with each account.
    pub const THRESHOLDS_VERSION: u32 = 1;

    /// Both accountants as [`Filter::new`] makes them, but with nothing of
    /// δ kept for thresholds: the accountant of accounts granted before
    /// thresholds were counted in concentrated form (a threshold closes
    /// it). Their charges so far were admitted by it, so they keep it.
    pub fn without_thresholds(total: PrivacyLoss) -> Result<Self> {
        Self::of_version(total, 0)
    }

    /// Both accountants with the share of δ for thresholds of `version`
    /// (0: none; [`Filter::THRESHOLDS_VERSION`]: [`Filter::new`]'s); an
    /// unknown version is an error.
    pub fn of_version(total: PrivacyLoss, version: u32) -> Result<Self> {
        let share = usize::try_from(version)
            .ok()
            .and_then(|v| THRESHOLD_SHARES.get(v))
            .ok_or_else(|| crate::error::Error::InvalidParameter {
                name: "version",
                reason: format!("no accountant of version {version}"),
            })?;
        Self::shared(total, *share)
    }

    fn shared(total: PrivacyLoss, threshold_share: f64) -> Result<Self> {
        static FILTERS: SharedTables<(u64, u64, u64), Filter> = SharedTables::with_capacity(64);
        let key = (
            total.epsilon().to_bits(),
            total.delta().to_bits(),
            threshold_share.to_bits(),
        );
        Ok(*FILTERS.get_or_build(key, || Self::build(total, threshold_share))?)
    }

    fn build(total: PrivacyLoss, threshold_share: f64) -> Result<Self> {
        let (epsilon, delta) = (total.epsilon(), total.delta());
        if delta == 0.0 {
            return Ok(Self::sums_only(total));
        }
        let share = delta / 2.0;
        let spread = epsilon * SPREAD_SHARE;
        let keys = share * threshold_share;
        let keys_epsilon = if keys > 0.0 {
            (keys / (1.0 - keys)).next_up()
        } else {
            0.0
        };
        let inner_epsilon = epsilon - 2.0 * spread - keys_epsilon;
        let rest = if keys > 0.0 {
            (share - keys).next_down()
        } else {
            share
        };
        // τ·(1 + e^(ε₀+η)) ≤ TAIL_SHARE·(what κ leaves), and e^η·δ₀ takes
        // the rest. Past e^709 no tail fits at all (τ = 0: no Gaussian is
        // admitted).
        let grow = 1.0 + (inner_epsilon + spread).exp();
        let tail = if grow.is_finite() {
            rest * TAIL_SHARE / grow
        } else {
            0.0
        };
        let reserved = if tail > 0.0 { tail * grow } else { 0.0 };
        // Less a relative 10⁻¹², so that the rounding of these few steps
        // can never bring e^η·δ₀ + (1 + e^(ε₀+η))·τ + κ above δ/2.
        let inner_delta = ((rest - reserved) / spread.exp() * (1.0 - 1e-12)).next_down();
        let rho = rho_within(inner_epsilon, inner_delta)?;
        Ok(Self {
            total,
            concentrated: Some(Bounds {
                rho,
                spread,
                tail,
                keys,
                inner_delta,
            }),
        })
    }

    /// The sums accountant alone, over the whole (ε, δ): the only one of a
    /// ledger made before the concentrated accountant existed.
    pub fn sums_only(total: PrivacyLoss) -> Self {
        Self {
            total,
            concentrated: None,
        }
    }

    /// The total.
    pub fn total(&self) -> PrivacyLoss {
        self.total
    }

    /// The δ the sums accountant may spend: half the total's when the
    /// concentrated accountant keeps the other half.
    pub fn sums_delta(&self) -> f64 {
        match self.concentrated {
            Some(_) => self.total.delta() / 2.0,
            None => self.total.delta(),
        }
    }

    /// The δ the concentrated accountant keeps (the rest of the total's),
    /// if it keeps the budget.
    pub fn concentrated_delta(&self) -> Option<f64> {
        self.concentrated
            .map(|_| self.total.delta() - self.sums_delta())
    }

    /// ρ the concentrated accountant allows in all, if it keeps the budget.
    pub fn concentrated_rho(&self) -> Option<f64> {
        self.concentrated.map(|b| b.rho)
    }

    /// Whether the concentrated accountant admits `cost` after `spent`.
    /// `None` is a loss without a concentrated form (thresholded keys beside
    /// Gaussian noise, say): one such charge closes the concentrated
    /// accountant for good.
    pub fn concentrated_fits(
        &self,
        spent: Option<ConcentratedLoss>,
        cost: Option<ConcentratedLoss>,
    ) -> bool {
        let (Some(bounds), Some(spent), Some(cost)) = (self.concentrated, spent, cost) else {
            return false;
        };
        let after = spent.and(cost);
        after.rho() <= bounds.rho
            && after.spread() <= bounds.spread
            && after.tail() <= bounds.tail
            && after.keys() <= bounds.keys
    }

    /// How many more charges of `cost` the concentrated accountant admits
    /// after `spent` (0 when it does not keep the budget, is closed, or
    /// `cost` has no concentrated form), with a little room kept for the
    /// rounding bound of the charges to come.
    pub fn concentrated_room(
        &self,
        spent: Option<ConcentratedLoss>,
        cost: Option<ConcentratedLoss>,
    ) -> u64 {
        let (Some(bounds), Some(spent), Some(cost)) = (self.concentrated, spent, cost) else {
            return 0;
        };
        let room = |bound: f64, spent: f64, each: f64| match each {
            0.0 => f64::INFINITY,
            each => ((bound * (1.0 - 1e-9) - spent) / each).max(0.0).floor(),
        };
        let n = room(bounds.rho, spent.rho(), cost.rho())
            .min(room(bounds.spread, spent.spread(), cost.spread()))
            .min(room(bounds.tail, spent.tail(), cost.tail()))
            .min(room(bounds.keys, spent.keys(), cost.keys()));
        n.min(u64::MAX as f64) as u64
    }

    /// The ε the concentrated accountant's spending converts to at the
    /// δ it keeps, as `dpkit budget` and the service show it: the spent ρ
    /// converted, plus twice the spread spent so far and what the
    /// thresholds spent add (`None` when it does not keep this budget, or a
    /// charge closed it).
    pub fn concentrated_epsilon(&self, spent: Option<ConcentratedLoss>) -> Option<f64> {
        let bounds = self.concentrated?;
        let spent = spent?;
        let inner = epsilon_of(spent.rho(), bounds.inner_delta).ok()?;
        let keys = spent.keys() / (1.0 - bounds.keys);
        Some(inner + 2.0 * spent.spread() + keys)
    }

    /// The δ the concentrated accountant keeps for thresholds (κ), if it
    /// keeps the budget: 0 on accounts made before it did.
    pub fn threshold_delta(&self) -> Option<f64> {
        self.concentrated.map(|b| b.keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_concentrated_bounds_convert_back_within_half_of_delta() {
        for (epsilon, delta) in [(1.0, 1e-6), (0.1, 1e-9), (10.0, 1e-5), (900.0, 1e-3)] {
            let total = PrivacyLoss::approximate(epsilon, delta).unwrap();
            let old = Filter::without_thresholds(total).unwrap();
            for filter in [Filter::new(total).unwrap(), old] {
                let b = filter.concentrated.unwrap();
                let keys_epsilon = match b.keys {
                    0.0 => 0.0,
                    keys => (keys / (1.0 - keys)).next_up(),
                };
                let inner_epsilon = epsilon - 2.0 * b.spread - keys_epsilon;
                let grow = 1.0 + (inner_epsilon + b.spread).exp();
                let tails = if b.tail > 0.0 { grow * b.tail } else { 0.0 };
                let converted = epsilon_of(b.rho, b.inner_delta).unwrap()
                    + 2.0 * b.spread
                    + b.keys / (1.0 - b.keys);
                let delta_used = b.spread.exp() * b.inner_delta + tails + b.keys;
                assert!(converted <= epsilon, "{epsilon}: {converted}");
                assert!(delta_used <= delta / 2.0, "{delta_used}");
            }
            assert_eq!(old.threshold_delta(), Some(0.0));
            assert_eq!(Filter::of_version(total, 0), Ok(old));
            assert!(Filter::of_version(total, 2).is_err());
            assert_eq!(
                Filter::new(total).unwrap().threshold_delta(),
                Some(delta / 8.0)
            );
        }
    }

    #[test]
    fn thresholds_spend_their_own_share_and_close_only_the_older_accountant() {
        let total = PrivacyLoss::approximate(1.0, 1e-6).unwrap();
        let (new, old) = (
            Filter::new(total).unwrap(),
            Filter::without_thresholds(total).unwrap(),
        );
        let keys = |delta: f64| {
            Some(
                ConcentratedLoss::pure(0.01)
                    .unwrap()
                    .with_keys(delta)
                    .unwrap(),
            )
        };
        let nothing = Some(ConcentratedLoss::default());
        // κ = δ/8 = 1.25e-7: twelve thresholds of 1e-8, whatever ρ is left.
        assert_eq!(new.concentrated_room(nothing, keys(1e-8)), 12);
        assert!(new.concentrated_fits(nothing, keys(1.25e-7 * (1.0 - 1e-12))));
        assert!(!new.concentrated_fits(nothing, keys(1.26e-7)));
        assert!(!old.concentrated_fits(nothing, keys(1e-12)));
        assert_eq!(old.concentrated_room(nothing, keys(1e-12)), 0);
        // The accountant of older accounts keeps its ρ (0.02285 at this
        // budget before thresholds were counted); thresholds cost about 2.4%.
        assert!((old.concentrated_rho().unwrap() / 0.02285 - 1.0).abs() < 1e-4);
        let (rho_new, rho_old) = (
            new.concentrated_rho().unwrap(),
            old.concentrated_rho().unwrap(),
        );
        assert!(
            rho_new < rho_old && rho_new > 0.97 * rho_old,
            "{rho_new} {rho_old}"
        );
        // What thresholds spent shows in the ε the accountant has spent.
        let spent = nothing.map(|s| s.and(keys(1e-7).unwrap()));
        let shown = new.concentrated_epsilon(spent).unwrap();
        let without = new
            .concentrated_epsilon(Some(ConcentratedLoss::pure(0.01).unwrap()))
            .unwrap();
        assert!(shown - without >= 1e-7, "{shown} {without}");
    }

    #[test]
    fn a_pure_budget_and_an_old_ledger_keep_plain_sums() {
        let pure = Filter::new(PrivacyLoss::pure(1.0).unwrap()).unwrap();
        let old = Filter::sums_only(PrivacyLoss::approximate(1.0, 1e-6).unwrap());
        for filter in [pure, old] {
            let count = ConcentratedLoss::pure(0.01).unwrap();
            assert!(!filter.concentrated_fits(Some(ConcentratedLoss::default()), Some(count)));
            assert_eq!(filter.sums_delta(), filter.total().delta());
        }
    }

    #[test]
    fn a_charge_without_a_concentrated_form_closes_that_accountant() {
        let filter = Filter::new(PrivacyLoss::approximate(1.0, 1e-6).unwrap()).unwrap();
        let small = Some(ConcentratedLoss::pure(0.001).unwrap());
        assert!(filter.concentrated_fits(Some(ConcentratedLoss::default()), small));
        assert!(!filter.concentrated_fits(Some(ConcentratedLoss::default()), None));
        assert!(!filter.concentrated_fits(None, small));
    }
}
