//! A ledger in a PostgreSQL database, which several processes on several
//! machines share: the same statements as in a SQLite file ([`crate::sql`]),
//! run through `tokio-postgres` on a runtime of the connection's own.
//!
//! Why the budget holds across processes: every write transaction begins
//! with `LOCK TABLE accounts IN SHARE ROW EXCLUSIVE MODE`, a lock that only
//! one transaction holds at a time and that plain reads never wait for.
//! The transaction is READ COMMITTED, so each statement after the lock
//! reads what every earlier writer committed: a charge's filter reads the
//! sums the last charge left, as `BEGIN IMMEDIATE` gives on SQLite. The
//! lock is taken before any statement that reads the ledger, so no read of
//! the transaction can come from a snapshot older than the lock.
//!
//! Why a commit is never reported that did not happen: PostgreSQL answers
//! the COMMIT of a transaction in which a statement failed with a rollback,
//! not an error. [`Sql::commit`] sends `SELECT 1; COMMIT` as one message: in
//! a failed transaction the `SELECT` fails, PostgreSQL skips the `COMMIT`,
//! and the failure is returned (and the transaction rolled back).
//!
//! Why a commit is on disk when it returns: each session sets
//! `synchronous_commit = on`, and a server that runs with `fsync = off`
//! (which loses commits in a crash) is refused.
//!
//! Methods block: call them from threads that may block, never from an
//! asynchronous task (the connection's runtime would refuse to start
//! inside another's).
//!
//! TLS is as the connection string's `sslmode` and `sslrootcert` say, as
//! for dpkit's PostgreSQL tables (`dpkit_postgres`): `verify-full` with the
//! server's root certificate is what a ledger on another machine needs.
//! Connect to PostgreSQL itself, not through a pooler in transaction mode,
//! which would drop the session's settings. `synchronous_commit = on` waits for the server's
//! disk and for its synchronous replicas, not for asynchronous ones: a
//! failover to one of those can lose commits.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::error::Error;
use std::str::FromStr;
use std::time::Duration;

use bytes::BytesMut;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Client, Config, Statement};

use crate::sql::{Row, Sql, SqlError, SqlResult, Value};

mod schema;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection may be idle before the client probes it.
const KEEPALIVE: Duration = Duration::from_secs(30);

/// Each session's settings. Commits wait for the disk. A transaction left
/// idle holding the write lock (its process stopped, or cut off) is ended
/// by the server after a minute, rolled back, so that it cannot hold up
/// every other writer; one that waits longer than that for the lock fails
/// (nothing is charged) rather than hang.
const SESSION: &str = "SET synchronous_commit = on;
     SET standard_conforming_strings = on;
     SET idle_in_transaction_session_timeout = '60s';
     SET lock_timeout = '60s';
     SET tcp_keepalives_idle = 30;
     SET tcp_keepalives_interval = 10;
     SET tcp_keepalives_count = 3";

/// One connection to a PostgreSQL ledger.
pub(crate) struct Postgres {
    runtime: tokio::runtime::Runtime,
    client: Client,
    /// Statements prepared on this connection, by their text in the
    /// common dialect.
    prepared: RefCell<HashMap<String, Statement>>,
    /// Whether a transaction is open.
    open: Cell<bool>,
}

/// A failure's reason. The connection string is parsed before anything
/// else, with a message of dpkit's own, so no later error can quote it.
fn reason(error: &tokio_postgres::Error) -> SqlError {
    if let Some(db) = error.as_db_error() {
        return SqlError(db.message().to_string());
    }
    if error.is_closed() {
        return SqlError("the connection was closed".into());
    }
    // With its causes: a TLS handshake's says which certificate failed.
    let mut text = error.to_string();
    let mut cause = Error::source(error);
    while let Some(inner) = cause {
        text = format!("{text}: {inner}");
        cause = inner.source();
    }
    SqlError(text)
}

/// `sql` with the common dialect's `?N` parameters written as `$N` (no
/// literal in the ledger's statements holds a `?` before a digit).
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        let parameter = c == '?' && chars.peek().is_some_and(char::is_ascii_digit);
        out.push(if parameter { '$' } else { c });
    }
    out
}

