//! Why a measured query cannot be released. No message holds a value from
//! the private data: only the query's names and public parameters.

use thiserror::Error;

/// A release that cannot be made as asked.
#[derive(Debug, Error)]
pub enum ReleaseError {
    /// No noise meets the query's privacy parameters or target.
    #[error("cannot answer privately: {0}")]
    NotPrivate(String),
    /// A mechanism rejected its parameters (ε, δ, confidence).
    #[error(transparent)]
    Mechanism(#[from] dpkit_core::Error),
}

/// `Result` with [`ReleaseError`].
pub type Result<T> = std::result::Result<T, ReleaseError>;
