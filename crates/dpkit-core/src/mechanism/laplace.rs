//! The Laplace mechanism, released on a grid with exact discrete-Laplace noise.

use rand_core::CryptoRng;

use super::{
    CALIBRATION_MARGIN, RealMechanism, release_exact_on_lattice, release_slice_on_lattice,
    require_within_declared,
};
use crate::accounting::PrivacyLoss;
use crate::accuracy::{NoiseAccuracy, require_alpha, smallest_integer_with_tail_below};
use crate::error::{Result, require_positive};
use crate::lattice::{GridValue, Lattice};
use crate::sampling::TwoSidedGeometricSampler;

/// Grid points per `min(Δ, λ)`: at least 2^10 (rounding moves a value by at
/// most λ/2048), few enough that one alias table of at most 2^14 cells covers the noise's body.
const RESOLUTION_BITS: i32 = 10;

/// The Laplace mechanism: density `e^(−|x|/λ)/(2λ)`, `λ = Δ/ε` (reference §Laplace).
///
/// # Privacy
/// Exactly ε-DP, floating point included. The true value is rounded to a grid
/// of spacing `g = 2^k ≤ min(Δ, λ)/1024` and moved by `g·Z`, where `Z` is a
/// two-sided geometric with `P(Z = z) ∝ e^(−s|z|)` and `s = ε(1 − 10⁻⁶)/⌈Δ/g⌉`:
/// the discrete Laplace, which on this grid is the Laplace distribution
/// sampled at grid points. Outputs are grid points for every input, and every
/// grid point is reachable from every input. The realised loss, including the
/// sampler's measured deviation from the ideal (≈1e-13), is proven ≤ ε at
/// construction ([`crate::sampling::GeometricSampler::log_ratio_bound`]).
///
/// # Accuracy
/// The noise's `E|X|` and variance are those of the discrete Laplace on the
/// grid (within 0.1% of `λ` and `2λ²`); grid rounding adds at most `g/2`.
///
/// ```
/// use dpkit_core::mechanism::{Laplace, RealMechanism};
/// let laplace = Laplace::new(0.5, 1.0).unwrap();
/// let released = laplace.privatize(100.0).unwrap();
/// assert!(released.is_finite());
/// assert_eq!(laplace.privacy().epsilon(), 0.5);
/// ```
#[derive(Debug, Clone)]
pub struct Laplace {
    epsilon: f64,
    sensitivity: f64,
    lattice: Lattice,
    index_sensitivity: u64,
    noise: TwoSidedGeometricSampler,
}

impl Laplace {
    /// Grid points per Δ (at least `2^GRID_BITS`): releases round to this grid.
    pub const GRID_BITS: i32 = RESOLUTION_BITS;

    /// ε-DP Laplace noise for a query of L1 sensitivity `sensitivity`.
    pub fn new(epsilon: f64, sensitivity: f64) -> Result<Self> {
        let epsilon = require_positive("epsilon", epsilon)?;
        let sensitivity = require_positive("sensitivity", sensitivity)?;
        let scale = sensitivity / epsilon;
        let lattice = Lattice::finer_than(sensitivity.min(scale), RESOLUTION_BITS)?;
        let index_sensitivity = lattice.index_sensitivity(sensitivity);
        let noise = TwoSidedGeometricSampler::new(
            epsilon * (1.0 - CALIBRATION_MARGIN) / index_sensitivity as f64,
        )?;
        require_within_declared(noise.log_ratio_bound(index_sensitivity), epsilon)?;
        Ok(Self {
            epsilon,
            sensitivity,
            lattice,
            index_sensitivity,
            noise,
        })
    }

    /// The nominal scale `λ = Δ/ε`.
    pub fn scale(&self) -> f64 {
        self.sensitivity / self.epsilon
    }

    /// The output grid.
    pub fn lattice(&self) -> Lattice {
        self.lattice
    }

    /// The noise in grid steps, with its closed forms.
    pub fn noise(&self) -> &TwoSidedGeometricSampler {
        &self.noise
    }

    /// The proven upper bound on the realised privacy loss (≤ ε).
    pub fn realised_epsilon_bound(&self) -> f64 {
        self.noise.log_ratio_bound(self.index_sensitivity)
    }
}

impl RealMechanism for Laplace {
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
        release_slice_on_lattice(&self.lattice, values, |block| {
            self.noise.sample_into(block, rng)
        })
    }

    fn privacy(&self) -> PrivacyLoss {
        PrivacyLoss::pure(self.epsilon).expect("validated at construction")
    }
}

impl NoiseAccuracy for Laplace {
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
