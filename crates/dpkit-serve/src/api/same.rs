//! One run at a time of each request of each account, in every server
//! process on the state directory. A copy of a request that arrives while
//! another copy runs waits for it, then finds its kept answer.
//!
//! The ledger alone keeps two runs under one charge to one released
//! answer (see `dpkit_ledger::replay`), but two runs draw their noise
//! apart, and the samplers' time depends on the noise they draw: if the
//! first to finish were released, a faster draw would be chosen from two.
//! So a copy never runs beside another, here or in another process.
//!
//! A request's turn is an OS lock (`flock`) on a file of its own in the
//! state directory, named by the SHA-256 of its account and text: two
//! requests share a file only if they are copies of one request, so a
//! request never waits for another analyst's run (whose time depends on
//! data the first may not be granted), nor for any other request. The lock
//! is the OS's, so a process's death lets it go, and two open files of one
//! process exclude each other as two processes do. The run removes its file
//! before it lets the lock go; a copy that got the lock of a removed file
//! opens the file again. A process that dies leaves its file, which the
//! next copy takes. A process stopped (not dead) mid-run keeps its turn:
//! copies of that request wait until it goes on. Nothing else may delete
//! these files while a server runs.
//!
//! On a state in PostgreSQL, shared by servers on several machines, a
//! request's turn is instead a lock in the database
//! (`dpkit_ledger::RequestTurns`), keyed by the first 64 bits of the same
//! SHA-256: two requests share a key only by a collision, which makes one
//! wait for the other, and nothing more. A run then keeps its answer only
//! while its turn is still held (`Ledger::keep_answers_holding`).

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dpkit_ledger::{Ledger, RequestTurns, Store, Turn};
use sha2::{Digest, Sha256};

use crate::error::{Result, ServeError};

/// How long a copy sleeps between tries of another run's lock.
const RETRY: Duration = Duration::from_millis(2);

/// Where the requests' turns are kept.
pub(crate) enum SameRequests {
    /// The folder of the requests' lock files.
    Files(PathBuf),
    /// The turns in a PostgreSQL state.
    Postgres(Arc<RequestTurns>),
}

/// A request's turn to run: held until dropped, by the run even if its
/// client leaves.
pub(crate) enum SameRequest {
    /// Dropping it removes the file, then lets the lock go.
    File { file: File, path: PathBuf },
    /// A turn in the database, let go where blocking is allowed.
    Postgres(HeldTurn),
}

/// A [`Turn`] that is never let go on the threads that serve connections
/// (letting it go is a round trip to the database).
pub(crate) struct HeldTurn(Option<Turn>);

impl Drop for HeldTurn {
    fn drop(&mut self) {
        let Some(turn) = self.0.take() else { return };
        // Dropped by a request whose client left before its run began:
        // on a thread of its own, which even a runtime that stops lets run.
        if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::spawn(move || drop(turn));
        } else {
            drop(turn);
        }
    }
}

impl Drop for SameRequest {
    fn drop(&mut self) {
        if let Self::File { file, path } = self {
            // While the lock is held: no one can hold this file's lock now.
            let _ = std::fs::remove_file(&*path);
            let _ = file.unlock();
        }
    }
}

impl SameRequest {
    /// Makes `ledger` keep its answers only while this turn is held (a
    /// turn in the database can be lost while the run goes on); a file's
    /// lock is held for as long as the process lives. The pool's ledger
    /// forgets the turn when it goes back.
    pub(crate) fn hold_for(&self, ledger: &Ledger) {
        if let Self::Postgres(HeldTurn(turn)) = self {
            ledger.keep_answers_holding(turn.as_ref());
        }
    }
}

impl SameRequests {
    /// The requests' turns of the state `store`: lock files in the folder
    /// `requests` beside a state file (made if need be), or turns in
    /// PostgreSQL.
    pub(crate) fn new(store: &Store) -> Result<Self> {
        if let Store::File(state) = store {
            let folder = state.with_file_name("requests");
            std::fs::create_dir_all(&folder).map_err(|e| {
                ServeError::State(format!("cannot create {}: {e}", folder.display()))
            })?;
            return Ok(Self::Files(folder));
        }
        Ok(Self::Postgres(Arc::new(RequestTurns::open(store)?)))
    }

