//! The staircase mechanisms (Geng & Viswanath 2014; Geng, Kairouz, Oh & Viswanath 2015).

use std::sync::Arc;

use rand_core::CryptoRng;

use super::staircase_noise::StaircaseNoise;
use super::{
    CALIBRATION_MARGIN, IntegerMechanism, RealMechanism, one_by_one, release_exact_on_lattice,
    release_slice_on_lattice, require_integer_sensitivity, require_within_declared,
    saturating_release,
};
use crate::accounting::PrivacyLoss;
use crate::accuracy::{NoiseAccuracy, require_alpha, smallest_integer_with_tail_below};
use crate::error::{Error, Result, require_positive, require_unit_interval};
use crate::lattice::{GridValue, Lattice};

/// Grid points per Δ for the real-valued staircase: at least 2^20, so values
/// up to 2^41·Δ fit the grid and the period is within 2⁻²⁰ of Δ.
const RESOLUTION_BITS: i32 = 20;

/// Which γ the staircase uses.
///
/// ```
/// use dpkit_core::mechanism::StaircaseGamma;
/// let g = StaircaseGamma::L1Optimal.value(1.0).unwrap();
/// assert!((g - 1.0 / (1.0 + 0.5f64.exp())).abs() < 1e-15);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum StaircaseGamma {
    /// `γ* = 1/(1 + e^(ε/2))`: the least `E|X|`, which is then `Δ/(2 sinh(ε/2))`.
    #[default]
    L1Optimal,
    /// The γ with the least variance (reference §Staircase).
    L2Optimal,
    /// A given γ ∈ [0, 1].
    Value(f64),
}

impl StaircaseGamma {
    /// The γ this choice means at `epsilon`.
    pub fn value(self, epsilon: f64) -> Result<f64> {
        let epsilon = require_positive("epsilon", epsilon)?;
        match self {
            // Positive for every ε, even where it underflows (ε > 1400).
            Self::L1Optimal => Ok((1.0 / (1.0 + (epsilon / 2.0).exp())).max(f64::MIN_POSITIVE)),
            Self::L2Optimal => {
                let b = (-epsilon).exp();
                if b < 1e-12 {
                    // The cubic below loses all precision (and b underflows at
                    // ε > 745); its leading term is γ ≈ (b/2)^(1/3).
                    return Ok(((-epsilon - std::f64::consts::LN_2) / 3.0)
                        .exp()
                        .max(f64::MIN_POSITIVE));
                }
                let one_minus_b = -(-epsilon).exp_m1();
                let cubic = b - 2.0 * b * b + 2.0 * b.powi(4) - b.powi(5);
                let gamma =
                    -b / one_minus_b + cubic.cbrt() / (2f64.cbrt() * one_minus_b * one_minus_b);
                Ok(gamma.clamp(0.0, 1.0))
            }
            Self::Value(gamma) => require_unit_interval("gamma", gamma),
        }
    }
}

/// The staircase mechanism for real values: the least absolute error (with
/// the default γ) of any additive ε-DP noise (reference §Staircase).
///
/// # Privacy
/// Exactly ε-DP, floating point included: the true value is rounded to a grid
/// of spacing `g = 2^k ≤ Δ/2^20` and moved by `g·Z`, with `Z` the discrete
/// staircase of period `N = ⌈Δ/g⌉` and rise `r = round(γN)` (kept within
/// `1..N` when `0 < γ < 1`), which is the
/// continuous staircase sampled on the grid. Every grid point is reachable
/// from every input; the realised loss is proven ≤ ε at construction.
///
/// # Accuracy
/// `E|X|` and the variance are the discrete staircase's (within 1e-6 of the
/// continuous closed forms); rounding to the grid adds at most `g/2`.
///
/// ```
/// use dpkit_core::mechanism::{RealMechanism, Staircase};
/// use dpkit_core::accuracy::NoiseAccuracy;
/// let staircase = Staircase::new(4.0, 1.0).unwrap();
/// // 45% less absolute error than Laplace's 0.25 at ε = 4
/// assert!((staircase.expected_absolute_error() - 0.13786).abs() < 1e-4);
/// let _released = staircase.privatize(3.5).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Staircase {
    epsilon: f64,
    sensitivity: f64,
    lattice: Lattice,
    noise: Arc<StaircaseNoise>,
}

