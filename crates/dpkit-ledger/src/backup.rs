//! Copies of a ledger file taken while it is in use, and putting one back.
//!
//! A backup is SQLite's `VACUUM INTO`, which reads the whole file in one
//! read transaction: the copy holds every charge committed before it began
//! and none after, whatever charges race it, so each account's running sums
//! agree with its charges. It is written to a new file beside its
//! destination, checked, synced to disk, and only then linked into place.
//!
//! Putting a copy back gives every account the spending it had when the
//! copy was taken. Charges made since then paid for answers already
//! released, so a restore that forgot them would grant their budget again.
//! [`Ledger::restore`] therefore refuses when the ledger in place made any
//! charge since, or lowered a total, or cannot be read, or does not verify
//! (`crate::digest`: what it says it did since cannot be trusted), unless
//! told to forget what it did since.
//!
//! Every account of a backup is verified whole (its seal and its chain)
//! when the backup is taken and again when it is put back, so a copy of a
//! ledger edited outside dpkit is never made, nor put in place; a copy put
//! back is the file as it was, and verifies as it did.
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
//! // The ledger has charged since: putting the copy back is refused...
//! assert!(Ledger::restore(&copy, &path, Restore::KeepLaterChanges).is_err());
//! // ...unless that charge is to be forgotten.
//! Ledger::restore(&copy, &path, Restore::ForgetLaterChanges).unwrap();
//! let state = Ledger::open(&path, 1.0, 0.0).unwrap().state().unwrap();
//! assert_eq!(state.spent_epsilon, 0.25);
//! # std::fs::remove_dir_all(&folder).unwrap();
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::sql::SqlError;
use crate::{Ledger, LedgerError, Result, ledger_error};

/// What a backup holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Backup {
    /// When it was taken (UTC, ISO 8601): its snapshot began then or just after.
    pub taken: String,
    /// Accounts in it.
    pub accounts: usize,
    /// Charges in it that were not refunded.
    pub charges: u64,
}

/// Whether [`Ledger::restore`] may forget what the ledger in place did
/// after the backup was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restore {
    /// Refuse if the ledger in place cannot be read, or changed since the
    /// backup in a way the backup would undo: a charge made (refunded or
    /// not), or a total lowered.
    KeepLaterChanges,
    /// Put the backup back whatever the ledger in place did since: the
    /// answers later charges paid for stay released, and their budget is
    /// granted again.
    ForgetLaterChanges,
}

/// The table a backup carries its time in.
const MARK: &str = "dpkit_backup";

/// What the restore check compares of each account: what only grows as
/// charges are made (refunds lower the ε and δ sums, never the rest), and
/// the totals, which a restore must not raise again.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Account {
    grows: [f64; 7],
    totals: [f64; 2],
}

/// Each account, and the last charge's number.
#[derive(Debug, Clone, PartialEq, Default)]
struct Snapshot {
    accounts: BTreeMap<String, Account>,
    last_charge: i64,
}

impl Ledger {
    /// Copies the ledger at `path`, in use or not, to `to` (which must not
    /// exist, and never is overwritten) as one consistent snapshot, checked
    /// and synced to disk. The copy is readable by its owner only: it holds
    /// every query's text and every kept answer.
    pub fn backup(path: &Path, to: &Path) -> Result<Backup> {
        if to.exists() {
            return Err(storage(
                to,
                "exists already: a backup never overwrites a file",
            ));
        }
        let partial = private_file(to, "partial")?;
        let copied = copy_into(path, &partial, to).and_then(|taken| {
            let summary = mark(&partial, &taken)?;
            sync(&partial)?;
            // A link fails if `to` appeared meanwhile: nothing is replaced.
            std::fs::hard_link(&partial, to).map_err(|e| storage(to, &e.to_string()))?;
            Ok(summary)
        });
        let _ = std::fs::remove_file(&partial);
        sync_folder(to);
        copied
    }

