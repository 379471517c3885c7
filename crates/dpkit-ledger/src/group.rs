//! Group commit: one thread of the process writes a ledger file, and the
//! charges and kept answers that arrive while it commits are committed
//! together next, in one transaction and one fsync.
//!
//! Why the budget holds: the writes of one group run one after another
//! inside one IMMEDIATE transaction, so each charge's filter reads the
//! sums that every earlier write of the group left, exactly as if each
//! had committed alone in that order; a refused charge is rolled back to
//! its own savepoint and leaves nothing. No caller hears its outcome before
//! the group's COMMIT has returned, which with `synchronous = FULL` means
//! the group is on disk: a charge is still durable before its query runs,
//! and a kept answer before it is released. If the COMMIT fails, every
//! write of the group fails and none of them happened.
//!
//! ```
//! use dpkit_core::accounting::PrivacyLoss;
//! use dpkit_ledger::{GroupCommit, Ledger};
//! # let dir = std::env::temp_dir().join(format!("doc-group-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! # std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("ledger.sqlite");
//! Ledger::grant(&path, "ann/adult", 1.0, 0.0).unwrap();
//! let writer = GroupCommit::open(&path).unwrap();
//! let ledger = writer.open_account("ann/adult").unwrap();
//! ledger.charge(PrivacyLoss::pure(0.75).unwrap(), "SELECT COUNT(*) FROM adult").unwrap();
//! assert!(ledger.charge(PrivacyLoss::pure(0.5).unwrap(), "again").is_err());
//! assert_eq!(ledger.state().unwrap().spent_epsilon, 0.75);
//! # drop((ledger, writer));
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

use crate::sql::Sql;
use crate::{InAccount, Ledger, Result, Store, store_error};

/// The most writes one transaction commits; later ones wait for the next.
const MOST_IN_A_GROUP: usize = 256;

/// The process's one writer of a ledger file (see the module's text).
/// Ledgers opened with [`GroupCommit::open_account`] send it their
/// charges, refunds and kept answers; their reads stay on their own
/// connections.
pub struct GroupCommit {
    store: Store,
    queue: Mutex<Option<mpsc::Sender<Box<dyn GroupWrite>>>>,
    thread: Option<JoinHandle<()>>,
    counts: Arc<Counts>,
}

/// How many writes were sent to a [`GroupCommit`], and how many groups
/// (transactions, each one fsync) its thread has ended, committed or not.
#[derive(Debug, Default)]
pub struct Counts {
    /// Writes sent.
    pub sent: AtomicU64,
    /// Writes taken into a group by the thread.
    pub taken: AtomicU64,
    /// Writes whose group has ended.
    pub written: AtomicU64,
    /// Groups ended.
    pub groups: AtomicU64,
}

/// One write waiting for its group: run inside the group's transaction,
/// then told the outcome once the group is committed (or failed).
trait GroupWrite: Send {
    fn account(&self) -> &str;
    /// Runs the write; whether it succeeded (a failed one is rolled back).
    fn run(&mut self, at: &InAccount) -> bool;
    /// Sends the outcome: the write's own, or the commit's failure.
    fn reply(self: Box<Self>, committed: std::result::Result<(), String>, store: &Store);
}

struct Pending<T, F> {
    account: String,
    work: Option<F>,
    outcome: Option<Result<T>>,
    reply: mpsc::SyncSender<Result<T>>,
}

impl<T: Send, F: FnOnce(&InAccount) -> Result<T> + Send> GroupWrite for Pending<T, F> {
    fn account(&self) -> &str {
        &self.account
    }

    fn run(&mut self, at: &InAccount) -> bool {
        // A panic in one write fails that write, never the writer thread.
        let outcome = self.work.take().map(|work| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(at)))
                .unwrap_or_else(|_| Err(store_error(at.store, "a write failed")))
        });
        let done = matches!(outcome, Some(Ok(_)));
        self.outcome = outcome;
        done
    }

    fn reply(self: Box<Self>, committed: std::result::Result<(), String>, store: &Store) {
        let outcome = match (committed, self.outcome) {
            (Ok(()), Some(outcome)) => outcome,
            (Ok(()), None) => Err(store_error(store, "a write was not run")),
            (Err(reason), _) => Err(store_error(store, reason)),
        };
        let _ = self.reply.send(outcome);
    }
}

impl GroupCommit {
    /// Starts the writer of the ledger file at `path` (creating its tables).
    pub fn open(path: &Path) -> Result<Arc<Self>> {
        Self::open_in(&Store::file(path))
    }

    /// Starts this process's writer of `store` (creating its tables).
    pub fn open_in(store: &Store) -> Result<Arc<Self>> {
        let connection = store.connect()?;
        let (sender, receiver) = mpsc::channel();
        let written = store.clone();
        let counts = Arc::new(Counts::default());
        let counted = counts.clone();
        let thread = std::thread::Builder::new()
            .name("dpkit-ledger-writer".into())
            .spawn(move || write_groups(connection, &written, &receiver, &counted))
            .map_err(|e| store_error(store, format!("cannot start the writer: {e}")))?;
        Ok(Arc::new(Self {
            store: store.clone(),
            queue: Mutex::new(Some(sender)),
            thread: Some(thread),
            counts,
        }))
    }

