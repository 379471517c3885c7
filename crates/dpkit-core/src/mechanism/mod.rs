//! The noise mechanisms.
//!
//! | mechanism | input | guarantee | pick it when |
//! |---|---|---|---|
//! | [`Laplace`] | real | ε-DP | the classic; error bars everyone knows |
//! | [`Staircase`] | real | ε-DP | the least absolute (or squared) error for a real value |
//! | [`TwoSidedGeometric`] | integer | ε-DP | counts: the least error of all integer noises |
//! | [`DiscreteStaircase`] | integer | ε-DP | integer queries with Δ > 1 |
//! | [`Gaussian`] / [`DiscreteGaussian`] | real / integer | (ε, δ)-DP | many queries, L2 sensitivity |
//! | [`ConcentratedDiscreteGaussian`] | integer vector | ρ-zCDP | marginals and histograms measured under a zCDP budget |
//! | [`BinaryRandomizedResponse`] / [`KaryRandomizedResponse`] | bit / category | ε-DP | local DP: each person randomises their own answer |
//! | [`ExponentialMechanism`] / [`ReportNoisyMax`] | candidate set | ε-DP | choosing the best of finitely many options |
//! | [`QuantileSelection`] | counts over a grid | ε-DP | a median or percentile over bounded values |
//!
//! Every constructor validates its parameters and returns a typed error;
//! every mechanism reports the privacy it provides through `privacy()`.
//! The additive ones share [`RealMechanism`] or [`IntegerMechanism`] and
//! [`crate::accuracy::NoiseAccuracy`].

use rand_core::CryptoRng;

use crate::accounting::PrivacyLoss;
use crate::error::{Error, Result};
use crate::lattice::GridValue;
use crate::rng::with_thread_secure_rng;

mod catalogue;
mod exponential;
mod gaussian;
mod laplace;
mod quantile;
mod randomized_response;
mod release_time;
mod report_noisy_max;
mod staircase;
mod staircase_noise;
mod two_sided_geometric;

pub use catalogue::{AdditiveNoise, Input, MechanismKind};
pub use exponential::ExponentialMechanism;
pub use gaussian::{
    ConcentratedDiscreteGaussian, DiscreteGaussian, Gaussian, analytic_gaussian_sigma,
};
pub use laplace::Laplace;
pub use quantile::{EndChoice, QuantileSelection};
pub use randomized_response::{BinaryRandomizedResponse, KaryRandomizedResponse};
pub use release_time::ReleaseTime;
pub use report_noisy_max::ReportNoisyMax;
pub use staircase::{DiscreteStaircase, Staircase, StaircaseGamma};
pub use two_sided_geometric::TwoSidedGeometric;

/// Mechanisms calibrate their noise to `ε·(1 − 10⁻⁶)` so that the
/// proven bound on the realised privacy loss, which includes the samplers'
/// measured deviations from their ideal distributions, stays at or below ε.
pub(crate) const CALIBRATION_MARGIN: f64 = 1e-6;

/// Confirms that a proven realised-loss bound fits the declared ε.
pub(crate) fn require_within_declared(realised_bound: f64, epsilon: f64) -> Result<()> {
    if realised_bound <= epsilon {
        Ok(())
    } else {
        Err(Error::InvalidParameter {
            name: "epsilon",
            reason: format!(
                "cannot be met exactly at these parameters (proven bound {realised_bound} exceeds {epsilon})"
            ),
        })
    }
}

/// Integer mechanisms need an integer sensitivity of at least 1.
pub(crate) fn require_integer_sensitivity(sensitivity: u64) -> Result<()> {
    if sensitivity == 0 {
        return Err(Error::InvalidParameter {
            name: "sensitivity",
            reason: "must be an integer ≥ 1, got 0".into(),
        });
    }
    Ok(())
}

/// Values released per block by the batch paths (the noise of a block is
/// drawn in one tight loop, then added).
const BLOCK: usize = 256;

/// A mechanism that releases a real value with additive noise.
pub trait RealMechanism {
    /// Releases `value` using `rng`. Fails on a non-finite or out-of-range value.
    fn privatize_with_rng<R: CryptoRng + ?Sized>(&self, value: f64, rng: &mut R) -> Result<f64>;

    /// Replaces every value in `values` by its private release, each at this
    /// mechanism's privacy cost; validates all values before changing any.
    fn privatize_slice_with_rng<R: CryptoRng + ?Sized>(
        &self,
        values: &mut [f64],
        rng: &mut R,
    ) -> Result<()>;

