//! Why an expression is refused. Messages name the query's functions and
//! columns, never a value from the data.

use thiserror::Error;

/// An expression that cannot be made total, or SQL that does not parse.
#[derive(Debug, Error)]
pub enum TotalError {
    /// The SQL does not parse, or an expression's type cannot be known.
    #[error("SQL: {0}")]
    Sql(String),
    /// The expression is valid SQL, but no total form of it is accepted.
    #[error("cannot answer privately: {0}")]
    NotPrivate(String),
}

/// `Result` with [`TotalError`].
pub type Result<T> = std::result::Result<T, TotalError>;
