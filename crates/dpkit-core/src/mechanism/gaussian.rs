//! The Gaussian mechanisms for (ε, δ)-DP, calibrated with the analytic
//! Gaussian mechanism (Balle & Wang, ICML 2018) and released with the
//! discrete Gaussian (Canonne, Kamath & Steinke, NeurIPS 2020).

use std::f64::consts::{PI, SQRT_2};

use rand_core::CryptoRng;

use super::{
    CALIBRATION_MARGIN, IntegerMechanism, RealMechanism, release_exact_on_lattice,
    release_slice_on_lattice, require_integer_sensitivity, saturating_release,
};
use crate::accounting::{ConcentratedLoss, PrivacyLoss};
use crate::accuracy::{NoiseAccuracy, require_alpha, smallest_integer_with_tail_below};
use crate::error::{Error, Result, require_positive};
use crate::lattice::{GridValue, Lattice};
use crate::sampling::DiscreteGaussianSampler;
use crate::sampling::discrete_gaussian::WINDOW_MISS;
use crate::shared_tables::SharedTables;

/// Grid points per `min(Δ, σ)`: at least 2^10, so that the noise's σ is at
/// least 1024 steps (the discrete Gaussian then equals the continuous one's
/// moments within 1e-12), and, where `σ ≤ 20Δ` or so, at most ~20,000
/// steps, which one alias table samples in one random word.
pub(crate) const RESOLUTION_BITS: i32 = 10;
const MAX_EPSILON: f64 = 500.0;
const MIN_DELTA: f64 = 1e-100;
/// Doubling from 1 passes the largest double within 1024 steps.
const MAX_DOUBLINGS: u32 = 1025;
/// Halving from 1 passes 1e-12 within 40 steps.
const MAX_HALVINGS: u32 = 40;
/// Each bisection step halves `log(high/low)`; from below 2^1064 to 1e-12
/// takes under 80 steps, and floating-point stalls end at adjacent doubles.
const MAX_BISECTIONS: u32 = 200;
/// The discrete Gaussian's σ raised by 0.01% steps stays within this many.
const MAX_RAISES: u32 = 200_000;
/// The largest σ of the integer noise: the sampler's realised-loss bound
/// covers draws up to 38σ, and below 2^47 those, and the tail bounds'
/// arguments, are integers below 2^53 (exact as doubles, and far from
/// `i64`/`u64` overflow).
const MAX_DISCRETE_SIGMA: f64 = 140_737_488_355_328.0; // 2^47

fn normal_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / SQRT_2)
}

/// δ of the continuous Gaussian mechanism with noise σ at ε for L2 sensitivity Δ
/// (Balle & Wang 2018, Theorem 8).
fn continuous_delta(sigma: f64, epsilon: f64, sensitivity: f64) -> f64 {
    let a = sensitivity / (2.0 * sigma);
    let b = epsilon * sigma / sensitivity;
    let second = normal_cdf(-a - b);
    let scaled = if second == 0.0 {
        0.0
    } else {
        (epsilon + second.ln()).exp()
    };
    (normal_cdf(a - b) - scaled).max(0.0)
}

/// The smallest σ for which Gaussian noise N(0, σ²) is (ε, δ)-DP for L2
/// sensitivity Δ: the analytic Gaussian mechanism, found by bisection on the
/// exact privacy profile (to a relative precision of 1e-12, rounded up).
///
/// The profile depends on σ and Δ only through `σ/Δ`, so the search runs at
/// Δ = 1 and its result is scaled: it takes the same bounded number of steps
/// for every Δ. A Δ for which σ would not be a finite positive double is
/// refused.
///
/// ```
/// use dpkit_core::mechanism::analytic_gaussian_sigma;
/// let sigma = analytic_gaussian_sigma(1.0, 1e-5, 1.0).unwrap();
/// // Below the classical √(2 ln(1.25/δ))/ε ≈ 4.84
/// assert!(sigma > 3.0 && sigma < 4.84);
/// assert!(analytic_gaussian_sigma(1.0, 1e-5, 1e308).is_err());
/// ```
pub fn analytic_gaussian_sigma(epsilon: f64, delta: f64, sensitivity: f64) -> Result<f64> {
    let (epsilon, delta) = validate_epsilon_delta(epsilon, delta)?;
    let sensitivity = require_positive("sensitivity", sensitivity)?;
    let ratio = unit_analytic_sigma(epsilon, delta)?;
    scale_rounding_up(ratio, sensitivity)
}