    /// Waits until no other copy of `request` of `account` runs, here or
    /// in another process, and takes its turn.
    pub(crate) async fn take(&self, account: &str, request: &str) -> Result<SameRequest> {
        match self {
            Self::Files(folder) => take_file(folder, account, request).await,
            Self::Postgres(turns) => take_in_database(turns, account, request).await,
        }
    }
}

/// A request's turn in the database: tried off the executor until free.
async fn take_in_database(
    turns: &Arc<RequestTurns>,
    account: &str,
    request: &str,
) -> Result<SameRequest> {
    let digest = digest(account, request);
    let key = i64::from_be_bytes(digest[..8].try_into().expect("SHA-256 has 32 bytes"));
    loop {
        let turns = turns.clone();
        let taken = tokio::task::spawn_blocking(move || {
            turns
                .try_take(key)
                .map(|turn| turn.map(|t| HeldTurn(Some(t))))
        })
        .await
        .map_err(|_| ServeError::State("a request's turn could not be taken".into()))??;
        match taken {
            Some(turn) => return Ok(SameRequest::Postgres(turn)),
            None => tokio::time::sleep(RETRY).await,
        }
    }
}

/// A request's turn as a lock file in `folder`.
async fn take_file(folder: &Path, account: &str, request: &str) -> Result<SameRequest> {
    let path = folder.join(format!("{}.lock", name(account, request)));
    let failed = |e: std::io::Error| ServeError::State(format!("{}: {e}", path.display()));
    loop {
        let file = crate::server::open_lock_file(&path)?;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => tokio::time::sleep(RETRY).await,
                Err(TryLockError::Error(e)) => return Err(failed(e)),
            }
        }
        // The run before may have removed the file while this one
        // waited: its lock is then no one's turn, and the path's is.
        if is_at(&file, &path) {
            return Ok(SameRequest::File { file, path });
        }
    }
}

/// Whether `file` is the file now at `path`.
#[cfg(unix)]
fn is_at(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
        _ => false,
    }
}

/// Whether `file` is the file now at `path` (an open file cannot be
/// removed here, so it is).
#[cfg(not(unix))]
fn is_at(_file: &File, _path: &Path) -> bool {
    true
}

/// The name of the lock file of `request` of `account`.
fn name(account: &str, request: &str) -> String {
    crate::analysts::hex(&digest(account, request))
}

