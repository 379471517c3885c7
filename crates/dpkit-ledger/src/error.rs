//! What a ledger refuses, and how it fails.

use thiserror::Error;

/// A charge or budget the ledger refuses, or a ledger file that failed.
#[derive(Debug, Error)]
pub enum LedgerError {
    /// The budget cannot pay for a cost, or a budget or name is malformed.
    #[error("budget: {0}")]
    Budget(String),
    /// An answer could not be kept because another run of the same request
    /// took its place: that run was refunded (its data could not be read),
    /// or the request was charged anew at a changed cost. This run's charge
    /// is given back, nothing may be released, and the request can be
    /// asked again.
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