/// The analytic Gaussian's σ for Δ = 1. Each loop has a fixed bound: the
/// doubling stops where doubles end, the halving at 1e-12, and the geometric
/// bisection halves `log(high/low)`, which starts below 2^11.
fn unit_analytic_sigma(epsilon: f64, delta: f64) -> Result<f64> {
    // A bisection over erfc (tens of microseconds), a pure function of (ε, δ):
    // computed once per pair and shared.
    static SIGMAS: SharedTables<(u64, u64), f64> = SharedTables::with_capacity(256);
    let sigma = SIGMAS.get_or_build((epsilon.to_bits(), delta.to_bits()), || {
        search_unit_analytic_sigma(epsilon, delta)
    })?;
    Ok(*sigma)
}

fn search_unit_analytic_sigma(epsilon: f64, delta: f64) -> Result<f64> {
    let too_small = |ratio: f64| continuous_delta(ratio, epsilon, 1.0) > delta;
    let high = first_doubling_large_enough(too_small)?;
    let mut low = 1.0;
    for _ in 0..MAX_HALVINGS {
        if too_small(low) {
            break;
        }
        low /= 2.0;
    }
    Ok(bisect(low, high, too_small))
}

/// The first of `1, 2, 4, …` that is not `too_small`, or an error if none is
/// a finite double (ε so small that σ overflows).
fn first_doubling_large_enough(too_small: impl Fn(f64) -> bool) -> Result<f64> {
    let mut high = 1.0f64;
    for _ in 0..MAX_DOUBLINGS {
        if !too_small(high) {
            return Ok(high);
        }
        high *= 2.0;
    }
    Err(Error::InvalidParameter {
        name: "epsilon",
        reason: "too small for the Gaussian mechanism: σ would not be a finite number".into(),
    })
}

/// Narrows `[low, high]` to a relative width of 1e-12 around the boundary of
/// `too_small`, keeping `high` on the side that is not too small.
fn bisect(mut low: f64, mut high: f64, too_small: impl Fn(f64) -> bool) -> f64 {
    for _ in 0..MAX_BISECTIONS {
        if high / low <= 1.0 + 1e-12 {
            break;
        }
        let middle = geometric_mean(low, high);
        if too_small(middle) {
            low = middle;
        } else {
            high = middle;
        }
    }
    high
}

/// `√(low·high)`, computed without overflow when the product would overflow.
fn geometric_mean(low: f64, high: f64) -> f64 {
    let product = low * high;
    if product.is_finite() {
        product.sqrt()
    } else {
        low * (high / low).sqrt()
    }
}

/// `ratio · sensitivity` rounded up (never below the exact product), or an
/// error if that is not a finite positive double.
fn scale_rounding_up(ratio: f64, sensitivity: f64) -> Result<f64> {
    let product = ratio * sensitivity;
    // The fused multiply-add gives the sign of the rounding error exactly.
    let sigma = if ratio.mul_add(sensitivity, -product) > 0.0 {
        product.next_up()
    } else {
        product
    };
    if sigma.is_finite() && sigma > 0.0 {
        return Ok(sigma);
    }
    Err(Error::InvalidParameter {
        name: "sensitivity",
        reason: format!(
            "{sensitivity:e} is out of range for the Gaussian mechanism at this ε and δ \
             (σ = {ratio:e}·Δ is not a finite positive number)"
        ),
    })
}

