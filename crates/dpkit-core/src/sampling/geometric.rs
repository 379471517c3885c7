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
use crate::error::{Error, Result, require_positive};

const LN_4: f64 = 2.0 * LN_2;
const MAX_BLOCK_BITS: u32 = 12;
const LOW_63_BITS: u64 = (1u64 << 63) - 1;
/// Upper bound on `ln β̃ − ln β`: β̃ is β inflated by 2⁻⁵⁰ and rounded up, on top of
/// at most three roundings of `exp` and the products feeding it.
const TOP_RATIO_EXCESS_BOUND: f64 = 8.0 * f64::EPSILON;

/// A distribution over `0..2^block_bits` as an alias table over 63-bit words:
/// a level of the split (the truncated geometric), or the bulk of a two-sided
/// geometric with its tail as the last cell.
#[derive(Debug, Clone)]
struct AliasTable {
    block_bits: u32,
    /// Column `c` yields `c` when the word's low bits are below `keep[c]`,
    /// else `alias[c]`.
    keep: Box<[u64]>,
    alias: Box<[u32]>,
    /// max − min over r of `ln(realised P(r)) − ln(ideal P(r))`.
    log_spread: f64,
}

impl AliasTable {
    /// The truncated geometric `P(R = r) ∝ e^(−s·r)` on `0..2^block_bits`.
    fn truncated_geometric(unit_log_ratio: f64, block_bits: u32) -> Self {
        let s = unit_log_ratio;
        let block_mass = -(-((1u64 << block_bits) as f64) * s).exp_m1();
        let log_first = (-(-s).exp_m1()).ln() - block_mass.ln();
        Self::new(block_bits, |r| log_first - r as f64 * s)
    }

    /// The table for cells whose ideal log-probabilities are `ideal_log(cell)`
    /// (they must sum to one).
    fn new(block_bits: u32, ideal_log: impl Fn(usize) -> f64) -> Self {
        let block = 1usize << block_bits;
        let threshold_bits = 63 - block_bits;
        let full = 1u64 << threshold_bits;

        // Vose's alias method on the masses scaled to mean 1.
        let mut scaled: Vec<f64> = (0..block)
            .map(|r| ideal_log(r).exp() * block as f64)
            .collect();
        let mut keep = vec![full; block];
        let mut alias: Vec<u32> = (0..block as u32).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) =
            (0..block).partition(|&r| scaled[r] < 1.0);
        while let (Some(&s_col), Some(&l_col)) = (small.last(), large.last()) {
            small.pop();
            keep[s_col] = ((scaled[s_col] * full as f64).round() as u64).min(full);
            alias[s_col] = l_col as u32;
            scaled[l_col] -= 1.0 - scaled[s_col];
            if scaled[l_col] < 1.0 {
                large.pop();
                small.push(l_col);
            }
        }

