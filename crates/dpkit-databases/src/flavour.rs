//! Which SQL a database speaks, and how dpkit writes names and types in it.

use crate::error::DatabaseError;
use dpkit_description::ColumnKind;

/// Which SQL a database speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// SQLite, with dpkit's functions registered on the connection.
    Sqlite,
    /// PostgreSQL, with dpkit's functions spelled in its SQL.
    Postgres,
    /// Apache Spark SQL (through Spark Connect), spelled likewise.
    Spark,
}

impl Flavour {
    /// The database's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "SQLite",
            Self::Postgres => "PostgreSQL",
            Self::Spark => "Spark",
        }
    }

    /// Whether a text column's cut to its `max_length` is read in the
    /// table's typed `SELECT` (`Backend::source`) rather than written where
    /// the plan cuts. SQLite copies a typed column's expression into every
    /// place the column is named, so `SUBSTR` of the typed column, in the
    /// plan, copies every text; in the typed `SELECT`, the cut can look at
    /// the stored length first, the typed expression computed once.
    pub(crate) fn cuts_in_source(self) -> bool {
        self == Self::Sqlite
    }

    /// Its name for a double.
    pub(crate) fn double(self) -> &'static str {
        match self {
            Self::Spark => "DOUBLE",
            _ => "DOUBLE PRECISION",
        }
    }

    /// `name` as a quoted identifier.
    pub(crate) fn quote(self, name: &str) -> String {
        match self {
            Self::Spark => format!("`{}`", name.replace('`', "``")),
            _ => format!("\"{}\"", name.replace('"', "\"\"")),
        }
    }

    /// `schema.table` (Spark: `database.table`), quoted part by part.
    #[cfg_attr(not(any(feature = "postgres", feature = "spark")), allow(dead_code))]
    pub(crate) fn qualified(self, table: &str) -> String {
        let parts: Vec<String> = table.split('.').map(|part| self.quote(part)).collect();
        parts.join(".")
    }

    /// The typed view of `table` for PostgreSQL and Spark: every column
    /// cast to the type of its kind, so the plan reads what it declared.
    /// Text compares byte by byte, as in the embedded engine, whatever the
    /// column's collation: under a case-insensitive one, `a` and `A` would
    /// be one group, keyed as whichever row the database met first (a
    /// cast to Spark's `STRING` takes its binary collation).
    #[cfg_attr(not(any(feature = "postgres", feature = "spark")), allow(dead_code))]
    pub(crate) fn cast_source(self, table: &str, columns: &[(String, ColumnKind)]) -> String {
        let list: Vec<String> = columns
            .iter()
            .map(|(name, kind)| {
                let quoted = self.quote(name);
                let cast = match (kind, self) {
                    (ColumnKind::Integer, _) => format!("CAST({quoted} AS BIGINT)"),
                    (ColumnKind::Real, _) => format!("CAST({quoted} AS {})", self.double()),
                    (ColumnKind::Text, Self::Spark) => format!("CAST({quoted} AS STRING)"),
                    (ColumnKind::Text, _) => format!("CAST({quoted} AS TEXT) COLLATE \"C\""),
                };
                format!("{cast} AS {quoted}")
            })
            .collect();
        format!("SELECT {} FROM {}", list.join(", "), self.qualified(table))
    }
}

/// A refusal: the query runs on the embedded engine but not on this database.
pub(crate) fn unavailable(flavour: Flavour, what: &str) -> DatabaseError {
    DatabaseError::NotPrivate(format!(
        "{what} is not available on {} yet (the embedded engine and SQLite run it)",
        flavour.name()
    ))
}
