//! `dpkit serve backup` and `dpkit serve restore`: the whole state
//! (analysts, key hashes, accounts, charges, kept answers) copied while the
//! server runs, as one consistent snapshot, and put back while no server
//! uses it. The copy and its checks are the ledger's
//! ([`dpkit_ledger::Ledger::backup`]); a restore that would grant spent
//! budget again is refused unless asked for.

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
    let ledger = Ledger::backup(&config.state_path(), to)?;
    Ok(StateBackup {
        analysts: analysts_in(to)?,
        ledger,
    })
}

/// Puts the backup `from` in place of `config`'s state. Refused while a
/// server uses the state, when `from` is not a backup of a server's state,
/// or (with [`Restore::KeepLaterCharges`]) when an account has spent more
/// since `from` was taken. The state it replaces is kept beside it.
pub fn restore(config: &Config, from: &Path, restore: Restore) -> Result<StateBackup> {
    std::fs::create_dir_all(&config.state_dir).map_err(|e| {
        ServeError::State(format!("cannot create {}: {e}", config.state_dir.display()))
    })?;
    let _lock = crate::server::lock_state(config)?;
    let analysts = analysts_in(from)?;
    let ledger = Ledger::restore(from, &config.state_path(), restore)?;
    Ok(StateBackup { ledger, analysts })
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
