//! What can go wrong with a private query. No message ever contains a value
//! from the private data: only names from the query and the description.

use thiserror::Error;

/// A query that cannot be answered privately, or a setup that cannot run.
#[derive(Debug, Error)]
pub enum QueryError {
    /// The data description file is missing, malformed or inconsistent.
    #[error("data description: {0}")]
    Description(String),
    /// The SQL does not parse, names something that does not exist, or
    /// names two columns of the answer alike.
    #[error("SQL: {0}")]
    Sql(String),
    /// The query is valid SQL but dpkit cannot make it private.
    #[error("cannot answer privately: {0}")]
    NotPrivate(String),
    /// The privacy budget cannot pay for the query.
    #[error("budget: {0}")]
    Budget(String),
    /// The ledger database failed.
    #[error("ledger {path}: {reason}")]
    Ledger {
        /// The ledger file.
        path: String,
        /// What failed.
        reason: String,
    },
    /// The data could not be read, for a reason outside its contents: an
    /// I/O failure, or a database that could not be reached before the
    /// statement was sent. The one failure whose charge is refunded (see
    /// `QueryEngine::answer`): whether it happens depends on no one's data.
    #[error("data file: {0}")]
    Unreadable(String),
    /// Another run of the same request took this run's place (it was
    /// refunded, or the request was charged anew at a changed cost): this
    /// run's charge was given back and nothing was released. Asking again
    /// is safe.
    #[error("{0}")]
    GivenBack(String),
    /// The query failed while running, for a reason that may depend on the
    /// private data (a value that does not parse, a division by zero in a
    /// filter): its cost is kept, since a refund would let failures reveal
    /// the data for free.
    #[error(
        "the query failed while running; its cost is kept, because whether it fails can depend on the private data ({0})"
    )]
    FailedWhileRunning(String),
    /// A mechanism rejected its parameters (ε, δ, confidence).
    #[error(transparent)]
    Mechanism(#[from] dpkit_core::Error),
}

impl From<dpkit_ledger::LedgerError> for QueryError {
    fn from(error: dpkit_ledger::LedgerError) -> Self {
        match error {
            dpkit_ledger::LedgerError::Budget(why) => QueryError::Budget(why),
            dpkit_ledger::LedgerError::GivenBack(why) => QueryError::GivenBack(why),
            dpkit_ledger::LedgerError::Storage { path, reason } => {
                QueryError::Ledger { path, reason }
            }
        }
    }
}

impl From<dpkit_release::ReleaseError> for QueryError {
    fn from(error: dpkit_release::ReleaseError) -> Self {
        match error {
            dpkit_release::ReleaseError::NotPrivate(why) => QueryError::NotPrivate(why),
            dpkit_release::ReleaseError::Mechanism(inner) => QueryError::Mechanism(inner),
        }
    }
}

impl From<dpkit_total::TotalError> for QueryError {
    fn from(error: dpkit_total::TotalError) -> Self {
        match error {
            dpkit_total::TotalError::Sql(why) => QueryError::Sql(why),
            dpkit_total::TotalError::NotPrivate(why) => QueryError::NotPrivate(why),
        }
    }
}

impl From<dpkit_description::DescriptionError> for QueryError {
    fn from(error: dpkit_description::DescriptionError) -> Self {
        QueryError::Description(error.0)
    }
}

impl From<dpkit_databases::DatabaseError> for QueryError {
    /// Kind for kind: whether a database failure is refunded (only
    /// `Unreadable`, which no one's data decides) is kept across the crates.
    fn from(error: dpkit_databases::DatabaseError) -> Self {
        use dpkit_databases::DatabaseError as D;
        match error {
            D::Description(why) => QueryError::Description(why),
            D::Sql(why) => QueryError::Sql(why),
            D::NotPrivate(why) => QueryError::NotPrivate(why),
            D::Unreadable(why) => QueryError::Unreadable(why),
            D::FailedWhileRunning(why) => QueryError::FailedWhileRunning(why),
        }
    }
}

/// `Result` with [`QueryError`].
pub type Result<T> = std::result::Result<T, QueryError>;
