//! Copies of a ledger file taken while it is in use, and putting one back.
//!
//! A backup is SQLite's `VACUUM INTO`, which reads the whole file in one
//! read transaction: the copy holds every charge committed before it began
//! and none after, whatever charges race it, so each account's running sums
//! agree with its charges. It is written beside its destination, checked,
//! synced to disk, and only then renamed into place.
//!
//! Putting a copy back gives every account the spending it had when the
//! copy was taken. Charges made since then paid for answers already
//! released, so a restore that forgot them would grant their budget again.
//! [`Ledger::restore`] therefore refuses while the ledger in place is
//! readable and any of its accounts has spent more than the copy says,
//! unless told to forget those charges.
//!
//! ```
//! use dpkit_ledger::{Ledger, Restore};
//! use dpkit_core::accounting::PrivacyLoss;
//! let folder = std::env::temp_dir().join(format!("doc-backup-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&folder);
//! std::fs::create_dir_all(&folder).unwrap();
//! let (path, copy) = (folder.join("ledger.sqlite"), folder.join("copy.sqlite"));
//! let ledger = Ledger::open(&path, 1.0, 0.0).unwrap();
//! ledger.charge(PrivacyLoss::pure(0.25).unwrap(), "first").unwrap();
//! assert_eq!(Ledger::backup(&path, &copy).unwrap().charges, 1);
//! ledger.charge(PrivacyLoss::pure(0.25).unwrap(), "second").unwrap();
//! drop(ledger);
//! // The ledger has spent more since: putting the copy back is refused...
//! assert!(Ledger::restore(&copy, &path, Restore::KeepLaterCharges).is_err());
//! // ...unless those charges are to be forgotten.
//! Ledger::restore(&copy, &path, Restore::ForgetLaterCharges).unwrap();
//! let state = Ledger::open(&path, 1.0, 0.0).unwrap().state().unwrap();
//! assert_eq!(state.spent_epsilon, 0.25);
//! # std::fs::remove_dir_all(&folder).unwrap();
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::{Ledger, LedgerError, Result, ledger_error};

/// What a backup holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Backup {
    /// When its snapshot was read (UTC, ISO 8601).
    pub taken: String,
    /// Accounts in it.
    pub accounts: usize,
    /// Charges in it that were not refunded.
    pub charges: u64,
}

/// Whether [`Ledger::restore`] may forget charges the ledger in place made
/// after the backup was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restore {
    /// Refuse if the ledger in place is readable and has spent more on any
    /// account than the backup says (or cannot be read at all).
    KeepLaterCharges,
    /// Put the backup back whatever the ledger in place has spent since:
    /// the answers those charges paid for stay released, and their budget
    /// is granted again.
    ForgetLaterCharges,
}

/// The table a backup carries its snapshot's time in.
const MARK: &str = "dpkit_backup";

/// What each account has spent: ε units, δ and ρ.
type Spending = BTreeMap<String, (i64, f64, f64)>;

