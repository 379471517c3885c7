#![forbid(unsafe_code)]
#![deny(missing_docs)]
//! # dpkit-databases
//!
//! Where the rewritten private plan runs when the rows live in a database.
//!
//! dpkit-query's embedded DataFusion engine runs the plan on CSV and
//! Parquet files. A [`Backend`] runs the same plan where
//! the rows already live, as one SQL statement (see [`sql`]): the capped,
//! typed view, the total expressions, the clamps and the exact sums all run
//! in the database, and only the per-group exact aggregates come back;
//! dpkit adds the noise, as it does for files.
//!
//! The table's columns are checked against the description when it is
//! opened; the plan is written as SQL when the query is planned, so a query
//! a database cannot run safely is refused before anything is spent.

mod bridge;
mod counted_sums;
pub mod error;
mod exprs;
mod flavour;
mod placeholder;
mod planned;
#[cfg(feature = "postgres")]
mod postgres;
mod postgres_reading;
mod public_rows;
mod renamed;
mod rows;
mod safe_sql;
#[cfg(feature = "spark")]
mod spark;
#[cfg(feature = "spark")]
mod spark_proto;
mod spelling;
mod sql;
mod sqlite;
mod tables;

use std::time::Duration;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, SchemaRef};

use dpkit_description::{ColumnKind, Description, Source};
pub use error::{DatabaseError, Result};
pub use flavour::Flavour;
pub use renamed::no_own_names;
pub use sql::RemotePlan;
pub use tables::{DatabaseTables, EmptyTables};

/// The name under which a private table's typed, capped read is defined,
/// wherever the plan runs (a `WITH` clause in a database, a view in the
/// embedded engine): `__dpkit_raw_` and the description's name.
pub fn raw_table_name(table: &str) -> String {
    format!("__dpkit_raw_{table}")
}

/// The name under which a typed read also gives a text column cut to its
/// `max_length` (SQLite's: see [`Flavour::cuts_in_source`]). A table with
/// a column that starts with `__dpkit` is refused (`declared_columns`), so
/// it names no other column.
pub(crate) fn cut_column(column: &str) -> String {
    format!("__dpkit_cut_{column}")
}

/// The Arrow type of a declared column kind.
pub fn declared_type(kind: ColumnKind) -> DataType {
    match kind {
        ColumnKind::Integer => DataType::Int64,
        ColumnKind::Real => DataType::Float64,
        ColumnKind::Text => DataType::Utf8,
    }
}

/// A column's type in a database, as dpkit reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseType {
    /// Whole numbers.
    Integer,
    /// Floating-point numbers.
    Real,
    /// Text.
    Text,
    /// Anything else (read as text when the description does not list it).
    Other(String),
}

/// A database that runs private plans as SQL.
pub trait Backend: Send + Sync {
    /// Which SQL it speaks.
    fn flavour(&self) -> Flavour;
    /// The table's columns, in order, with their types.
    fn columns(&self) -> Result<Vec<(String, DatabaseType)>>;
    /// The `SELECT` that reads the table's columns as `columns` declares;
    /// `found` is what [`Backend::columns`] gave when the table was opened
    /// (every plan checks that the columns are still so). Each `(column,
    /// length)` of `cuts` is also read cut to `length` characters, as
    /// [`cut_column`] names it; `cuts` is empty unless the flavour
    /// [`Flavour::cuts_in_source`].
    fn source(
        &self,
        columns: &[(String, ColumnKind)],
        found: &[(String, DatabaseType)],
        cuts: &[(String, u32)],
    ) -> String;
    /// What names the table in the database, whatever the description
    /// wrote: two private tables with one identity read the same rows.
    /// PostgreSQL gives the table's OID; SQLite (main schema only) and Spark
    /// the name in lower case (Spark's without its database: two tables of
    /// one name are taken for one, which refuses more, never less).
    fn identity(&self) -> Result<String>;
    /// Asks the database whether it can run `plan`, without reading a row
    /// (SQLite and PostgreSQL prepare it, Spark describes it): a plan it
    /// cannot run is refused at planning, so that a failure that cannot
    /// depend on the rows is never charged. PostgreSQL and Spark also say
    /// the type of each column the statement returns, which must be the
    /// type `schema` reads (SQLite's values carry their own types). A
    /// database that cannot be reached is [`DatabaseError::Unreadable`].
    fn check(&self, plan: &RemotePlan, schema: &SchemaRef) -> Result<()>;
    /// Runs `plan`; the result has `schema`'s columns. Failures that cannot
    /// depend on the rows (the database cannot be reached) are
    /// [`DatabaseError::Unreadable`], refunded; any other is
    /// [`DatabaseError::FailedWhileRunning`], its cost kept.
    fn run(
        &self,
        plan: &RemotePlan,
        schema: SchemaRef,
        timeout: Option<Duration>,
    ) -> Result<RecordBatch>;
}