fn validate_epsilon_delta(epsilon: f64, delta: f64) -> Result<(f64, f64)> {
    let epsilon = require_positive("epsilon", epsilon)?;
    if epsilon > MAX_EPSILON {
        return Err(Error::InvalidParameter {
            name: "epsilon",
            reason: format!(
                "must be at most {MAX_EPSILON} for the Gaussian mechanism, got {epsilon:e}"
            ),
        });
    }
    if !(MIN_DELTA..1.0).contains(&delta) {
        return Err(Error::InvalidParameter {
            name: "delta",
            reason: format!(
                "must lie in [{MIN_DELTA:e}, 1) for the Gaussian mechanism, got {delta:e}"
            ),
        });
    }
    Ok((epsilon, delta))
}

/// Bounds on `P(Y ≥ n)`, `n ≥ 0`, for the discrete Gaussian `Y` of parameter σ.
///
/// The weight `f(y) = e^(−y²/(2σ²))` decreases for `y ≥ 0`, so its sum from
/// `n` lies between `∫ₙ f` and `∫ₙ f + f(n)`; where it is also convex
/// (`y ≥ σ`), the midpoint and trapezoid rules tighten that to
/// `[∫ₙ f + f(n)/2, ∫_{n−½} f]`. The normaliser lies in
/// `σ√(2π)·[1, 1 + 3e^(−2π²σ²)]` (Poisson summation).
fn discrete_tail_bounds(sigma: f64, n: f64) -> (f64, f64) {
    let root_two_pi_sigma = sigma * (2.0 * PI).sqrt();
    // Φ(−x), not 1 − Φ(x): the latter rounds to 0 beyond x ≈ 8.3, which made
    // the upper bound 0 (and any σ seem to fit) for δ below about 1e-16.
    let integral_from = |start: f64| normal_cdf(-start / sigma);
    let first_term = (-(n * n) / (2.0 * sigma * sigma)).exp() / root_two_pi_sigma;
    let (lower_sum, upper_sum) = if n - 0.5 >= sigma {
        (integral_from(n) + first_term / 2.0, integral_from(n - 0.5))
    } else {
        (integral_from(n), integral_from(n) + first_term)
    };
    let normaliser_excess = 1.0 + 3.0 * (-2.0 * PI * PI * sigma * sigma).exp();
    let lower = lower_sum / normaliser_excess * (1.0 - 1e-12);
    let upper = upper_sum * (1.0 + 1e-12);
    (lower, upper.min(1.0))
}

/// Bounds on `P(Y > x)` for real `x`.
fn discrete_exceedance_bounds(sigma: f64, x: f64) -> (f64, f64) {
    if x >= 0.0 {
        discrete_tail_bounds(sigma, x.floor() + 1.0)
    } else {
        // P(Y > x) = 1 − P(Y ≤ ⌊x⌋) = 1 − P(Y ≥ −⌊x⌋)
        let (lower, upper) = discrete_tail_bounds(sigma, -x.floor());
        (1.0 - upper, 1.0 - lower)
    }
}

/// An upper bound on the δ of the discrete Gaussian with integer sensitivity
/// `d` at ε (Canonne, Kamath & Steinke 2020, Theorem 7):
/// `δ = P(Y > εσ²/d − d/2) − e^ε·P(Y > εσ²/d + d/2)`.
fn discrete_delta_upper_bound(sigma: f64, sensitivity: u64, epsilon: f64) -> f64 {
    let d = sensitivity as f64;
    let centre = epsilon * sigma * sigma / d;
    let (_, first_upper) = discrete_exceedance_bounds(sigma, centre - d / 2.0);
    let (second_lower, _) = discrete_exceedance_bounds(sigma, centre + d / 2.0);
    let scaled = if second_lower <= 0.0 {
        0.0
    } else {
        (epsilon + second_lower.ln()).exp()
    };
    (first_upper - scaled).max(0.0)
}

