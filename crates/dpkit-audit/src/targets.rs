//! Every mechanism of `dpkit-core`, run on a pair of neighbouring inputs.

use dpkit_core::accounting::PrivacyLoss;
use dpkit_core::mechanism::{
    BinaryRandomizedResponse, DiscreteGaussian, DiscreteStaircase, ExponentialMechanism, Gaussian,
    IntegerMechanism, KaryRandomizedResponse, Laplace, MechanismKind, RealMechanism,
    ReportNoisyMax, Staircase, StaircaseGamma, TwoSidedGeometric,
};
use rand_core::CryptoRng;

use crate::auditor::NeighbouringOutputs;
use crate::error::{AuditError, Result};

/// A mechanism of `dpkit-core` that the auditor can run by name: an entry of
/// the core's catalogue (names, `ALL`, `from_name`, `needs_delta` come from
/// there), run by [`RunAudit::run`]. Randomized response is run with the
/// largest coin whose exact ε fits; the selection mechanisms over four
/// candidates.
///
/// ```
/// use dpkit_audit::AuditTarget;
/// assert_eq!(AuditTarget::from_name("staircase-l2"), Some(AuditTarget::StaircaseL2));
/// assert!(AuditTarget::ALL.iter().all(|t| AuditTarget::from_name(t.name()) == Some(*t)));
/// ```
pub type AuditTarget = MechanismKind;

/// The parameters of one audited mechanism.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TargetParameters {
    /// The ε to build the mechanism with.
    pub epsilon: f64,
    /// δ, for the Gaussian mechanisms.
    pub delta: Option<f64>,
    /// Sensitivity Δ (a whole number for the integer mechanisms).
    pub sensitivity: f64,
}

/// Running a catalogue mechanism on a pair of neighbouring inputs.
pub trait RunAudit {
    /// Builds the mechanism and draws `samples` outputs from each of two
    /// neighbouring inputs (see the implementation for which).
    fn run<R: CryptoRng + ?Sized>(
        self,
        parameters: TargetParameters,
        samples: usize,
        rng: &mut R,
    ) -> Result<NeighbouringOutputs>;
}

impl RunAudit for AuditTarget {
    /// Builds the mechanism and draws `samples` outputs from each of two
    /// neighbouring inputs:
    /// * real additive mechanisms: `q = 0.37·Δ` and `q + Δ` (off the output
    ///   grid, so rounding is exercised too);
    /// * integer additive mechanisms: `0` and `Δ`;
    /// * randomized response: truth `false`/`true`, or categories 0 and 1;
    /// * selection mechanisms: utilities `(0, 0, 0, 0)` and `(Δ, −Δ, −Δ, −Δ)`,
    ///   every utility moving by the full sensitivity.
    fn run<R: CryptoRng + ?Sized>(
        self,
        parameters: TargetParameters,
        samples: usize,
        rng: &mut R,
    ) -> Result<NeighbouringOutputs> {
        let TargetParameters {
            epsilon,
            delta,
            sensitivity,
        } = parameters;
        let delta_value = || {
            delta.ok_or(AuditError::InvalidSetting {
                name: "delta",
                reason: format!("{} needs --delta", self.name()),
            })
        };
        match self {
            Self::Laplace => real_pair(
                self,
                &Laplace::new(epsilon, sensitivity)?,
                sensitivity,
                samples,
                rng,
            ),
            Self::Staircase => real_pair(
                self,
                &Staircase::new(epsilon, sensitivity)?,
                sensitivity,
                samples,
                rng,
            ),
            Self::StaircaseL2 => real_pair(
                self,
                &Staircase::with_gamma(epsilon, sensitivity, StaircaseGamma::L2Optimal)?,
                sensitivity,
                samples,
                rng,
            ),
            Self::Gaussian => real_pair(
                self,
                &Gaussian::new(epsilon, delta_value()?, sensitivity)?,
                sensitivity,
                samples,
                rng,
            ),
            Self::Geometric => {
                let steps = whole_sensitivity(sensitivity)?;
                integer_pair(
                    self,
                    &TwoSidedGeometric::new(epsilon, steps)?,
                    steps,
                    samples,
                    rng,
                )
            }
            Self::DiscreteStaircase => {
                let steps = whole_sensitivity(sensitivity)?;
                integer_pair(
                    self,
                    &DiscreteStaircase::new(epsilon, steps)?,
                    steps,
                    samples,
                    rng,
                )
            }
            Self::DiscreteGaussian => {
                let steps = whole_sensitivity(sensitivity)?;
                let mechanism = DiscreteGaussian::new(epsilon, delta_value()?, steps)?;
                integer_pair(self, &mechanism, steps, samples, rng)
            }
            Self::BinaryRandomizedResponse => {
                let mechanism = binary_response_within(epsilon)?;
                let mut draw = |truth: bool| -> Vec<f64> {
                    (0..samples)
                        .map(|_| f64::from(u8::from(mechanism.privatize_with_rng(truth, rng))))
                        .collect()
                };
                let (first, second) = (draw(false), draw(true));
                Ok(outputs(
                    self,
                    mechanism.privacy(),
                    "truth = false",
                    "truth = true",
                    first,
                    second,
                ))
            }
            Self::KaryRandomizedResponse => {
                let mechanism = KaryRandomizedResponse::new(epsilon, 4)?;
                let mut draw = |truth: u64| -> Result<Vec<f64>> {
                    (0..samples)
                        .map(|_| Ok(mechanism.privatize_with_rng(truth, rng)? as f64))
                        .collect()
                };
                let (first, second) = (draw(0)?, draw(1)?);
                Ok(outputs(
                    self,
                    mechanism.privacy(),
                    "category 0",
                    "category 1",
                    first,
                    second,
                ))
            }
            Self::Exponential => {
                let mechanism = ExponentialMechanism::new(epsilon, sensitivity)?;
                selection_pair(
                    self,
                    mechanism.privacy(),
                    sensitivity,
                    samples,
                    rng,
                    |u, r| mechanism.select_with_rng(u, r),
                )
            }
            Self::ReportNoisyMax => {
                let mechanism = ReportNoisyMax::new(epsilon, sensitivity)?;
                selection_pair(
                    self,
                    mechanism.privacy(),
                    sensitivity,
                    samples,
                    rng,
                    |u, r| mechanism.select_with_rng(u, r),
                )
            }
        }
    }
}