impl Ledger {
    /// Copies the ledger at `path`, in use or not, to `to` (which must not
    /// exist) as one consistent snapshot, checked and synced to disk.
    pub fn backup(path: &Path, to: &Path) -> Result<Backup> {
        if to.exists() {
            return Err(storage(
                to,
                "exists already: a backup never overwrites a file",
            ));
        }
        let partial = beside(to, "partial");
        let _ = std::fs::remove_file(&partial);
        let source = open(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        let target = text_of(&partial)?;
        let taken: String = source
            .query_row("SELECT strftime('%Y-%m-%dT%H:%M:%SZ', 'now')", [], |r| {
                r.get(0)
            })
            .map_err(|e| ledger_error(path, e))?;
        source
            .execute("VACUUM INTO ?1", [target])
            .map_err(|e| ledger_error(path, e))?;
        drop(source);
        let summary = mark(&partial, &taken).inspect_err(|_| {
            let _ = std::fs::remove_file(&partial);
        })?;
        sync(&partial)?;
        std::fs::rename(&partial, to).map_err(|e| storage(to, &e.to_string()))?;
        sync_folder(to);
        Ok(summary)
    }

    /// Puts the backup `from` (made by [`Ledger::backup`]) in place of the
    /// ledger at `path`, which no one may be using. The ledger in place, if
    /// any, is kept beside it as `<file>.before-restore` (numbered if that
    /// exists). Refused, with nothing changed, when `from` is not a sound
    /// backup, or when `restore` keeps later charges and the ledger in
    /// place has spent more than `from` on some account.
    pub fn restore(from: &Path, path: &Path, restore: Restore) -> Result<Backup> {
        let (summary, backed_up) = read_backup(from)?;
        if restore == Restore::KeepLaterCharges && path.exists() {
            let later = spent_since(path, &backed_up)?;
            if later > 0 {
                return Err(LedgerError::Budget(format!(
                    "{later} account(s) in the ledger in place have spent more since this backup \
                     was taken ({}): restoring it would grant that budget again",
                    summary.taken
                )));
            }
        }
        let restoring = beside(path, "restoring");
        let _ = std::fs::remove_file(&restoring);
        std::fs::copy(from, &restoring).map_err(|e| storage(&restoring, &e.to_string()))?;
        unmark(&restoring)?;
        sync(&restoring)?;
        if path.exists() {
            set_aside(path)?;
        }
        std::fs::rename(&restoring, path).map_err(|e| storage(path, &e.to_string()))?;
        sync_folder(path);
        Ok(summary)
    }
}

fn storage(path: &Path, reason: &str) -> LedgerError {
    LedgerError::Storage {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// `<file>.<suffix>` beside `path`.
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{suffix}"));
    PathBuf::from(name)
}

fn text_of(path: &Path) -> Result<&str> {
    path.to_str()
        .ok_or_else(|| storage(path, "a backup's path must be UTF-8"))
}

/// An existing file, opened with `flags` (never created).
fn open(path: &Path, flags: OpenFlags) -> Result<Connection> {
    if !path.is_file() {
        return Err(storage(path, "no such file"));
    }
    let connection = Connection::open_with_flags(path, flags | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| ledger_error(path, e))?;
    connection
        .busy_timeout(std::time::Duration::from_secs(10))
        .map_err(|e| ledger_error(path, e))?;
    Ok(connection)
}

/// Checks the copy at `path` and writes `taken` into it.
fn mark(path: &Path, taken: &str) -> Result<Backup> {
    let connection = open(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    check_sound(&connection, path)?;
    connection
        .execute_batch(&format!(
            "PRAGMA journal_mode = DELETE; CREATE TABLE {MARK} (taken TEXT NOT NULL);"
        ))
        .and_then(|_| connection.execute(&format!("INSERT INTO {MARK} VALUES (?1)"), [taken]))
        .map_err(|e| ledger_error(path, e))?;
    summary(&connection, path, taken.to_string())
}

/// Drops the mark from a copy about to be put in place.
fn unmark(path: &Path) -> Result<()> {
    let connection = open(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    connection
        .execute_batch(&format!("DROP TABLE {MARK}; PRAGMA journal_mode = WAL;"))
        .map_err(|e| ledger_error(path, e))
}

/// SQLite's own check of every page, and a ledger's tables.
fn check_sound(connection: &Connection, path: &Path) -> Result<()> {
    let verdict: String = connection
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .map_err(|e| ledger_error(path, e))?;
    if verdict != "ok" {
        return Err(storage(
            path,
            "is damaged (SQLite's integrity check failed)",
        ));
    }
    spending(connection, path).map(drop)
}

fn summary(connection: &Connection, path: &Path, taken: String) -> Result<Backup> {
    let (accounts, charges): (i64, i64) = connection
        .query_row(
            "SELECT (SELECT COUNT(*) FROM accounts),
                    (SELECT COUNT(*) FROM spends WHERE status = 'charged')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(|e| ledger_error(path, e))?;
    Ok(Backup {
        taken,
        accounts: usize::try_from(accounts).unwrap_or(0),
        charges: u64::try_from(charges).unwrap_or(0),
    })
}

/// A backup's summary and spending, refused unless it is one, and sound.
fn read_backup(from: &Path) -> Result<(Backup, Spending)> {
    let connection = open(from, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let taken: Option<String> = connection
        .query_row(&format!("SELECT taken FROM {MARK}"), [], |r| r.get(0))
        .optional()
        .ok()
        .flatten();
    let Some(taken) = taken else {
        return Err(storage(from, "is not a backup made by dpkit"));
    };
    check_sound(&connection, from)?;
    Ok((
        summary(&connection, from, taken)?,
        spending(&connection, from)?,
    ))
}

fn spending(connection: &Connection, path: &Path) -> Result<Spending> {
    let mut statement = connection
        .prepare("SELECT account, spent_units, spent_delta, spent_rho FROM accounts")
        .map_err(|e| ledger_error(path, e))?;
    let rows = statement
        .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))
        .map_err(|e| ledger_error(path, e))?;
    rows.collect::<rusqlite::Result<_>>()
        .map_err(|e| ledger_error(path, e))
}

/// How many accounts of the ledger at `path` have spent more than
/// `backed_up` says (an account the backup lacks, anything at all).
fn spent_since(path: &Path, backed_up: &Spending) -> Result<usize> {
    let unreadable = |_| {
        LedgerError::Budget(format!(
            "the ledger in place ({}) cannot be read, so what it spent since the backup is unknown",
            path.display()
        ))
    };
    let connection = open(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(unreadable)?;
    let now = spending(&connection, path).map_err(unreadable)?;
    Ok(now
        .iter()
        .filter(|&(account, &(units, delta, rho))| {
            let (was_units, was_delta, was_rho) =
                backed_up.get(account).copied().unwrap_or((0, 0.0, 0.0));
            units > was_units || delta > was_delta || rho > was_rho
        })
        .count())
}

/// Moves the ledger at `path` (with its write-ahead log, checkpointed
/// first where it can be) to a free `<file>.before-restore[.N]`.
fn set_aside(path: &Path) -> Result<()> {
    if let Ok(connection) = open(path, OpenFlags::SQLITE_OPEN_READ_WRITE) {
        let _ = connection.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)");
    }
    let aside = (0..)
        .map(|n| match n {
            0 => beside(path, "before-restore"),
            n => beside(path, &format!("before-restore.{n}")),
        })
        .find(|candidate| !candidate.exists())
        .expect("some name is free");
    std::fs::rename(path, &aside).map_err(|e| storage(path, &e.to_string()))?;
    for suffix in ["-wal", "-shm"] {
        let mut log = path.as_os_str().to_owned();
        log.push(suffix);
        let log = PathBuf::from(log);
        if log.exists() {
            let mut moved = aside.as_os_str().to_owned();
            moved.push(suffix);
            std::fs::rename(&log, PathBuf::from(moved))
                .map_err(|e| storage(&log, &e.to_string()))?;
        }
    }
    Ok(())
}

fn sync(path: &Path) -> Result<()> {
    std::fs::File::open(path)
        .and_then(|file| file.sync_all())
        .map_err(|e| storage(path, &e.to_string()))
}

/// Syncs the folder of `path`, so a rename into it survives a crash
/// (best effort: not every system can open a folder to sync it).
fn sync_folder(path: &Path) {
    if let Some(folder) = path.parent() {
        let folder = if folder.as_os_str().is_empty() {
            Path::new(".")
        } else {
            folder
        };
        let _ = std::fs::File::open(folder).and_then(|f| f.sync_all());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpkit_core::accounting::PrivacyLoss;

    fn folder(name: &str) -> PathBuf {
        let folder =
            std::env::temp_dir().join(format!("dpkit-backup-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&folder);
        std::fs::create_dir_all(&folder).unwrap();
        folder
    }

    /// Each account's running sums against the charges it holds.
    fn sums_agree_with_charges(path: &Path) -> usize {
        let connection = open(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        let disagree: i64 = connection
            .query_row(
                "SELECT COUNT(*) FROM accounts a WHERE a.spent_units <> (SELECT COALESCE(SUM(s.epsilon_units), 0)
                     FROM spends s WHERE s.account = a.account AND s.status = 'charged')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(disagree, 0, "an account's sums disagree with its charges");
        summary(&connection, path, String::new()).unwrap().charges as usize
    }

    #[test]
    fn backups_under_racing_charges_are_snapshots_and_a_restore_never_grants_spent_budget_unasked()
    {
        let folder = folder("racing");
        let path = folder.join("ledger.sqlite");
        for account in ["ann/adult", "bob/adult"] {
            Ledger::grant(&path, account, 100.0, 0.0).unwrap();
        }
        let chargers: Vec<_> = ["ann/adult", "bob/adult"]
            .map(|account| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let ledger = Ledger::open_account(&path, account).unwrap();
                    for i in 0..60 {
                        ledger
                            .charge(PrivacyLoss::pure(0.01).unwrap(), &format!("q{i}"))
                            .unwrap();
                    }
                })
            })
            .into_iter()
            .collect();
        let copies: Vec<PathBuf> = (0..5)
            .map(|i| {
                let copy = folder.join(format!("copy{i}.sqlite"));
                Ledger::backup(&path, &copy).unwrap();
                copy
            })
            .collect();
        for charger in chargers {
            charger.join().unwrap();
        }
        Ledger::open_account(&path, "ann/adult")
            .unwrap()
            .charge(PrivacyLoss::pure(0.01).unwrap(), "after every copy")
            .unwrap();
        for copy in &copies {
            let charges = sums_agree_with_charges(copy);
            assert!(charges <= 120, "{charges}");
            assert!(!beside(copy, "partial").exists());
        }
        let last = folder.join("last.sqlite");
        assert_eq!(Ledger::backup(&path, &last).unwrap().charges, 121);
        assert!(
            Ledger::backup(&path, &last).is_err(),
            "a backup overwrote a file"
        );

        // The first copy was taken before the last charge: putting it back
        // is refused unless asked for, and nothing changes.
        let early = &copies[0];
        let (_, spent_then) = read_backup(early).unwrap();
        let refused = Ledger::restore(early, &path, Restore::KeepLaterCharges).unwrap_err();
        assert!(
            refused.to_string().contains("spent more since"),
            "{refused}"
        );
        assert_eq!(sums_agree_with_charges(&path), 121);
        // The last copy has everything: it goes back without being asked.
        Ledger::restore(&last, &path, Restore::KeepLaterCharges).unwrap();
        assert!(beside(&path, "before-restore").exists());
        Ledger::restore(early, &path, Restore::ForgetLaterCharges).unwrap();
        assert!(beside(&path, "before-restore.1").exists());
        let connection = open(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        assert_eq!(spending(&connection, &path).unwrap(), spent_then);
        let marked: i64 = connection
            .query_row(
                &format!("SELECT COUNT(*) FROM sqlite_master WHERE name = '{MARK}'"),
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(marked, 0, "the restored ledger kept the backup's mark");
        drop(connection);
        // The restored ledger charges as a ledger does.
        let ledger = Ledger::open_account(&path, "ann/adult").unwrap();
        ledger
            .charge(PrivacyLoss::pure(0.01).unwrap(), "after")
            .unwrap();
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn only_sound_backups_made_by_dpkit_are_put_back() {
        let folder = folder("sound");
        let path = folder.join("ledger.sqlite");
        Ledger::grant(&path, "ann/adult", 1.0, 0.0).unwrap();
        // A ledger is not a backup.
        let error = Ledger::restore(
            &path,
            &folder.join("other.sqlite"),
            Restore::ForgetLaterCharges,
        )
        .unwrap_err();
        assert!(error.to_string().contains("not a backup"), "{error}");
        assert!(Ledger::restore(&folder.join("none"), &path, Restore::ForgetLaterCharges).is_err());
        // A damaged backup is refused, and the ledger in place stays.
        let copy = folder.join("copy.sqlite");
        Ledger::backup(&path, &copy).unwrap();
        let mut bytes = std::fs::read(&copy).unwrap();
        let half = bytes.len() / 2;
        bytes[half..].iter_mut().for_each(|b| *b = 0xA5);
        let damaged = folder.join("damaged.sqlite");
        std::fs::write(&damaged, &bytes).unwrap();
        let error = Ledger::restore(&damaged, &path, Restore::ForgetLaterCharges).unwrap_err();
        assert!(!error.to_string().contains('\n'), "{error}");
        assert!(!beside(&path, "before-restore").exists());
        assert!(Ledger::account_state(&path, "ann/adult").unwrap().is_some());
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
