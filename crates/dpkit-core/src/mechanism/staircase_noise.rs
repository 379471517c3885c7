//! The discrete staircase distribution: the noise behind both staircase mechanisms.

use rand_core::Rng;

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::sampling::alias_table::{AliasTable, LOW_63_BITS};
use crate::sampling::{ExactBernoulli, GeometricSampler, uniform_below};
use crate::shared_tables::SharedTables;

/// Symmetric integer noise with period `N` and rise `r ∈ 0..=N`
/// (reference §Staircase, discrete form):
/// `p(i) = a·b^⌊|i|/N⌋` when `|i| mod N < r`, else `a·b^(⌊|i|/N⌋+1)`.
///
/// # Sampling
/// The one-sided form is `G·N + offset`, with `G` geometric of ratio `b`,
/// the offset uniform on `0..r` with probability `w = r/(r + (N − r)b)` and
/// uniform on `r..N` otherwise. When `s = −ln b ≥ 4.2/1023` (ε ≳ 0.004 per
/// Δ) one alias table over (sign, period, level) cells for the first
/// `K = ⌈4.2/s⌉` periods, plus two tail cells, picks a run of equally likely
/// magnitudes, and one exact uniform draw picks within it: two words per
/// value. The tails (mass ≤ e^(−4.2)) continue with the one-sided form
/// shifted by `K·N` (memorylessness). Otherwise: a sign bit times the
/// one-sided form, rejecting "minus zero".
///
/// # Realised privacy loss
/// For magnitudes `N` apart or less the one-sided form's loss is at most
/// `max(−ln b̃₁, L_G(1))`: `b̃₁ = (1 − w̃)r / (w̃(N − r))` is the realised ratio
/// of the two levels of a step (the coin's `w̃` is `w` rounded *down*, which
/// can only lower the loss), and `L_G(1)` is the geometric sampler's proven
/// one-step bound. The table adds its measured spread and, between a table
/// value and a tail value, the tail's bounded deviation
/// (`DirectCells::realised_loss_bound`). All computed at construction.
#[derive(Debug, Clone)]
pub(crate) struct StaircaseNoise {
    period: u64,
    rise: u64,
    /// `b = e^(−s)`, the ideal ratio between consecutive periods.
    ratio: f64,
    periods: GeometricSampler,
    first_region: ExactBernoulli,
    /// One alias table over (sign, period, region) cells, when `s` allows.
    direct: Option<DirectCells>,
    realised_loss_bound: f64,
}

/// The values `|i| < K·N` as cells of consecutive magnitudes with one sign
/// and one level, plus two tail cells (`|i| ≥ K·N`, one per sign), in one
/// alias table: a draw is one word for the cell and one for the offset.
#[derive(Debug, Clone)]
struct DirectCells {
    table: AliasTable,
    cells: Box<[MagnitudeRange]>,
    tail_start: u64,
}

/// Magnitudes `start..start + count` with one sign; `count == 0` marks a
/// tail cell (padding cells are never drawn).
#[derive(Debug, Clone, Copy)]
struct MagnitudeRange {
    start: u64,
    count: u64,
    negative: bool,
}

/// Each direct table's tail mass is at most `e^(−TAIL_EXPONENT)`, under 1/64.
const TAIL_EXPONENT: f64 = 4.2;
/// The largest direct table: `2^MAX_TABLE_BITS` cells.
const MAX_TABLE_BITS: u32 = 12;

impl StaircaseNoise {
    /// Noise whose realised loss for a shift of `period` is ≤ `epsilon`,
    /// calibrated to `log_ratio` (slightly below ε) per period.
    /// The noise for (N, r, s), built once per process and shared.
    pub(crate) fn shared(period: u64, rise: u64, log_ratio: f64) -> Result<Arc<Self>> {
        static TABLES: SharedTables<(u64, u64, u64), StaircaseNoise> =
            SharedTables::with_capacity(256);
        TABLES.get_or_build((period, rise, log_ratio.to_bits()), || {
            Self::new(period, rise, log_ratio)
        })
    }

    pub(crate) fn new(period: u64, rise: u64, log_ratio: f64) -> Result<Self> {
        assert!(period >= 1 && rise <= period);
        // As for the geometric: ratios beyond e^(−700) are sampled as e^(−700),
        // which only lowers the realised loss.
        let log_ratio = log_ratio.min(crate::sampling::geometric::MAX_UNIT_LOG_RATIO);
        let periods = GeometricSampler::new(log_ratio)?;
        let ratio = (-log_ratio).exp();
        if ratio >= 1.0 {
            return Err(Error::InvalidParameter {
                name: "epsilon",
                reason: format!("{log_ratio:e} is too small for the staircase"),
            });
        }
        let (first_weight, step_loss) = if rise == 0 {
            (0.0, 0.0)
        } else if rise == period {
            (1.0, 0.0)
        } else {
            let (r, rest) = (rise as f64, (period - rise) as f64);
            let ideal = r / (r + rest * ratio);
            let rounded_down = (ideal * (1.0 - 2f64.powi(-50))).next_down();
            let realised_level_ratio = (1.0 - rounded_down) * r / (rounded_down * rest);
            (rounded_down, -realised_level_ratio.ln())
        };
        let one_sided_bound = step_loss.max(periods.log_ratio_bound(1));
        let mut noise = Self {
            period,
            rise,
            ratio,
            realised_loss_bound: one_sided_bound,
            periods,
            first_region: ExactBernoulli::new(first_weight)?,
            direct: None,
        };
        // The table is only a speed-up: it is used when its proven bound
        // stays within half the calibration margin of the ideal loss.
        if let Some(direct) = DirectCells::new(&noise) {
            let bound = direct.realised_loss_bound(&noise, one_sided_bound);
            if bound <= log_ratio * (1.0 + 5e-7) {
                noise.realised_loss_bound = bound;
                noise.direct = Some(direct);
            }
        }
        Ok(noise)
    }