/// The first of `σ, 1.0001σ, 1.0001²σ, …` whose proven discrete δ at ε is at
/// most `delta`, within [`MAX_RAISES`] steps and [`MAX_DISCRETE_SIGMA`].
fn raise_until_discrete_delta_fits(
    mut sigma: f64,
    sensitivity: u64,
    epsilon: f64,
    delta: f64,
) -> Result<f64> {
    for _ in 0..MAX_RAISES {
        require_discrete_sigma(sigma)?;
        if discrete_delta_upper_bound(sigma, sensitivity, epsilon) <= delta {
            return Ok(sigma);
        }
        sigma *= 1.0001;
    }
    Err(Error::InvalidParameter {
        name: "delta",
        reason: "the discrete Gaussian could not be calibrated".into(),
    })
}

/// Refuses a σ the exact integer sampler cannot serve (see [`MAX_DISCRETE_SIGMA`]).
fn require_discrete_sigma(sigma: f64) -> Result<()> {
    if sigma <= MAX_DISCRETE_SIGMA {
        return Ok(());
    }
    Err(Error::InvalidParameter {
        name: "sigma",
        reason: format!(
            "the noise would need σ = {sigma:e} grid steps, above the exact sampler's limit \
             of 2^47; raise ε or δ, or lower the sensitivity"
        ),
    })
}

/// A discrete Gaussian calibrated for integer sensitivity `d`.
#[derive(Debug, Clone)]
struct CalibratedDiscreteGaussian {
    epsilon: f64,
    delta: f64,
    sampler: DiscreteGaussianSampler,
}

impl CalibratedDiscreteGaussian {
    /// The calibration for (ε, δ, Δ): a pure function of them, which takes
    /// up to a few hundred microseconds of tail bounds, so computed once per
    /// triple and shared.
    fn new(epsilon: f64, delta: f64, sensitivity: u64) -> Result<Self> {
        static CALIBRATIONS: SharedTables<(u64, u64, u64), CalibratedDiscreteGaussian> =
            SharedTables::with_capacity(256);
        let key = (epsilon.to_bits(), delta.to_bits(), sensitivity);
        let calibrated =
            CALIBRATIONS.get_or_build(key, || Self::calibrate(epsilon, delta, sensitivity))?;
        Ok(Self::clone(&calibrated))
    }

    /// The σ starts at the analytic Gaussian's and grows by 0.01% steps until
    /// the proven discrete δ fits. The realised sampler's relative deviation η
    /// makes it (ε_in + 2η, e^η·δ_in + (1 + e^(ε_in+η))·τ)-DP, τ the chance of
    /// a draw outside its window ([`WINDOW_MISS`]); the inner targets leave
    /// room, and a δ too small to hold that last term is refused.
    fn calibrate(epsilon: f64, delta: f64, sensitivity: u64) -> Result<Self> {
        let (epsilon, delta) = validate_epsilon_delta(epsilon, delta)?;
        if (1.0 + epsilon.exp()) * WINDOW_MISS * 2.0 > delta * 1e-6 {
            return Err(Error::InvalidParameter {
                name: "delta",
                reason: format!("{delta:e} is too small for the Gaussian at ε = {epsilon}"),
            });
        }
        let inner_delta = delta * (1.0 - 1e-6);
        let mut inner_epsilon = epsilon * (1.0 - CALIBRATION_MARGIN);
        // Not `analytic_gaussian_sigma`: the inner δ may lie just below MIN_DELTA.
        let start = unit_analytic_sigma(inner_epsilon, inner_delta)?;
        let mut sigma = scale_rounding_up(start, sensitivity as f64)?;
        for _attempt in 0..3 {
            if inner_epsilon <= 0.0 {
                break;
            }
            sigma =
                raise_until_discrete_delta_fits(sigma, sensitivity, inner_epsilon, inner_delta)?;
            let sampler = DiscreteGaussianSampler::new(sigma)?;
            let spread = sampler.log_spread_bound();
            if inner_epsilon + 2.0 * spread <= epsilon && spread < 1e-6 {
                return Ok(Self {
                    epsilon,
                    delta,
                    sampler,
                });
            }
            inner_epsilon = epsilon * (1.0 - CALIBRATION_MARGIN) - 2.0 * spread;
        }
        Err(Error::InvalidParameter {
            name: "epsilon",
            reason: "cannot be met exactly at these parameters".into(),
        })
    }

