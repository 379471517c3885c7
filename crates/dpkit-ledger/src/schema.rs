//! The ledger's tables, and the move from the one-account layout of the
//! first ledgers (a `budget` table of one row) to accounts.
//!
//! A file with none of the ledger's tables and no layout number is new,
//! and is made. Any other is a ledger, and is opened only if it holds every
//! table and column of its layout: one of this layout as it is, one of an
//! older layout after it is moved to this one (once, in one transaction).
//! A ledger with a table or a column missing, or a layout number that dpkit
//! never wrote, is refused, never made anew: a ledger whose charges table
//! was dropped must not read as a fresh budget.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, TransactionBehavior};
use thiserror::Error;

use crate::digest::RESTORE;

/// Why a ledger file is refused as it stands.
#[derive(Debug, Error)]
pub(crate) enum Refused {
    /// SQLite failed.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// A table, column or trigger of its layout is missing.
    #[error(
        "is not a whole dpkit ledger ({0} is missing) and is refused, never made anew: {RESTORE}"
    )]
    NotWhole(String),
    /// Its layout number is not one dpkit wrote.
    #[error(
        "has layout {0}, which this dpkit does not know (a newer dpkit's, or not dpkit's): \
         upgrade dpkit, or {RESTORE}"
    )]
    Unknown(i64),
    /// It has the chain's columns but an older layout number: the number
    /// was changed, and upgrading it would seal what it holds as it stands.
    #[error(
        "says it is of layout {0} but has the columns of a later one (its layout number was \
         changed) and is refused: {RESTORE}"
    )]
    Relabelled(i64),
    /// Computing the chain of an older ledger failed.
    #[error("cannot be upgraded: {0}")]
    Chain(String),
}

/// How long a connection waits for another's lock before it gives up.
pub(crate) const BUSY_WAIT: Duration = Duration::from_secs(10);

/// Waiting and durability: writers wait for each other, in this process
/// or another, up to [`BUSY_WAIT`] at a time, and every commit reaches the
/// disk before it returns (WAL, `synchronous = FULL`).
fn settings(connection: &Connection) -> rusqlite::Result<()> {
    connection.busy_timeout(BUSY_WAIT)?;
    write_ahead(connection)?;
    connection.pragma_update(None, "synchronous", "FULL")
}

/// `journal_mode = WAL`, tried again while another connection holds the
/// file. The change needs the file to itself, and SQLite answers "database
/// is locked" at once, without its busy handler, when another connection
/// reads it: two servers opening one new state at once failed so in 14
/// starts of 30.
fn write_ahead(connection: &Connection) -> rusqlite::Result<()> {
    let start = Instant::now();
    loop {
        match connection.pragma_update(None, "journal_mode", "WAL") {
            Err(e)
                if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
                    && start.elapsed() < BUSY_WAIT =>
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            done => return done,
        }
    }
}

