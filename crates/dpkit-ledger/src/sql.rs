//! The one interface the ledger's accounting reads and writes its store
//! through. Every rule of the budget (what fits, the running sums, refunds,
//! replays) is written once, in this crate's other modules, as statements of
//! one common dialect over this interface; a store only runs them.
//!
//! The dialect is what SQLite and PostgreSQL both take: parameters `?1`,
//! `?2`, … (a store that numbers them otherwise rewrites them), `INSERT …
//! ON CONFLICT … DO …`, `RETURNING`, `SAVEPOINT`, `COMMIT` and `ROLLBACK`.
//! The one step the dialects write differently, beginning a transaction
//! that holds the write lock from its first read, is a method of its own
//! ([`Sql::begin_write`]).
//!
//! Values are the four kinds both stores keep: a 64-bit integer, a double,
//! a text, or NULL. A row's values are read back as rusqlite reads them: an
//! integer is read as a double where a double is asked for, and as a flag
//! (non-zero) where one is.

use std::fmt;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql};

/// A value sent to a statement or read from a row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
}

impl From<i64> for Value {
    fn from(value: i64) -> Self {
        Self::Integer(value)
    }
}

impl From<u32> for Value {
    fn from(value: u32) -> Self {
        Self::Integer(i64::from(value))
    }
}

impl From<f64> for Value {
    fn from(value: f64) -> Self {
        Self::Real(value)
    }
}

impl From<&str> for Value {
    fn from(value: &str) -> Self {
        Self::Text(value.to_string())
    }
}

impl From<&String> for Value {
    fn from(value: &String) -> Self {
        Self::Text(value.clone())
    }
}

impl From<String> for Value {
    fn from(value: String) -> Self {
        Self::Text(value)
    }
}

impl From<Option<i64>> for Value {
    fn from(value: Option<i64>) -> Self {
        value.map_or(Self::Null, Self::Integer)
    }
}

impl From<Option<f64>> for Value {
    fn from(value: Option<f64>) -> Self {
        value.map_or(Self::Null, Self::Real)
    }
}

/// The parameters of a statement, in order: `params![a, b]` gives `?1`, `?2`.
macro_rules! values {
    ($($value:expr),* $(,)?) => {
        &[$($crate::sql::Value::from($value)),*]
    };
}
pub(crate) use values;

/// Why a statement failed, as the store said it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SqlError(pub String);

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<rusqlite::Error> for SqlError {
    fn from(error: rusqlite::Error) -> Self {
        Self(error.to_string())
    }
}

/// `Result` with [`SqlError`].
pub(crate) type SqlResult<T> = std::result::Result<T, SqlError>;

/// One row a statement returned.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row(Vec<Value>);

impl Row {
    /// A row of `values`, in column order.
    pub(crate) fn new(values: Vec<Value>) -> Self {
        Self(values)
    }

    fn at(&self, index: usize) -> SqlResult<&Value> {
        self.0
            .get(index)
            .ok_or_else(|| SqlError(format!("no column {index} in a row")))
    }

    fn wrong(index: usize, wanted: &str) -> SqlError {
        SqlError(format!("column {index} is not {wanted}"))
    }

    /// Column `index` as an integer.
    pub(crate) fn integer(&self, index: usize) -> SqlResult<i64> {
        match self.at(index)? {
            Value::Integer(value) => Ok(*value),
            _ => Err(Self::wrong(index, "an integer")),
        }
    }

    /// Column `index` as an integer, or `None` for NULL.
    pub(crate) fn optional_integer(&self, index: usize) -> SqlResult<Option<i64>> {
        match self.at(index)? {
            Value::Null => Ok(None),
            Value::Integer(value) => Ok(Some(*value)),
            _ => Err(Self::wrong(index, "an integer")),
        }
    }

    /// Column `index` as a double (an integer is converted).
    pub(crate) fn real(&self, index: usize) -> SqlResult<f64> {
        self.optional_real(index)?
            .ok_or_else(|| Self::wrong(index, "a number"))
    }

