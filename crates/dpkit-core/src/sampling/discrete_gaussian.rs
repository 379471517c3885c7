//! The discrete Gaussian: one alias-table look-up per draw where its body
//! fits a table, rejection from a discrete Laplace elsewhere.

use std::sync::Arc;

use rand_core::Rng;

use super::alias_table::{AliasTable, fill_from_halves};
use super::{ExactBernoulli, GeometricSampler, TwoSidedGeometricSampler};
use crate::accounting::ConcentratedLoss;
use crate::error::{Result, require_positive};
use crate::shared_tables::SharedTables;

/// The realised-loss bounds cover draws with `|y| < REACH·σ`; beyond, the
/// ideal probability is below `e^(−REACH²/2)` ≈ 1e-313 and the mechanisms
/// count it in δ.
const REACH: f64 = 38.0;
/// A bound on the probability, realised or ideal, that one draw falls
/// outside `|y| < REACH·σ`. The ideal law puts about `e^(−REACH²/2)` ≈
/// 1e-313 there (twice that over both sides, over a normaliser ≥ 1). The
/// realised sampler reaches there only through its tail, a proposal
/// accepted by an exact coin whose probability is `e^(−x)` rounded to a
/// double: beyond the window that probability is below 1e-313, or
/// subnormal or 0, so the accepted mass there stays of the ideal's order.
/// 1e-290 leaves room for both; the (ε, δ) calibration of the Gaussian
/// mechanisms counts the same bound in δ.
pub const WINDOW_MISS: f64 = 1e-290;
/// The body table has at most `2^MAX_TABLE_BITS` cells (512 KiB).
const MAX_TABLE_BITS: u32 = 16;
/// A body cell's ideal mass is at least `2^−MIN_CELL_LOG2` (with 2^16 cells
/// of 2^−63 resolution, its realised mass is within 1e-9 of it).
const MIN_CELL_LOG2: f64 = 30.0;
/// The table is used when it covers at least this many σ (the tail, drawn
/// by rejection, then has mass under 14% and acceptance above 0.7).
const MIN_TABLE_SIGMAS: f64 = 1.5;

/// `P(Y = y) ∝ e^(−y²/(2σ²))` on the integers.
///
/// # Sampling
/// * **table** (σ up to about 20,000): one alias table holds `−T..=T` and,
///   as its last cell, the tail `|Y| > T`, so a draw is one random word.
///   The tail is `T + 1 + G` with a random sign, where `G` is a geometric
///   of ratio `e^(−(T+1)/σ²)` accepted with probability `e^(−G²/(2σ²))`:
///   that product is proportional to `e^(−(T+1+G)²/(2σ²))`, exactly.
/// * **rejection** (larger σ): Canonne, Kamath & Steinke (2020), Algorithm 3.
///   A proposal `Y` from a discrete Laplace of scale `t = ⌊σ⌋ + 1` is
///   accepted with probability `exp(−(|Y| − σ²/t)² / (2σ²))`.
///
/// Every acceptance coin is an [`ExactBernoulli`] of an `f64` probability,
/// and every table's realised masses are known exactly, so
/// [`DiscreteGaussianSampler::log_spread_bound`] can bound the realised
/// distribution's distance from the ideal one, rounding included.
///
/// ```
/// use dpkit_core::sampling::DiscreteGaussianSampler;
/// use dpkit_core::rng::InsecureSeededRng;
/// let gaussian = DiscreteGaussianSampler::new(3.0).unwrap();
/// let mut rng = InsecureSeededRng::from_seed_for_testing(2);
/// let n = 20_000;
/// let variance = (0..n).map(|_| (gaussian.sample(&mut rng) as f64).powi(2)).sum::<f64>() / n as f64;
/// assert!((variance - 9.0).abs() < 0.5);
/// ```
#[derive(Debug, Clone)]
pub struct DiscreteGaussianSampler {
    sigma: f64,
    strategy: Strategy,
}