    /// Puts the backup `from` (made by [`Ledger::backup`]) in place of the
    /// ledger at `path`, which no one may be using. The file put in place
    /// is a copy of `from`, checked after it was copied. The ledger it
    /// replaces, if any, is copied first to `<file>.before-restore`
    /// (numbered if that exists), with its write-ahead log; the copy is put
    /// in place by one rename. Refused, with nothing changed, when `from` is
    /// not a sound backup, or as [`Restore::KeepLaterChanges`] says.
    pub fn restore(from: &Path, path: &Path, restore: Restore) -> Result<Backup> {
        let restoring = private_file(path, "restoring")?;
        let restored = std::fs::copy(from, &restoring)
            .map_err(|e| storage(from, &e.to_string()))
            .and_then(|_| put_back(&restoring, path, restore));
        let _ = std::fs::remove_file(&restoring);
        restored
    }
}

/// Checks the copy `restoring`, and the ledger in place as `restore` says,
/// then moves the ledger in place aside and `restoring` into its place.
fn put_back(restoring: &Path, path: &Path, restore: Restore) -> Result<Backup> {
    let (summary, backed_up) = read_backup(restoring)?;
    let in_place = path.exists() || with_suffix(path, "-wal").exists();
    if restore == Restore::KeepLaterChanges && in_place {
        let changed = changed_since(path, &backed_up)?;
        if changed > 0 {
            return Err(LedgerError::Budget(format!(
                "{changed} account(s) in the ledger in place changed since this backup was taken \
                 ({}): restoring it would grant spent budget again or raise a lowered total",
                summary.taken
            )));
        }
    }
    unmark(restoring)?;
    sync(restoring)?;
    if in_place {
        set_aside(path)?;
    }
    std::fs::rename(restoring, path).map_err(|e| storage(path, &e.to_string()))?;
    sync_folder(path);
    Ok(summary)
}