/// Accounts (one budget each: the CLI's is named ""), their charges, and
/// the answers kept for replay, each tied to the charge that paid for it.
/// An account keeps its running sums of the charges not refunded, updated
/// in the transaction of each charge and refund, so a charge costs the same
/// whatever the history.
///
/// An account's `accounting` says which accountants keep it (see
/// `dpkit_core::accounting::Filter`): `combined` (plain sums and the
/// concentrated accountant) for accounts made since the concentrated one
/// exists, `sums` for older ones, whose charges were admitted by plain
/// sums over the whole δ. A charge's concentrated loss is `rho`, `spread`
/// and `tail` (NULL when it has none); an account sums them in doubles
/// (`concentrated_terms` of them, for the rounding's bound), and counts
/// its charges without one (`formless`), any of which closes the
/// concentrated accountant. A refund gives back ε and δ but none of these:
/// the concentrated accountant keeps counting what it once admitted.
///
/// A charge whose keys passed a threshold has its threshold's δ in `keys`
/// (the loss's `keys`), summed in `spent_keys`. An account's `thresholds`
/// is the version of the share of δ its concentrated accountant keeps for
/// them (`Filter::of_version`): `Filter::THRESHOLDS_VERSION` for accounts
/// granted since it keeps one, 0 for older ones, whose accountant keeps
/// none (`Filter::without_thresholds`): their charges so far were
/// admitted by it.
const TABLES: &str = "CREATE TABLE IF NOT EXISTS accounts (
         account TEXT PRIMARY KEY,
         epsilon_units INTEGER NOT NULL,
         delta REAL NOT NULL,
         spent_units INTEGER NOT NULL DEFAULT 0,
         spent_delta REAL NOT NULL DEFAULT 0.0,
         queries INTEGER NOT NULL DEFAULT 0,
         accounting TEXT NOT NULL DEFAULT 'sums' CHECK (accounting IN ('sums', 'combined')),
         spent_rho REAL NOT NULL DEFAULT 0.0,
         spent_spread REAL NOT NULL DEFAULT 0.0,
         spent_tail REAL NOT NULL DEFAULT 0.0,
         formless INTEGER NOT NULL DEFAULT 0,
         concentrated_terms INTEGER NOT NULL DEFAULT 0,
         thresholds INTEGER NOT NULL DEFAULT 0,
         spent_keys REAL NOT NULL DEFAULT 0.0,
         links INTEGER NOT NULL DEFAULT 0,
         head TEXT,
         seal TEXT);
     CREATE TABLE IF NOT EXISTS spends (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
         query TEXT NOT NULL,
         epsilon_units INTEGER NOT NULL,
         delta REAL NOT NULL,
         status TEXT NOT NULL CHECK (status IN ('charged', 'refunded')),
         account TEXT NOT NULL DEFAULT '',
         rho REAL,
         spread REAL,
         tail REAL,
         layout INTEGER,
         keys REAL,
         chained INTEGER,
         link TEXT,
         refund_chained INTEGER,
         refund_link TEXT);
     CREATE TABLE IF NOT EXISTS replays (
         account TEXT NOT NULL,
         request TEXT NOT NULL,
         spend INTEGER NOT NULL REFERENCES spends (id),
         answer TEXT,
         PRIMARY KEY (account, request));";

const INDEXES: &str = "CREATE INDEX IF NOT EXISTS replays_by_spend ON replays (spend);
     CREATE INDEX IF NOT EXISTS spends_by_account ON spends (account);";

/// This layout's number, which every charge it writes carries.
pub(crate) const LAYOUT: i64 = 4;

/// The columns every ledger had, by table, whatever its layout (`budget`
/// is the first layout's, which had no accounts).
const FIRST: &[(&str, &[&str])] = &[
    (
        "spends",
        &["id", "at", "query", "epsilon_units", "delta", "status"],
    ),
    ("accounts", &["account", "epsilon_units", "delta"]),
    ("budget", &["id", "epsilon_units", "delta"]),
];

/// What layout 2 (the concentrated accountant) added.
const SECOND: &[(&str, &[&str])] = &[
    (
        "accounts",
        &[
            "spent_units",
            "spent_delta",
            "queries",
            "accounting",
            "spent_rho",
            "spent_spread",
            "spent_tail",
            "formless",
            "concentrated_terms",
        ],
    ),
    ("spends", &["account", "rho", "spread", "tail", "layout"]),
    ("replays", &["account", "request", "spend", "answer"]),
];

/// What layout 3 (thresholds) added.
const THIRD: &[(&str, &[&str])] = &[
    ("accounts", &["thresholds", "spent_keys"]),
    ("spends", &["keys"]),
];

/// What this layout (the chained digest, `crate::digest`) added.
pub(crate) const FOURTH: &[(&str, &[&str])] = &[
    ("accounts", &["links", "head", "seal"]),
    (
        "spends",
        &["chained", "link", "refund_chained", "refund_link"],
    ),
];

