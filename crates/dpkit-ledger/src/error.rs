//! What a ledger refuses, and how it fails.

use thiserror::Error;

/// A charge or budget the ledger refuses, or a ledger file that failed.
#[derive(Debug, Error)]
pub enum LedgerError {
    /// The budget cannot pay for a cost, or a budget or name is malformed.
    #[error("budget: {0}")]
    Budget(String),
    /// An answer could not be kept because its charge was given back
    /// meanwhile: another run of the same request failed for a reason no
    /// one's data decides and was refunded. Nothing may be released, and
    /// nothing is spent; the request can be asked again.
    #[error("{0}")]
    GivenBack(String),
    /// The ledger database failed.
    #[error("ledger {path}: {reason}")]
    Storage {
        /// The ledger file.
        path: String,
        /// What failed.
        reason: String,
    },
}

/// `Result` with [`LedgerError`].
pub type Result<T> = std::result::Result<T, LedgerError>;
