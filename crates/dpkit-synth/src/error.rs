//! The crate's typed errors: bad input is reported, never a panic.

/// What can go wrong building a synthetic table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A domain, table or marginal with no columns.
    #[error("no columns: a synthetic table needs at least one column")]
    NoColumns,
    /// A column whose public domain has no codes.
    #[error("column {column} has an empty domain: every column needs at least one code")]
    EmptyDomain {
        /// The column.
        column: usize,
    },
    /// A value that is not one of its column's codes `0..size`.
    #[error("row {row}, column {column}: code {code} is outside the column's domain 0..{size}")]
    CodeOutOfDomain {
        /// The column.
        column: usize,
        /// The row.
        row: usize,
        /// The code found.
        code: u64,
        /// The number of codes of the column.
        size: usize,
    },
    /// Columns of a table that do not all have the same number of rows.
    #[error("column {column} has {found} rows, column 0 has {expected}")]
    RaggedColumns {
        /// The column.
        column: usize,
        /// Its number of rows.
        found: usize,
        /// Column 0's.
        expected: usize,
    },
    /// A row with a number of values other than the domain's columns.
    #[error("row {row} has {found} values, the domain has {expected} columns")]
    RowLength {
        /// The row.
        row: usize,
        /// Its number of values.
        found: usize,
        /// The domain's number of columns.
        expected: usize,
    },
    /// A column index that the domain does not have, or one named twice.
    #[error("column list {columns:?} is not a list of distinct columns of a {width}-column domain")]
    BadColumns {
        /// The columns asked for.
        columns: Vec<usize>,
        /// The domain's number of columns.
        width: usize,
    },
    /// A marginal or clique with more cells than this crate holds in memory.
    #[error(
        "a marginal over columns {columns:?} would have {cells} cells, more than the {limit} \
         this crate holds: coarsen these columns' domains or drop a column"
    )]
    DomainTooLarge {
        /// The columns.
        columns: Vec<usize>,
        /// Its number of cells (saturated at `u128::MAX`).
        cells: u128,
        /// The largest number of cells allowed.
        limit: usize,
    },
    /// A marginal source that returned the wrong number of counts.
    #[error("the counts over columns {columns:?} have {found} cells, the domain gives {expected}")]
    WrongCountLength {
        /// The columns.
        columns: Vec<usize>,
        /// The number of counts returned.
        found: usize,
        /// The number of cells of the marginal.
        expected: usize,
    },
    /// A marginal source that failed (a database, for instance).
    #[error("the marginal source failed: {0}")]
    Source(String),
    /// Cliques that no junction tree joins (their graph is not triangulated).
    #[error("the cliques do not form a junction tree: {0}")]
    NotAJunctionTree(String),
    /// A measurement or marginal whose columns lie in no single clique.
    #[error("columns {columns:?} lie in no single clique of the model")]
    NotInAClique {
        /// The columns.
        columns: Vec<usize>,
    },
    /// A parameter out of range.
    #[error("invalid {name}: {reason}")]
    InvalidParameter {
        /// The parameter.
        name: &'static str,
        /// Why.
        reason: String,
    },
    /// An error from dpkit-core (a mechanism's parameters, the random source).
    #[error(transparent)]
    Core(#[from] dpkit_core::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
