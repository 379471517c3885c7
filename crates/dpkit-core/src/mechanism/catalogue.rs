//! The one list of dpkit's mechanisms: their names, what they take, whether
//! they need δ and how their privacy loss grows with the move of their
//! input. The command line, the query path and the auditor all read it.
//!
//! [`AdditiveNoise`] builds any additive mechanism of the list from
//! (ε, δ, Δ), so that callers do not each write out the same match.

use rand_core::CryptoRng;

use super::{
    DiscreteGaussian, DiscreteStaircase, Gaussian, IntegerMechanism, Laplace, RealMechanism,
    Staircase, StaircaseGamma, TwoSidedGeometric,
};
use crate::accounting::ConcentratedLoss;
use crate::accuracy::NoiseAccuracy;
use crate::error::{Error, Result};
use crate::lattice::GridValue;
use crate::sensitivity::LossGrowth;

/// What a mechanism releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A real value, with additive noise.
    Real,
    /// An integer, with additive integer noise.
    Integer,
    /// One bit (local randomisation).
    Bit,
    /// One of k categories (local randomisation).
    Category,
    /// The index of the best of finitely many candidates.
    Candidates,
}

/// Every mechanism dpkit offers.
///
/// ```
/// use dpkit_core::mechanism::MechanismKind;
/// assert!(MechanismKind::ALL.iter().all(|m| MechanismKind::from_name(m.name()) == Some(*m)));
/// assert!(MechanismKind::Gaussian.needs_delta());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MechanismKind {
    /// Laplace noise on real values.
    Laplace,
    /// The staircase with the L1-optimal γ, on real values.
    Staircase,
    /// The staircase with the L2-optimal γ, on real values.
    StaircaseL2,
    /// The two-sided geometric, on integers.
    Geometric,
    /// The discrete staircase, on integers.
    DiscreteStaircase,
    /// The analytic Gaussian on real values (needs δ).
    Gaussian,
    /// The discrete Gaussian on integers (needs δ).
    DiscreteGaussian,
    /// Randomized response on one bit.
    BinaryRandomizedResponse,
    /// Randomized response on k categories.
    KaryRandomizedResponse,
    /// The exponential mechanism.
    Exponential,
    /// Report noisy max.
    ReportNoisyMax,
}

