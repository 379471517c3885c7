//! Open ledger connections, kept per account between requests: opening a
//! SQLite connection re-reads the file's schema, which cost more than the
//! charge itself under load. Every read and charge still goes to the file;
//! charges and kept answers go through this process's writer of the file, which
//! commits those that arrive together in one transaction (see
//! [`GroupCommit`]).

use std::collections::HashMap;
use std::ops::Deref;
use std::path::Path;
use std::sync::{Arc, Mutex};

use dpkit_ledger::{GroupCommit, Ledger};
use dpkit_query::QueryError;

/// The most connections kept idle, over all accounts.
const MAX_IDLE: usize = 256;

/// Idle ledger connections by account.
pub struct LedgerPool {
    idle: Mutex<HashMap<String, Vec<Ledger>>>,
    writer: Arc<GroupCommit>,
}

/// A ledger taken from the pool; it goes back when dropped.
pub struct Pooled {
    ledger: Option<Ledger>,
    pool: Arc<LedgerPool>,
}

impl LedgerPool {
    /// A pool of the ledgers in the state file at `path`, with its writer.
    pub fn open(path: &Path) -> Result<Self, dpkit_ledger::LedgerError> {
        Ok(Self {
            idle: Mutex::default(),
            writer: GroupCommit::open(path)?,
        })
    }

    /// The state file's writer (its counts are in the metrics).
    pub fn writer(&self) -> &GroupCommit {
        &self.writer
    }

    /// `account`'s ledger: an idle one, or a new one.
    pub fn take(self: &Arc<Self>, account: &str) -> Result<Pooled, QueryError> {
        let idle = self
            .idle
            .lock()
            .ok()
            .and_then(|mut idle| idle.get_mut(account).and_then(Vec::pop));
        let ledger = match idle {
            Some(ledger) => ledger,
            None => self.writer.open_account(account)?,
        };
        Ok(Pooled {
            ledger: Some(ledger),
            pool: self.clone(),
        })
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
        let (Some(ledger), Ok(mut idle)) = (self.ledger.take(), self.pool.idle.lock()) else {
            return;
        };
        if idle.values().map(Vec::len).sum::<usize>() < MAX_IDLE {
            idle.entry(ledger.account().to_string())
                .or_default()
                .push(ledger);
        }
    }
}
