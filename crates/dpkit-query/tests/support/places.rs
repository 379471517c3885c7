//! The places a test can put one CSV table and query it privately: the
//! embedded engine on the file itself, a SQLite file, the test's
//! PostgreSQL server or its Spark cluster. The same description opens
//! each (its `file = …` line is replaced by the database's source).
#![allow(dead_code)]

use std::path::PathBuf;

use dpkit_query::QueryEngine;

use super::databases::{Types, create_table, in_database, sqlite_add_table, sqlite_file};
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

/// A table to load: its name, its rows as CSV and its columns' SQL types.
pub type Loaded<'a> = (&'a str, &'a str, Types<'a>);

impl Place<'_> {
    /// Loads each table into one database at this place (or as CSV files
    /// beside each other), named `{prefix}_{table}` there, and opens
    /// `description`, whose `[table]` and `[private.NAME]` sections each
    /// read `file = "NAME.csv"`: each becomes its database table. Prefixes
    /// must be new to the place. `public` are files (name, CSV text) that
    /// `[public.NAME]` sections read.
    pub fn open_tables(
        &self,
        prefix: &str,
        loaded: (&[Loaded<'_>], &[(&str, &str)]),
        description: &str,
    ) -> QueryEngine {
        self.try_open_tables(prefix, loaded, description)
            .unwrap_or_else(|e| panic!("{}: cannot open {prefix}: {e}", self.name()))
    }

    /// As [`Place::open_tables`], with what opening says.
    pub fn try_open_tables(
        &self,
        prefix: &str,
        (tables, public): (&[Loaded<'_>], &[(&str, &str)]),
        description: &str,
    ) -> dpkit_query::Result<QueryEngine> {
        let dir = folder(&format!("{}-{prefix}", self.name()));
        let database = dir.join(format!("{prefix}.sqlite"));
        let _ = std::fs::remove_file(&database);
        for (file, csv) in public {
            std::fs::write(dir.join(file), csv).unwrap();
        }
        for (table, csv, types) in tables {
            let file = dir.join(format!("{table}.csv"));
            std::fs::write(&file, format!("{}\n", csv.trim_end())).unwrap();
            let named = format!("{prefix}_{table}");
            match self {
                Self::Embedded => {}
                Self::Sqlite | Self::SqliteStrict => {
                    let strict = matches!(self, Self::SqliteStrict);
                    sqlite_add_table(&database, &named, csv, types, strict);
                }
                Self::Postgres(server) => {
                    server.load_csv(&create_table(&named, csv, types, true), &named, &file);
                }
                Self::Spark(spark) => spark.sql(&[spark_table(&named, csv, &file, types)]),
            }
        }
        let source = match self {
            Self::Embedded => String::new(),
            Self::Sqlite | Self::SqliteStrict => format!("sqlite = \"{prefix}.sqlite\""),
            Self::Postgres(server) => format!("postgres = \"{}\"", server.connection()),
            Self::Spark(spark) => format!("spark = \"{}\"", spark.address()),
        };
        let text = match self {
            Self::Embedded => description.to_string(),
            _ => in_one_database(description, &source, prefix),
        };
        QueryEngine::open(dpkit_query::Description::from_toml(&text, &dir)?)
    }
}

/// `description` with each `file = "NAME.csv"` line of a private table
/// turned into the database table `{prefix}_NAME`: `source` then the
/// table in `[table]`, the table alone in `[private.NAME]`; public tables
/// stay files.
fn in_one_database(description: &str, source: &str, prefix: &str) -> String {
    let mut section = "";
    let mut lines = Vec::new();
    for line in description.lines() {
        if line.starts_with('[') {
            section = line;
        }
        let Some(file) = line.strip_prefix("file = \"") else {
            lines.push(line.to_string());
            continue;
        };
        let table = file.trim_end_matches('"').trim_end_matches(".csv");
        let named = format!("source_table = \"{prefix}_{table}\"");
        match section {
            "[table]" => lines.extend([source.to_string(), named]),
            private if private.starts_with("[private.") => lines.push(named),
            _ => lines.push(line.to_string()),
        }
    }
    lines.join("\n")
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