    /// Releases the exact value `value` (a sum of grid steps of any size):
    /// rounded to this mechanism's grid in integers, the noise added in 128
    /// bits, and the result rounded once to the nearest double. The privacy
    /// argument is the one above, without its range limit: see
    /// [`crate::lattice::Lattice::index_of_exact`].
    fn privatize_exact_with_rng<R: CryptoRng + ?Sized>(
        &self,
        value: GridValue,
        rng: &mut R,
    ) -> Result<f64>;

    /// The guarantee of one release.
    fn privacy(&self) -> PrivacyLoss;

    /// Releases `value` with this thread's OS-seeded [`crate::rng::SecureRng`].
    fn privatize(&self, value: f64) -> Result<f64> {
        with_thread_secure_rng(|rng| self.privatize_with_rng(value, rng))?
    }

    /// [`RealMechanism::privatize_slice_with_rng`] with this thread's secure generator.
    fn privatize_slice(&self, values: &mut [f64]) -> Result<()> {
        with_thread_secure_rng(|rng| self.privatize_slice_with_rng(values, rng))?
    }
}

/// A mechanism that releases an integer with additive integer noise.
pub trait IntegerMechanism {
    /// Releases `value` using `rng` (saturating at the ends of `i64`).
    fn privatize_with_rng<R: CryptoRng + ?Sized>(&self, value: i64, rng: &mut R) -> i64;

    /// Replaces every value in `values` by its private release, each at this
    /// mechanism's privacy cost.
    fn privatize_slice_with_rng<R: CryptoRng + ?Sized>(&self, values: &mut [i64], rng: &mut R) {
        for value in values {
            *value = self.privatize_with_rng(*value, rng);
        }
    }

    /// Releases the exact value `value` of any size: rounded to the nearest
    /// whole number (ties upwards, which is translation invariant, so two
    /// values `Δ` apart land at most `⌈Δ⌉` apart, the move the noise is
    /// calibrated for), the noise added in 128 bits, and the result rounded
    /// once to the nearest double (post-processing).
    fn privatize_exact_with_rng<R: CryptoRng + ?Sized>(
        &self,
        value: GridValue,
        rng: &mut R,
    ) -> Result<f64> {
        let whole = value
            .steps_on(0)
            .filter(|w| w.unsigned_abs() < 1 << 120)
            .ok_or(Error::ValueOutOfRange)?;
        // The release of 0 is the noise alone.
        let noise = self.privatize_with_rng(0, rng);
        Ok(GridValue::whole(whole + i128::from(noise)).to_f64())
    }

    /// The guarantee of one release.
    fn privacy(&self) -> PrivacyLoss;

    /// Releases `value` with this thread's OS-seeded [`crate::rng::SecureRng`].
    fn privatize(&self, value: i64) -> Result<i64> {
        with_thread_secure_rng(|rng| self.privatize_with_rng(value, rng))
    }

    /// [`IntegerMechanism::privatize_slice_with_rng`] with this thread's secure generator.
    fn privatize_slice(&self, values: &mut [i64]) -> Result<()> {
        with_thread_secure_rng(|rng| self.privatize_slice_with_rng(values, rng))
    }
}

/// Adds integer noise to an integer, saturating (a fixed post-processing).
#[inline]
pub(crate) fn saturating_release(value: i64, noise: i64) -> i64 {
    value.saturating_add(noise)
}

/// Checks every value of a slice first (so a bad value changes nothing), then
/// replaces each by its grid value plus its noise in grid steps, saturating
/// at the ends of `i64` (a fixed function of the exact sum, so
/// post-processing). `fill_noise` fills a block of independent draws; the
/// values are released a block at a time.
pub(crate) fn release_slice_on_lattice(
    lattice: &crate::lattice::Lattice,
    values: &mut [f64],
    mut fill_noise: impl FnMut(&mut [i64]),
) -> Result<()> {
    lattice.check_all(values)?;
    let mut noise = [0i64; BLOCK];
    for chunk in values.chunks_mut(BLOCK) {
        let noise = &mut noise[..chunk.len()];
        fill_noise(noise);
        for (value, &steps) in chunk.iter_mut().zip(noise.iter()) {
            let index = lattice.index_of_checked(*value);
            *value = lattice.value_at(index.saturating_add(steps));
        }
    }
    Ok(())
}

/// The exact value `value` released on `lattice` with `noise` grid steps.
#[inline]
pub(crate) fn release_exact_on_lattice(
    lattice: &crate::lattice::Lattice,
    value: GridValue,
    noise: i64,
) -> Result<f64> {
    let index = lattice.index_of_exact(value)?;
    Ok(lattice.value_at_exact(index + i128::from(noise)))
}

/// A block filler for [`release_slice_on_lattice`] from a one-draw sampler.
pub(crate) fn one_by_one(mut draw: impl FnMut() -> i64) -> impl FnMut(&mut [i64]) {
    move |block| block.iter_mut().for_each(|steps| *steps = draw())
}