impl MechanismKind {
    /// All of them, in the order they are listed to users.
    pub const ALL: [Self; 11] = [
        Self::Laplace,
        Self::Staircase,
        Self::StaircaseL2,
        Self::Geometric,
        Self::DiscreteStaircase,
        Self::Gaussian,
        Self::DiscreteGaussian,
        Self::BinaryRandomizedResponse,
        Self::KaryRandomizedResponse,
        Self::Exponential,
        Self::ReportNoisyMax,
    ];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Laplace => "laplace",
            Self::Staircase => "staircase",
            Self::StaircaseL2 => "staircase-l2",
            Self::Geometric => "geometric",
            Self::DiscreteStaircase => "discrete-staircase",
            Self::Gaussian => "gaussian",
            Self::DiscreteGaussian => "discrete-gaussian",
            Self::BinaryRandomizedResponse => "binary-randomized-response",
            Self::KaryRandomizedResponse => "kary-randomized-response",
            Self::Exponential => "exponential",
            Self::ReportNoisyMax => "report-noisy-max",
        }
    }

    /// The mechanism called `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// When to pick it, in one line (the command line's help).
    pub fn summary(self) -> &'static str {
        match self {
            Self::Laplace => {
                "Real values, ε-DP. The classic: E|X| = Δ/ε. Pick it for comparability."
            }
            Self::Staircase => {
                "Real values, ε-DP, the least absolute error of any additive noise \
                 (E|X| = Δ/(2 sinh(ε/2))): 5% better than Laplace at ε ≈ 1, 2× at ε ≈ 4.4."
            }
            Self::StaircaseL2 => "Real values, ε-DP, the staircase with the least variance.",
            Self::Geometric => {
                "Integers (counts), ε-DP: the two-sided geometric, optimal for counts."
            }
            Self::DiscreteStaircase => {
                "Integers with sensitivity Δ > 1, ε-DP: the discrete staircase."
            }
            Self::Gaussian => {
                "Real values, (ε, δ)-DP over L2 sensitivity: for many queries at once."
            }
            Self::DiscreteGaussian => "Integers, (ε, δ)-DP: the discrete Gaussian.",
            Self::BinaryRandomizedResponse => {
                "One bit, ε-DP, randomised by each person (local DP)."
            }
            Self::KaryRandomizedResponse => {
                "One of k categories, ε-DP, randomised by each person (local DP)."
            }
            Self::Exponential => "The best of finitely many candidates by a utility, ε-DP.",
            Self::ReportNoisyMax => "The index of the largest of several counts, ε-DP.",
        }
    }

    /// What it releases.
    pub fn input(self) -> Input {
        match self {
            Self::Laplace | Self::Staircase | Self::StaircaseL2 | Self::Gaussian => Input::Real,
            Self::Geometric | Self::DiscreteStaircase | Self::DiscreteGaussian => Input::Integer,
            Self::BinaryRandomizedResponse => Input::Bit,
            Self::KaryRandomizedResponse => Input::Category,
            Self::Exponential | Self::ReportNoisyMax => Input::Candidates,
        }
    }

    /// Whether it needs δ > 0.
    pub fn needs_delta(self) -> bool {
        matches!(self, Self::Gaussian | Self::DiscreteGaussian)
    }

    /// How an additive mechanism's loss grows with the move of its input
    /// (`None` for the others).
    pub fn loss_growth(self) -> Option<LossGrowth> {
        match self {
            Self::Laplace | Self::Geometric => Some(LossGrowth::Linear),
            Self::Staircase | Self::StaircaseL2 | Self::DiscreteStaircase => {
                Some(LossGrowth::Scalar)
            }
            Self::Gaussian | Self::DiscreteGaussian => Some(LossGrowth::Gaussian),
            _ => None,
        }
    }

    /// Grid points per Δ of a real-valued mechanism's output grid (at
    /// least `2^bits`), `None` for integer noise, which does not round.
    pub fn grid_bits(self) -> Option<i32> {
        match self {
            Self::Laplace => Some(Laplace::GRID_BITS),
            Self::Staircase | Self::StaircaseL2 => Some(Staircase::GRID_BITS),
            // At least 2^bits points per min(Δ, σ) ≤ Δ.
            Self::Gaussian => Some(super::gaussian::RESOLUTION_BITS),
            _ => None,
        }
    }
}

/// One additive mechanism of the catalogue, built from (ε, δ, Δ).
#[derive(Debug, Clone)]
pub enum AdditiveNoise {
    /// [`Laplace`].
    Laplace(Laplace),
    /// [`Staircase`] (either γ).
    Staircase(Staircase),
    /// [`TwoSidedGeometric`].
    Geometric(TwoSidedGeometric),
    /// [`DiscreteStaircase`].
    DiscreteStaircase(DiscreteStaircase),
    /// [`Gaussian`].
    Gaussian(Gaussian),
    /// [`DiscreteGaussian`].
    DiscreteGaussian(DiscreteGaussian),
}

/// The whole number nearest to `value`, ties upwards (saturating at the
/// ends of `i64`; NaN gives 0): `⌊value + 1/2⌋` without the rounding of
/// that addition.
fn nearest_whole(value: f64) -> i64 {
    let floor = value.floor();
    (floor + f64::from(u8::from(value - floor >= 0.5))) as i64
}

fn whole(sensitivity: f64) -> Result<u64> {
    if sensitivity >= 1.0 && sensitivity.fract() == 0.0 && sensitivity <= 1e15 {
        Ok(sensitivity as u64)
    } else {
        Err(Error::InvalidParameter {
            name: "sensitivity",
            reason: format!(
                "must be a whole number from 1 to 10^15 for integer noise, got {sensitivity:e}"
            ),
        })
    }
}

