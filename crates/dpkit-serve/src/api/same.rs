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

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::error::{Result, ServeError};

/// How long a copy sleeps between tries of another run's lock.
const RETRY: Duration = Duration::from_millis(2);

/// The folder of the requests' lock files.
pub(crate) struct SameRequests {
    folder: PathBuf,
}

/// A request's turn to run: held until dropped, by the run even if its
/// client leaves. Dropping it removes the file, then lets the lock go.
pub(crate) struct SameRequest {
    file: File,
    path: PathBuf,
}

impl Drop for SameRequest {
    fn drop(&mut self) {
        // While the lock is held: no one can hold this file's lock now.
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

impl SameRequests {
    /// The requests whose lock files are in `folder` (made if need be).
    pub(crate) fn new(folder: &Path) -> Result<Self> {
        std::fs::create_dir_all(folder)
            .map_err(|e| ServeError::State(format!("cannot create {}: {e}", folder.display())))?;
        Ok(Self {
            folder: folder.to_path_buf(),
        })
    }

    /// Waits until no other copy of `request` of `account` runs, here or
    /// in another process, and takes its turn.
    pub(crate) async fn take(&self, account: &str, request: &str) -> Result<SameRequest> {
        let path = self.folder.join(format!("{}.lock", name(account, request)));
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
                return Ok(SameRequest { file, path });
            }
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
    let digest = Sha256::new()
        .chain_update(account.as_bytes())
        .chain_update([0])
        .chain_update(request.as_bytes())
        .finalize();
    crate::analysts::hex(&digest)
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
        let (here, there) = (
            SameRequests::new(&folder).unwrap(),
            SameRequests::new(&folder).unwrap(),
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
        let left = std::fs::read_dir(&folder).unwrap().count();
        assert_eq!(left, 0, "a lock file outlived its run");
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