impl Staircase {
    /// Grid points per Δ (at least `2^GRID_BITS`): releases round to this grid.
    pub const GRID_BITS: i32 = RESOLUTION_BITS;

    /// ε-DP staircase noise with the L1-optimal γ.
    pub fn new(epsilon: f64, sensitivity: f64) -> Result<Self> {
        Self::with_gamma(epsilon, sensitivity, StaircaseGamma::L1Optimal)
    }

    /// ε-DP staircase noise with a chosen γ.
    pub fn with_gamma(epsilon: f64, sensitivity: f64, gamma: StaircaseGamma) -> Result<Self> {
        let epsilon = require_positive("epsilon", epsilon)?;
        let sensitivity = require_positive("sensitivity", sensitivity)?;
        let gamma = gamma.value(epsilon)?;
        let lattice = Lattice::finer_than(sensitivity, RESOLUTION_BITS)?;
        let period = lattice.index_sensitivity(sensitivity);
        // A γ strictly inside (0, 1) keeps both steps on the grid, however
        // narrow: at large ε the L1-optimal γN is below one grid step, and
        // rounding it to 0 would remove the central spike.
        let mut rise = ((gamma * period as f64).round() as u64).min(period);
        if gamma > 0.0 && gamma < 1.0 {
            rise = rise.clamp(1, period - 1);
        }
        let noise = StaircaseNoise::shared(period, rise, epsilon * (1.0 - CALIBRATION_MARGIN))?;
        require_within_declared(noise.realised_loss_bound(), epsilon)?;
        Ok(Self {
            epsilon,
            sensitivity,
            lattice,
            noise,
        })
    }

    /// The γ in effect (`r/N`).
    pub fn gamma(&self) -> f64 {
        self.noise.rise() as f64 / self.noise.period() as f64
    }

    /// The output grid.
    pub fn lattice(&self) -> Lattice {
        self.lattice
    }

    /// The sensitivity Δ.
    pub fn sensitivity(&self) -> f64 {
        self.sensitivity
    }

    /// The proven upper bound on the realised privacy loss (≤ ε).
    pub fn realised_epsilon_bound(&self) -> f64 {
        self.noise.realised_loss_bound()
    }

    /// `P(noise = k·g)` of the ideal discrete distribution.
    pub fn probability_of_steps(&self, steps: i64) -> f64 {
        self.noise.probability(steps)
    }

    /// `P(|noise| > t·g)` of the ideal discrete distribution.
    pub fn tail_probability_of_steps(&self, steps: u64) -> f64 {
        self.noise.tail_probability(steps)
    }
}

impl RealMechanism for Staircase {
    #[inline]
    fn privatize_with_rng<R: CryptoRng + ?Sized>(&self, value: f64, rng: &mut R) -> Result<f64> {
        let index = self.lattice.index_of(value)?;
        Ok(self
            .lattice
            .value_at(index.saturating_add(self.noise.sample(rng))))
    }

    fn privatize_exact_with_rng<R: CryptoRng + ?Sized>(
        &self,
        value: GridValue,
        rng: &mut R,
    ) -> Result<f64> {
        release_exact_on_lattice(&self.lattice, value, self.noise.sample(rng))
    }

    fn privatize_slice_with_rng<R: CryptoRng + ?Sized>(
        &self,
        values: &mut [f64],
        rng: &mut R,
    ) -> Result<()> {
        release_slice_on_lattice(&self.lattice, values, one_by_one(|| self.noise.sample(rng)))
    }

    fn privacy(&self) -> PrivacyLoss {
        PrivacyLoss::pure(self.epsilon).expect("validated at construction")
    }
}

impl NoiseAccuracy for Staircase {
    fn expected_absolute_error(&self) -> f64 {
        self.lattice.spacing() * self.noise.expected_absolute_value()
    }

    fn variance(&self) -> f64 {
        self.lattice.spacing().powi(2) * self.noise.variance()
    }

    fn confidence_half_width(&self, alpha: f64) -> Result<f64> {
        let alpha = require_alpha(alpha)?;
        let steps = smallest_integer_with_tail_below(alpha, |t| self.noise.tail_probability(t));
        Ok((steps as f64 + 0.5) * self.lattice.spacing())
    }
}