#[derive(Debug, Clone)]
enum Strategy {
    Table(Arc<BodyTable>),
    Rejection(Rejection),
}

/// Tables built once per σ and shared; at most 16 of them, 512 KiB each.
static TABLES: SharedTables<u64, Option<Arc<BodyTable>>> = SharedTables::with_capacity(16);

impl DiscreteGaussianSampler {
    /// A discrete Gaussian with parameter `sigma` (> 0).
    pub fn new(sigma: f64) -> Result<Self> {
        let sigma = require_positive("sigma", sigma)?;
        let table =
            TABLES.get_or_build(sigma.to_bits(), || Ok(BodyTable::new(sigma)?.map(Arc::new)))?;
        let strategy = match Option::clone(&table) {
            Some(table) => Strategy::Table(table),
            None => Strategy::Rejection(Rejection::new(sigma)?),
        };
        Ok(Self { sigma, strategy })
    }

    /// The parameter σ.
    pub fn sigma(&self) -> f64 {
        self.sigma
    }

    /// Upper bound on `|ln(realised pmf / ideal pmf)|` differences between any
    /// two points within `|y| < 38σ`.
    pub fn log_spread_bound(&self) -> f64 {
        match &self.strategy {
            Strategy::Table(table) => table.log_spread_bound,
            Strategy::Rejection(rejection) => rejection.log_spread_bound(self.sigma),
        }
    }

    /// The loss in concentrated form of a vector of `draws` independent
    /// draws added to an integer query of integer L2 sensitivity
    /// `sensitivity`: ρ = Δ²/(2σ²) of the ideal law; per draw, a spread of
    /// twice [`DiscreteGaussianSampler::log_spread_bound`] (the realised
    /// pmf is `e^u` times the ideal one within the window, `u` within that
    /// bound of its least value, which normalisation puts within it of 0)
    /// and a tail of [`WINDOW_MISS`].
    pub fn concentrated(&self, sensitivity: u64, draws: u64) -> Result<ConcentratedLoss> {
        self.concentrated_l2(sensitivity as f64, draws)
    }

    /// As [`DiscreteGaussianSampler::concentrated`], for an integer-valued
    /// vector query whose move between neighbours has L2 norm at most
    /// `l2_sensitivity`, which need not be an integer (a move of 1 in each
    /// of k cells has norm √k).
    ///
    /// # Privacy
    /// For an integer shift μ, the Rényi divergence of order α between the
    /// discrete Gaussian at 0 and at μ is at most α·μ²/(2σ²) (Canonne, Kamath
    /// & Steinke 2020, Proposition 5); independent draws on each coordinate
    /// add these up to α·‖μ‖²/(2σ²) ≤ α·Δ²/(2σ²), so ρ = Δ²/(2σ²) for any
    /// real Δ bounding the integer move's norm.
    pub fn concentrated_l2(&self, l2_sensitivity: f64, draws: u64) -> Result<ConcentratedLoss> {
        let draws = draws.max(1) as f64;
        ConcentratedLoss::gaussian(
            l2_sensitivity,
            self.sigma,
            2.0 * self.log_spread_bound() * draws,
            WINDOW_MISS * draws,
        )
    }