        // The realised masses, exactly, as numerators over 2^63.
        let mut numerators = vec![0u128; block];
        for column in 0..block {
            numerators[column] += u128::from(keep[column]);
            numerators[alias[column] as usize] += u128::from(full - keep[column]);
        }
        let (mut low, mut high) = (f64::INFINITY, f64::NEG_INFINITY);
        for (r, &numerator) in numerators.iter().enumerate() {
            assert!(numerator > 0, "every remainder keeps positive mass");
            let realised = (numerator as f64).ln() - 63.0 * LN_2;
            low = low.min(realised - ideal_log(r));
            high = high.max(realised - ideal_log(r));
        }
        Self {
            block_bits,
            keep: keep.into_boxed_slice(),
            alias: alias.into_boxed_slice(),
            log_spread: high - low,
        }
    }

    #[inline]
    fn cell(&self, uniform63: u64) -> u64 {
        let column = (uniform63 >> (63 - self.block_bits)) as usize;
        let threshold = uniform63 & ((1u64 << (63 - self.block_bits)) - 1);
        let keep = self.keep[column];
        let alias = u64::from(self.alias[column]);
        if threshold < keep {
            column as u64
        } else {
            alias
        }
    }
}

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
    pub fn new(unit_log_ratio: f64) -> Result<Self> {
        let s = require_positive("geometric log-ratio", unit_log_ratio)?;
        let mut levels = Vec::new();
        let mut level_ratio = s;
        let mut top_period = 1.0;
        while level_ratio < LN_4 {
            let wanted = (LN_4 / level_ratio).log2().ceil().max(1.0);
            let block_bits = (wanted as u32).min(MAX_BLOCK_BITS);
            levels.push(AliasTable::truncated_geometric(level_ratio, block_bits));
            // Exact: the block is a power of two.
            level_ratio *= (1u64 << block_bits) as f64;
            top_period *= (1u64 << block_bits) as f64;
        }
        if top_period > 2f64.powi(60) {
            return Err(Error::InvalidParameter {
                name: "geometric log-ratio",
                reason: format!("{unit_log_ratio} is too small (noise scale beyond 2^60 units)"),
            });
        }
        let beta = (-level_ratio).exp();
        let inflated = (beta * (1.0 + 2f64.powi(-50))).next_up().min(0.5);
        Ok(Self {
            unit_log_ratio: s,
            log_spread: levels.iter().map(|l| l.log_spread).sum(),
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
        let top_steps = (shift as f64 / self.top_period).ceil();
        let bound = exact + top_steps * TOP_RATIO_EXCESS_BOUND + self.log_spread;
        // Covers the rounding of the f64 arithmetic above.
        bound * (1.0 + 1e-12) + 1e-15
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
    fn sample_with_sign<R: Rng + ?Sized>(&self, rng: &mut R) -> (bool, u64) {
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
            value = if value >> (64 - level.block_bits) != 0 {
                u64::MAX
            } else {
                value << level.block_bits | level.cell(uniform)
            };
        }
        value
    }
}

/// Two-sided geometric (discrete Laplace): `P(Z = z) ∝ e^(-s·|z|)` on all integers.
///
/// Sampled as a random sign times a [`GeometricSampler`] magnitude, rejecting
/// "minus zero" so that zero is not counted twice; the loss of a shift `d` is
/// then the one-sided bound, since `||z| − |z + d|| ≤ d`. The sign is a bit
/// of a word the magnitude draw leaves unread, so it costs no extra word.
///
/// ```
/// use dpkit_core::sampling::TwoSidedGeometricSampler;
/// use dpkit_core::rng::InsecureSeededRng;
/// let noise = TwoSidedGeometricSampler::new(1.0).unwrap();
/// let mut rng = InsecureSeededRng::from_seed_for_testing(5);
/// let mean_abs = (0..20_000).map(|_| noise.sample(&mut rng).unsigned_abs() as f64).sum::<f64>() / 20_000.0;
/// assert!((mean_abs - 1.0 / 1f64.sinh()).abs() < 0.04);
/// ```
#[derive(Debug, Clone)]
pub struct TwoSidedGeometricSampler {
    magnitude: GeometricSampler,
    /// For `s ≥ DIRECT_TABLE_MIN_S`: the values `−T..=T` and, as the last
    /// cell, the tail `|Z| > T`, in one alias table (one word per draw).
    direct: Option<(AliasTable, i64)>,
}

/// The direct table needs `P(|Z| > T) ≤ 1/64` with `2T + 2 ≤ 4096` cells.
const DIRECT_TABLE_MIN_S: f64 = 8.4 / 4096.0;

impl TwoSidedGeometricSampler {
    /// `P(Z = z) ∝ e^(-unit_log_ratio·|z|)`.
    pub fn new(unit_log_ratio: f64) -> Result<Self> {
        let magnitude = GeometricSampler::new(unit_log_ratio)?;
        let s = magnitude.unit_log_ratio;
        let direct = (s >= DIRECT_TABLE_MIN_S).then(|| {
            // Smallest table with 2^(m−1) ≥ 4.2/s, so the tail has mass ≤ e^(−4.2).
            let bits = ((8.4 / s).log2().ceil().max(2.0) as u32).min(MAX_BLOCK_BITS);
            let half = (1i64 << (bits - 1)) - 1;
            let alpha = (-s).exp();
            let log_zero = (s / 2.0).tanh().ln();
            let log_tail = (2.0f64).ln() - (half + 1) as f64 * s - (1.0 + alpha).ln();
            let table = AliasTable::new(bits, |cell| {
                if cell as i64 <= 2 * half {
                    log_zero - (cell as i64 - half).unsigned_abs() as f64 * s
                } else {
                    log_tail
                }
            });
            (table, half)
        });
        Ok(Self { magnitude, direct })
    }

    /// The ideal ratio `α = e^(-s)`.
    pub fn ratio(&self) -> f64 {
        (-self.magnitude.unit_log_ratio).exp()
    }

    /// The ideal `s = −ln α`.
    pub fn unit_log_ratio(&self) -> f64 {
        self.magnitude.unit_log_ratio
    }

    /// A proven upper bound on the privacy loss of a shift by `shift`: the
    /// one-sided bound, plus, with the direct table, its measured spread and
    /// twice the tail sampler's excess over the exact loss.
    pub fn log_ratio_bound(&self, shift: u64) -> f64 {
        let one_sided = self.magnitude.log_ratio_bound(shift);
        match &self.direct {
            None => one_sided,
            Some((table, _)) => {
                let exact = shift as f64 * self.magnitude.unit_log_ratio;
                let tail_excess = (one_sided - exact).max(0.0);
                (exact + table.log_spread + 2.0 * tail_excess) * (1.0 + 1e-12) + 1e-15
            }
        }
    }

    /// `E|Z| = 2α/(1 − α²) = 1/sinh(s)` of the ideal distribution.
    pub fn expected_absolute_value(&self) -> f64 {
        1.0 / self.unit_log_ratio().sinh()
    }

    /// `Var Z = 2α/(1 − α)² = 1/(2 sinh²(s/2))` of the ideal distribution.
    pub fn variance(&self) -> f64 {
        let half_sinh = (self.unit_log_ratio() / 2.0).sinh();
        1.0 / (2.0 * half_sinh * half_sinh)
    }

    /// `P(Z = k) = (1 − α)/(1 + α)·α^|k|` of the ideal distribution.
    pub fn probability(&self, k: i64) -> f64 {
        let s = self.unit_log_ratio();
        (s / 2.0).tanh() * (-(k.unsigned_abs() as f64) * s).exp()
    }

    /// `P(|Z| > t) = 2α^(t+1)/(1 + α)` of the ideal distribution.
    pub fn tail_probability(&self, t: u64) -> f64 {
        2.0 * (-(t as f64 + 1.0) * self.unit_log_ratio()).exp() / (1.0 + self.ratio())
    }

    /// One draw.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> i64 {
        if let Some((table, half)) = &self.direct {
            let cell = table.cell(rng.next_u64() & LOW_63_BITS) as i64;
            if cell <= 2 * half {
                return cell - half;
            }
            // The tail: a fair sign and T + 1 + a geometric (memorylessness).
            let (negative, beyond) = self.magnitude.sample_with_sign(rng);
            let magnitude = beyond.saturating_add(*half as u64 + 1).min(i64::MAX as u64) as i64;
            return if negative { -magnitude } else { magnitude };
        }
        loop {
            let (negative, magnitude) = self.magnitude.sample_with_sign(rng);
            let magnitude = magnitude.min(i64::MAX as u64) as i64;
            match (negative, magnitude) {
                (true, 0) => continue,
                (true, m) => return -m,
                (false, m) => return m,
            }
        }
    }
}