impl AdditiveNoise {
    /// `kind` at (ε, δ, Δ); δ is used only by the Gaussians. Integer noise
    /// needs a whole-number Δ.
    ///
    /// ```
    /// use dpkit_core::mechanism::{AdditiveNoise, MechanismKind};
    /// let noise = AdditiveNoise::build(MechanismKind::Geometric, 1.0, 0.0, 1.0).unwrap();
    /// assert!(noise.is_integer());
    /// assert!(AdditiveNoise::build(MechanismKind::Exponential, 1.0, 0.0, 1.0).is_err());
    /// ```
    pub fn build(kind: MechanismKind, epsilon: f64, delta: f64, sensitivity: f64) -> Result<Self> {
        Ok(match kind {
            MechanismKind::Laplace => Self::Laplace(Laplace::new(epsilon, sensitivity)?),
            MechanismKind::Staircase => Self::Staircase(Staircase::new(epsilon, sensitivity)?),
            MechanismKind::StaircaseL2 => Self::Staircase(Staircase::with_gamma(
                epsilon,
                sensitivity,
                StaircaseGamma::L2Optimal,
            )?),
            MechanismKind::Geometric => {
                Self::Geometric(TwoSidedGeometric::new(epsilon, whole(sensitivity)?)?)
            }
            MechanismKind::DiscreteStaircase => {
                Self::DiscreteStaircase(DiscreteStaircase::new(epsilon, whole(sensitivity)?)?)
            }
            MechanismKind::Gaussian => Self::Gaussian(Gaussian::new(epsilon, delta, sensitivity)?),
            MechanismKind::DiscreteGaussian => {
                Self::DiscreteGaussian(DiscreteGaussian::new(epsilon, delta, whole(sensitivity)?)?)
            }
            other => {
                return Err(Error::InvalidParameter {
                    name: "mechanism",
                    reason: format!("{} does not add noise to a number", other.name()),
                });
            }
        })
    }

    /// Its catalogue entry.
    pub fn kind(&self) -> MechanismKind {
        match self {
            Self::Laplace(_) => MechanismKind::Laplace,
            Self::Staircase(_) => MechanismKind::Staircase,
            Self::Geometric(_) => MechanismKind::Geometric,
            Self::DiscreteStaircase(_) => MechanismKind::DiscreteStaircase,
            Self::Gaussian(_) => MechanismKind::Gaussian,
            Self::DiscreteGaussian(_) => MechanismKind::DiscreteGaussian,
        }
    }

    /// The loss in concentrated form of one measurement of `draws` values
    /// released with this noise, whose cost as a whole is `epsilon`-DP (for
    /// the pure kinds; the share of ε the measurement was given). Pure
    /// kinds: ρ = ε²/2, their samplers being exact. The Gaussians: their
    /// own ρ, spread and tail, from σ and the Δ they were built for; their
    /// (ε, δ) does not enter.
    ///
    /// ```
    /// use dpkit_core::mechanism::{AdditiveNoise, MechanismKind};
    /// let laplace = AdditiveNoise::build(MechanismKind::Laplace, 0.2, 0.0, 1.0).unwrap();
    /// assert!((laplace.concentrated(0.2, 5).unwrap().rho() - 0.02).abs() < 1e-15);
    /// let gaussian = AdditiveNoise::build(MechanismKind::DiscreteGaussian, 0.2, 1e-6, 1.0).unwrap();
    /// assert!(gaussian.concentrated(0.2, 5).unwrap().rho() < 0.02);
    /// ```
    pub fn concentrated(&self, epsilon: f64, draws: u64) -> Result<ConcentratedLoss> {
        match self {
            Self::Gaussian(m) => m.concentrated(draws),
            Self::DiscreteGaussian(m) => m.concentrated(draws),
            _ => ConcentratedLoss::pure(epsilon),
        }
    }

    /// Its accuracy (expected error, variance, intervals).
    pub fn accuracy(&self) -> &dyn NoiseAccuracy {
        match self {
            Self::Laplace(m) => m,
            Self::Staircase(m) => m,
            Self::Geometric(m) => m,
            Self::DiscreteStaircase(m) => m,
            Self::Gaussian(m) => m,
            Self::DiscreteGaussian(m) => m,
        }
    }

    /// Whether it releases integers.
    pub fn is_integer(&self) -> bool {
        self.kind().input() == Input::Integer
    }

