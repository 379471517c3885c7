//! What can go wrong where the rows live. Each kind says whether its
//! failure can depend on the private data, which decides whether dpkit-query
//! refunds a charge (it maps each onto its `QueryError` of the same name).
//! No message ever contains a value from the private data: only names from
//! the query, the description and the database's own words about a
//! statement before a row was read.

use thiserror::Error;

/// A database that cannot hold, check or run a private plan.
#[derive(Debug, Error)]
pub enum DatabaseError {
    /// The database's table does not match its description, or the
    /// description names tables that cannot be read together.
    #[error("data description: {0}")]
    Description(String),
    /// The database refuses the statement as written, before reading a row.
    #[error("SQL: {0}")]
    Sql(String),
    /// The plan uses something the database cannot run exactly.
    #[error("cannot answer privately: {0}")]
    NotPrivate(String),
    /// The database could not be reached before the statement was sent: a
    /// failure that depends on no one's data, so its charge is refunded.
    #[error("data file: {0}")]
    Unreadable(String),
    /// The statement failed after it was sent, for a reason that may depend
    /// on the private data: its cost is kept.
    #[error(
        "the query failed while running; its cost is kept, because whether it fails can depend on the private data ({0})"
    )]
    FailedWhileRunning(String),
}

/// `Result` with [`DatabaseError`].
pub type Result<T> = std::result::Result<T, DatabaseError>;
