//! The one error type of the core crate.

use thiserror::Error;

/// Everything that can go wrong in `dpkit-core`.
///
/// Messages name the offending *parameter* (public by nature) but never echo a
/// private data value: a non-finite or out-of-range true value is reported
/// without its value.
///
/// ```
/// use dpkit_core::{Error, mechanism::Laplace};
/// let err = Laplace::new(-1.0, 1.0).unwrap_err();
/// assert!(matches!(err, Error::InvalidParameter { name: "epsilon", .. }));
/// ```
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// A mechanism or accounting parameter is outside its domain.
    #[error("invalid {name}: {reason}")]
    InvalidParameter {
        /// The parameter's name, e.g. `epsilon`.
        name: &'static str,
        /// Why it was rejected, e.g. `must be finite and > 0, got -1`.
        reason: String,
    },
    /// A true value handed to a mechanism is NaN or infinite (its value is not shown).
    #[error("a true value is not a finite number")]
    NonFiniteValue,
    /// A true value is too large for the mechanism's output lattice (its value is not shown).
    #[error("a true value is too large in magnitude for this mechanism's output lattice")]
    ValueOutOfRange,
    /// The exponential mechanism or report-noisy-max got no candidates.
    #[error("the candidate set is empty")]
    EmptyCandidates,
    /// A spend would exceed the privacy budget; nothing was spent or released.
    #[error("privacy budget exceeded: requested {requested}, remaining {remaining}")]
    BudgetExceeded {
        /// The privacy loss that was asked for.
        requested: String,
        /// What the budget still allowed.
        remaining: String,
    },
    /// Sensitivity sampling needs more samples for the requested confidence.
    #[error("too few samples: {reason}")]
    TooFewSamples {
        /// What was needed.
        reason: String,
    },
    /// Could not obtain randomness from the operating system.
    #[error("the operating system's random source failed: {0}")]
    RandomSource(String),
}

/// Shorthand for results in this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Rejects anything that is not a finite number strictly greater than zero.
pub(crate) fn require_positive(name: &'static str, value: f64) -> Result<f64> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(Error::InvalidParameter {
            name,
            reason: format!("must be finite and > 0, got {value}"),
        })
    }
}

/// Rejects anything outside the closed unit interval (or NaN).
pub(crate) fn require_unit_interval(name: &'static str, value: f64) -> Result<f64> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(Error::InvalidParameter {
            name,
            reason: format!("must lie in [0, 1], got {value}"),
        })
    }
}

/// Rejects anything outside the open unit interval (or NaN).
pub(crate) fn require_open_unit_interval(name: &'static str, value: f64) -> Result<f64> {
    if value > 0.0 && value < 1.0 {
        Ok(value)
    } else {
        Err(Error::InvalidParameter {
            name,
            reason: format!("must lie strictly between 0 and 1, got {value}"),
        })
    }
}
