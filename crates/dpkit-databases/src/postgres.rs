//! A table in a PostgreSQL database, read in read-only transactions.

use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Config, Row};

use super::flavour::Flavour;
use super::rows::{Cell, Rows, shape_error};
use super::sql::RemotePlan;
use super::{Backend, DatabaseType};
use crate::error::{DatabaseError, Result};
use dpkit_description::ColumnKind;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A PostgreSQL table.
pub(crate) struct PostgresTable {
    runtime: tokio::runtime::Runtime,
    config: Config,
    /// TLS as the connection string's `sslmode` says (see `dpkit_postgres`).
    tls: dpkit_postgres::MakeRustlsConnect,
    /// The open connection; `None` after it was lost (reopened on next use).
    client: Mutex<Option<Client>>,
    table: String,
}

/// A failure that does not depend on the rows: the server cannot be
/// reached, or went away before a statement was sent. Refunded. The
/// connection string is never shown.
fn unreachable_error(reason: &str) -> DatabaseError {
    DatabaseError::Unreadable(format!("PostgreSQL {reason} (an I/O failure)"))
}

impl PostgresTable {
    /// Connects with `connection` (libpq `key=value` or a URL) to `table`.
    pub(crate) fn open(connection: &str, table: &str) -> Result<Self> {
        let refused = |e: dpkit_postgres::Refused| DatabaseError::Description(e.to_string());
        let (connection, tls) = dpkit_postgres::split(connection).map_err(refused)?;
        let tls = dpkit_postgres::connector(&tls).map_err(refused)?;
        let mut config = Config::from_str(&connection).map_err(|_| {
            DatabaseError::Description(
                "the postgres connection string does not parse (use key=value pairs or a postgresql:// URL)"
                    .into(),
            )
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| {
                DatabaseError::Unreadable(format!("cannot start the PostgreSQL client: {e}"))
            })?;
        let this = Self {
            runtime,
            config,
            tls,
            client: Mutex::new(None),
            table: table.to_string(),
        };
        let client = this.connect()?;
        let encoding = this
            .runtime
            .block_on(client.query_one("SHOW server_encoding", &[]))
            .and_then(|row| row.try_get::<_, String>(0))
            .map_err(|e| unreachable_error(&format!("cannot be read: {}", reason(&e))))?;
        // SQL_ASCII keeps whatever bytes were written, unchecked: a text
        // that is not UTF-8 would fail to be read only after the charge,
        // and whether it does is a bit about the rows. Every other encoding
        // is checked on writing and converted to UTF-8 for dpkit.
        if encoding.eq_ignore_ascii_case("SQL_ASCII") {
            return Err(DatabaseError::Description(
                "the PostgreSQL database's encoding is SQL_ASCII, which keeps text unchecked: \
                 dpkit reads databases whose text is checked (UTF8, LATIN1, …)"
                    .into(),
            ));
        }
        *this.client.lock().map_err(|_| shape_error())? = Some(client);
        Ok(this)
    }

    fn connect(&self) -> Result<Client> {
        let (client, connection) = self
            .runtime
            .block_on(self.config.connect(self.tls.clone()))
            .map_err(|e| unreachable_error(&format!("cannot be reached: {}", reason(&e))))?;
        self.runtime.spawn(connection);
        // Literals in the SQL sent are written with standard quoting.
        self.runtime
            .block_on(client.batch_execute("SET standard_conforming_strings = on"))
            .map_err(|e| unreachable_error(&format!("cannot be prepared: {}", reason(&e))))?;
        Ok(client)
    }

    /// Runs `work` with an open connection, reopening a lost one first.
    fn with_client<T>(
        &self,
        work: impl AsyncFnOnce(&Client) -> std::result::Result<T, tokio_postgres::Error>,
    ) -> std::result::Result<Result<T>, tokio_postgres::Error> {
        let Ok(mut slot) = self.client.lock() else {
            return Ok(Err(shape_error()));
        };
        if slot.as_ref().is_none_or(Client::is_closed) {
            match self.connect() {
                Ok(client) => *slot = Some(client),
                Err(error) => return Ok(Err(error)),
            }
        }
        let client = slot.as_ref().expect("connected above");
        let outcome = self.runtime.block_on(work(client));
        if client.is_closed() {
            *slot = None;
        }
        outcome.map(Ok)
    }
}

/// A connection failure's reason: the server's message or the socket's
/// error (neither holds the connection string).
fn reason(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return db.message().to_string();
    }
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(error);
    while let Some(inner) = source {
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            return io.kind().to_string();
        }
        source = inner.source();
    }
    "the connection failed".into()
}