    /// The writes and groups so far.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Opens `account`, which must have been granted (as
    /// [`Ledger::open_account`]), with its writes sent to this writer.
    pub fn open_account(self: &Arc<Self>, account: &str) -> Result<Ledger> {
        let mut ledger = Ledger::open_account_in(&self.store, account)?;
        ledger.writer = Some(self.clone());
        Ok(ledger)
    }

    /// Runs `work` on `account` in the next group, and returns its outcome
    /// once the group is on disk.
    pub(crate) fn write<T: Send + 'static>(
        &self,
        account: &str,
        work: impl FnOnce(&InAccount) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let stopped = || store_error(&self.store, "the ledger's writer has stopped");
        let (reply, outcome) = mpsc::sync_channel(1);
        let pending = Box::new(Pending {
            account: account.to_string(),
            work: Some(work),
            outcome: None,
            reply,
        });
        let queue = self.queue.lock().map_err(|_| stopped())?;
        self.counts.sent.fetch_add(1, Ordering::SeqCst);
        queue
            .as_ref()
            .ok_or_else(stopped)?
            .send(pending)
            .map_err(|_| stopped())?;
        drop(queue);
        outcome.recv().map_err(|_| stopped())?
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        if let Ok(mut queue) = self.queue.lock() {
            queue.take();
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The writer's loop: waits for a write, takes every write queued behind
/// it (up to [`MOST_IN_A_GROUP`]), commits them as one group, replies. A
/// connection the server has closed (a restart, a failover) is replaced
/// before the next group. The group under way when it closed failed, as
/// any commit that cannot be confirmed does: its charges may be on disk,
/// and stay for the request asked again (see `crate::replay`).
fn write_groups(
    mut connection: Box<dyn Sql>,
    store: &Store,
    queue: &mpsc::Receiver<Box<dyn GroupWrite>>,
    counts: &Counts,
) {
    while let Ok(first) = queue.recv() {
        let mut group = vec![first];
        while group.len() < MOST_IN_A_GROUP {
            match queue.try_recv() {
                Ok(next) => group.push(next),
                Err(_) => break,
            }
        }
        counts.taken.fetch_add(group.len() as u64, Ordering::SeqCst);
        if connection.is_closed() {
            match store.connect() {
                Ok(new) => connection = new,
                Err(e) => {
                    let reason = match e {
                        crate::LedgerError::Storage { reason, .. } => reason,
                        other => other.to_string(),
                    };
                    fail(group, &reason, store, counts);
                    continue;
                }
            }
        }
        let committed = commit(&*connection, store, &mut group);
        counts.groups.fetch_add(1, Ordering::SeqCst);
        counts
            .written
            .fetch_add(group.len() as u64, Ordering::SeqCst);
        for write in group {
            write.reply(committed.clone(), store);
        }
    }
}

/// Ends `group` without running it: each write fails with `reason`.
fn fail(group: Vec<Box<dyn GroupWrite>>, reason: &str, store: &Store, counts: &Counts) {
    counts.groups.fetch_add(1, Ordering::SeqCst);
    counts
        .written
        .fetch_add(group.len() as u64, Ordering::SeqCst);
    for write in group {
        write.reply(Err(reason.to_string()), store);
    }
}

/// Runs `group` in one IMMEDIATE transaction, each write inside its own
/// savepoint, and commits it.
fn commit(
    connection: &dyn Sql,
    store: &Store,
    group: &mut [Box<dyn GroupWrite>],
) -> std::result::Result<(), String> {
    // A group whose ROLLBACK failed may have left its transaction open:
    // end it, or no group would ever begin again.
    if connection.in_transaction() {
        let _ = connection.rollback();
    }
    connection.begin_write().map_err(|e| e.to_string())?;
    for write in group.iter_mut() {
        if let Err(reason) = one_write(connection, store, write.as_mut()) {
            let _ = connection.rollback();
            return Err(reason);
        }
    }
    if let Err(error) = connection.commit() {
        let _ = connection.rollback();
        return Err(error.to_string());
    }
    Ok(())
}

/// One write in its savepoint: kept if it succeeded, else undone.
fn one_write(
    connection: &dyn Sql,
    store: &Store,
    write: &mut dyn GroupWrite,
) -> std::result::Result<(), String> {
    let savepoint = |sql: &str| {
        connection
            .run(sql, &[])
            .map(drop)
            .map_err(|e| e.to_string())
    };
    savepoint("SAVEPOINT one_write")?;
    let account = write.account().to_string();
    let done = write.run(&InAccount {
        sql: connection,
        account: &account,
        store,
    });
    if !done {
        savepoint("ROLLBACK TO one_write")?;
    }
    savepoint("RELEASE one_write")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{pure, temporary};
    use crate::{LedgerError, Once};
    use rusqlite::Connection;
    use std::time::{Duration, Instant};

    /// Waits until `done`, for at most ten seconds.
    fn until(done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "timed out");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_transaction_left_open_by_a_failed_rollback_does_not_stop_the_next_group() {
        let path = temporary("group-left-open");
        Ledger::grant(&path, "ann/adult", 1.0, 0.0).unwrap();
        let connection = Connection::open(&path).unwrap();
        connection
            .execute_batch(
                "BEGIN; INSERT INTO accounts (account, epsilon_units, delta) VALUES ('left', 1, 0.0);",
            )
            .unwrap();
        assert_eq!(commit(&connection, &Store::file(&path), &mut []), Ok(()));
        let left: i64 = connection
            .query_row(
                "SELECT COUNT(*) FROM accounts WHERE account = 'left'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(
            left, 0,
            "the transaction left open is rolled back, not committed"
        );
        drop(connection);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn racing_charges_share_commits_and_spend_exactly_the_budget() {
        let path = temporary("group-race");
        Ledger::grant(&path, "ann/adult", 1.0, 0.0).unwrap();
        Ledger::grant(&path, "bob/adult", 1.0, 0.0).unwrap();
        let writer = GroupCommit::open(&path).unwrap();
        // Another connection holds the write lock, so every charge queues
        // behind the first, which waits for the lock.
        let holder = Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        let threads: Vec<_> = (0..64)
            .map(|i| {
                let account = if i % 2 == 0 { "ann/adult" } else { "bob/adult" };
                let ledger = writer.open_account(account).unwrap();
                std::thread::spawn(move || {
                    ledger.charge_once(pure(0.1), "q", &format!("request {i}"))
                })
            })
            .collect();
        until(|| writer.counts().sent.load(Ordering::SeqCst) == 64);
        holder.execute_batch("COMMIT").unwrap();
        let outcomes: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let charged = outcomes
            .iter()
            .filter(|o| matches!(o, Ok(Once::Charged(_))))
            .count();
        let refused = outcomes
            .iter()
            .filter(|o| matches!(o, Err(LedgerError::Budget(_))))
            .count();
        assert_eq!((charged, refused), (20, 44));
        assert!(writer.counts().groups.load(Ordering::SeqCst) <= 2);
        for account in ["ann/adult", "bob/adult"] {
            let state = Ledger::account_state(&path, account).unwrap().unwrap();
            assert_eq!((state.queries, state.spent_epsilon), (10, 1.0));
        }
        let rows: i64 = holder
            .query_row("SELECT COUNT(*) FROM spends", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 20, "a refused charge in a group leaves no row");
        drop(writer);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_failed_commit_fails_every_write_of_its_group_and_keeps_none() {
        let path = temporary("group-fail");
        Ledger::grant(&path, "ann/adult", 1.0, 0.0).unwrap();
        let writer = GroupCommit::open(&path).unwrap();
        let ledger = writer.open_account("ann/adult").unwrap();
        let Once::Charged(charge) = ledger.charge_once(pure(0.25), "q", "r").unwrap() else {
            panic!("a new request is charged");
        };
        // Keeping an answer now breaks a deferred foreign key, which SQLite
        // checks only at COMMIT: the group that holds it cannot commit.
        let holder = Connection::open(&path).unwrap();
        holder
            .execute_batch(
                "CREATE TABLE blocker (x TEXT REFERENCES accounts(account) DEFERRABLE INITIALLY DEFERRED);
                 CREATE TRIGGER block_keep AFTER UPDATE OF answer ON replays
                 BEGIN INSERT INTO blocker VALUES ('no such account'); END;
                 BEGIN IMMEDIATE;",
            )
            .unwrap();
        // The writer waits for the lock with a first charge, alone in its
        // group; the keep and a second charge queue behind it, together.
        let sent = |n| until(|| writer.counts().sent.load(Ordering::SeqCst) == n);
        let first = writer.open_account("ann/adult").unwrap();
        let first = std::thread::spawn(move || first.charge_once(pure(0.25), "q", "r1"));
        until(|| writer.counts().taken.load(Ordering::SeqCst) == 2);
        let keep = std::thread::spawn(move || {
            let kept = ledger.keep_answer(charge, "the answer");
            (ledger, kept)
        });
        sent(3);
        let second = writer.open_account("ann/adult").unwrap();
        let second = std::thread::spawn(move || second.charge_once(pure(0.25), "q", "r2"));
        sent(4);
        holder.execute_batch("COMMIT").unwrap();
        assert!(matches!(first.join().unwrap(), Ok(Once::Charged(_))));
        let (ledger, kept) = keep.join().unwrap();
        for outcome in [kept.map(|_| ()), second.join().unwrap().map(|_| ())] {
            assert!(
                matches!(outcome, Err(LedgerError::Storage { .. })),
                "{outcome:?}"
            );
        }
        assert_eq!(writer.counts().groups.load(Ordering::SeqCst), 3);
        assert_eq!(ledger.replayed("r").unwrap(), None);
        assert_eq!(
            ledger.state().unwrap().queries,
            2,
            "the failed group charged nothing"
        );
        assert_eq!(
            ledger.charge_once(pure(0.25), "q", "r").unwrap(),
            Once::Unanswered(charge),
            "the first charge stays, unanswered"
        );
        drop((ledger, writer));
        std::fs::remove_file(&path).unwrap();
    }
}