    pub(crate) fn realised_loss_bound(&self) -> f64 {
        self.realised_loss_bound
    }

    pub(crate) fn period(&self) -> u64 {
        self.period
    }

    pub(crate) fn rise(&self) -> u64 {
        self.rise
    }

    #[inline]
    pub(crate) fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> i64 {
        if let Some(direct) = &self.direct {
            return direct.sample(self, rng);
        }
        loop {
            let negative = rng.next_u64() >> 63 == 1;
            let magnitude = self.sample_magnitude(rng).min(i64::MAX as u64) as i64;
            match (negative, magnitude) {
                (true, 0) => continue,
                (true, m) => return -m,
                (false, m) => return m,
            }
        }
    }

    /// The one-sided staircase: `P(m) ∝` the level of `m`, for `m = 0, 1, …`
    /// (saturating at `u64::MAX`, a fixed function of the exact value).
    #[inline]
    fn sample_magnitude<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let whole_periods = self.periods.sample(rng);
        let offset = if self.first_region.sample(rng) {
            uniform_below(self.rise, rng)
        } else {
            self.rise + uniform_below(self.period - self.rise, rng)
        };
        whole_periods
            .saturating_mul(self.period)
            .saturating_add(offset)
    }

    /// A bound on `|ln(w̃/w)|` and `|ln((1 − w̃)/(1 − w))|`, the region
    /// coin's deviations from its ideal weight `w = r/(r + (N − r)b)`.
    /// `w − w̃ ≤ 2⁻⁴⁹w` by construction, and `w` itself is within 4 ulp of
    /// the exact value, so `|w − w̃| ≤ 3·10⁻¹⁵·w`; then `ln(1 + x) ≤ x`.
    fn region_deviation_bound(&self) -> f64 {
        if self.rise == 0 || self.rise == self.period {
            return 0.0;
        }
        let (r, rest, b) = (
            self.rise as f64,
            (self.period - self.rise) as f64,
            self.ratio,
        );
        let first_share = r / (r + rest * b);
        let second_share = rest * b / (r + rest * b);
        let gap = 3e-15 * first_share;
        let (first_room, second_room) = (first_share - gap, second_share * (1.0 - 1e-12) - gap);
        if first_room <= 0.0 || second_room <= 0.0 {
            return f64::INFINITY;
        }
        (gap / first_room).max(gap / second_room) * 1.01
    }

    /// Sums of the level weights `c_j` (1 below the rise, b above) over one period.
    fn level_sums(&self) -> LevelSums {
        let (n, r, b) = (self.period as f64, self.rise as f64, self.ratio);
        let s1 = |m: f64| m * (m - 1.0) / 2.0;
        let s2 = |m: f64| (m - 1.0) * m * (2.0 * m - 1.0) / 6.0;
        let count = r + (n - r) * b;
        let first = s1(r) + b * (s1(n) - s1(r));
        let second = s2(r) + b * (s2(n) - s2(r));
        let zero_weight = if self.rise >= 1 { 1.0 } else { b };
        let one_minus_b = -(-self.log_ratio()).exp_m1();
        let height = one_minus_b / (2.0 * count - zero_weight * one_minus_b);
        LevelSums {
            count,
            first,
            second,
            height,
            one_minus_b,
        }
    }

    fn log_ratio(&self) -> f64 {
        self.periods.unit_log_ratio()
    }

    /// `E|Z|` in grid steps.
    pub(crate) fn expected_absolute_value(&self) -> f64 {
        let LevelSums {
            count,
            first,
            height,
            one_minus_b,
            ..
        } = self.level_sums();
        let (n, b) = (self.period as f64, self.ratio);
        2.0 * height * (n * count * b / one_minus_b.powi(2) + first / one_minus_b)
    }

    /// `Var Z = E[Z²]` in grid steps squared.
    pub(crate) fn variance(&self) -> f64 {
        let LevelSums {
            count,
            first,
            second,
            height,
            one_minus_b,
        } = self.level_sums();
        let (n, b) = (self.period as f64, self.ratio);
        2.0 * height
            * (n * n * count * b * (1.0 + b) / one_minus_b.powi(3)
                + 2.0 * n * first * b / one_minus_b.powi(2)
                + second / one_minus_b)
    }

    /// `P(Z = i)` of the ideal distribution.
    pub(crate) fn probability(&self, i: i64) -> f64 {
        let magnitude = i.unsigned_abs();
        let periods = (magnitude / self.period) as f64;
        let raised = if magnitude % self.period < self.rise {
            0.0
        } else {
            1.0
        };
        self.level_sums().height * (-(periods + raised) * self.log_ratio()).exp()
    }

    /// `P(|Z| > t)` of the ideal distribution.
    pub(crate) fn tail_probability(&self, t: u64) -> f64 {
        let LevelSums {
            count,
            height,
            one_minus_b,
            ..
        } = self.level_sums();
        let start = t.saturating_add(1);
        let (k, offset) = (start / self.period, start % self.period);
        let (n, r, b) = (self.period, self.rise, self.ratio);
        let partial = r.saturating_sub(offset) as f64 + b * (n - offset.max(r)) as f64;
        let bk = (-(k as f64) * self.log_ratio()).exp();
        2.0 * height * bk * (partial + count * b / one_minus_b)
    }
}