/// An older dpkit opens this layout as its own (it looks for the same
/// tables), but would charge it by rules this one no longer keeps: one from
/// before the concentrated accountant by plain sums over the whole δ,
/// leaving the concentrated sums behind; one of layout 2 by a concentrated
/// accountant that keeps no δ for thresholds, on accounts whose accountant
/// does (and without their threshold's δ). Their charges, which carry no
/// layout or an older one, are refused by the file itself.
///
/// An older dpkit of layout 3 would also change an account's totals or sums
/// without sealing them again, which this one would then refuse as edited:
/// every change to an account must change its seal (this dpkit's set it to
/// NULL and then to the new one), or the file refuses it.
const GUARD: &str = "DROP TRIGGER IF EXISTS charges_of_this_layout;
     CREATE TRIGGER charges_of_this_layout
     BEFORE INSERT ON spends WHEN NEW.layout IS NULL OR NEW.layout < 4
     BEGIN SELECT RAISE(ABORT, 'a newer dpkit keeps this ledger: upgrade dpkit to charge it'); END;
     DROP TRIGGER IF EXISTS accounts_sealed;
     CREATE TRIGGER accounts_sealed
     BEFORE UPDATE ON accounts WHEN NEW.seal IS OLD.seal
     BEGIN SELECT RAISE(ABORT, 'a newer dpkit keeps this ledger: upgrade dpkit to charge it'); END;
     PRAGMA user_version = 4;";

/// The triggers of this layout.
const TRIGGERS: [&str; 2] = ["charges_of_this_layout", "accounts_sealed"];

/// What a file holds, as far as its layout goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// None of a ledger's tables, and no layout number: a new file.
    Nothing,
    /// A whole ledger of an older layout.
    Older,
    /// A whole ledger of this layout.
    Current,
}

/// What the file holds; a ledger that is not whole, or of a layout dpkit
/// never wrote, is refused.
fn found(connection: &Connection) -> Result<Found, Refused> {
    let version = user_version(connection)?;
    let columns = columns(connection)?;
    let has = |table: &str| columns.iter().any(|(t, _)| t == table);
    // A service's analysts are made after the ledger's tables, never before.
    let tables = ["accounts", "spends", "replays", "budget", "analysts"];
    if version == 0 && !tables.iter().any(|t| has(t)) {
        return Ok(Found::Nothing);
    }
    let first_layout = has("budget");
    let mut wanted: Vec<(&str, &[&str])> = FIRST
        .iter()
        .filter(|(table, _)| *table != if first_layout { "accounts" } else { "budget" })
        .copied()
        .collect();
    match version {
        0 => {}
        2 => wanted.extend(SECOND),
        3 | LAYOUT => wanted.extend(SECOND.iter().chain(THIRD)),
        other => return Err(Refused::Unknown(other)),
    }
    if version == LAYOUT {
        wanted.extend(FOURTH);
    }
    for (table, names) in wanted {
        if !has(table) {
            return Err(Refused::NotWhole(format!("table {table}")));
        }
        if let Some(name) = names
            .iter()
            .find(|n| !columns.contains(&(table.into(), n.to_string())))
        {
            return Err(Refused::NotWhole(format!("column {table}.{name}")));
        }
    }
    if version < LAYOUT {
        let chained = FOURTH.iter().any(|(table, names)| {
            names
                .iter()
                .any(|name| columns.contains(&(table.to_string(), name.to_string())))
        });
        if chained {
            return Err(Refused::Relabelled(version));
        }
        return Ok(Found::Older);
    }
    for trigger in TRIGGERS {
        if !has_trigger(connection, trigger)? {
            return Err(Refused::NotWhole(format!("trigger {trigger}")));
        }
    }
    Ok(Found::Current)
}

/// Every column of every table, as (table, column).
fn columns(connection: &Connection) -> rusqlite::Result<HashSet<(String, String)>> {
    let mut statement = connection.prepare(
        "SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p
         WHERE m.type = 'table'",
    )?;
    let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect()
}

/// Creates the tables of a new file, or moves an older ledger to this
/// layout, in one transaction; refuses a ledger that is not whole (see the
/// module's text).
pub(super) fn create(connection: &mut Connection) -> Result<(), Refused> {
    settings(connection)?;
    // Already made: a read, not a write transaction, for every open. Its
    // statements may read before and after another connection makes the
    // file, so only a whole ledger is taken from it; anything else is
    // found again under the write lock, which decides.
    if matches!(found(connection), Ok(Found::Current))
        && has_index(connection, "replays_by_spend")?
        && has_index(connection, "spends_by_account")?
    {
        return Ok(());
    }
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Found again under the write lock: another process may have made it.
    match found(&transaction)? {
        Found::Nothing => transaction.execute_batch(&format!("{TABLES} {INDEXES} {GUARD}"))?,
        Found::Current => transaction.execute_batch(INDEXES)?,
        Found::Older => upgrade(&transaction)?,
    }
    Ok(transaction.commit()?)
}

