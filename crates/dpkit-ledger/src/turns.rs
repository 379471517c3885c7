//! One run at a time of each request, in every process on a PostgreSQL
//! store: a request's turn is a session-level advisory lock, held by the
//! process's own session for as long as the run lasts. A process that
//! dies, or is cut off, loses its session and its locks with it, so a copy
//! elsewhere can take the turn.
//!
//! Why a copy never runs beside another where it matters. Two runs draw
//! their noise apart, and the samplers' time depends on their draw, so if
//! two copies ran at once the first answer kept (and released) would be a
//! draw chosen by speed (see `crate::replay`). A turn keeps copies apart,
//! but a session can end while its process goes on running (a network
//! cut): the process then holds a turn that no longer exists. So a ledger
//! that runs under a turn ([`Ledger::keep_answers_holding`]) keeps its
//! answer only if, inside the transaction that keeps it (which holds the
//! ledger's write lock until it commits), the turn's lock is still held by
//! its session (`pg_locks`). A session is named by a random token it holds
//! as a lock of its own from its start, not by its process id, which the
//! server may give a later session. Otherwise nothing is kept and nothing
//! given back: the charge stays unanswered, for the request asked again,
//! or for the copy that holds the turn now; an answer another run kept
//! under it is released instead, as always. Every answer kept was
//! therefore kept by the one run that held the request's turn at that
//! moment; a copy that took the turn since finds that answer kept, or
//! keeps its own.
//!
//! A run takes its turn before it charges (`Ledger::charge_once`), so a
//! copy never finds the charge of a run that still goes on. A [`Turn`]
//! is dropped where blocking is allowed (its lock is let go over the
//! network), never in an asynchronous task.
//!
//! Advisory locks are re-entrant within a session, so runs of one process
//! are kept apart here, by the keys it holds. A session that failed to let
//! a turn go may still hold it, so new turns are taken on a new session; the
//! old one lives on until the last turn taken on it is dropped, so that the
//! other runs under it keep their turns (and their answers) rather than
//! losing them with it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use dpkit_core::rng::SecureRng;
use rand_core::Rng;

use crate::postgres::Postgres;
use crate::sql::{Sql, values};
use crate::{Ledger, Result, Store, store_error};

/// The turns of a process on a PostgreSQL store.
pub struct RequestTurns {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    /// The keys this process holds: taken under this lock, then `current`'s.
    held: Mutex<HashSet<i64>>,
    /// The session new turns are taken on.
    current: Mutex<Arc<Mutex<Session>>>,
}

/// A session that holds turns, named by its token. A session replaced
/// (`broken`, or closed) lives on while turns taken on it are held, each
/// holding it, so that replacing it never takes another run's turn away;
/// it ends, and its locks with it, when the last of them is dropped.
struct Session {
    sql: Postgres,
    token: i64,
    /// A lock it failed to let go may still be held: the session is
    /// replaced before another turn is taken (its locks go with it once its
    /// turns are dropped).
    broken: bool,
}

/// A request's turn, held until dropped (where blocking is allowed).
pub struct Turn {
    key: i64,
    token: i64,
    session: Arc<Mutex<Session>>,
    inner: Arc<Inner>,
}

impl Session {
    fn connect(store: &Store) -> Result<Arc<Mutex<Self>>> {
        let Store::Postgres(connection) = store else {
            return Err(store_error(store, "request turns are kept in PostgreSQL"));
        };
        let sql = Postgres::connect(connection).map_err(|e| store_error(store, e))?;
        let mut rng = SecureRng::from_os().map_err(|e| store_error(store, e))?;
        let token = rng.next_u64() as i64;
        // The two-key form (`objsubid` 2), apart from the turns' one-key.
        let (high, low) = ((token >> 32) as i32, token as i32);
        // `run`, not `first`: the function returns no value to read.
        sql.run(
            "SELECT pg_advisory_lock(?1, ?2)",
            values![i64::from(high), i64::from(low)],
        )
        .map_err(|e| store_error(store, e))?;
        Ok(Arc::new(Mutex::new(Self {
            sql,
            token,
            broken: false,
        })))
    }

    /// Takes the advisory lock `key` if no session holds it.
    fn try_lock(&self, key: i64) -> crate::sql::SqlResult<bool> {
        self.sql
            .first("SELECT pg_try_advisory_lock(?1)", values![key])
            .and_then(|row| row.map_or(Ok(false), |row| row.flag(0)))
    }
}

/// `mutex`'s value: a panic elsewhere leaves each value whole, since each
/// change to it is one step.
fn whole<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl RequestTurns {
    /// The turns of this process on `store`, which must be PostgreSQL.
    pub fn open(store: &Store) -> Result<Self> {
        Ok(Self {
            inner: Arc::new(Inner {
                store: store.clone(),
                held: Mutex::default(),
                current: Mutex::new(Session::connect(store)?),
            }),
        })
    }

    /// Takes the turn of the request whose key is `key`, unless a run of it
    /// holds it, in this process or another: then `None`.
    ///
    /// Its network calls are made under this process's locks of its turns:
    /// a server that stops answering holds up its other takes and drops
    /// until the connection's keepalives give up on it (about a minute).
    pub fn try_take(&self, key: i64) -> Result<Option<Turn>> {
        let mut held = whole(&self.inner.held);
        if held.contains(&key) {
            return Ok(None);
        }
        let mut current = whole(&self.inner.current);
        if whole(&current).broken {
            *current = Session::connect(&self.inner.store)?;
        }
        let attempt = whole(&current).try_lock(key);
        let taken = match attempt {
            // A session that ended took its locks along: their runs, still
            // going, keep nothing (see the module's text). A new one starts.
            Err(_) if whole(&current).sql.is_closed() => {
                *current = Session::connect(&self.inner.store)?;
                whole(&current).try_lock(key)
            }
            taken => taken,
        }
        .map_err(|e| store_error(&self.inner.store, e))?;
        if !taken {
            return Ok(None);
        }
        held.insert(key);
        Ok(Some(Turn {
            key,
            token: whole(&current).token,
            session: current.clone(),
            inner: self.inner.clone(),
        }))
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut held = whole(&self.inner.held);
        let mut session = whole(&self.session);
        let let_go = session
            .sql
            .first("SELECT pg_advisory_unlock(?1)", values![self.key])
            .and_then(|row| row.map_or(Ok(false), |row| row.flag(0)));
        // Still held, perhaps: re-entrant, a later take of the key on this
        // session would hold it twice and shut other processes out for
        // good, so new turns go to a new session. This one lives on for the
        // turns still held on it, which stay theirs.
        session.broken |= let_go != Ok(true);
        held.remove(&self.key);
    }
}

impl Ledger {
    /// Keeps answers only while `turn` is held (see the module's text);
    /// `None` to keep them without a turn, as a file's ledger does.
    ///
    /// Set it for each run, and back to `None` after: a ledger kept for
    /// another run would check a turn that is no longer its own.
    pub fn keep_answers_holding(&self, turn: Option<&Turn>) {
        self.turn.set(turn.map(|turn| (turn.key, turn.token)));
    }
}
