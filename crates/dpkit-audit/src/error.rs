//! What can go wrong in an audit.

use thiserror::Error;

/// An audit that cannot run.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum AuditError {
    /// A setting outside its range (the message names the setting, never data).
    #[error("invalid audit setting `{name}`: {reason}")]
    InvalidSetting {
        /// The setting's name.
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A mechanism produced a NaN or infinite output, which no event can place.
    #[error("the mechanism produced a non-finite output")]
    NonFiniteOutput,
    /// The mechanism under audit could not be built or run.
    #[error(transparent)]
    Mechanism(#[from] dpkit_core::Error),
}

/// `Result` with [`AuditError`].
pub type Result<T> = std::result::Result<T, AuditError>;