    fn privacy(&self) -> PrivacyLoss {
        PrivacyLoss::approximate(self.epsilon, self.delta).expect("validated at construction")
    }

    fn sigma(&self) -> f64 {
        self.sampler.sigma()
    }

    /// A proven upper bound on `P(|Y| > t)`.
    fn tail_upper_bound(&self, t: u64) -> f64 {
        (2.0 * discrete_tail_bounds(self.sigma(), t as f64 + 1.0).1).min(1.0)
    }

    fn half_width_steps(&self, alpha: f64) -> Result<u64> {
        let alpha = require_alpha(alpha)?;
        Ok(smallest_integer_with_tail_below(alpha, |t| {
            self.tail_upper_bound(t)
        }))
    }
}

/// The Gaussian mechanism for real values: (ε, δ)-DP for L2 sensitivity Δ.
///
/// # Privacy
/// σ comes from the analytic Gaussian mechanism. The value is released on a
/// grid `g = 2^k ≤ min(Δ, σ)/1024` with discrete Gaussian noise of parameter
/// `σ/g` (raised until the proven discrete δ fits), so no floating-point
/// artefact leaks the input. The declared (ε, δ) holds with the sampler's
/// measured deviation included. `privatize_slice` releases each value as its
/// own scalar query, each at the full (ε, δ).
///
/// # Accuracy
/// `E|X| = σ√(2/π)` and `Var = σ²` of the noise (the discrete Gaussian's
/// moments equal these within 1e-12 at this resolution); the confidence
/// half-width comes from a proven tail bound plus `g/2` for rounding.
///
/// ```
/// use dpkit_core::mechanism::{Gaussian, RealMechanism};
/// let gaussian = Gaussian::new(1.0, 1e-6, 1.0).unwrap();
/// assert!(gaussian.sigma() > 4.0 && gaussian.sigma() < 5.0);
/// let _released = gaussian.privatize(10.0).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Gaussian {
    analytic_sigma: f64,
    lattice: Lattice,
    /// Δ in grid steps: how far apart two neighbours' values can round.
    index_sensitivity: u64,
    noise: CalibratedDiscreteGaussian,
}

impl Gaussian {
    /// (ε, δ)-DP Gaussian noise for a query of L2 sensitivity `l2_sensitivity`.
    pub fn new(epsilon: f64, delta: f64, l2_sensitivity: f64) -> Result<Self> {
        let analytic_sigma = analytic_gaussian_sigma(epsilon, delta, l2_sensitivity)?;
        let lattice = Lattice::finer_than(l2_sensitivity.min(analytic_sigma), RESOLUTION_BITS)?;
        let index_sensitivity = lattice.index_sensitivity(l2_sensitivity);
        let noise = CalibratedDiscreteGaussian::new(epsilon, delta, index_sensitivity)?;
        Ok(Self {
            analytic_sigma,
            lattice,
            index_sensitivity,
            noise,
        })
    }

    /// Its loss in concentrated form for a measurement of `draws` values
    /// whose move has L2 norm at most the Δ it was built for: the discrete
    /// Gaussian's on the grid, in grid steps (see
    /// [`DiscreteGaussianSampler::concentrated`]).
    ///
    /// ```
    /// use dpkit_core::mechanism::Gaussian;
    /// let gaussian = Gaussian::new(0.5, 1e-6, 1.0).unwrap();
    /// let rho = gaussian.concentrated(1).unwrap().rho();
    /// let sigma = gaussian.sigma();
    /// assert!((rho - 1.0 / (2.0 * sigma * sigma)).abs() < 1e-3 * rho);
    /// ```
    pub fn concentrated(&self, draws: u64) -> Result<ConcentratedLoss> {
        (self.noise.sampler).concentrated(self.index_sensitivity, draws)
    }

    /// The σ of the noise actually added (in the value's units).
    pub fn sigma(&self) -> f64 {
        self.noise.sigma() * self.lattice.spacing()
    }

    /// The continuous analytic-Gaussian σ for the same (ε, δ, Δ).
    pub fn analytic_sigma(&self) -> f64 {
        self.analytic_sigma
    }