/// A PostgreSQL type as dpkit reads it.
fn database_type(name: &str) -> DatabaseType {
    match name {
        "smallint" | "integer" | "bigint" => DatabaseType::Integer,
        "real" | "double precision" => DatabaseType::Real,
        "text" => DatabaseType::Text,
        other if other.starts_with("character") => DatabaseType::Text,
        other => DatabaseType::Other(other.to_string()),
    }
}

impl Backend for PostgresTable {
    fn flavour(&self) -> Flavour {
        Flavour::Postgres
    }

    fn identity(&self) -> Result<String> {
        let name = Flavour::Postgres.qualified(&self.table);
        let rows = self
            .with_client(async |client| {
                client
                    .query("SELECT to_regclass($1)::oid::text", &[&name])
                    .await
            })
            .map_err(|e| unreachable_error(&format!("cannot be read: {}", reason(&e))))??;
        let oid = rows
            .first()
            .and_then(|row| row.try_get::<_, Option<String>>(0).ok());
        oid.flatten().ok_or_else(|| {
            DatabaseError::Description(format!(
                "the PostgreSQL database has no table '{}'",
                self.table
            ))
        })
    }

    fn columns(&self) -> Result<Vec<(String, DatabaseType)>> {
        let name = Flavour::Postgres.qualified(&self.table);
        let rows = self
            .with_client(async |client| {
                client
                    .query(
                        "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) \
                         FROM pg_catalog.pg_attribute a \
                         WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 \
                         AND NOT a.attisdropped ORDER BY a.attnum",
                        &[&name],
                    )
                    .await
            })
            .map_err(|e| unreachable_error(&format!("cannot be read: {}", reason(&e))))??;
        if rows.is_empty() {
            return Err(DatabaseError::Description(format!(
                "the PostgreSQL database has no table '{}'",
                self.table
            )));
        }
        rows.iter()
            .map(|row| {
                let name: String = row.try_get(0).map_err(|_| shape_error())?;
                let kind: String = row.try_get(1).map_err(|_| shape_error())?;
                Ok((name, database_type(&kind)))
            })
            .collect()
    }

    fn source(
        &self,
        columns: &[(String, ColumnKind)],
        _: &[(String, DatabaseType)],
        _: &[(String, u32)],
    ) -> String {
        Flavour::Postgres.cast_source(&self.table, columns)
    }

    fn check(&self, plan: &RemotePlan, schema: &SchemaRef) -> Result<()> {
        let prepared = self.with_client(async |client| {
            let statement = client.prepare(plan.sql.as_str()).await?;
            Ok(statement
                .columns()
                .iter()
                .map(|c| (c.name().to_string(), c.type_().name().to_string()))
                .collect::<Vec<_>>())
        });
        match prepared {
            Ok(Ok(types)) => super::check_result_types(Flavour::Postgres, schema, &types, reads_as),
            Ok(Err(error)) => Err(error),
            Err(error) => match error.as_db_error() {
                Some(db) if !went_away(&error) => {
                    Err(super::cannot_run(Flavour::Postgres, db.message()))
                }
                _ => Err(unreachable_error(&format!(
                    "cannot be read: {}",
                    reason(&error)
                ))),
            },
        }
    }

    fn run(
        &self,
        plan: &RemotePlan,
        schema: SchemaRef,
        timeout: Option<Duration>,
    ) -> Result<RecordBatch> {
        let limit = timeout.map_or(0, |t| t.as_millis().clamp(1, i32::MAX as u128));
        // The outer error is the transaction's start, before the statement
        // is sent; the inner one is the statement's own.
        let outcome = self.with_client(async |client| {
            client
                .batch_execute(&format!(
                    "BEGIN READ ONLY; SET LOCAL statement_timeout = {limit}"
                ))
                .await?;
            let rows = client.query(plan.sql.as_str(), &[]).await;
            let _ = client.batch_execute("ROLLBACK").await;
            Ok(rows)
        });
        match outcome {
            Ok(Ok(Ok(rows))) => batch(&rows, schema),
            Ok(Ok(Err(error))) => Err(run_error(&error, timeout.is_some())),
            Ok(Err(error)) => Err(error),
            Err(error) if went_away(&error) => Err(unreachable_error(&format!(
                "went away before the query was sent: {}",
                reason(&error)
            ))),
            Err(_) => Err(DatabaseError::FailedWhileRunning(
                "details withheld: they could quote private values".into(),
            )),
        }
    }
}

