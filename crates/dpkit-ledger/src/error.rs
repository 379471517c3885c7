//! What a ledger refuses, and how it fails.

use thiserror::Error;

/// A charge or budget the ledger refuses, or a ledger file that failed.
#[derive(Debug, Error)]
pub enum LedgerError {
    /// The budget cannot pay for a cost, or a budget or name is malformed.
    #[error("budget: {0}")]
    Budget(String),
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
