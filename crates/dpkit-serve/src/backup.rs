//! `dpkit serve backup` and `dpkit serve restore`: the whole state
//! (analysts, key hashes, accounts, charges, kept answers) copied while the
//! server runs, as one consistent snapshot, and put back while no server
//! uses it. The copy and its checks are the ledger's
//! ([`dpkit_ledger::Ledger::backup`]); a restore that would grant spent
//! budget again is refused unless asked for.

use std::collections::BTreeMap;
use std::path::Path;

use dpkit_ledger::{Backup, Ledger, Restore};
use rusqlite::{Connection, OpenFlags};

use crate::config::Config;
use crate::error::{Result, ServeError};

/// A backup of a server's state: the ledger's summary and its analysts.
#[derive(Debug, Clone, PartialEq)]
pub struct StateBackup {
    /// Accounts, charges and when the snapshot was read.
    pub ledger: Backup,
    /// Analysts in it, revoked or not.
    pub analysts: usize,
}

/// Copies the state of `config`'s server, running or not, to `to`.
pub fn backup(config: &Config, to: &Path) -> Result<StateBackup> {
    in_a_file(config)?;
    let _shared = crate::server::share_state(config)?;
    let ledger = Ledger::backup(&config.state_path(), to)?;
    Ok(StateBackup {
        analysts: analysts_in(to)?,
        ledger,
    })
}

/// Puts the backup `from` in place of `config`'s state. Refused while a
/// server uses the state, when `from` is not a backup of a server's state,
/// or (with [`Restore::KeepLaterChanges`]) when the state in place changed
/// since in a way the backup would undo: a charge, a lowered total (see
/// [`Ledger::restore`]), or a key revoked or replaced, which would work
/// again. The state it replaces is kept beside it.
pub fn restore(config: &Config, from: &Path, restore: Restore) -> Result<StateBackup> {
    in_a_file(config)?;
    let _server = crate::server::lock_state(config)?;
    let _commands = crate::server::restore_state(config)?;
    let analysts = analysts_in(from)?;
    let state = config.state_path();
    if restore == Restore::KeepLaterChanges && state.exists() {
        let keys = keys_changed_since(&state, from)?;
        if keys > 0 {
            return Err(dpkit_ledger::LedgerError::Budget(format!(
                "{keys} analyst key(s) were revoked or replaced since this backup was taken: \
                 restoring it would make them work again"
            ))
            .into());
        }
    }
    let ledger = Ledger::restore(from, &state, restore)?;
    Ok(StateBackup { ledger, analysts })
}

/// Refuses a state in PostgreSQL, whose backups are the database's own.
fn in_a_file(config: &Config) -> Result<()> {
    if config.state_postgres.is_some() {
        return Err(ServeError::State(
            "the state is in PostgreSQL: back it up and restore it with PostgreSQL's own tools \
             (pg_dump, or the server's continuous archiving)"
                .into(),
        ));
    }
    Ok(())
}

/// Each analyst's key hash and whether it is revoked, in the state file
/// `path` opened with `flags`.
fn keys_in(path: &Path, flags: OpenFlags) -> Result<BTreeMap<String, (String, bool)>> {
    let unreadable = |_| {
        ServeError::State(format!(
            "{} cannot be read, so which keys changed since the backup is unknown",
            path.display()
        ))
    };
    let connection = Connection::open_with_flags(path, flags).map_err(unreadable)?;
    let mut statement = connection
        .prepare("SELECT name, key_hash, revoked IS NOT NULL FROM analysts")
        .map_err(unreadable)?;
    let rows = statement
        .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
        .map_err(unreadable)?;
    rows.collect::<rusqlite::Result<_>>().map_err(unreadable)
}

/// How many keys of the state at `path` putting `from` back would make
/// work again: revoked since, or replaced by another.
fn keys_changed_since(path: &Path, from: &Path) -> Result<usize> {
    let then = keys_in(from, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let now = keys_in(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    Ok(then
        .iter()
        .filter(|(name, (hash, revoked))| match now.get(*name) {
            Some((now_hash, now_revoked)) => !revoked && (*now_revoked || now_hash != hash),
            None => false,
        })
        .count())
}

/// The number of analysts in the state file `path`, read without writing.
fn analysts_in(path: &Path) -> Result<usize> {
    let not_state = || {
        ServeError::State(format!(
            "{} is not a backup of a server's state",
            path.display()
        ))
    };
    let connection = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|_| not_state())?;
    let count: i64 = connection
        .query_row("SELECT COUNT(*) FROM analysts", [], |r| r.get(0))
        .map_err(|_| not_state())?;
    Ok(usize::try_from(count).unwrap_or(0))
}