    /// `exact` plus integer noise, saturating at the ends of `i64`; real
    /// noise refuses (it needs [`AdditiveNoise::release`]).
    pub fn release_integer<R: CryptoRng + ?Sized>(&self, exact: i64, rng: &mut R) -> Result<i64> {
        match self {
            Self::Geometric(m) => Ok(m.privatize_with_rng(exact, rng)),
            Self::DiscreteStaircase(m) => Ok(m.privatize_with_rng(exact, rng)),
            Self::DiscreteGaussian(m) => Ok(m.privatize_with_rng(exact, rng)),
            _ => Err(Error::InvalidParameter {
                name: "mechanism",
                reason: format!("{} releases real values", self.kind().name()),
            }),
        }
    }

    /// `exact` plus noise. Integer noise takes `exact` rounded to the
    /// nearest whole number, ties upwards (counts and sums of whole numbers
    /// are whole already): translation invariant, so values `Δ` apart stay
    /// at most `⌈Δ⌉` apart.
    pub fn release<R: CryptoRng + ?Sized>(&self, exact: f64, rng: &mut R) -> Result<f64> {
        let whole = || nearest_whole(exact);
        Ok(match self {
            Self::Geometric(m) => m.privatize_with_rng(whole(), rng) as f64,
            Self::DiscreteStaircase(m) => m.privatize_with_rng(whole(), rng) as f64,
            Self::DiscreteGaussian(m) => m.privatize_with_rng(whole(), rng) as f64,
            Self::Laplace(m) => m.privatize_with_rng(exact, rng)?,
            Self::Staircase(m) => m.privatize_with_rng(exact, rng)?,
            Self::Gaussian(m) => m.privatize_with_rng(exact, rng)?,
        })
    }

    /// The exact value `exact` (a sum of grid steps of any size) plus noise,
    /// with no rounding before the noise but the mechanism's own (to its
    /// grid, or to a whole number ties upwards), and none after it but the
    /// final conversion to the nearest double, whose relative error is at
    /// most 2⁻⁵³.
    ///
    /// ```
    /// use dpkit_core::lattice::GridValue;
    /// use dpkit_core::mechanism::{AdditiveNoise, MechanismKind};
    /// use dpkit_core::rng::InsecureSeededRng;
    /// let noise = AdditiveNoise::build(MechanismKind::Geometric, 1000.0, 0.0, 1.0).unwrap();
    /// let mut rng = InsecureSeededRng::from_seed_for_testing(7);
    /// let total = GridValue::new(15_099_494_400_000_000, -24); // 900,000,000
    /// let released = noise.release_exact(total, &mut rng).unwrap();
    /// assert!((released - 900_000_000.0).abs() <= 1.0);
    /// ```
    pub fn release_exact<R: CryptoRng + ?Sized>(
        &self,
        exact: GridValue,
        rng: &mut R,
    ) -> Result<f64> {
        match self {
            Self::Geometric(m) => m.privatize_exact_with_rng(exact, rng),
            Self::DiscreteStaircase(m) => m.privatize_exact_with_rng(exact, rng),
            Self::DiscreteGaussian(m) => m.privatize_exact_with_rng(exact, rng),
            Self::Laplace(m) => m.privatize_exact_with_rng(exact, rng),
            Self::Staircase(m) => m.privatize_exact_with_rng(exact, rng),
            Self::Gaussian(m) => m.privatize_exact_with_rng(exact, rng),
        }
    }

    /// The spacing of its outputs: 1 for integer noise, its grid's for
    /// real noise. An exact release of a total within 2^53 spacings is an
    /// exact double; beyond, [`AdditiveNoise::release_exact`] rounds it to
    /// the nearest, by at most a relative 2⁻⁵³.
    pub fn output_spacing(&self) -> f64 {
        match self {
            Self::Laplace(m) => m.lattice().spacing(),
            Self::Staircase(m) => m.lattice().spacing(),
            Self::Gaussian(m) => m.lattice().spacing(),
            Self::Geometric(_) | Self::DiscreteStaircase(_) | Self::DiscreteGaussian(_) => 1.0,
        }
    }

