//! Geometric noise with an exactly known realised distribution.
//!
//! # Construction
//! A geometric variable `G` with `P(G = i) ∝ α^i`, `α = e^(-s)`, splits exactly
//! as `G = R + M·G'` with `R` a geometric truncated to `0..M` and `G'` an
//! independent geometric of ratio `α^M` (reference §Two-sided geometric). We
//! apply the split repeatedly with power-of-two blocks `M ≤ 2048` until the
//! top ratio `β = α^(M₁M₂…)` is at most ¼, then sample:
//! * each remainder `R` from an alias table (Walker/Vose) with integer
//!   thresholds: one random word, its top bits pick a column and the rest
//!   are compared with the column's threshold, without a branch;
//! * the top `G'` by repeated [`ExactBernoulli`] trials of probability
//!   `β̃ ≥ β` (rounded up on purpose: a larger ratio only adds privacy).
//!
//! # What is proven about it
//! The realised probabilities are integers over powers of two. For two
//! magnitudes `a, b` with `|a − b| ≤ d`,
//! `ln P(G = a) − ln P(G = b) ≤ d·s + ⌈d / ΠM⌉·τ + Σ spreadₗ`, where `τ ≥ 0`
//! bounds `ln β̃ − ln β` and `spreadₗ` is the measured range of
//! `ln(realised / ideal)` over a table. [`GeometricSampler::log_ratio_bound`]
//! returns that bound; mechanisms calibrate `s` so that it stays at or below
//! their declared ε. Typical spreads are around 1e-13.

use std::f64::consts::LN_2;

use rand_core::Rng;

use super::ExactBernoulli;
use super::alias_table::{AliasTable, LOW_63_BITS};
use crate::error::{Error, Result, require_positive};

pub(crate) const LN_4: f64 = 2.0 * LN_2;
/// The largest per-step log-ratio sampled (see [`GeometricSampler::new`]).
pub const MAX_UNIT_LOG_RATIO: f64 = 700.0;
/// The largest alias table has `2^MAX_BLOCK_BITS` cells (32 KiB of thresholds).
pub(crate) const MAX_BLOCK_BITS: u32 = 12;
/// Upper bound on `ln β̃ − ln β`: β̃ is β inflated by 2⁻⁵⁰ and rounded up, on top of
/// at most three roundings of `exp` and the products feeding it.
const TOP_RATIO_EXCESS_BOUND: f64 = 8.0 * f64::EPSILON;

/// One-sided geometric: `P(G = i) ∝ e^(-s·i)`, `i = 0, 1, 2, …`, with a proven
/// bound on how far its realised distribution is from the ideal one.
///
/// ```
/// use dpkit_core::sampling::GeometricSampler;
/// use dpkit_core::rng::InsecureSeededRng;
/// let geometric = GeometricSampler::new(0.5).unwrap();
/// let mut rng = InsecureSeededRng::from_seed_for_testing(11);
/// let mean = (0..20_000).map(|_| geometric.sample(&mut rng) as f64).sum::<f64>() / 20_000.0;
/// // E[G] = α/(1 − α) with α = e^(-0.5): 1.5415
/// assert!((mean - 1.5415).abs() < 0.06);
/// ```
#[derive(Debug, Clone)]
pub struct GeometricSampler {
    unit_log_ratio: f64,
    /// Finest level first.
    levels: Vec<AliasTable>,
    top_continue: ExactBernoulli,
    top_period: f64,
    log_spread: f64,
}

impl GeometricSampler {
    /// A geometric with `P(G = i) ∝ e^(-unit_log_ratio·i)`.
    ///
    /// Ratios beyond `e^(−MAX_UNIT_LOG_RATIO)` = e^(−700) per step are sampled
    /// as e^(−700) (the ratio must stay a normal double for the bounds below):
    /// the draw is 0 with probability above 1 − 10⁻³⁰⁴ either way, and the
    /// realised privacy loss is then below the requested one.
    pub fn new(unit_log_ratio: f64) -> Result<Self> {
        let s = require_positive("geometric log-ratio", unit_log_ratio)?.min(MAX_UNIT_LOG_RATIO);
        let mut levels = Vec::new();
        let mut level_ratio = s;
        let mut top_period = 1.0;
        while level_ratio < LN_4 {
            let wanted = (LN_4 / level_ratio).log2().ceil().max(1.0);
            let block_bits = (wanted as u32).min(MAX_BLOCK_BITS);
            // A level's masses span at most e^(−2 ln 4) = 1/16: always representable.
            let level = AliasTable::truncated_geometric(level_ratio, block_bits)
                .expect("a level's smallest mass is at least 1/16 of its largest");
            levels.push(level);
            // Exact: the block is a power of two.
            level_ratio *= (1u64 << block_bits) as f64;
            top_period *= (1u64 << block_bits) as f64;
        }
        if top_period > 2f64.powi(60) {
            return Err(Error::InvalidParameter {
                name: "geometric log-ratio",
                reason: format!("{unit_log_ratio:e} is too small (noise scale beyond 2^60 units)"),
            });
        }
        let beta = (-level_ratio).exp();
        let inflated = (beta * (1.0 + 2f64.powi(-50))).next_up().min(0.5);
        Ok(Self {
            unit_log_ratio: s,
            log_spread: levels.iter().map(AliasTable::log_spread).sum(),
            levels,
            top_continue: ExactBernoulli::new(inflated)?,
            top_period,
        })
    }