fn storage(path: &Path, reason: &str) -> LedgerError {
    LedgerError::Storage {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// `<file><suffix>` beside `path`.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// A new empty file `<file>.<what>-<pid>-<n>` beside `path`, readable and
/// writable by its owner only.
fn private_file(path: &Path, what: &str) -> Result<PathBuf> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut last = None;
    for n in 0..100 {
        let candidate = with_suffix(path, &format!(".{what}-{}-{n}", std::process::id()));
        match options.open(&candidate) {
            Ok(_) => return Ok(candidate),
            Err(e) => last = Some(e),
        }
    }
    Err(storage(
        path,
        &last.map_or(String::new(), |e| e.to_string()),
    ))
}

/// `VACUUM INTO` the empty file `partial`; the time it began. Failures
/// name `to`, the backup asked for.
fn copy_into(path: &Path, partial: &Path, to: &Path) -> Result<String> {
    let source = open(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    let target = partial
        .to_str()
        .ok_or_else(|| storage(to, "a backup's path must be UTF-8"))?;
    let taken: String = source
        .query_row("SELECT strftime('%Y-%m-%dT%H:%M:%SZ', 'now')", [], |r| {
            r.get(0)
        })
        .map_err(|e| ledger_error(path, e))?;
    source
        .execute("VACUUM INTO ?1", [target])
        .map_err(|e| ledger_error(to, e))?;
    Ok(taken)
}

/// An existing file, opened with `flags` (never created).
fn open(path: &Path, flags: OpenFlags) -> Result<Connection> {
    if !path.is_file() {
        return Err(storage(path, "is not a file"));
    }
    let connection = Connection::open_with_flags(path, flags | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| ledger_error(path, e))?;
    connection
        .busy_timeout(crate::schema::BUSY_WAIT)
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

/// SQLite's own check of every page, a ledger's tables, and every
/// account's seal and chain.
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
    let snapshot = snapshot(connection, path)?;
    verify_all(connection, &snapshot).map_err(|e| ledger_error(path, e))
}

/// Verifies every account of `snapshot` whole (see `crate::digest`). A
/// ledger of a layout before the chain (a backup taken by an older dpkit)
/// has none to verify: its chains are computed when it is next opened.
fn verify_all(connection: &Connection, snapshot: &Snapshot) -> std::result::Result<(), SqlError> {
    let layout: i64 = connection.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if layout < crate::schema::LAYOUT {
        return Ok(());
    }
    for account in snapshot.accounts.keys() {
        crate::digest::verify(connection, account)?;
    }
    Ok(())
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

/// A backup's summary and snapshot, refused unless it is one, and sound.
fn read_backup(from: &Path) -> Result<(Backup, Snapshot)> {
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
        snapshot(&connection, from)?,
    ))
}

fn snapshot(connection: &Connection, path: &Path) -> Result<Snapshot> {
    let error = |e| ledger_error(path, e);
    let mut statement = connection
        .prepare(
            "SELECT account, spent_units, spent_delta, spent_rho, spent_spread, spent_tail,
                    formless, concentrated_terms, epsilon_units, delta FROM accounts",
        )
        .map_err(error)?;
    let rows = statement
        .query_map([], |r| {
            let mut account = Account::default();
            for (i, grows) in account.grows.iter_mut().enumerate() {
                *grows = r.get(i + 1)?;
            }
            account.totals = [r.get(8)?, r.get(9)?];
            Ok((r.get(0)?, account))
        })
        .map_err(error)?;
    let accounts = rows.collect::<rusqlite::Result<_>>().map_err(error)?;
    let last_charge = connection
        .query_row("SELECT COALESCE(MAX(id), 0) FROM spends", [], |r| r.get(0))
        .map_err(error)?;
    Ok(Snapshot {
        accounts,
        last_charge,
    })
}

/// How many accounts of the ledger at `path` changed since `backed_up` in
/// a way putting it back would undo: an account it lacks, anything that
/// only grows with charges grown, a total lowered; any charge after its
/// last counts against every account.
fn changed_since(path: &Path, backed_up: &Snapshot) -> Result<usize> {
    let unreadable = |_| {
        LedgerError::Budget(format!(
            "the ledger in place ({}) cannot be read, so what it did since the backup is unknown",
            path.display()
        ))
    };
    let connection = open(path, OpenFlags::SQLITE_OPEN_READ_WRITE).map_err(unreadable)?;
    let now = snapshot(&connection, path).map_err(unreadable)?;
    if verify_all(&connection, &now).is_err() {
        return Err(LedgerError::Budget(format!(
            "the ledger in place ({}) does not verify (it was changed outside dpkit), so what it \
             did since the backup is unknown",
            path.display()
        )));
    }
    if now.last_charge > backed_up.last_charge {
        return Ok(now.accounts.len().max(1));
    }
    Ok(now
        .accounts
        .iter()
        .filter(|&(name, account)| match backed_up.accounts.get(name) {
            None => true,
            Some(then) => {
                let grew = account
                    .grows
                    .iter()
                    .zip(then.grows)
                    .any(|(now, then)| *now > then);
                let lowered = account
                    .totals
                    .iter()
                    .zip(then.totals)
                    .any(|(now, then)| *now < then);
                grew || lowered
            }
        })
        .count())
}

/// Copies the ledger at `path` (checkpointed first where it can be) to a
/// free `<file>.before-restore[.N]`, and moves its write-ahead log and
/// shared memory beside that copy, so neither is read with the file put
/// in place.
fn set_aside(path: &Path) -> Result<()> {
    if let Ok(connection) = open(path, OpenFlags::SQLITE_OPEN_READ_WRITE) {
        let _ = connection.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)");
    }
    let aside = (0..u32::MAX)
        .map(|n| match n {
            0 => with_suffix(path, ".before-restore"),
            n => with_suffix(path, &format!(".before-restore.{n}")),
        })
        .find(|candidate| !candidate.exists())
        .ok_or_else(|| storage(path, "no free name to keep it under"))?;
    if path.exists() {
        std::fs::copy(path, &aside).map_err(|e| storage(path, &e.to_string()))?;
        sync(&aside)?;
    }
    for suffix in ["-wal", "-shm"] {
        let log = with_suffix(path, suffix);
        if log.exists() {
            std::fs::rename(&log, with_suffix(&aside, suffix))
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
    fn backups_taken_while_charges_race_are_consistent_and_a_restore_never_grants_spent_budget_unasked()
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
            sums_agree_with_charges(copy);
            let partials = std::fs::read_dir(&folder)
                .unwrap()
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .contains(".partial")
                })
                .count();
            assert_eq!(partials, 0);
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
        let (_, then) = read_backup(early).unwrap();
        let refused = Ledger::restore(early, &path, Restore::KeepLaterChanges).unwrap_err();
        assert!(refused.to_string().contains("changed since"), "{refused}");
        assert_eq!(sums_agree_with_charges(&path), 121);
        // The last copy has everything: it goes back without being asked.
        Ledger::restore(&last, &path, Restore::KeepLaterChanges).unwrap();
        assert!(with_suffix(&path, ".before-restore").exists());
        Ledger::restore(early, &path, Restore::ForgetLaterChanges).unwrap();
        assert!(with_suffix(&path, ".before-restore.1").exists());
        let connection = open(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        assert_eq!(snapshot(&connection, &path).unwrap(), then);
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
            Restore::ForgetLaterChanges,
        )
        .unwrap_err();
        assert!(error.to_string().contains("not a backup"), "{error}");
        assert!(Ledger::restore(&folder.join("none"), &path, Restore::ForgetLaterChanges).is_err());
        // A damaged backup is refused, and the ledger in place stays.
        let copy = folder.join("copy.sqlite");
        Ledger::backup(&path, &copy).unwrap();
        let mut bytes = std::fs::read(&copy).unwrap();
        let half = bytes.len() / 2;
        bytes[half..].iter_mut().for_each(|b| *b = 0xA5);
        let damaged = folder.join("damaged.sqlite");
        std::fs::write(&damaged, &bytes).unwrap();
        let error = Ledger::restore(&damaged, &path, Restore::ForgetLaterChanges).unwrap_err();
        assert!(!error.to_string().contains('\n'), "{error}");
        assert!(!with_suffix(&path, ".before-restore").exists());
        assert!(Ledger::account_state(&path, "ann/adult").unwrap().is_some());
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn a_refund_then_a_smaller_charge_or_a_lowered_total_since_the_backup_is_not_undone_unasked() {
        let folder = folder("refund");
        let path = folder.join("ledger.sqlite");
        Ledger::grant(&path, "ann/adult", 10.0, 0.0).unwrap();
        let ledger = Ledger::open_account(&path, "ann/adult").unwrap();
        let first = ledger
            .charge(PrivacyLoss::pure(1.0).unwrap(), "first")
            .unwrap();
        let copy = folder.join("copy.sqlite");
        Ledger::backup(&path, &copy).unwrap();
        // A refund and a smaller charge: every sum of ε and δ is at most
        // the copy's, but the charge paid for an answer the copy knows
        // nothing of, and the copy would reopen the concentrated accountant
        // that charge (it has no concentrated form) closed.
        ledger.refund(first).unwrap();
        let second = ledger
            .charge(PrivacyLoss::pure(0.5).unwrap(), "second")
            .unwrap();
        let refused = Ledger::restore(&copy, &path, Restore::KeepLaterChanges).unwrap_err();
        assert!(refused.to_string().contains("changed since"), "{refused}");
        // A refund alone: putting the copy back charges it again, which is safe.
        let refunded = folder.join("refunded.sqlite");
        Ledger::backup(&path, &refunded).unwrap();
        ledger.refund(second).unwrap();
        Ledger::restore(&refunded, &path, Restore::KeepLaterChanges).unwrap();
        // A total lowered since would be raised again.
        let lowered = folder.join("lowered.sqlite");
        Ledger::backup(&path, &lowered).unwrap();
        Ledger::grant(&path, "ann/adult", 2.0, 0.0).unwrap();
        let refused = Ledger::restore(&lowered, &path, Restore::KeepLaterChanges).unwrap_err();
        assert!(refused.to_string().contains("changed since"), "{refused}");
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