impl Postgres {
    /// Connects with `connection` (libpq `key=value` pairs or a
    /// `postgresql://` URL), checks that the server keeps its commits, and
    /// makes the ledger's tables if they are not there.
    pub(crate) fn connect(connection: &str) -> SqlResult<Self> {
        let refused = |e: dpkit_postgres::Refused| SqlError(e.to_string());
        let (connection, tls) = dpkit_postgres::split(connection).map_err(refused)?;
        let tls = dpkit_postgres::connector(&tls).map_err(refused)?;
        let mut config = Config::from_str(&connection).map_err(|_| {
            SqlError(
                "the connection string does not parse \
                 (use key=value pairs or a postgresql:// URL)"
                    .into(),
            )
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        // A server that went away, or a path to it that broke, is noticed
        // in about a minute, not the system's default two hours; the
        // server notices a client gone as soon (the session's settings).
        config
            .keepalives(true)
            .keepalives_idle(KEEPALIVE)
            .keepalives_interval(KEEPALIVE / 3)
            .keepalives_retries(3)
            .tcp_user_timeout(KEEPALIVE * 2);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| SqlError(format!("cannot start the client: {e}")))?;
        let (client, connection) = runtime
            .block_on(config.connect(tls))
            .map_err(|e| reason(&e))?;
        runtime.spawn(connection);
        let this = Self {
            runtime,
            client,
            prepared: RefCell::default(),
            open: Cell::new(false),
        };
        this.batch(SESSION)?;
        let fsync = this.rows("SHOW fsync", &[])?;
        if fsync.first().and_then(|row| row.text(0).ok()).as_deref() != Some("on") {
            return Err(SqlError(
                "the server runs with fsync = off, which can lose committed \
                 charges in a crash: a ledger needs fsync = on"
                    .into(),
            ));
        }
        schema::create(&this)?;
        Ok(this)
    }

    /// Whether the connection has ended (its session, and every lock the
    /// session held, are gone). The connection's task runs only while this
    /// connection waits for the server, so it is let run first: a server
    /// that ended the session since the last statement has said so, and
    /// this sees it. The first yield lets the runtime poll the socket (its
    /// task is then ready), the second lets that task run.
    pub(crate) fn is_closed(&self) -> bool {
        self.runtime.block_on(async {
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
        });
        self.client.is_closed()
    }

    /// Runs `sql` (statements without parameters) as one message.
    pub(crate) fn batch(&self, sql: &str) -> SqlResult<()> {
        self.runtime
            .block_on(self.client.batch_execute(sql))
            .map_err(|e| reason(&e))
    }

    /// `sql`, prepared once on this connection.
    fn statement(&self, sql: &str) -> SqlResult<Statement> {
        if let Some(statement) = self.prepared.borrow().get(sql) {
            return Ok(statement.clone());
        }
        let statement = self
            .runtime
            .block_on(self.client.prepare(&numbered(sql)))
            .map_err(|e| reason(&e))?;
        self.prepared
            .borrow_mut()
            .insert(sql.to_string(), statement.clone());
        Ok(statement)
    }
}

/// A value is sent as the type PostgreSQL asks for in its place.
impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        match (self, ty) {
            (Value::Null, _) => Ok(IsNull::Yes),
            (Value::Integer(value), &Type::INT8) => value.to_sql(ty, out),
            (Value::Integer(value), &Type::INT4) => i32::try_from(*value)?.to_sql(ty, out),
            (Value::Integer(value), &Type::FLOAT8) => (*value as f64).to_sql(ty, out),
            (Value::Real(value), &Type::FLOAT8) => value.to_sql(ty, out),
            (Value::Text(value), &Type::TEXT | &Type::VARCHAR | &Type::NAME | &Type::UNKNOWN) => {
                value.as_str().to_sql(ty, out)
            }
            (value, ty) => Err(format!("a ledger value {value:?} cannot be sent as {ty}").into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// Column `index` of `row` as one of the ledger's values.
fn value(row: &tokio_postgres::Row, index: usize) -> Result<Value, tokio_postgres::Error> {
    let ty = row.columns()[index].type_();
    Ok(match *ty {
        Type::INT8 => row.try_get::<_, Option<i64>>(index)?.map(Value::Integer),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(index)?
            .map(|v| Value::Integer(v.into())),
        Type::INT2 => row
            .try_get::<_, Option<i16>>(index)?
            .map(|v| Value::Integer(v.into())),
        Type::BOOL => row
            .try_get::<_, Option<bool>>(index)?
            .map(|v| Value::Integer(v.into())),
        Type::FLOAT8 => row.try_get::<_, Option<f64>>(index)?.map(Value::Real),
        _ => row.try_get::<_, Option<String>>(index)?.map(Value::Text),
    }
    .unwrap_or(Value::Null))
}

impl Sql for Postgres {
    fn run(&self, sql: &str, params: &[Value]) -> SqlResult<usize> {
        let statement = self.statement(sql)?;
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as _).collect();
        let changed = self
            .runtime
            .block_on(self.client.execute(&statement, &refs))
            .map_err(|e| reason(&e))?;
        usize::try_from(changed).map_err(|_| SqlError("too many rows changed".into()))
    }

    fn rows(&self, sql: &str, params: &[Value]) -> SqlResult<Vec<Row>> {
        let statement = self.statement(sql)?;
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as _).collect();
        let rows = self
            .runtime
            .block_on(self.client.query(&statement, &refs))
            .map_err(|e| reason(&e))?;
        rows.iter()
            .map(|row| {
                (0..row.len())
                    .map(|i| value(row, i))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Row::new)
                    .map_err(|e| reason(&e))
            })
            .collect()
    }

