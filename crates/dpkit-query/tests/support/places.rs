//! The places a test can put one CSV table and query it privately: the
//! embedded engine on the file itself, a SQLite file, the test's
//! PostgreSQL server or its Spark cluster. The same description opens
//! each (its `file = …` line is replaced by the database's source).
#![allow(dead_code)]

use std::path::PathBuf;

use dpkit_query::QueryEngine;

use super::databases::{Types, create_table, in_database, sqlite_file};
use super::postgres::Postgres;
use super::spark::Spark;

/// Where a table is loaded and queried.
pub enum Place<'a> {
    /// The CSV file, read by embedded DataFusion.
    Embedded,
    /// A SQLite file.
    Sqlite,
    /// A SQLite file whose table is STRICT (its columns read as stored).
    SqliteStrict,
    /// A table of a running PostgreSQL server.
    Postgres(&'a Postgres),
    /// A table of a running Spark cluster (a CSV table in its warehouse).
    Spark(&'a Spark),
}

/// A new folder for this process's tables at `place`.
fn folder(place: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("dpkit-places-{place}-{}", std::process::id()));
    std::fs::create_dir_all(&path).unwrap();
    path
}

impl Place<'_> {
    /// Its name, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Embedded => "embedded",
            Self::Sqlite => "sqlite",
            Self::SqliteStrict => "sqlite-strict",
            Self::Postgres(_) => "postgres",
            Self::Spark(_) => "spark",
        }
    }

    /// Loads `csv` (a header, then simple unquoted rows; an empty field is
    /// NULL) as `table`, typed by `types` (the rest is text), and opens
    /// `description` over it. Table names must be new to the place.
    pub fn open(&self, table: &str, csv: &str, types: Types<'_>, description: &str) -> QueryEngine {
        self.try_open(table, csv, types, description)
            .unwrap_or_else(|e| panic!("{}: cannot open {table}: {e}", self.name()))
    }

    /// As [`Place::open`], with what opening says.
    pub fn try_open(
        &self,
        table: &str,
        csv: &str,
        types: Types<'_>,
        description: &str,
    ) -> dpkit_query::Result<QueryEngine> {
        let dir = folder(self.name());
        let file = dir.join(format!("{table}.csv"));
        // No blank line at the end: PostgreSQL's COPY reads one as a row.
        std::fs::write(&file, format!("{}\n", csv.trim_end())).unwrap();
        let source = match self {
            Self::Embedded => format!("file = \"{table}.csv\""),
            Self::Sqlite | Self::SqliteStrict => {
                let strict = matches!(self, Self::SqliteStrict);
                sqlite_file(
                    &dir.join(format!("{table}.sqlite")),
                    table,
                    csv,
                    types,
                    strict,
                );
                format!("sqlite = \"{table}.sqlite\"")
            }
            Self::Postgres(server) => {
                server.load_csv(&create_table(table, csv, types, true), table, &file);
                format!("postgres = \"{}\"", server.connection())
            }
            Self::Spark(spark) => {
                spark.sql(&[spark_table(table, csv, &file, types)]);
                format!("spark = \"{}\"", spark.address())
            }
        };
        let source = match self {
            Self::Embedded => source,
            _ => format!("{source}\nsource_table = \"{table}\""),
        };
        QueryEngine::open(in_database(description, &source, &dir))
    }
}

/// `CREATE TABLE … USING csv` over `file`, typed as `types` say; NaN and
/// infinities are spelled as PostgreSQL and DataFusion read them.
pub fn spark_table(table: &str, csv: &str, file: &std::path::Path, types: Types<'_>) -> String {
    let header = csv.lines().next().unwrap();
    let columns: Vec<String> = header
        .split(',')
        .map(|c| {
            let t = match types.iter().find(|(n, _)| *n == c).map(|(_, t)| *t) {
                Some("INTEGER") => "BIGINT",
                Some("REAL") => "DOUBLE",
                _ => "STRING",
            };
            format!("`{c}` {t}")
        })
        .collect();
    format!(
        "CREATE TABLE {table} ({}) USING csv OPTIONS (path '{}', header 'true', \
         nanValue 'NaN', positiveInf 'Infinity', negativeInf '-Infinity')",
        columns.join(", "),
        file.display()
    )
}
