//! Statements a connection runs for every query, prepared once.
//!
//! Preparing a statement parses and plans its SQL; in the service's load
//! benchmark that was 8% of the time of a COUNT request, more than the
//! statements' own work. Each connection keeps the statements it ran in
//! rusqlite's cache, keyed by their text, and runs them again from there.
//! A statement is reset when its run ends (rusqlite resets it after
//! `execute`, and when a query's rows are dropped), before it goes back to
//! the cache, so none keeps a read open; SQLite prepares it anew by itself
//! if the schema changed under it.

use std::path::Path;

use rusqlite::Connection;

/// Room for every statement a ledger's connection runs again (about 20):
/// the cache forgets the least recently used, so one too few would let
/// a request's statements push each other out in turn.
const CAPACITY: usize = 64;

/// A connection to the file at `path` that keeps its prepared statements.
pub(crate) fn open(path: &Path) -> rusqlite::Result<Connection> {
    let connection = Connection::open(path)?;
    connection.set_prepared_statement_cache_capacity(CAPACITY);
    Ok(connection)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::{Sql, values};

    /// The first row's first column of `sql` (a statement from the cache).
    fn one(connection: &Connection, sql: &str) -> i64 {
        let row = Sql::first(connection, sql, &[]).unwrap().unwrap();
        row.integer(0).unwrap()
    }

    #[test]
    fn a_cached_statement_runs_again_and_sees_a_changed_schema() {
        let connection = Connection::open_in_memory().unwrap();
        connection.run("CREATE TABLE t (x INTEGER)", &[]).unwrap();
        for x in 1i64..=3 {
            assert_eq!(
                connection
                    .run("INSERT INTO t VALUES (?1)", values![x])
                    .unwrap(),
                1
            );
        }
        let sum = |c: &Connection| one(c, "SELECT SUM(x) FROM t");
        assert_eq!(sum(&connection), 6);
        connection.run("DROP TABLE t", &[]).unwrap();
        connection.run("CREATE TABLE t (x INTEGER)", &[]).unwrap();
        connection
            .run("INSERT INTO t VALUES (?1)", values![10i64])
            .unwrap();
        assert_eq!(sum(&connection), 10);
    }

    /// A row read from a statement of two leaves it part-way; back in
    /// the cache it must be reset, or its connection would go on reading
    /// an old snapshot and hold the file's lock against writers.
    #[test]
    fn a_statement_back_in_the_cache_holds_no_read_open() {
        let path = std::env::temp_dir().join(format!("dpkit-cached-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let (reader, writer) = (
            Connection::open(&path).unwrap(),
            Connection::open(&path).unwrap(),
        );
        writer.run("CREATE TABLE t (x INTEGER)", &[]).unwrap();
        writer.run("INSERT INTO t VALUES (1), (2)", &[]).unwrap();
        one(&reader, "SELECT x FROM t");
        writer.run("INSERT INTO t VALUES (3)", &[]).unwrap();
        assert_eq!(one(&reader, "SELECT COUNT(*) FROM t"), 3);
        std::fs::remove_file(&path).unwrap();
    }
}