/// The rows as one batch of `schema`.
fn batch(rows: &[Row], schema: SchemaRef) -> Result<RecordBatch> {
    let mut batch = Rows::new(schema)?;
    let Some(first) = rows.first() else {
        return batch.finish();
    };
    let order = batch.order(first.columns().iter().map(|c| c.name()))?;
    for row in rows {
        for (i, column) in row.columns().iter().enumerate() {
            let ty = column.type_();
            let cell = if *ty == Type::INT8 {
                row.try_get::<_, Option<i64>>(i)
                    .map(|v| v.map(Cell::Integer))
            } else if *ty == Type::INT4 {
                row.try_get::<_, Option<i32>>(i)
                    .map(|v| v.map(|v| Cell::Integer(v.into())))
            } else if *ty == Type::INT2 {
                row.try_get::<_, Option<i16>>(i)
                    .map(|v| v.map(|v| Cell::Integer(v.into())))
            } else if *ty == Type::FLOAT8 {
                row.try_get::<_, Option<f64>>(i).map(|v| v.map(Cell::Real))
            } else if *ty == Type::BOOL {
                row.try_get::<_, Option<bool>>(i)
                    .map(|v| v.map(|b| Cell::Integer(b.into())))
            } else {
                row.try_get::<_, Option<&str>>(i).map(|v| v.map(Cell::Text))
            }
            .map_err(|_| shape_error())?;
            batch.push(order[i], cell.unwrap_or(Cell::Null))?;
        }
    }
    batch.finish()
}

/// Whether a result column PostgreSQL types `found` is read as `wanted`
/// (see `batch`: exact sums and quantile cells come as text).
fn reads_as(wanted: &datafusion::arrow::datatypes::DataType, found: &str) -> bool {
    use datafusion::arrow::datatypes::DataType as T;
    match wanted {
        T::Int64 => matches!(found, "int8" | "int4" | "int2"),
        T::Float64 => found == "float8",
        T::Utf8 => matches!(found, "text" | "varchar"),
        T::Decimal128(_, 0) | T::List(_) => found == "text",
        T::Boolean => found == "bool",
        // A key that is NULL in every row.
        T::Null => true,
        _ => false,
    }
}

/// Whether `error` says the server could not be reached or went away.
fn went_away(error: &tokio_postgres::Error) -> bool {
    let code = error.code();
    error.is_closed()
        || code.is_none() && error.as_db_error().is_none()
        || code.is_some_and(|c| {
            c.code().starts_with("08")
                || [
                    SqlState::ADMIN_SHUTDOWN,
                    SqlState::CRASH_SHUTDOWN,
                    SqlState::CANNOT_CONNECT_NOW,
                    SqlState::TOO_MANY_CONNECTIONS,
                ]
                .contains(c)
        })
}

/// A failure of the statement. Its cost is kept, and its details are
/// withheld (PostgreSQL's messages can quote values). Even a server that
/// goes away while the statement runs is charged: it could have crashed on
/// one person's row, and a refund would give that bit away for free. Only
/// a server that cannot be reached before the statement is sent is
/// refunded (see [`PostgresTable::run`]).
fn run_error(error: &tokio_postgres::Error, limited: bool) -> DatabaseError {
    if went_away(error) {
        DatabaseError::FailedWhileRunning(
            "PostgreSQL went away while running it, which one row could have caused".into(),
        )
    } else if limited && error.code() == Some(&SqlState::QUERY_CANCELED) {
        DatabaseError::FailedWhileRunning("it ran longer than the time limit".into())
    } else {
        DatabaseError::FailedWhileRunning(
            "details withheld: they could quote private values".into(),
        )
    }
}