    /// Column `index` as a double, or `None` for NULL.
    pub(crate) fn optional_real(&self, index: usize) -> SqlResult<Option<f64>> {
        match self.at(index)? {
            Value::Null => Ok(None),
            Value::Real(value) => Ok(Some(*value)),
            Value::Integer(value) => Ok(Some(*value as f64)),
            Value::Text(_) => Err(Self::wrong(index, "a number")),
        }
    }

    /// Column `index` as a flag: an integer other than 0.
    pub(crate) fn flag(&self, index: usize) -> SqlResult<bool> {
        Ok(self.integer(index)? != 0)
    }

    /// Column `index` as a text, or `None` for NULL.
    pub(crate) fn optional_text(&self, index: usize) -> SqlResult<Option<String>> {
        match self.at(index)? {
            Value::Null => Ok(None),
            Value::Text(value) => Ok(Some(value.clone())),
            _ => Err(Self::wrong(index, "a text")),
        }
    }

    /// Column `index` as a text.
    pub(crate) fn text(&self, index: usize) -> SqlResult<String> {
        self.optional_text(index)?
            .ok_or_else(|| Self::wrong(index, "a text"))
    }
}

/// A connection to a ledger's store, which runs the common dialect.
pub(crate) trait Sql: Send {
    /// Runs `sql` with `params`; the count of rows it changed.
    fn run(&self, sql: &str, params: &[Value]) -> SqlResult<usize>;

    /// Every row of `sql` with `params`.
    fn rows(&self, sql: &str, params: &[Value]) -> SqlResult<Vec<Row>>;

    /// Begins a transaction that holds the store's write lock from its
    /// first statement on, so that what it reads no other writer changes
    /// before it commits (SQLite: `BEGIN IMMEDIATE`).
    fn begin_write(&self) -> SqlResult<()>;

    /// Commits the transaction open on this connection; an error if it
    /// did not commit (a store that ends a failed transaction's COMMIT as
    /// a rollback must say so here, never report it committed).
    fn commit(&self) -> SqlResult<()>;

    /// Rolls back the transaction open on this connection.
    fn rollback(&self) -> SqlResult<()>;

    /// Whether a transaction is open on this connection.
    fn in_transaction(&self) -> bool;

    /// An expression for the time now, in UTC, as ISO 8601 text to the
    /// second (`2026-11-29T04:30:00Z`): the dialects name it differently.
    fn now(&self) -> &'static str;

    /// Whether the connection has ended for good (a server that closed
    /// its session): nothing more can be run on it.
    fn is_closed(&self) -> bool {
        false
    }

    /// The first row of `sql` with `params`, if it returned any.
    fn first(&self, sql: &str, params: &[Value]) -> SqlResult<Option<Row>> {
        Ok(self.rows(sql, params)?.into_iter().next())
    }
}

impl ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Integer(value) => ValueRef::Integer(*value),
            Value::Real(value) => ValueRef::Real(*value),
            Value::Text(value) => ValueRef::Text(value.as_bytes()),
        }))
    }
}

/// A value SQLite returned; a BLOB, which no ledger table holds, is refused.
fn from_sqlite(value: ValueRef<'_>) -> rusqlite::Result<Value> {
    Ok(match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(value) => Value::Integer(value),
        ValueRef::Real(value) => Value::Real(value),
        ValueRef::Text(text) => Value::Text(
            std::str::from_utf8(text)
                .map_err(|e| rusqlite::Error::Utf8Error(0, e))?
                .to_string(),
        ),
        ValueRef::Blob(_) => {
            return Err(rusqlite::Error::InvalidColumnType(
                0,
                "a ledger value".into(),
                rusqlite::types::Type::Blob,
            ));
        }
    })
}

