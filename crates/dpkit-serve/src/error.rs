//! What can go wrong setting up or running the server (for the curator;
//! what analysts see is in [`crate::api::ApiError`]).

use thiserror::Error;

/// A failure of the server's setup or state.
#[derive(Debug, Error)]
pub enum ServeError {
    /// `serve.toml` is missing or wrong.
    #[error("serve.toml: {0}")]
    Config(String),
    /// A dataset could not be opened.
    #[error("dataset {dataset}: {source}")]
    Dataset {
        /// The description's path or the dataset's name.
        dataset: String,
        /// Why.
        source: dpkit_query::QueryError,
    },
    /// The state database failed.
    #[error("state database: {0}")]
    State(String),
    /// An analyst command that cannot be done (an unknown name, say).
    #[error("{0}")]
    Analyst(String),
    /// The budget ledger refused.
    #[error(transparent)]
    Ledger(#[from] dpkit_ledger::LedgerError),
    /// The address or the runtime.
    #[error("{0}")]
    Io(String),
}

/// `Result` with [`ServeError`].
pub type Result<T> = std::result::Result<T, ServeError>;