    /// The output grid.
    pub fn lattice(&self) -> Lattice {
        self.lattice
    }
}

impl RealMechanism for Gaussian {
    fn privatize_with_rng<R: CryptoRng + ?Sized>(&self, value: f64, rng: &mut R) -> Result<f64> {
        let index = self.lattice.index_of(value)?;
        Ok(self
            .lattice
            .value_at(index.saturating_add(self.noise.sampler.sample(rng))))
    }

    fn privatize_exact_with_rng<R: CryptoRng + ?Sized>(
        &self,
        value: GridValue,
        rng: &mut R,
    ) -> Result<f64> {
        release_exact_on_lattice(&self.lattice, value, self.noise.sampler.sample(rng))
    }

    fn privatize_slice_with_rng<R: CryptoRng + ?Sized>(
        &self,
        values: &mut [f64],
        rng: &mut R,
    ) -> Result<()> {
        release_slice_on_lattice(&self.lattice, values, |block| {
            self.noise.sampler.sample_into(block, rng)
        })
    }

    fn privacy(&self) -> PrivacyLoss {
        self.noise.privacy()
    }
}

impl NoiseAccuracy for Gaussian {
    fn expected_absolute_error(&self) -> f64 {
        self.sigma() * (2.0 / PI).sqrt()
    }

    fn variance(&self) -> f64 {
        self.sigma().powi(2)
    }

    fn confidence_half_width(&self, alpha: f64) -> Result<f64> {
        Ok((self.noise.half_width_steps(alpha)? as f64 + 0.5) * self.lattice.spacing())
    }
}

/// The discrete Gaussian mechanism for integer queries: (ε, δ)-DP for integer
/// L2 sensitivity Δ, σ calibrated exactly for the discrete distribution.
/// Its loss in concentrated form is [`DiscreteGaussian::concentrated`].
///
/// ```
/// use dpkit_core::mechanism::{DiscreteGaussian, IntegerMechanism};
/// let counts = DiscreteGaussian::new(0.5, 1e-6, 1).unwrap();
/// let _noisy = counts.privatize(500).unwrap();
/// assert!(counts.sigma() > 8.0);
/// ```
#[derive(Debug, Clone)]
pub struct DiscreteGaussian {
    sensitivity: u64,
    noise: CalibratedDiscreteGaussian,
}

impl DiscreteGaussian {
    /// (ε, δ)-DP discrete Gaussian noise for integer sensitivity ≥ 1.
    pub fn new(epsilon: f64, delta: f64, l2_sensitivity: u64) -> Result<Self> {
        require_integer_sensitivity(l2_sensitivity)?;
        Ok(Self {
            sensitivity: l2_sensitivity,
            noise: CalibratedDiscreteGaussian::new(epsilon, delta, l2_sensitivity)?,
        })
    }

    /// Its loss in concentrated form for a measurement of `draws` values
    /// whose move has L2 norm at most its Δ (see
    /// [`DiscreteGaussianSampler::concentrated`]).
    ///
    /// ```
    /// use dpkit_core::mechanism::DiscreteGaussian;
    /// let counts = DiscreteGaussian::new(0.5, 1e-6, 1).unwrap();
    /// let loss = counts.concentrated(3).unwrap();
    /// let ideal = 1.0 / (2.0 * counts.sigma() * counts.sigma());
    /// assert!(loss.rho() >= ideal && loss.rho() < ideal * (1.0 + 1e-15));
    /// assert!(loss.spread() < 1e-8 && loss.tail() > 0.0);
    /// ```
    pub fn concentrated(&self, draws: u64) -> Result<ConcentratedLoss> {
        (self.noise.sampler).concentrated(self.sensitivity, draws)
    }

    /// The parameter σ.
    pub fn sigma(&self) -> f64 {
        self.noise.sigma()
    }
}

impl IntegerMechanism for DiscreteGaussian {
    fn privatize_with_rng<R: CryptoRng + ?Sized>(&self, value: i64, rng: &mut R) -> i64 {
        saturating_release(value, self.noise.sampler.sample(rng))
    }