/// SQLite's connection, its statements prepared once and kept in its
/// cache ([`crate::cached`]).
impl Sql for Connection {
    fn run(&self, sql: &str, params: &[Value]) -> SqlResult<usize> {
        let mut statement = self.prepare_cached(sql)?;
        Ok(statement.execute(rusqlite::params_from_iter(params))?)
    }

    fn rows(&self, sql: &str, params: &[Value]) -> SqlResult<Vec<Row>> {
        let mut statement = self.prepare_cached(sql)?;
        let columns = statement.column_count();
        let rows = statement.query_map(rusqlite::params_from_iter(params), |row| {
            (0..columns)
                .map(|i| from_sqlite(row.get_ref(i)?))
                .collect::<rusqlite::Result<Vec<_>>>()
                .map(Row::new)
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn begin_write(&self) -> SqlResult<()> {
        self.run("BEGIN IMMEDIATE", &[]).map(drop)
    }

    fn commit(&self) -> SqlResult<()> {
        self.run("COMMIT", &[]).map(drop)
    }

    fn rollback(&self) -> SqlResult<()> {
        self.run("ROLLBACK", &[]).map(drop)
    }

    fn in_transaction(&self) -> bool {
        !self.is_autocommit()
    }

    fn now(&self) -> &'static str {
        "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_go_in_and_come_back_as_rusqlite_reads_them() {
        let connection = Connection::open_in_memory().unwrap();
        let sql: &dyn Sql = &connection;
        sql.run("CREATE TABLE t (i INTEGER, r REAL, t TEXT)", &[])
            .unwrap();
        sql.run(
            "INSERT INTO t VALUES (?1, ?2, ?3), (?4, ?5, ?6)",
            values![7i64, 0.5, "a", 3i64, None::<f64>, Value::Null],
        )
        .unwrap();
        let rows = sql
            .rows("SELECT i, r, t, i > 5 FROM t ORDER BY i", &[])
            .unwrap();
        assert_eq!(rows.len(), 2);
        let (low, high) = (&rows[0], &rows[1]);
        assert_eq!((high.integer(0), high.real(1)), (Ok(7), Ok(0.5)));
        assert_eq!(high.text(2), Ok("a".to_string()));
        assert_eq!((high.flag(3), low.flag(3)), (Ok(true), Ok(false)));
        assert_eq!(low.real(0), Ok(3.0), "an integer reads as a double");
        assert_eq!(low.optional_real(1), Ok(None));
        assert_eq!(low.optional_text(2), Ok(None));
        assert!(
            low.real(1).is_err() && low.text(2).is_err(),
            "NULL is not a value"
        );
        assert!(high.integer(1).is_err() && high.text(0).is_err());
        assert!(high.integer(4).is_err(), "no such column");
        let returned = sql
            .first("INSERT INTO t (i) VALUES (9) RETURNING i * 2", &[])
            .unwrap();
        assert_eq!(returned.unwrap().integer(0), Ok(18));
        assert_eq!(sql.first("SELECT i FROM t WHERE i > 100", &[]), Ok(None));
    }

    #[test]
    fn a_write_transaction_is_open_until_it_ends() {
        let connection = Connection::open_in_memory().unwrap();
        let sql: &dyn Sql = &connection;
        assert!(!sql.in_transaction());
        sql.begin_write().unwrap();
        assert!(sql.in_transaction());
        sql.run("CREATE TABLE t (x INTEGER)", &[]).unwrap();
        sql.rollback().unwrap();
        assert!(!sql.in_transaction());
        assert!(
            sql.run("INSERT INTO t VALUES (1)", &[]).is_err(),
            "rolled back"
        );
        sql.begin_write().unwrap();
        sql.run("CREATE TABLE t (x INTEGER)", &[]).unwrap();
        sql.commit().unwrap();
        assert!(!sql.in_transaction());
        assert_eq!(sql.run("INSERT INTO t VALUES (1)", &[]), Ok(1), "committed");
    }
}