/// Moves a whole ledger of an older layout to this one: a first-layout
/// budget becomes account "" and its charges stay its own; accounts without
/// running sums get them, summed from their charges; every account gets its
/// chain, computed once over the charges it holds (`crate::digest`).
fn upgrade(transaction: &Connection) -> Result<(), Refused> {
    // Sums are set below without a seal: the guard comes back at the end.
    transaction.execute_batch("DROP TRIGGER IF EXISTS accounts_sealed;")?;
    let first_layout = has_table(transaction, "budget")?;
    let old_spends =
        has_table(transaction, "spends")? && !has_column(transaction, "spends", "account")?;
    let no_sums =
        has_table(transaction, "accounts")? && !has_column(transaction, "accounts", "spent_units")?;
    let no_forms =
        has_table(transaction, "accounts")? && !has_column(transaction, "accounts", "accounting")?;
    let no_spend_forms =
        has_table(transaction, "spends")? && !has_column(transaction, "spends", "rho")?;
    let no_layout =
        has_table(transaction, "spends")? && !has_column(transaction, "spends", "layout")?;
    let no_thresholds =
        has_table(transaction, "accounts")? && !has_column(transaction, "accounts", "thresholds")?;
    let no_keys = has_table(transaction, "spends")? && !has_column(transaction, "spends", "keys")?;
    transaction.execute_batch(TABLES)?;
    if old_spends {
        transaction
            .execute_batch("ALTER TABLE spends ADD COLUMN account TEXT NOT NULL DEFAULT '';")?;
    }
    if no_sums {
        transaction.execute_batch(
            "ALTER TABLE accounts ADD COLUMN spent_units INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE accounts ADD COLUMN spent_delta REAL NOT NULL DEFAULT 0.0;
             ALTER TABLE accounts ADD COLUMN queries INTEGER NOT NULL DEFAULT 0;",
        )?;
    }
    if no_forms {
        // Accounts older than the concentrated accountant keep plain sums
        // (the column's default): their charges so far were admitted so.
        transaction.execute_batch(
            "ALTER TABLE accounts ADD COLUMN accounting TEXT NOT NULL DEFAULT 'sums'
                 CHECK (accounting IN ('sums', 'combined'));
             ALTER TABLE accounts ADD COLUMN spent_rho REAL NOT NULL DEFAULT 0.0;
             ALTER TABLE accounts ADD COLUMN spent_spread REAL NOT NULL DEFAULT 0.0;
             ALTER TABLE accounts ADD COLUMN spent_tail REAL NOT NULL DEFAULT 0.0;
             ALTER TABLE accounts ADD COLUMN formless INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE accounts ADD COLUMN concentrated_terms INTEGER NOT NULL DEFAULT 0;",
        )?;
    }
    if no_spend_forms {
        transaction.execute_batch(
            "ALTER TABLE spends ADD COLUMN rho REAL;
             ALTER TABLE spends ADD COLUMN spread REAL;
             ALTER TABLE spends ADD COLUMN tail REAL;",
        )?;
    }
    if no_layout {
        transaction.execute_batch("ALTER TABLE spends ADD COLUMN layout INTEGER;")?;
    }
    if no_thresholds {
        // Accounts granted before keep an accountant without thresholds
        // (the column's default 0): their charges so far were admitted so.
        transaction.execute_batch(
            "ALTER TABLE accounts ADD COLUMN thresholds INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE accounts ADD COLUMN spent_keys REAL NOT NULL DEFAULT 0.0;",
        )?;
    }
    if no_keys {
        transaction.execute_batch("ALTER TABLE spends ADD COLUMN keys REAL;")?;
    }
    add_chain_columns(transaction)?;
    if first_layout {
        transaction.execute_batch(
            "INSERT OR IGNORE INTO accounts (account, epsilon_units, delta)
                 SELECT '', epsilon_units, delta FROM budget WHERE id = 1;
             DROP TABLE budget;",
        )?;
    }
    if first_layout || no_sums || no_forms {
        transaction.execute_batch(SUMS)?;
    }
    transaction.execute_batch(INDEXES)?;
    crate::digest::chain_existing(transaction).map_err(|e| Refused::Chain(e.to_string()))?;
    transaction.execute_batch(GUARD)?;
    Ok(())
}