/// The discrete staircase for integer queries of integer sensitivity Δ
/// (reference §Staircase, discrete form): `p(i) = a·b^⌊|i|/Δ⌋` when
/// `|i| mod Δ < r`, else `a·b^(⌊|i|/Δ⌋+1)`. With Δ = 1 it is the two-sided geometric.
///
/// # Privacy
/// Exactly ε-DP; the realised loss is proven ≤ ε at construction.
///
/// ```
/// use dpkit_core::mechanism::{DiscreteStaircase, IntegerMechanism};
/// let sum_of_ratings = DiscreteStaircase::new(2.0, 5).unwrap();
/// let _noisy = sum_of_ratings.privatize(1_000).unwrap();
/// assert!((1..=5).contains(&sum_of_ratings.rise()));
/// ```
#[derive(Debug, Clone)]
pub struct DiscreteStaircase {
    epsilon: f64,
    noise: Arc<StaircaseNoise>,
}

impl DiscreteStaircase {
    /// The discrete staircase whose rise `r` has the least `E|Z|` among the
    /// integers next to `γ*·Δ` (γ* the L1-optimal continuous value).
    pub fn new(epsilon: f64, sensitivity: u64) -> Result<Self> {
        let epsilon = require_positive("epsilon", epsilon)?;
        require_integer_sensitivity(sensitivity)?;
        let centre = StaircaseGamma::L1Optimal.value(epsilon)? * sensitivity as f64;
        let first = (centre.floor() as u64).saturating_sub(2).max(1);
        let last = (centre.ceil() as u64 + 2).min(sensitivity);
        let mut best: Option<(f64, Self)> = None;
        for rise in first..=last {
            let candidate = Self::with_rise(epsilon, sensitivity, rise)?;
            let error = candidate.expected_absolute_error();
            if best
                .as_ref()
                .is_none_or(|(best_error, _)| error < *best_error)
            {
                best = Some((error, candidate));
            }
        }
        Ok(best.expect("the candidate range is never empty").1)
    }

    /// The discrete staircase with rise `r ∈ 1..=Δ`.
    pub fn with_rise(epsilon: f64, sensitivity: u64, rise: u64) -> Result<Self> {
        let epsilon = require_positive("epsilon", epsilon)?;
        require_integer_sensitivity(sensitivity)?;
        if !(1..=sensitivity).contains(&rise) {
            return Err(Error::InvalidParameter {
                name: "rise",
                reason: format!("must lie in 1..={sensitivity}, got {rise}"),
            });
        }
        let noise =
            StaircaseNoise::shared(sensitivity, rise, epsilon * (1.0 - CALIBRATION_MARGIN))?;
        require_within_declared(noise.realised_loss_bound(), epsilon)?;
        Ok(Self { epsilon, noise })
    }

    /// The rise `r`.
    pub fn rise(&self) -> u64 {
        self.noise.rise()
    }

    /// The proven upper bound on the realised privacy loss (≤ ε).
    pub fn realised_epsilon_bound(&self) -> f64 {
        self.noise.realised_loss_bound()
    }

    /// `P(Z = k)` of the ideal distribution.
    pub fn probability_of_noise(&self, k: i64) -> f64 {
        self.noise.probability(k)
    }

    /// `P(|Z| > t)` of the ideal distribution.
    pub fn tail_probability(&self, t: u64) -> f64 {
        self.noise.tail_probability(t)
    }
}

impl IntegerMechanism for DiscreteStaircase {
    #[inline]
    fn privatize_with_rng<R: CryptoRng + ?Sized>(&self, value: i64, rng: &mut R) -> i64 {
        saturating_release(value, self.noise.sample(rng))
    }

    fn privacy(&self) -> PrivacyLoss {
        PrivacyLoss::pure(self.epsilon).expect("validated at construction")
    }
}

impl NoiseAccuracy for DiscreteStaircase {
    fn expected_absolute_error(&self) -> f64 {
        self.noise.expected_absolute_value()
    }

    fn variance(&self) -> f64 {
        self.noise.variance()
    }

    fn confidence_half_width(&self, alpha: f64) -> Result<f64> {
        let alpha = require_alpha(alpha)?;
        Ok(smallest_integer_with_tail_below(alpha, |t| self.noise.tail_probability(t)) as f64)
    }
}
