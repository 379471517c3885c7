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

use rusqlite::{Connection, Params, Row};

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

/// Runs statements from the connection's cache of prepared statements.
pub(crate) trait Cached {
    /// Runs `sql` with `params`; the count of rows it changed.
    fn run<P: Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize>;

    /// The first row of `sql` with `params`, read by `read`.
    fn one<T, P: Params>(
        &self,
        sql: &str,
        params: P,
        read: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T>;
}

impl Cached for Connection {
    fn run<P: Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(params)
    }

    fn one<T, P: Params>(
        &self,
        sql: &str,
        params: P,
        read: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        self.prepare_cached(sql)?.query_row(params, read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_statement_runs_again_and_sees_a_changed_schema() {
        let connection = Connection::open_in_memory().unwrap();
        connection.run("CREATE TABLE t (x INTEGER)", []).unwrap();
        for x in 1..=3 {
            assert_eq!(connection.run("INSERT INTO t VALUES (?1)", [x]).unwrap(), 1);
        }
        let sum = |c: &Connection| c.one("SELECT SUM(x) FROM t", [], |r| r.get::<_, i64>(0));
        assert_eq!(sum(&connection).unwrap(), 6);
        connection.run("DROP TABLE t", []).unwrap();
        connection.run("CREATE TABLE t (x INTEGER)", []).unwrap();
        connection.run("INSERT INTO t VALUES (?1)", [10]).unwrap();
        assert_eq!(sum(&connection).unwrap(), 10);
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
        writer.run("CREATE TABLE t (x INTEGER)", []).unwrap();
        writer.run("INSERT INTO t VALUES (1), (2)", []).unwrap();
        reader
            .one("SELECT x FROM t", [], |r| r.get::<_, i64>(0))
            .unwrap();
        writer.run("INSERT INTO t VALUES (3)", []).unwrap();
        let count = reader.one("SELECT COUNT(*) FROM t", [], |r| r.get::<_, i64>(0));
        assert_eq!(count.unwrap(), 3);
        std::fs::remove_file(&path).unwrap();
    }
}