/// The database `description` names, connected, or `None` for a file.
pub(crate) fn connect(description: &Description) -> Result<Option<Box<dyn Backend>>> {
    Ok(match &description.source {
        Source::File => None,
        Source::Sqlite { table } => Some(Box::new(sqlite::SqliteTable::open(
            &description.file,
            table,
        )?)),
        #[cfg(feature = "postgres")]
        Source::Postgres { connection, table } => {
            Some(Box::new(postgres::PostgresTable::open(connection, table)?))
        }
        #[cfg(feature = "spark")]
        Source::Spark { address, table } => {
            Some(Box::new(spark::SparkTable::open(address, table)?))
        }
        #[cfg(not(all(feature = "postgres", feature = "spark")))]
        other => return Err(not_built(other)),
    })
}

/// The refusal of a table in a database this build leaves out.
#[cfg(not(all(feature = "postgres", feature = "spark")))]
fn not_built(source: &Source) -> DatabaseError {
    let (database, feature) = match source {
        Source::Postgres { .. } => ("PostgreSQL", "postgres"),
        _ => ("Spark", "spark"),
    };
    DatabaseError::Description(format!(
        "this dpkit was built without {database} tables: build it with the cargo feature \
         `{feature}`"
    ))
}

/// Each column of the database table with the type the view reads it as:
/// the declared type for described columns (which must match the
/// database's), text for the others. One line names every mismatch.
pub(crate) fn declared_columns(
    description: &Description,
    columns: &[(String, DatabaseType)],
    database: &str,
) -> Result<Vec<(String, ColumnKind)>> {
    // dpkit names columns of its own in the statements it sends (each text
    // column's cut, `cut_column`): a table's column of such a name, which
    // SQLite finds whatever its case, would be read in their place.
    let mut problems: Vec<String> = columns
        .iter()
        .filter(|(name, _)| name.to_lowercase().starts_with("__dpkit"))
        .map(|(name, _)| {
            format!("its column '{name}' starts with dpkit's own prefix __dpkit (rename it)")
        })
        .collect();
    for (name, facts) in &description.columns {
        match columns.iter().find(|(n, _)| n == name) {
            None => problems.push(format!("it has no column '{name}'")),
            Some((_, found)) if !fits(facts.kind, found) => problems.push(format!(
                "its column '{name}' is {} where the description declares {}",
                type_name(found),
                facts.kind.name()
            )),
            Some(_) => {}
        }
    }
    if !problems.is_empty() {
        return Err(DatabaseError::Description(format!(
            "the {database} table differs from its description: {}",
            problems.join("; ")
        )));
    }
    Ok(columns
        .iter()
        .map(|(name, _)| {
            let kind = description
                .column(name)
                .map_or(ColumnKind::Text, |f| f.kind);
            (name.clone(), kind)
        })
        .collect())
}

/// The refusal of a plan whose result columns a database types otherwise
/// than the plan reads them: `found` lists (name, type) as it says.
#[cfg_attr(not(any(feature = "postgres", feature = "spark")), allow(dead_code))]
pub(crate) fn check_result_types(
    flavour: Flavour,
    schema: &SchemaRef,
    found: &[(String, String)],
    accepts: impl Fn(&datafusion::arrow::datatypes::DataType, &str) -> bool,
) -> Result<()> {
    let wrong: Vec<&str> = schema
        .fields()
        .iter()
        .filter(|field| {
            !found
                .iter()
                .any(|(name, ty)| name == field.name() && accepts(field.data_type(), ty))
        })
        .map(|field| field.name().as_str())
        .collect();
    if wrong.is_empty() && found.len() == schema.fields().len() {
        return Ok(());
    }
    Err(DatabaseError::Sql(format!(
        "{} would return the plan's columns with other types ({}): nothing was run",
        flavour.name(),
        wrong.join(", ")
    )))
}

/// The refusal of a plan the database says it cannot run: the first line
/// of its reason, which is about the statement (no row has been read).
pub(crate) fn cannot_run(flavour: Flavour, reason: &str) -> DatabaseError {
    let first = reason.lines().map(str::trim).find(|l| !l.is_empty());
    let line: String = first
        .unwrap_or("no reason given")
        .chars()
        .take(240)
        .collect();
    DatabaseError::Sql(format!(
        "{} cannot run the plan as written: {line}",
        flavour.name()
    ))
}

/// Whether a database type holds the declared kind exactly (integers are
/// exact reals; nothing else converts without a rule of its own).
fn fits(kind: ColumnKind, found: &DatabaseType) -> bool {
    matches!(
        (kind, found),
        (ColumnKind::Integer, DatabaseType::Integer)
            | (ColumnKind::Real, DatabaseType::Real | DatabaseType::Integer)
            | (ColumnKind::Text, DatabaseType::Text)
    )
}

fn type_name(found: &DatabaseType) -> String {
    match found {
        DatabaseType::Integer => "an integer".into(),
        DatabaseType::Real => "a real number".into(),
        DatabaseType::Text => "text".into(),
        DatabaseType::Other(name) => format!("of type {name}"),
    }
}