    fn privatize_slice_with_rng<R: CryptoRng + ?Sized>(&self, values: &mut [i64], rng: &mut R) {
        self.noise.sampler.add_into(values, rng);
    }

    fn privacy(&self) -> PrivacyLoss {
        self.noise.privacy()
    }
}

impl NoiseAccuracy for DiscreteGaussian {
    fn expected_absolute_error(&self) -> f64 {
        self.sigma() * (2.0 / PI).sqrt()
    }

    fn variance(&self) -> f64 {
        self.sigma().powi(2)
    }

    fn confidence_half_width(&self, alpha: f64) -> Result<f64> {
        Ok(self.noise.half_width_steps(alpha)? as f64)
    }
}

/// Discrete Gaussian noise for integer-valued vector queries (counts,
/// histograms, marginals), calibrated to a zCDP budget ρ rather than to
/// (ε, δ): σ is the smallest double with `Δ²/(2σ²) ≤ ρ` as
/// [`ConcentratedLoss::gaussian`] rounds it.
///
/// # Privacy
/// Adding independent discrete Gaussians of parameter σ to each coordinate
/// of an integer vector whose move between neighbours has L2 norm at most
/// Δ is Δ²/(2σ²)-zCDP (Canonne, Kamath & Steinke 2020, Proposition 5 and
/// its sum over coordinates; see
/// [`DiscreteGaussianSampler::concentrated_l2`]). The realised sampler's
/// distance from the ideal law is counted apart, as `spread` and `tail`
/// of [`ConcentratedDiscreteGaussian::concentrated`].
///
/// ```
/// use dpkit_core::mechanism::ConcentratedDiscreteGaussian;
/// use dpkit_core::rng::InsecureSeededRng;
/// let noise = ConcentratedDiscreteGaussian::new(0.01, 1.0).unwrap();
/// assert!((noise.sigma() - (1.0f64 / 0.02).sqrt()).abs() < 1e-9);
/// let loss = noise.concentrated(100).unwrap();
/// assert!(loss.rho() <= 0.01 && loss.rho() > 0.01 * (1.0 - 1e-12));
/// let mut counts = vec![500i64; 100];
/// noise.add_into(&mut counts, &mut InsecureSeededRng::from_seed_for_testing(1));
/// ```
#[derive(Debug, Clone)]
pub struct ConcentratedDiscreteGaussian {
    l2_sensitivity: f64,
    sampler: DiscreteGaussianSampler,
}

impl ConcentratedDiscreteGaussian {
    /// Noise for a query of L2 sensitivity `l2_sensitivity` (> 0) at
    /// `rho` (> 0) for the whole vector.
    pub fn new(rho: f64, l2_sensitivity: f64) -> Result<Self> {
        let rho = require_positive("rho", rho)?;
        let l2_sensitivity = require_positive("l2 sensitivity", l2_sensitivity)?;
        let mut sigma = l2_sensitivity / (2.0 * rho).sqrt();
        // The loss is computed with upward rounding; raise σ by ulps until
        // it fits (a handful at most, as each step moves ρ by about 2 ulps).
        for _ in 0..64 {
            if !(sigma.is_finite() && sigma > 0.0) {
                break;
            }
            if ConcentratedLoss::gaussian(l2_sensitivity, sigma, 0.0, 0.0)?.rho() <= rho {
                return Ok(Self {
                    l2_sensitivity,
                    sampler: DiscreteGaussianSampler::new(sigma)?,
                });
            }
            sigma = sigma.next_up();
        }
        Err(Error::InvalidParameter {
            name: "rho",
            reason: format!("no finite σ gives ρ = {rho:e} for sensitivity {l2_sensitivity:e}"),
        })
    }

    /// The parameter σ (the standard deviation within 1e-12 relative for
    /// σ ≥ 1).
    pub fn sigma(&self) -> f64 {
        self.sampler.sigma()
    }