    /// The ideal `s = −ln α` this sampler approximates.
    pub fn unit_log_ratio(&self) -> f64 {
        self.unit_log_ratio
    }

    /// A proven upper bound on `ln P(G = a) − ln P(G = b)` over all magnitudes
    /// with `|a − b| ≤ shift`: the privacy loss of a shift by `shift` units.
    pub fn log_ratio_bound(&self, shift: u64) -> f64 {
        let exact = shift as f64 * self.unit_log_ratio;
        let bound = exact + self.log_deviation_difference_bound(shift);
        // Covers the rounding of the f64 arithmetic above.
        bound * (1.0 + 1e-12) + 1e-15
    }

    /// With `dev(x) = ln(realised P(G = x)) − ln(ideal P(G = x))`: a bound on
    /// `|dev(a) − dev(b)|` over all `|a − b| ≤ shift`. The levels contribute
    /// their spreads; the top contributes `ln(β̃/β) ≤ τ` per top step crossed.
    pub(crate) fn log_deviation_difference_bound(&self, shift: u64) -> f64 {
        let top_steps = (shift as f64 / self.top_period).ceil();
        top_steps * TOP_RATIO_EXCESS_BOUND + self.log_spread
    }

    /// A bound on `|dev(0)|`. Each level's deviation at 0 lies within its
    /// spread, because its realised and ideal masses both sum to one (1e-12
    /// covers the rounding of the ideal's normalisation); the top's is
    /// `|ln((1 − β̃)/(1 − β))| ≤ (β̃ − β)/(1 − β̃) ≤ 2⁻⁴⁸β ≤ τ` for `β ≤ ¼`.
    pub(crate) fn log_deviation_bound_at_zero(&self) -> f64 {
        self.log_spread + TOP_RATIO_EXCESS_BOUND + 1e-12
    }

    /// One draw.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let first = if self.levels.is_empty() {
            0
        } else {
            rng.next_u64() & LOW_63_BITS
        };
        self.sample_with_first_word(first, rng)
    }

    /// One draw and an independent fair sign bit, taken from a word whose
    /// remaining bits the draw uses.
    #[inline]
    pub(crate) fn sample_with_sign<R: Rng + ?Sized>(&self, rng: &mut R) -> (bool, u64) {
        let word = rng.next_u64();
        if !self.levels.is_empty() {
            return (
                word >> 63 == 1,
                self.sample_with_first_word(word & LOW_63_BITS, rng),
            );
        }
        if self.top_continue.leaves_lowest_bit() {
            let mut value = 0;
            if self.top_continue.decide_with_word(word) {
                value = 1;
                while self.top_continue.sample(rng) {
                    value += 1;
                }
            }
            return (word & 1 == 1, value);
        }
        (word & 1 == 1, self.sample_with_first_word(0, rng))
    }

    /// One draw whose finest remainder uses `uniform63` (63 uniform bits the
    /// caller already holds); the other words come from `rng`.
    #[inline]
    fn sample_with_first_word<R: Rng + ?Sized>(&self, uniform63: u64, rng: &mut R) -> u64 {
        let mut value = 0u64;
        while self.top_continue.sample(rng) {
            value += 1;
        }
        let finest = 0;
        for (index, level) in self.levels.iter().enumerate().rev() {
            let uniform = if index == finest {
                uniform63
            } else {
                rng.next_u64() & LOW_63_BITS
            };
            // Saturates at u64::MAX: a fixed function of the exact value.
            value = if value >> (64 - level.block_bits()) != 0 {
                u64::MAX
            } else {
                value << level.block_bits() | level.cell(uniform)
            };
        }
        value
    }
}