    /// One draw.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> i64 {
        match &self.strategy {
            Strategy::Table(table) => table.draw(u64::from(rng.next_u32()), rng),
            Strategy::Rejection(rejection) => rejection.sample(self.sigma, rng),
        }
    }

    /// Fills `out` with independent draws, in one tight loop.
    ///
    /// ```
    /// use dpkit_core::sampling::DiscreteGaussianSampler;
    /// use dpkit_core::rng::InsecureSeededRng;
    /// let gaussian = DiscreteGaussianSampler::new(1000.0).unwrap();
    /// let mut draws = vec![0i64; 1000];
    /// gaussian.sample_into(&mut draws, &mut InsecureSeededRng::from_seed_for_testing(4));
    /// assert!(draws.iter().all(|z| z.abs() < 38_000));
    /// ```
    pub fn sample_into<R: Rng + ?Sized>(&self, out: &mut [i64], rng: &mut R) {
        self.combine_into(out, rng, |_, draw| draw);
    }

    /// Adds an independent draw to each value, saturating at the ends of
    /// `i64`, in one tight loop.
    ///
    /// ```
    /// use dpkit_core::sampling::DiscreteGaussianSampler;
    /// use dpkit_core::rng::InsecureSeededRng;
    /// let gaussian = DiscreteGaussianSampler::new(4.0).unwrap();
    /// let mut counts = vec![100i64; 1000];
    /// gaussian.add_into(&mut counts, &mut InsecureSeededRng::from_seed_for_testing(4));
    /// assert!(counts.iter().any(|&c| c != 100));
    /// ```
    pub fn add_into<R: Rng + ?Sized>(&self, values: &mut [i64], rng: &mut R) {
        self.combine_into(values, rng, i64::saturating_add);
    }

    /// Replaces each `x` of `out` by `combine(x, draw)`.
    fn combine_into<R: Rng + ?Sized>(
        &self,
        out: &mut [i64],
        rng: &mut R,
        combine: impl Fn(i64, i64) -> i64,
    ) {
        match &self.strategy {
            Strategy::Table(table) => table.draw_all(out, rng, combine),
            Strategy::Rejection(rejection) => {
                for x in out {
                    *x = combine(*x, rejection.sample(self.sigma, rng));
                }
            }
        }
    }
}

/// A bound on the absolute rounding error of an `f64` exponent built from
/// a few products and sums whose magnitudes add up to at most `magnitude`,
/// plus the relative error of `exp` itself.
fn exponent_error_bound(magnitude: f64) -> f64 {
    8.0 * f64::EPSILON * (magnitude + 1.0)
}

/// The body `−T..=T` as cells `0..=2T` and the tail `|Y| > T` as cell `2T + 1`.
#[derive(Debug, Clone)]
struct BodyTable {
    table: AliasTable,
    half: i64,
    tail: Tail,
    log_spread_bound: f64,
}

impl BodyTable {
    /// `None` when no table of at most `2^16` cells covers 1.5σ with cells
    /// of representable mass (the rejection sampler is used then).
    fn new(sigma: f64) -> Result<Option<Self>> {
        let two_variance = 2.0 * sigma * sigma;
        let half = Self::half_width(sigma);
        if (half as f64) < MIN_TABLE_SIGMAS * sigma {
            return Ok(None);
        }
        let tail = Tail::new(sigma, half)?;
        let body_weight = (1..=half).fold(1.0, |sum, y| {
            sum + 2.0 * (-((y * y) as f64) / two_variance).exp()
        });
        let log_total = (body_weight + 2.0 * tail.weight).ln();
        let log_tail = (2.0 * tail.weight).ln() - log_total;
        let bits = ((2 * half + 2) as f64).log2().ceil() as u32;
        let table = AliasTable::new(bits, |cell| {
            let cell = cell as i64;
            if cell <= 2 * half {
                let y = cell - half;
                -((y * y) as f64) / two_variance - log_total
            } else if cell == 2 * half + 1 {
                log_tail
            } else {
                f64::NEG_INFINITY
            }
        });
        let Some(table) = table else {
            return Ok(None);
        };
        // ln P(y) − (its ideal log) lies within the table's spread, shifted
        // by the common error of `log_total` (which cancels in differences),
        // plus the rounding of `−y²/(2σ²)` in a body cell or the relative
        // error of the tail's weight, plus, inside the tail, the spread of
        // the conditional draw.
        let body_exponent = exponent_error_bound((half * half) as f64 / two_variance);
        let log_spread_bound = table.log_spread()
            + 2.0 * (body_exponent + tail.weight_error)
            + tail.log_spread_bound(sigma);
        Ok(Some(Self {
            table,
            half,
            tail,
            log_spread_bound,
        }))
    }