fn outputs(
    target: AuditTarget,
    declared: PrivacyLoss,
    first_input: &str,
    second_input: &str,
    first: Vec<f64>,
    second: Vec<f64>,
) -> NeighbouringOutputs {
    NeighbouringOutputs {
        mechanism: target.name().into(),
        declared,
        first_input: first_input.into(),
        second_input: second_input.into(),
        first,
        second,
    }
}

fn real_pair<M: RealMechanism, R: CryptoRng + ?Sized>(
    target: AuditTarget,
    mechanism: &M,
    sensitivity: f64,
    samples: usize,
    rng: &mut R,
) -> Result<NeighbouringOutputs> {
    let low = 0.37 * sensitivity;
    let high = low + sensitivity;
    let mut draw = |value: f64| -> Result<Vec<f64>> {
        let mut released = vec![value; samples];
        mechanism.privatize_slice_with_rng(&mut released, rng)?;
        Ok(released)
    };
    let (first, second) = (draw(low)?, draw(high)?);
    Ok(outputs(
        target,
        mechanism.privacy(),
        &format!("q = {low}"),
        &format!("q = {high}"),
        first,
        second,
    ))
}

fn integer_pair<M: IntegerMechanism, R: CryptoRng + ?Sized>(
    target: AuditTarget,
    mechanism: &M,
    sensitivity: u64,
    samples: usize,
    rng: &mut R,
) -> Result<NeighbouringOutputs> {
    let high = i64::try_from(sensitivity).map_err(|_| AuditError::InvalidSetting {
        name: "sensitivity",
        reason: "too large for an integer mechanism".into(),
    })?;
    let mut draw = |value: i64| -> Vec<f64> {
        let mut released = vec![value; samples];
        mechanism.privatize_slice_with_rng(&mut released, rng);
        released.into_iter().map(|v| v as f64).collect()
    };
    let (first, second) = (draw(0), draw(high));
    Ok(outputs(
        target,
        mechanism.privacy(),
        "q = 0",
        &format!("q = {high}"),
        first,
        second,
    ))
}

fn whole_sensitivity(sensitivity: f64) -> Result<u64> {
    if sensitivity >= 1.0 && sensitivity.fract() == 0.0 && sensitivity < 2f64.powi(53) {
        Ok(sensitivity as u64)
    } else {
        Err(AuditError::InvalidSetting {
            name: "sensitivity",
            reason: format!("integer mechanisms need a whole number ≥ 1, got {sensitivity}"),
        })
    }
}

/// The binary two-coin mechanism with the largest coin probability whose
/// exact ε is at most `epsilon` (its ε grows with the coin).
fn binary_response_within(epsilon: f64) -> Result<BinaryRandomizedResponse> {
    let epsilon = PrivacyLoss::pure(epsilon)?.epsilon();
    let fits =
        |p: f64| BinaryRandomizedResponse::new(p).is_ok_and(|m| m.privacy().epsilon() <= epsilon);
    let (mut fitting, mut too_large) = (0.0f64, 1.0f64);
    for _ in 0..60 {
        let middle = 0.5 * (fitting + too_large);
        if fits(middle) {
            fitting = middle;
        } else {
            too_large = middle;
        }
    }
    if fitting == 0.0 {
        return Err(AuditError::InvalidSetting {
            name: "epsilon",
            reason: format!("{epsilon} is below ln 2, the least ε of two-coin randomized response"),
        });
    }
    Ok(BinaryRandomizedResponse::new(fitting)?)
}

/// A selection mechanism's choices on utilities `(0, 0, 0, 0)` and
/// `(Δ, −Δ, −Δ, −Δ)`.
fn selection_pair<R: CryptoRng + ?Sized>(
    target: AuditTarget,
    declared: PrivacyLoss,
    sensitivity: f64,
    samples: usize,
    rng: &mut R,
    select: impl Fn(&[f64], &mut R) -> dpkit_core::Result<usize>,
) -> Result<NeighbouringOutputs> {
    let (quiet, moved) = neighbouring_utilities(sensitivity);
    let mut draw = |utilities: &[f64]| -> Result<Vec<f64>> {
        (0..samples)
            .map(|_| Ok(select(utilities, rng)? as f64))
            .collect()
    };
    let (first, second) = (draw(&quiet)?, draw(&moved)?);
    Ok(outputs(
        target,
        declared,
        &describe(&quiet),
        &describe(&moved),
        first,
        second,
    ))
}

fn neighbouring_utilities(sensitivity: f64) -> ([f64; 4], [f64; 4]) {
    (
        [0.0; 4],
        [sensitivity, -sensitivity, -sensitivity, -sensitivity],
    )
}

fn describe(utilities: &[f64]) -> String {
    let shown: Vec<String> = utilities.iter().map(|u| u.to_string()).collect();
    format!("utilities ({})", shown.join(", "))
}
