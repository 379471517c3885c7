//! The discrete staircase distribution: the noise behind both staircase mechanisms.

use rand_core::Rng;

use crate::error::{Error, Result};
use crate::sampling::{ExactBernoulli, GeometricSampler, uniform_below};

/// Symmetric integer noise with period `N` and rise `r ∈ 0..=N`
/// (reference §Staircase, discrete form):
/// `p(i) = a·b^⌊|i|/N⌋` when `|i| mod N < r`, else `a·b^(⌊|i|/N⌋+1)`.
///
/// Sampled as sign × (`G·N + offset`), with `G` geometric of ratio `b`, the
/// offset uniform on `0..r` with probability `w = r/(r + (N − r)b)` and
/// uniform on `r..N` otherwise, rejecting "minus zero".
///
/// # Realised privacy loss
/// For magnitudes `N` apart or less the loss is at most
/// `max(−ln b̃₁, L_G(1))`: `b̃₁ = (1 − w̃)r / (w̃(N − r))` is the realised ratio
/// of the two levels of a step (the coin's `w̃` is `w` rounded *down*, which
/// can only lower the loss), and `L_G(1)` is the geometric sampler's proven
/// one-step bound. Both are computed at construction.
#[derive(Debug, Clone)]
pub(crate) struct StaircaseNoise {
    period: u64,
    rise: u64,
    /// `b = e^(−s)`, the ideal ratio between consecutive periods.
    ratio: f64,
    periods: GeometricSampler,
    first_region: ExactBernoulli,
    realised_loss_bound: f64,
}

impl StaircaseNoise {
    /// Noise whose realised loss for a shift of `period` is ≤ `epsilon`,
    /// calibrated to `log_ratio` (slightly below ε) per period.
    pub(crate) fn new(period: u64, rise: u64, log_ratio: f64) -> Result<Self> {
        assert!(period >= 1 && rise <= period);
        let periods = GeometricSampler::new(log_ratio)?;
        let ratio = (-log_ratio).exp();
        if ratio >= 1.0 {
            return Err(Error::InvalidParameter {
                name: "epsilon",
                reason: format!("{log_ratio} is too small for the staircase"),
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
        Ok(Self {
            period,
            rise,
            ratio,
            realised_loss_bound: step_loss.max(periods.log_ratio_bound(1)),
            periods,
            first_region: ExactBernoulli::new(first_weight)?,
        })
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
        loop {
            let negative = rng.next_u64() >> 63 == 1;
            let whole_periods = self.periods.sample(rng);
            let offset = if self.first_region.sample(rng) {
                uniform_below(self.rise, rng)
            } else {
                self.rise + uniform_below(self.period - self.rise, rng)
            };
            let magnitude = whole_periods
                .saturating_mul(self.period)
                .saturating_add(offset)
                .min(i64::MAX as u64) as i64;
            match (negative, magnitude) {
                (true, 0) => continue,
                (true, m) => return -m,
                (false, m) => return m,
            }
        }
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