    /// The loss of one release of a vector of `draws` values.
    pub fn concentrated(&self, draws: u64) -> Result<ConcentratedLoss> {
        self.sampler.concentrated_l2(self.l2_sensitivity, draws)
    }

    /// Adds an independent draw to each value (saturating).
    pub fn add_into<R: CryptoRng + ?Sized>(&self, values: &mut [i64], rng: &mut R) {
        self.sampler.add_into(values, rng);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analytic_sigma_meets_delta_and_is_tight() {
        for &(eps, delta) in &[(0.1, 1e-5), (1.0, 1e-6), (4.0, 1e-9)] {
            let sigma = analytic_gaussian_sigma(eps, delta, 1.0).unwrap();
            assert!(continuous_delta(sigma, eps, 1.0) <= delta);
            assert!(continuous_delta(sigma * (1.0 - 1e-6), eps, 1.0) > delta);
        }
    }

    #[test]
    fn discrete_delta_bound_is_close_to_continuous_for_large_sigma() {
        let sigma = 5000.0;
        let cont = continuous_delta(sigma, 1.0, 1024.0);
        let disc = discrete_delta_upper_bound(sigma, 1024, 1.0);
        assert!(
            disc >= cont * 0.999 && disc <= cont * 1.001,
            "{cont} vs {disc}"
        );
    }

    #[test]
    fn discrete_tail_bounds_bracket_the_exact_sum() {
        let sigma: f64 = 2.5;
        let weight = |y: f64| (-(y * y) / (2.0 * sigma * sigma)).exp();
        let normaliser: f64 = (-200..=200).map(|y| weight(y as f64)).sum();
        for n in 0..12 {
            let exact: f64 = (n..=200).map(|y| weight(y as f64)).sum::<f64>() / normaliser;
            let (lower, upper) = discrete_tail_bounds(sigma, n as f64);
            assert!(
                lower <= exact && exact <= upper,
                "n={n}: {lower} {exact} {upper}"
            );
        }
    }

    #[test]
    fn discrete_tail_bounds_hold_far_in_the_tail() {
        // Beyond about 8.3σ, 1 − Φ(x) rounds to 0; the bounds must not.
        let sigma: f64 = 2.5;
        let weight = |y: f64| (-(y * y) / (2.0 * sigma * sigma)).exp();
        let normaliser: f64 = (-200..=200).map(|y| weight(y as f64)).sum();
        for n in [21, 25, 30, 40] {
            let exact: f64 = (n..=200).map(|y| weight(y as f64)).sum::<f64>() / normaliser;
            let (lower, upper) = discrete_tail_bounds(sigma, n as f64);
            assert!(
                lower <= exact && exact <= upper,
                "n={n}: {lower:e} {exact:e} {upper:e}"
            );
        }
    }

    #[test]
    fn concentrated_noise_meets_its_rho_and_no_smaller_sigma_does() {
        for (rho, sensitivity) in [(1e-4, 1.0), (0.0043, 2.0f64.sqrt()), (3.0, 7.0)] {
            let noise = ConcentratedDiscreteGaussian::new(rho, sensitivity).unwrap();
            assert!(noise.concentrated(1).unwrap().rho() <= rho);
            let smaller = noise.sigma() * (1.0 - 1e-9);
            let loss = ConcentratedLoss::gaussian(sensitivity, smaller, 0.0, 0.0).unwrap();
            assert!(loss.rho() > rho, "{rho} {sensitivity}");
        }
        assert!(ConcentratedDiscreteGaussian::new(0.0, 1.0).is_err());
        assert!(ConcentratedDiscreteGaussian::new(1.0, -1.0).is_err());
    }

    #[test]
    fn analytic_sigma_is_proportional_to_the_sensitivity() {
        let unit = analytic_gaussian_sigma(1.0, 1e-6, 1.0).unwrap();
        for scale in [1e-280, 1e-12, 3.0, 1e12, 1e300] {
            let sigma = analytic_gaussian_sigma(1.0, 1e-6, scale).unwrap();
            assert!(sigma >= unit * scale && sigma <= unit * scale * (1.0 + 1e-15));
        }
    }
}