/// The SHA-256 of `account` and `request`, apart.
fn digest(account: &str, request: &str) -> [u8; 32] {
    Sha256::new()
        .chain_update(account.as_bytes())
        .chain_update([0])
        .chain_update(request.as_bytes())
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    use std::pin::{Pin, pin};

    use super::*;

    /// Whether every one of `others` waits while `turn` is held; then
    /// lets `turn` go.
    async fn alone<F: Future<Output = Result<SameRequest>>>(
        turn: SameRequest,
        others: [Pin<&mut F>; 2],
    ) -> bool {
        let mut waited = true;
        for other in others {
            let at_once = tokio::time::timeout(Duration::from_millis(100), other).await;
            waited &= at_once.is_err();
        }
        drop(turn);
        waited
    }

    /// Two processes are two `SameRequests` on one folder; their lock files
    /// are opened apart, so the OS keeps them apart as it does processes.
    #[tokio::test]
    async fn a_copy_waits_for_the_run_of_another_process_and_no_other_request_does() {
        let folder = std::env::temp_dir().join(format!("dpkit-same-{}", std::process::id()));
        let state = Store::file(&folder.join("state.sqlite"));
        let (here, there) = (
            SameRequests::new(&state).unwrap(),
            SameRequests::new(&state).unwrap(),
        );
        let at_once = Duration::from_millis(100);
        let first = here.take("ann/adult", "a request").await.unwrap();
        for (account, request) in [("ann/adult", "another request"), ("bob/adult", "a request")] {
            let other = tokio::time::timeout(at_once, there.take(account, request));
            assert!(other.await.is_ok(), "{account} {request} waited");
        }
        let copy = tokio::time::timeout(at_once, there.take("ann/adult", "a request"));
        assert!(copy.await.is_err(), "a copy ran beside the first");
        // Two copies wait on the first's file. Whichever gets the turn
        // runs alone: the other waits, and so does a copy that comes after
        // the first run removed its file.
        let (second, third) = (
            there.take("ann/adult", "a request"),
            here.take("ann/adult", "a request"),
        );
        let later = there.take("ann/adult", "a request");
        let waiting = async move {
            let (mut second, mut third, mut later) = (pin!(second), pin!(third), pin!(later));
            let other = tokio::select! {
                turn = &mut second => alone(turn.unwrap(), [third.as_mut(), later.as_mut()]).await.then_some(third),
                turn = &mut third => alone(turn.unwrap(), [second.as_mut(), later.as_mut()]).await.then_some(second),
            };
            drop(other.expect("the others waited").await.unwrap());
            later.await.unwrap();
        };
        let release = async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            drop(first);
        };
        tokio::time::timeout(Duration::from_secs(5), async {
            tokio::join!(waiting, release)
        })
        .await
        .expect("the copies wait only while another runs");
        let left = std::fs::read_dir(folder.join("requests")).unwrap().count();
        assert_eq!(left, 0, "a lock file outlived its run");
        std::fs::remove_dir_all(&folder).unwrap();
    }

    /// On a PostgreSQL state, the turn is the database's, and a run whose
    /// turn went with its session (a network cut) keeps no answer; the copy
    /// that takes the turn then keeps its own.
    #[test]
    fn a_run_whose_turn_in_postgresql_was_lost_keeps_no_answer() {
        use dpkit_core::accounting::PrivacyLoss;
        use dpkit_ledger::Once;
        let server = crate::api::test_server::Postgres::start_durable("serve-same");
        let store = Store::Postgres(server.connection());
        Ledger::grant_in(&store, "ann/adult", 1.0, 0.0).unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let (here, there) = (
            SameRequests::new(&store).unwrap(),
            SameRequests::new(&store).unwrap(),
        );
        let writer = dpkit_ledger::GroupCommit::open_in(&store).unwrap();
        let ledger = writer.open_account("ann/adult").unwrap();
        let cost = PrivacyLoss::pure(0.25).unwrap();
        let charge = |request| match ledger.charge_once(cost, "q", request).unwrap() {
            Once::Charged(charge) | Once::Unanswered(charge) => charge,
            other => panic!("{other:?}"),
        };
        for (request, lost) in [("kept", false), ("lost", true)] {
            let turn = runtime.block_on(here.take("ann/adult", request)).unwrap();
            let copy = runtime.block_on(async {
                tokio::time::timeout(Duration::from_millis(100), there.take("ann/adult", request))
                    .await
            });
            assert!(copy.is_err(), "a copy ran beside the first");
            // As the query handler does: the turn, then the charge.
            turn.hold_for(&ledger);
            let charged = charge(request);
            if lost {
                // Waits (up to 5 s) for each session to end.
                server.psql(
                    "SELECT pg_terminate_backend(pid, 5000) FROM pg_locks \
                     WHERE locktype = 'advisory'",
                );
            }
            let kept = ledger.keep_answer(charged, "the answer");
            assert_eq!(kept.is_ok(), !lost, "{request}: {kept:?}");
            let replayed = ledger.replayed(request).unwrap();
            assert_eq!(replayed.is_some(), !lost, "{request}");
            drop(turn);
        }
        // The copy takes the lost run's turn, and keeps its answer under
        // the charge that run left.
        let turn = runtime.block_on(there.take("ann/adult", "lost")).unwrap();
        turn.hold_for(&ledger);
        let charged = charge("lost");
        assert_eq!(ledger.keep_answer(charged, "the copy's").unwrap(), None);
        assert_eq!(
            ledger.replayed("lost").unwrap().as_deref(),
            Some("the copy's")
        );
        assert_eq!(ledger.state().unwrap().queries, 2, "no second charge");
        drop(turn);
    }
}