    /// The largest `T` with `2T + 2 ≤ 2^16` such that the ideal mass
    /// `e^(−y²/(2σ²))/(σ√(2π))` is at least `2^−30` at `y = T + 1`, so at
    /// the last body cell and in the tail cell too (which holds `T + 1`).
    fn half_width(sigma: f64) -> i64 {
        let largest = (1i64 << (MAX_TABLE_BITS - 1)) - 1;
        let log_peak = -(sigma * (2.0 * std::f64::consts::PI).sqrt()).ln();
        let room = log_peak + MIN_CELL_LOG2 * std::f64::consts::LN_2;
        if room <= 0.0 {
            return 0;
        }
        let reach = sigma * (2.0 * room).sqrt();
        (reach.floor() as i64 - 1).clamp(0, largest)
    }

    /// Fills `out` with draws (a loop of its own, so that the table's
    /// address and size stay in registers across it).
    #[inline(never)]
    fn draw_all<R: Rng + ?Sized>(
        &self,
        out: &mut [i64],
        rng: &mut R,
        combine: impl Fn(i64, i64) -> i64,
    ) {
        fill_from_halves(out, rng, |field, rng| self.draw(field, rng), combine);
    }

    /// The draw that a 32-bit `field` of uniform bits selects (see
    /// [`AliasTable::cell_lazy`]); the tail's words come from `rng`.
    #[inline(always)]
    fn draw<R: Rng + ?Sized>(&self, field: u64, rng: &mut R) -> i64 {
        let known = 32 - self.table.block_bits();
        let cell = self.table.cell_lazy(field, known, rng) as i64;
        if cell <= 2 * self.half {
            cell - self.half
        } else {
            self.tail.sample(rng)
        }
    }
}

/// `|Y| > T`: `a + G` with `a = T + 1`, a random sign, and `G` geometric of
/// ratio `e^(−s)`, `s ≤ a/σ²`, accepted with probability
/// `e^(s·G − (2aG + G²)/(2σ²))` ≤ 1, which makes the accepted magnitude's
/// probability proportional to `e^(−(a + G)²/(2σ²))`.
#[derive(Debug, Clone)]
struct Tail {
    start: u64,
    sigma: f64,
    proposal: GeometricSampler,
    /// `Σ_{y > T} e^(−y²/(2σ²))`, and a bound on its relative error.
    weight: f64,
    weight_error: f64,
}

impl Tail {
    fn new(sigma: f64, half: i64) -> Result<Self> {
        let start = half as u64 + 1;
        let two_variance = 2.0 * sigma * sigma;
        let rate = start as f64 / (sigma * sigma);
        let proposal = GeometricSampler::new(rate.next_down())?;
        // Sum until a term is below 2^−70 of the sum: the rest, a sum of
        // terms falling faster than a geometric of ratio e^(−y/σ²), is then
        // below 2^−70·σ²/y of it.
        let (mut weight, mut terms, mut y) = (0.0f64, 0u64, start as f64);
        loop {
            let term = (-(y * y) / two_variance).exp();
            weight += term;
            terms += 1;
            if term <= weight * 2f64.powi(-70) || y > REACH * sigma {
                break;
            }
            y += 1.0;
        }
        let truncation = 2f64.powi(-70) * (sigma * sigma / start as f64 + 1.0);
        let weight_error =
            terms as f64 * f64::EPSILON + exponent_error_bound((y * y) / two_variance) + truncation;
        Ok(Self {
            start,
            sigma,
            proposal,
            weight,
            weight_error,
        })
    }

    /// The spread of `ln(realised/ideal)` over the tail's conditional
    /// distribution for magnitudes below 38σ: the proposal's deviation
    /// differences, plus twice the acceptance probability's rounding (a
    /// ratio of two such deviations, since acceptance is renormalised).
    fn log_spread_bound(&self, sigma: f64) -> f64 {
        let reach = (REACH * sigma).ceil();
        let start = self.start as f64;
        let exponent = self.proposal.unit_log_ratio() * reach
            + (2.0 * start * reach + reach * reach) / (2.0 * sigma * sigma);
        self.proposal.log_deviation_difference_bound(reach as u64)
            + 2.0 * exponent_error_bound(exponent)
    }

