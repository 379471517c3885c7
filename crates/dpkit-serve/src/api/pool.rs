//! Open ledger connections, kept per account between requests: opening a
//! SQLite connection re-reads the file's schema, which cost more than the
//! charge itself under load, and a PostgreSQL one costs a round trip and
//! its TLS handshake. Every read and charge still goes to the store;
//! charges and kept answers go through this process's writer of it, which
//! commits those that arrive together in one transaction (see
//! [`GroupCommit`]).
//!
//! A PostgreSQL server accepts a bounded number of connections, shared by
//! every process on it, so there a process holds at most `limit` ledgers
//! at once, idle or in use: a request that finds none free closes an idle
//! one of another account, or waits for one to come back (each is held
//! for one run or one read).

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use dpkit_ledger::{GroupCommit, Ledger, Store};
use dpkit_query::QueryError;

/// The most connections to a state file kept idle, over all accounts.
const MAX_IDLE_FILE: usize = 256;

/// Idle ledger connections by account.
pub struct LedgerPool {
    ledgers: Mutex<Ledgers>,
    returned: Condvar,
    /// The most ledgers open at once, idle or in use.
    limit: usize,
    /// The most kept idle.
    max_idle: usize,
    writer: Arc<GroupCommit>,
}

/// The ledgers open, by whether they are in use.
#[derive(Default)]
struct Ledgers {
    idle: HashMap<String, Vec<Ledger>>,
    /// Idle and in use.
    open: usize,
}

/// A ledger taken from the pool; it goes back when dropped.
pub struct Pooled {
    ledger: Option<Ledger>,
    pool: Arc<LedgerPool>,
}

impl LedgerPool {
    /// A pool of the ledgers in `store`, with its writer, holding at most
    /// `limit` of them at once on a PostgreSQL store (a file's are bounded
    /// by the runs and reads under way, and 256 kept idle).
    pub fn open(store: &Store, limit: usize) -> Result<Self, dpkit_ledger::LedgerError> {
        // A PostgreSQL pool keeps every one that comes back: it holds
        // fewer than `limit` idle then, one being in use.
        let (limit, max_idle) = match store {
            Store::File(_) => (usize::MAX, MAX_IDLE_FILE),
            _ => (limit.max(1), limit.max(1)),
        };
        Ok(Self {
            ledgers: Mutex::default(),
            returned: Condvar::new(),
            limit,
            max_idle,
            writer: GroupCommit::open_in(store)?,
        })
    }

    /// The state's writer (its counts are in the metrics).
    pub fn writer(&self) -> &GroupCommit {
        &self.writer
    }

    /// `account`'s ledger: an idle one, or a new one (in place of another
    /// account's idle one, or once one comes back, if `limit` are open).
    pub fn take(self: &Arc<Self>, account: &str) -> Result<Pooled, QueryError> {
        let mut ledgers = self.lock();
        let closed = loop {
            if let Some(ledger) = ledgers.idle.get_mut(account).and_then(Vec::pop) {
                // One whose session the server ended (a restart) is let go.
                if !ledger.is_closed() {
                    return Ok(self.pooled(ledger));
                }
                ledgers.open -= 1;
                continue;
            }
            if ledgers.open < self.limit {
                ledgers.open += 1;
                break None;
            }
            if let Some(other) = ledgers.take_any_idle() {
                break Some(other);
            }
            ledgers = self
                .returned
                .wait(ledgers)
                .unwrap_or_else(|e| e.into_inner());
        };
        drop(ledgers);
        // Closed and opened without the lock: both may wait on the network.
        drop(closed);
        match self.writer.open_account(account) {
            Ok(ledger) => Ok(self.pooled(ledger)),
            Err(e) => {
                self.lock().open -= 1;
                self.returned.notify_one();
                Err(e.into())
            }
        }
    }

    fn pooled(self: &Arc<Self>, ledger: Ledger) -> Pooled {
        Pooled {
            ledger: Some(ledger),
            pool: self.clone(),
        }
    }

    /// The ledgers; a panic elsewhere leaves them whole (each change is one step).
    fn lock(&self) -> MutexGuard<'_, Ledgers> {
        self.ledgers.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Ledgers {
    /// An idle ledger of any account, taken out to be closed.
    fn take_any_idle(&mut self) -> Option<Ledger> {
        self.idle.values_mut().find_map(Vec::pop)
    }
}

impl Deref for Pooled {
    type Target = Ledger;

    fn deref(&self) -> &Ledger {
        self.ledger
            .as_ref()
            .expect("a pooled ledger is present until dropped")
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let Some(ledger) = self.ledger.take() else {
            return;
        };
        // The next run of this account holds a turn of its own, if any.
        ledger.keep_answers_holding(None);
        let pool = &self.pool;
        let mut ledgers = pool.lock();
        let idle: usize = ledgers.idle.values().map(Vec::len).sum();
        if idle < pool.max_idle {
            ledgers
                .idle
                .entry(ledger.account().to_string())
                .or_default()
                .push(ledger);
        } else {
            ledgers.open -= 1;
            drop(ledgers);
            drop(ledger);
        }
        pool.returned.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::api::test_server::Postgres;

    /// The sessions on `server` but the asking one's.
    fn sessions(server: &Postgres) -> String {
        let rows = server.rows(
            "SELECT COUNT(*) FROM pg_stat_activity
             WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
        );
        rows[0][0].clone().unwrap()
    }

    #[test]
    fn a_postgresql_pool_holds_at_most_its_limit_and_lets_ended_sessions_go() {
        let server = Postgres::start_durable("serve-pool");
        let store = Store::Postgres(server.connection());
        for account in ["a", "b", "c"] {
            Ledger::grant_in(&store, account, 1.0, 0.0).unwrap();
        }
        let pool = Arc::new(LedgerPool::open(&store, 2).unwrap());
        let (a, b) = (pool.take("a").unwrap(), pool.take("b").unwrap());
        assert_eq!(sessions(&server), "3", "the writer and two ledgers");
        let (taken, waited) = std::sync::mpsc::channel();
        let third = {
            let pool = pool.clone();
            std::thread::spawn(move || {
                let c = pool.take("c").unwrap();
                taken.send(()).unwrap();
                c.state().unwrap().total_epsilon
            })
        };
        let at_once = waited.recv_timeout(Duration::from_millis(300));
        assert!(at_once.is_err(), "a third ledger opened past the limit");
        drop(a);
        waited
            .recv_timeout(Duration::from_secs(10))
            .expect("the third opened once the first came back");
        assert_eq!(third.join().unwrap(), 1.0);
        assert_eq!(sessions(&server), "3", "a's idle ledger made way for c's");
        // Sessions the server ended are let go, idle or coming back.
        server.psql(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
             WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
        );
        std::thread::sleep(Duration::from_millis(100));
        drop(b);
        // c's is idle, b's came back after its session ended.
        for account in ["c", "b", "a"] {
            let ledger = pool.take(account).unwrap();
            assert_eq!(ledger.state().unwrap().total_epsilon, 1.0);
        }
    }
}