    fn begin_write(&self) -> SqlResult<()> {
        self.open.set(true);
        let begun = self.batch(
            "BEGIN ISOLATION LEVEL READ COMMITTED;
             LOCK TABLE accounts IN SHARE ROW EXCLUSIVE MODE",
        );
        if begun.is_err() {
            let _ = self.rollback();
        }
        begun
    }

    fn commit(&self) -> SqlResult<()> {
        // In a failed transaction the SELECT fails and the COMMIT is not
        // run (see the module's text).
        let committed = self.batch("SELECT 1; COMMIT");
        if committed.is_err() {
            let _ = self.rollback();
        }
        self.open.set(false);
        committed
    }

    fn rollback(&self) -> SqlResult<()> {
        self.open.set(false);
        self.batch("ROLLBACK")
    }

    fn in_transaction(&self) -> bool {
        self.open.get()
    }

    fn is_closed(&self) -> bool {
        Postgres::is_closed(self)
    }

    fn now(&self) -> &'static str {
        "to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::values;
    use crate::test_server::Postgres as Server;

    fn count(sql: &Postgres) -> i64 {
        let rows = sql.rows("SELECT COUNT(*) FROM accounts", &[]).unwrap();
        rows[0].integer(0).unwrap()
    }

    #[test]
    fn a_transaction_in_which_a_statement_failed_is_never_reported_committed() {
        let server = Server::start_durable("ledger-failed-commit");
        let sql = Postgres::connect(&server.connection()).unwrap();
        let insert = "INSERT INTO accounts (account, epsilon_units, delta) VALUES (?1, 1, 0.0)";
        sql.begin_write().unwrap();
        assert_eq!(sql.run(insert, values!["ann"]), Ok(1));
        assert!(
            sql.run(insert, values!["ann"]).is_err(),
            "a second row of one key"
        );
        let committed = sql.commit();
        assert!(
            committed.is_err(),
            "PostgreSQL rolled it back: {committed:?}"
        );
        assert!(!sql.in_transaction());
        assert_eq!(count(&sql), 0, "nothing of it was kept");
        // A failed statement undone to its savepoint fails nothing else.
        sql.begin_write().unwrap();
        sql.run(insert, values!["ann"]).unwrap();
        sql.run("SAVEPOINT one_write", &[]).unwrap();
        assert!(sql.run(insert, values!["ann"]).is_err());
        sql.run("ROLLBACK TO one_write", &[]).unwrap();
        sql.run("RELEASE one_write", &[]).unwrap();
        assert_eq!(sql.commit(), Ok(()));
        assert_eq!(count(&sql), 1);
    }

    #[test]
    fn a_transaction_whose_session_was_ended_is_not_reported_committed() {
        let server = Server::start_durable("ledger-ended");
        let sql = Postgres::connect(&server.connection()).unwrap();
        let other = Postgres::connect(&server.connection()).unwrap();
        let pid = sql.rows("SELECT pg_backend_pid()", &[]).unwrap()[0]
            .integer(0)
            .unwrap();
        sql.begin_write().unwrap();
        sql.run(
            "INSERT INTO accounts (account, epsilon_units, delta) VALUES ('ann', 1, 0.0)",
            &[],
        )
        .unwrap();
        other
            .rows("SELECT pg_terminate_backend(?1::integer)", values![pid])
            .unwrap();
        assert!(sql.commit().is_err());
        assert!(
            sql.begin_write().is_err(),
            "a closed connection stays an error"
        );
        assert_eq!(count(&other), 0);
    }

    #[test]
    fn a_write_transaction_waits_for_another_and_then_reads_what_it_committed() {
        let server = Server::start_durable("ledger-write-lock");
        let connection = server.connection();
        let first = Postgres::connect(&connection).unwrap();
        let second = Postgres::connect(&connection).unwrap();
        first.begin_write().unwrap();
        first
            .run(
                "INSERT INTO accounts (account, epsilon_units, delta) VALUES ('ann', 1, 0.0)",
                &[],
            )
            .unwrap();
        // A plain read does not wait for the writer, and sees nothing yet.
        assert_eq!(count(&second), 0);
        let waiter = std::thread::spawn(move || {
            second.begin_write().unwrap();
            let seen = count(&second);
            second.rollback().unwrap();
            seen
        });
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !waiter.is_finished(),
            "the second writer waits for the first"
        );
        first.commit().unwrap();
        assert_eq!(waiter.join().unwrap(), 1, "and then reads its commit");
    }

    #[test]
    fn parameters_are_numbered_as_postgresql_numbers_them() {
        assert_eq!(
            numbered("UPDATE t SET a = ?2 WHERE b = ?1 AND c = '?' AND d = ?10"),
            "UPDATE t SET a = $2 WHERE b = $1 AND c = '?' AND d = $10"
        );
    }
}