    #[cold]
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> i64 {
        let two_variance = 2.0 * self.sigma * self.sigma;
        let rate = self.proposal.unit_log_ratio();
        let start = self.start as f64;
        loop {
            let (negative, beyond) = self.proposal.sample_with_sign(rng);
            let g = beyond as f64;
            let exponent = rate * g - (2.0 * start * g + g * g) / two_variance;
            let accept = ExactBernoulli::new(exponent.exp().min(1.0))
                .expect("exp of a number ≤ 0, capped at 1, is in [0, 1]");
            if accept.sample(rng) {
                // Accepted draws have |y| < 38σ ≤ 2^53 (σ ≤ 2^47 in every caller).
                let magnitude = self.start.saturating_add(beyond).min(i64::MAX as u64) as i64;
                return if negative { -magnitude } else { magnitude };
            }
        }
    }
}

/// Canonne, Kamath & Steinke's rejection sampler (for σ beyond the tables).
#[derive(Debug, Clone)]
struct Rejection {
    proposal_scale: f64,
    proposal: TwoSidedGeometricSampler,
}

impl Rejection {
    fn new(sigma: f64) -> Result<Self> {
        let proposal_scale = sigma.floor() + 1.0;
        Ok(Self {
            proposal_scale,
            proposal: TwoSidedGeometricSampler::new(1.0 / proposal_scale)?,
        })
    }

    /// The proposal's spread over magnitudes up to 38σ (a shift of that many
    /// units minus its exact part), plus twice the acceptance exponent's
    /// rounding and `exp`'s error.
    fn log_spread_bound(&self, sigma: f64) -> f64 {
        let reach = (REACH * sigma).ceil() as u64 + 1;
        let proposal_spread =
            self.proposal.log_ratio_bound(reach) - reach as f64 * self.proposal.unit_log_ratio();
        let distance = reach as f64 + sigma;
        let exponent = distance * distance / (2.0 * sigma * sigma);
        proposal_spread.max(0.0) + 2.0 * exponent_error_bound(exponent) + 1e-15
    }

    #[inline]
    fn sample<R: Rng + ?Sized>(&self, sigma: f64, rng: &mut R) -> i64 {
        let shift = sigma * sigma / self.proposal_scale;
        let two_variance = 2.0 * sigma * sigma;
        loop {
            let candidate = self.proposal.sample(rng);
            let distance = candidate.unsigned_abs() as f64 - shift;
            let accept = (-(distance * distance) / two_variance).exp();
            let coin =
                ExactBernoulli::new(accept).expect("exp of a non-positive number is in [0, 1]");
            if coin.sample(rng) {
                return candidate;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uses_table(sigma: f64) -> bool {
        let sampler = DiscreteGaussianSampler::new(sigma).unwrap();
        matches!(sampler.strategy, Strategy::Table(_))
    }

    #[test]
    fn a_table_serves_every_sigma_it_covers_by_one_and_a_half_sigmas() {
        for sigma in [0.4, 1.0, 4.4, 1024.0, 9000.0, 21_000.0] {
            assert!(uses_table(sigma), "σ = {sigma}");
        }
        for sigma in [0.05, 0.2, 22_000.0, 1e6, 1e12] {
            assert!(!uses_table(sigma), "σ = {sigma}");
        }
    }

    #[test]
    fn every_table_cell_and_the_tail_have_representable_mass() {
        for sigma in [0.4, 3.0, 1024.0, 21_000.0] {
            let half = BodyTable::half_width(sigma) as f64;
            let log_mass = |y: f64| {
                -(y * y) / (2.0 * sigma * sigma)
                    - (sigma * (2.0 * std::f64::consts::PI).sqrt()).ln()
            };
            assert!(log_mass(half + 1.0) >= -MIN_CELL_LOG2 * std::f64::consts::LN_2);
        }
    }
}