struct LevelSums {
    count: f64,
    first: f64,
    second: f64,
    height: f64,
    one_minus_b: f64,
}

impl DirectCells {
    /// `None` when the staircase needs more than `2^MAX_TABLE_BITS` cells for
    /// a tail mass of at most `e^(−TAIL_EXPONENT)`.
    fn new(noise: &StaircaseNoise) -> Option<Self> {
        let s = noise.log_ratio();
        let periods = (TAIL_EXPONENT / s).ceil();
        // A zero cell, four per period (two signs × two levels), two tails.
        let cell_count = 4.0 * periods + 3.0;
        let bits = cell_count.log2().ceil().max(1.0) as u32;
        if bits > MAX_TABLE_BITS {
            return None;
        }
        let periods = periods as u64;
        let (n, r) = (noise.period, noise.rise);
        let mut cells = vec![
            MagnitudeRange {
                start: 0,
                count: 0,
                negative: false,
            };
            1 << bits
        ];
        // Cell index → (range, level in periods); level None marks the tails.
        let mut levels: Vec<Option<f64>> = vec![None; 1 << bits];
        cells[0].count = 1;
        levels[0] = Some(if r >= 1 { 0.0 } else { 1.0 });
        for k in 0..periods {
            for (side, negative) in [false, true].into_iter().enumerate() {
                // Zero is its own cell, so period 0 starts at magnitude 1.
                let first = u64::from(k == 0);
                let regions = [
                    (first.min(r), r, k as f64),
                    (first.max(r), n, k as f64 + 1.0),
                ];
                for (region, (low, high, level)) in regions.into_iter().enumerate() {
                    let index = 1 + 4 * k as usize + 2 * side + region;
                    cells[index] = MagnitudeRange {
                        start: k * n + low,
                        count: high.saturating_sub(low),
                        negative,
                    };
                    levels[index] = Some(level);
                }
            }
        }
        let tail = 1 + 4 * periods as usize;
        cells[tail + 1].negative = true;
        let sums = noise.level_sums();
        let log_height = sums.height.ln();
        let log_tail = log_height - periods as f64 * s + sums.count.ln() - sums.one_minus_b.ln();
        let table = AliasTable::new(bits, |index| {
            if index == tail || index == tail + 1 {
                return log_tail;
            }
            match (levels[index], cells[index].count) {
                (Some(level), count) if count > 0 => (count as f64).ln() + log_height - level * s,
                _ => f64::NEG_INFINITY,
            }
        })?;
        Some(Self {
            table,
            cells: cells.into_boxed_slice(),
            tail_start: periods * n,
        })
    }

    /// The realised loss for magnitudes at most `N` apart. With
    /// `dev = ln(realised/ideal)`, a body value's `dev` is its cell's (the
    /// offset is exactly uniform), and a tail value's is its cell's plus the
    /// one-sided sampler's. Two body values: `s` + the table's spread. Two
    /// tail values: the one-sided bound + the spread (the two tail cells may
    /// differ). A body and a tail value: the tail one lies in the first
    /// period of the one-sided sampler, whose `|dev|` is at most the
    /// geometric's `|dev(0)|` bound plus the region coin's.
    fn realised_loss_bound(&self, noise: &StaircaseNoise, one_sided_bound: f64) -> f64 {
        let spread = self.table.log_spread();
        let mixed = noise.log_ratio()
            + noise.periods.log_deviation_bound_at_zero()
            + noise.region_deviation_bound();
        (mixed.max(one_sided_bound) + spread) * (1.0 + 1e-12) + 1e-15
    }

    #[inline]
    fn sample<R: Rng + ?Sized>(&self, noise: &StaircaseNoise, rng: &mut R) -> i64 {
        let cell = self.cells[self.table.cell(rng.next_u64() & LOW_63_BITS) as usize];
        let magnitude = if cell.count != 0 {
            cell.start + uniform_below(cell.count, rng)
        } else {
            self.tail_start.saturating_add(noise.sample_magnitude(rng))
        };
        let magnitude = magnitude.min(i64::MAX as u64) as i64;
        if cell.negative { -magnitude } else { magnitude }
    }
}
