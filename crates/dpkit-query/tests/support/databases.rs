//! A CSV file copied into a SQLite database or a test's PostgreSQL server,
//! with column types, and a description of it.
#![allow(dead_code)]

use std::path::Path;

use dpkit_query::Description;

/// The SQL type of each column: `INTEGER`, `REAL` or `TEXT`.
pub type Types<'a> = &'a [(&'a str, &'a str)];

fn csv_rows(csv: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut reader = csv.lines().filter(|l| !l.is_empty());
    let header = reader
        .next()
        .unwrap()
        .split(',')
        .map(String::from)
        .collect();
    let rows = reader
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    (header, rows)
}

fn sql_type<'a>(types: Types<'a>, column: &str) -> &'a str {
    types
        .iter()
        .find(|(n, _)| *n == column)
        .map_or("TEXT", |(_, t)| t)
}

/// `CREATE TABLE table (…)` for the CSV's header, in SQLite's types or
/// (`postgres`) in PostgreSQL's 64-bit ones.
pub fn create_table(table: &str, csv: &str, types: Types<'_>, postgres: bool) -> String {
    let (header, _) = csv_rows(csv);
    let columns: Vec<String> = header
        .iter()
        .map(|c| {
            let t = sql_type(types, c);
            let t = match (t, postgres) {
                ("REAL", true) => "DOUBLE PRECISION",
                ("INTEGER", true) => "BIGINT",
                _ => t,
            };
            format!("\"{c}\" {t}")
        })
        .collect();
    format!("CREATE TABLE {table} ({})", columns.join(", "))
}

/// Writes `csv` (simple, unquoted) to a new SQLite file as `table`, a
/// STRICT table if `strict`.
pub fn sqlite_file(path: &Path, table: &str, csv: &str, types: Types<'_>, strict: bool) {
    let _ = std::fs::remove_file(path);
    sqlite_add_table(path, table, csv, types, strict);
}

/// Adds `csv` (simple, unquoted) to the SQLite file at `path` (made if
/// need be) as `table`, a STRICT table if `strict`.
pub fn sqlite_add_table(path: &Path, table: &str, csv: &str, types: Types<'_>, strict: bool) {
    let connection = rusqlite::Connection::open(path).unwrap();
    let create = create_table(table, csv, types, false);
    let create = if strict {
        format!("{create} STRICT")
    } else {
        create
    };
    connection.execute_batch(&create).unwrap();
    let (header, rows) = csv_rows(csv);
    let marks = vec!["?"; header.len()].join(",");
    let mut insert = connection
        .prepare(&format!("INSERT INTO {table} VALUES ({marks})"))
        .unwrap();
    for row in rows {
        let values: Vec<rusqlite::types::Value> = row
            .iter()
            .zip(&header)
            .map(|(v, c)| match sql_type(types, c) {
                "INTEGER" => v.parse::<i64>().map_or(
                    rusqlite::types::Value::Null,
                    rusqlite::types::Value::Integer,
                ),
                "REAL" => v
                    .parse::<f64>()
                    .map_or(rusqlite::types::Value::Null, rusqlite::types::Value::Real),
                _ => rusqlite::types::Value::Text(v.clone()),
            })
            .collect();
        insert.execute(rusqlite::params_from_iter(values)).unwrap();
    }
}

/// `description` (TOML naming a file) pointed at a database instead.
pub fn in_database(description: &str, source: &str, base: &Path) -> Description {
    let text: String = description
        .lines()
        .map(|l| {
            if l.starts_with("file = ") {
                source.to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    Description::from_toml(&text, base).unwrap()
}

/// The bundled Adult description's text and folder.
pub fn adult_text() -> (String, std::path::PathBuf) {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/adult");
    (
        std::fs::read_to_string(folder.join("adult.toml")).unwrap(),
        folder,
    )
}

/// Adult's integer columns (the rest are text).
pub const ADULT_TYPES: Types<'static> = &[
    ("age", "INTEGER"),
    ("fnlwgt", "INTEGER"),
    ("education-num", "INTEGER"),
    ("capital-gain", "INTEGER"),
    ("capital-loss", "INTEGER"),
    ("hours-per-week", "INTEGER"),
];