/// The chain's columns ([`FOURTH`]), where a table lacks them.
fn add_chain_columns(transaction: &Connection) -> rusqlite::Result<()> {
    let kinds = [
        ("links", "INTEGER NOT NULL DEFAULT 0"),
        ("head", "TEXT"),
        ("seal", "TEXT"),
        ("chained", "INTEGER"),
        ("link", "TEXT"),
        ("refund_chained", "INTEGER"),
        ("refund_link", "TEXT"),
    ];
    for (table, names) in FOURTH {
        for name in *names {
            if has_column(transaction, table, name)? {
                continue;
            }
            let kind = kinds
                .iter()
                .find(|(n, _)| n == name)
                .map_or("TEXT", |k| k.1);
            transaction.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {name} {kind};"))?;
        }
    }
    Ok(())
}

/// Every account's running sums, from its charges not refunded.
const SUMS: &str = "UPDATE accounts SET
     spent_units = (SELECT COALESCE(SUM(epsilon_units), 0) FROM spends s
                    WHERE s.account = accounts.account AND s.status = 'charged'),
     spent_delta = (SELECT COALESCE(SUM(delta), 0.0) FROM spends s
                    WHERE s.account = accounts.account AND s.status = 'charged'),
     queries = (SELECT COUNT(*) FROM spends s
                WHERE s.account = accounts.account AND s.status = 'charged'),
     spent_rho = (SELECT COALESCE(SUM(rho), 0.0) FROM spends s
                  WHERE s.account = accounts.account AND s.status = 'charged'),
     spent_spread = (SELECT COALESCE(SUM(spread), 0.0) FROM spends s
                     WHERE s.account = accounts.account AND s.status = 'charged'),
     spent_tail = (SELECT COALESCE(SUM(tail), 0.0) FROM spends s
                   WHERE s.account = accounts.account AND s.status = 'charged'),
     formless = (SELECT COUNT(*) FROM spends s
                 WHERE s.account = accounts.account AND s.status = 'charged' AND s.rho IS NULL),
     concentrated_terms = (SELECT COUNT(*) FROM spends s
                           WHERE s.account = accounts.account AND s.status = 'charged'),
     spent_keys = (SELECT COALESCE(SUM(keys), 0.0) FROM spends s
                   WHERE s.account = accounts.account AND s.status = 'charged');";

fn has_table(connection: &Connection, name: &str) -> rusqlite::Result<bool> {
    connection.query_row(
        "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |row| row.get(0),
    )
}

fn has_trigger(connection: &Connection, name: &str) -> rusqlite::Result<bool> {
    connection.query_row(
        "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'trigger' AND name = ?1",
        [name],
        |row| row.get(0),
    )
}

fn has_index(connection: &Connection, name: &str) -> rusqlite::Result<bool> {
    connection.query_row(
        "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'index' AND name = ?1",
        [name],
        |row| row.get(0),
    )
}

fn user_version(connection: &Connection) -> rusqlite::Result<i64> {
    connection.query_row("PRAGMA user_version", [], |row| row.get(0))
}

fn has_column(connection: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    connection.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info(?1) WHERE name = ?2",
        [table, column],
        |row| row.get(0),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};

    use crate::Store;

    /// Two connections opening one new file at the same moment both make
    /// it: the change to WAL, which SQLite does not wait for by itself,
    /// waits for the other's lock. Without the wait, one of the first few
    /// rounds failed with "database is locked", in each of three runs.
    #[test]
    fn two_connections_opening_one_new_file_at_once_both_open_it() {
        let path = crate::tests::temporary("opened-at-once");
        for round in 0..50 {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            let both = Arc::new(Barrier::new(2));
            let opening: Vec<_> = (0..2)
                .map(|_| {
                    let (store, both) = (Store::file(&path), Arc::clone(&both));
                    std::thread::spawn(move || {
                        both.wait();
                        store.connect().map(drop)
                    })
                })
                .collect();
            for opened in opening {
                let opened = opened.join().unwrap();
                assert!(opened.is_ok(), "round {round}: {opened:?}");
            }
        }
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}