    /// The privacy one release provides (each value of a slice, separately).
    pub fn privacy(&self) -> crate::accounting::PrivacyLoss {
        match self {
            Self::Laplace(m) => RealMechanism::privacy(m),
            Self::Staircase(m) => RealMechanism::privacy(m),
            Self::Gaussian(m) => RealMechanism::privacy(m),
            Self::Geometric(m) => IntegerMechanism::privacy(m),
            Self::DiscreteStaircase(m) => IntegerMechanism::privacy(m),
            Self::DiscreteGaussian(m) => IntegerMechanism::privacy(m),
        }
    }

    /// Replaces every value of `values` by its release, each at this
    /// mechanism's cost (validated before any changes, as the mechanisms'
    /// own batch paths do). Integer noise takes each value rounded.
    pub fn release_slice<R: CryptoRng + ?Sized>(
        &self,
        values: &mut [f64],
        rng: &mut R,
    ) -> Result<()> {
        match self {
            Self::Laplace(m) => m.privatize_slice_with_rng(values, rng),
            Self::Staircase(m) => m.privatize_slice_with_rng(values, rng),
            Self::Gaussian(m) => m.privatize_slice_with_rng(values, rng),
            _ => {
                let mut whole: Vec<i64> = values.iter().map(|&v| nearest_whole(v)).collect();
                self.release_integer_slice(&mut whole, rng)?;
                for (value, released) in values.iter_mut().zip(whole) {
                    *value = released as f64;
                }
                Ok(())
            }
        }
    }

    /// Replaces every value of `values` by its release; integer noise only.
    pub fn release_integer_slice<R: CryptoRng + ?Sized>(
        &self,
        values: &mut [i64],
        rng: &mut R,
    ) -> Result<()> {
        match self {
            Self::Geometric(m) => m.privatize_slice_with_rng(values, rng),
            Self::DiscreteStaircase(m) => m.privatize_slice_with_rng(values, rng),
            Self::DiscreteGaussian(m) => m.privatize_slice_with_rng(values, rng),
            _ => {
                return Err(Error::InvalidParameter {
                    name: "values",
                    reason: format!("{} releases real values, not integers", self.kind().name()),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::InsecureSeededRng;

    fn every_additive() -> Vec<AdditiveNoise> {
        [
            (MechanismKind::Laplace, 0.0, 1.0),
            (MechanismKind::Staircase, 0.0, 1.0),
            (MechanismKind::Gaussian, 1e-6, 1.0),
            (MechanismKind::Geometric, 0.0, 1.0),
            (MechanismKind::DiscreteStaircase, 0.0, 3.0),
            (MechanismKind::DiscreteGaussian, 1e-6, 1.0),
        ]
        .into_iter()
        .map(|(kind, delta, sensitivity)| {
            AdditiveNoise::build(kind, 1.0, delta, sensitivity).unwrap()
        })
        .collect()
    }

    #[test]
    fn a_slice_is_released_whole_by_integer_noise_and_checked_before_any_change() {
        let mut rng = InsecureSeededRng::from_seed_for_testing(5);
        for noise in every_additive() {
            assert_eq!(noise.privacy().epsilon(), 1.0, "{:?}", noise.kind());
            let mut values = vec![10.0; 1000];
            noise.release_slice(&mut values, &mut rng).unwrap();
            assert!(values.iter().any(|v| *v != 10.0), "{:?}", noise.kind());
            if noise.is_integer() {
                assert!(
                    values.iter().all(|v| v.fract() == 0.0),
                    "{:?}",
                    noise.kind()
                );
                let mut whole = vec![10_i64; 100];
                noise.release_integer_slice(&mut whole, &mut rng).unwrap();
            } else {
                assert!(noise.release_integer_slice(&mut [1], &mut rng).is_err());
                let mut bad = vec![1.0, f64::NAN, 2.0];
                assert!(noise.release_slice(&mut bad, &mut rng).is_err());
                assert_eq!(
                    (bad[0], bad[2]),
                    (1.0, 2.0),
                    "nothing changed: {:?}",
                    noise.kind()
                );
            }
        }
    }
}
