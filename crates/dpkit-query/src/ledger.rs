//! The budget ledger: one SQLite file per dataset and analyst. A query's cost
//! is committed to disk before any answer is computed, and refunded if the
//! query then fails.

use std::path::{Path, PathBuf};

use dpkit_core::accounting::PrivacyLoss;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::error::{QueryError, Result};

/// ε is stored in integer units of 10⁻¹⁵, so sums of decimal costs are exact.
const UNITS_PER_EPSILON: f64 = 1e15;
/// δ sums may round; this much slack keeps a spend of exactly the rest possible.
const DELTA_SLACK: f64 = 1e-18;

fn to_units(epsilon: f64) -> i64 {
    (epsilon * UNITS_PER_EPSILON).round() as i64
}

fn from_units(units: i64) -> f64 {
    units as f64 / UNITS_PER_EPSILON
}

/// Spent and remaining budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetState {
    /// The total granted.
    pub total_epsilon: f64,
    /// The total δ granted.
    pub total_delta: f64,
    /// Spent by committed queries.
    pub spent_epsilon: f64,
    /// δ spent by committed queries.
    pub spent_delta: f64,
    /// Queries charged and not refunded.
    pub queries: u64,
}

impl BudgetState {
    /// What is left.
    pub fn remaining_epsilon(&self) -> f64 {
        (self.total_epsilon - self.spent_epsilon).max(0.0)
    }

    /// δ left.
    pub fn remaining_delta(&self) -> f64 {
        (self.total_delta - self.spent_delta).max(0.0)
    }
}

/// A ledger file.
///
/// ```
/// use dpkit_query::ledger::Ledger;
/// use dpkit_core::accounting::PrivacyLoss;
/// let path = std::env::temp_dir().join(format!("doc-ledger-{}.sqlite", std::process::id()));
/// let _ = std::fs::remove_file(&path);
/// let ledger = Ledger::open(&path, 1.0, 1e-6).unwrap();
/// let charge = ledger.charge(PrivacyLoss::pure(0.4).unwrap(), "SELECT COUNT(*) FROM t").unwrap();
/// assert!(ledger.charge(PrivacyLoss::pure(0.7).unwrap(), "again").is_err());
/// ledger.refund(charge).unwrap();
/// assert_eq!(ledger.state().unwrap().spent_epsilon, 0.0);
/// # std::fs::remove_file(&path).unwrap();
/// ```
pub struct Ledger {
    connection: Connection,
    path: PathBuf,
}

/// The receipt of a committed charge, used to refund it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charge(i64);

impl Ledger {
    /// Opens the ledger at `path`, creating it with the given totals if it
    /// does not exist (totals of an existing ledger are kept: editing the
    /// description does not raise a budget already granted).
    pub fn open(path: &Path, total_epsilon: f64, total_delta: f64) -> Result<Self> {
        let connection = Connection::open(path).map_err(|e| ledger_error(path, e))?;
        let ledger = Self {
            connection,
            path: path.to_path_buf(),
        };
        ledger
            .connection
            .execute_batch(
                "PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = FULL;
                 PRAGMA busy_timeout = 10000;
                 CREATE TABLE IF NOT EXISTS budget (
                     id INTEGER PRIMARY KEY CHECK (id = 1),
                     epsilon_units INTEGER NOT NULL,
                     delta REAL NOT NULL);
                 CREATE TABLE IF NOT EXISTS spends (
                     id INTEGER PRIMARY KEY AUTOINCREMENT,
                     at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
                     query TEXT NOT NULL,
                     epsilon_units INTEGER NOT NULL,
                     delta REAL NOT NULL,
                     status TEXT NOT NULL CHECK (status IN ('charged', 'refunded')));",
            )
            .map_err(|e| ledger.error(e))?;
        ledger
            .connection
            .execute(
                "INSERT OR IGNORE INTO budget (id, epsilon_units, delta) VALUES (1, ?1, ?2)",
                params![to_units(total_epsilon), total_delta],
            )
            .map_err(|e| ledger.error(e))?;
        Ok(ledger)
    }

    fn error(&self, error: rusqlite::Error) -> QueryError {
        ledger_error(&self.path, error)
    }

    /// Spent and remaining budget.
    pub fn state(&self) -> Result<BudgetState> {
        read_state(&self.connection).map_err(|e| self.error(e))
    }

    /// Commits `cost` to disk if it fits the remaining budget, else refuses
    /// with [`QueryError::Budget`] and records nothing.
    pub fn charge(&self, cost: PrivacyLoss, query: &str) -> Result<Charge> {
        let mut connection = Connection::open(&self.path).map_err(|e| self.error(e))?;
        connection
            .busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| self.error(e))?;
        // IMMEDIATE: the check and the insert happen under one write lock, so
        // two concurrent queries cannot both take the last of the budget.
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.error(e))?;
        let state = read_state(&transaction).map_err(|e| self.error(e))?;
        let units = to_units(cost.epsilon());
        let spent_units = to_units(state.spent_epsilon);
        let total_units = to_units(state.total_epsilon);
        if spent_units + units > total_units {
            return Err(QueryError::Budget(format!(
                "the query costs ε = {} but only ε = {} of {} remains",
                cost.epsilon(),
                from_units(total_units - spent_units),
                state.total_epsilon
            )));
        }
        if state.spent_delta + cost.delta() > state.total_delta + DELTA_SLACK {
            return Err(QueryError::Budget(format!(
                "the query costs δ = {:e} but only δ = {:e} of {:e} remains",
                cost.delta(),
                state.remaining_delta(),
                state.total_delta
            )));
        }
        transaction
            .execute(
                "INSERT INTO spends (query, epsilon_units, delta, status) VALUES (?1, ?2, ?3, 'charged')",
                params![query, units, cost.delta()],
            )
            .map_err(|e| self.error(e))?;
        let id = transaction.last_insert_rowid();
        transaction.commit().map_err(|e| self.error(e))?;
        Ok(Charge(id))
    }

    /// Gives back a charge whose query failed before releasing anything.
    pub fn refund(&self, charge: Charge) -> Result<()> {
        self.connection
            .execute(
                "UPDATE spends SET status = 'refunded' WHERE id = ?1",
                params![charge.0],
            )
            .map_err(|e| self.error(e))?;
        Ok(())
    }
}

fn read_state(connection: &Connection) -> rusqlite::Result<BudgetState> {
    let (total_units, total_delta): (i64, f64) = connection
        .query_row(
            "SELECT epsilon_units, delta FROM budget WHERE id = 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?
        .unwrap_or((0, 0.0));
    let (spent_units, spent_delta, queries): (i64, f64, i64) = connection.query_row(
        "SELECT COALESCE(SUM(epsilon_units), 0), COALESCE(SUM(delta), 0.0), COUNT(*)
         FROM spends WHERE status = 'charged'",
        [],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )?;
    Ok(BudgetState {
        total_epsilon: from_units(total_units),
        total_delta,
        spent_epsilon: from_units(spent_units),
        spent_delta,
        queries: queries as u64,
    })
}

fn ledger_error(path: &Path, error: rusqlite::Error) -> QueryError {
    QueryError::Ledger {
        path: path.display().to_string(),
        reason: error.to_string(),
    }
}
