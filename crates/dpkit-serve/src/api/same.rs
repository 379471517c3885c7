//! One run at a time of each request of each account, in every server
//! process on the state directory. A copy of a request that arrives while
//! another copy runs waits for it, then finds its kept answer.
//!
//! The ledger alone keeps two runs under one charge to one released
//! answer (see `dpkit_ledger::replay`), but two runs draw their noise
//! apart, and the samplers' time depends on the noise they draw: if the
//! first to finish were released, a faster draw would be chosen from two.
//! So a copy never runs beside another, here or in another process: a
//! request takes its stripe's lock in this process, then the same stripe's
//! lock file in the state directory (an OS lock, which a process's death
//! lets go). Stripes are chosen by SHA-256, the same in every build.
//!
//! Each account has stripes of its own: two requests meet on a stripe only
//! if one analyst sent both, so a wait depends on that analyst's own runs,
//! never on another's (whose run time depends on data the first may not be
//! granted). A process stopped (not dead) mid-run keeps its stripe: copies
//! of its requests, and the requests on its stripes, wait until it goes on.

use std::collections::HashMap;
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::error::{Result, ServeError};

/// Lock stripes of each account: its requests whose stripes meet wait for
/// each other.
const STRIPES: u64 = 64;

/// How long a copy sleeps between tries of another process's lock.
const RETRY: Duration = Duration::from_millis(2);

/// The stripes of one process, and the folder of their lock files.
pub(crate) struct SameRequests {
    /// By the name of their lock file; at most [`STRIPES`] an account.
    stripes: std::sync::Mutex<HashMap<String, Arc<Mutex<()>>>>,
    folder: PathBuf,
}

/// A request's turn to run: held until dropped, by the run even if its
/// client leaves. The file is closed (its lock let go) before the stripe.
pub(crate) struct SameRequest {
    _file: File,
    _stripe: OwnedMutexGuard<()>,
}

impl SameRequests {
    /// The stripes whose lock files are in `folder` (made if need be).
    pub(crate) fn new(folder: &Path) -> Result<Self> {
        std::fs::create_dir_all(folder)
            .map_err(|e| ServeError::State(format!("cannot create {}: {e}", folder.display())))?;
        Ok(Self {
            stripes: std::sync::Mutex::default(),
            folder: folder.to_path_buf(),
        })
    }

    /// Waits until no other copy of `request` of `account` runs, here or
    /// in another process, and takes its turn.
    pub(crate) async fn take(&self, account: &str, request: &str) -> Result<SameRequest> {
        let name = stripe(account, request);
        let mutex = self
            .stripes
            .lock()
            .map_err(|_| ServeError::State("a request's lock failed".into()))?
            .entry(name.clone())
            .or_default()
            .clone();
        let guard = mutex.lock_owned().await;
        let path = self.folder.join(format!("{name}.lock"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| ServeError::State(format!("cannot open {}: {e}", path.display())))?;
        loop {
            match file.try_lock() {
                Ok(()) => {
                    return Ok(SameRequest {
                        _file: file,
                        _stripe: guard,
                    });
                }
                Err(TryLockError::WouldBlock) => tokio::time::sleep(RETRY).await,
                Err(TryLockError::Error(e)) => {
                    return Err(ServeError::State(format!(
                        "cannot lock {}: {e}",
                        path.display()
                    )));
                }
            }
        }
    }
}

/// The name of the stripe of `request` of `account`: the account's, and
/// one of its [`STRIPES`].
fn stripe(account: &str, request: &str) -> String {
    let of_account = Sha256::digest(account.as_bytes());
    let digest = Sha256::new()
        .chain_update(account.as_bytes())
        .chain_update([0])
        .chain_update(request.as_bytes())
        .finalize();
    let first: [u8; 8] = digest[..8].try_into().expect("SHA-256 has 32 bytes");
    let account = crate::analysts::hex(&of_account[..8]);
    format!("{account}-{}", u64::from_le_bytes(first) % STRIPES)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two processes are two `SameRequests` on one folder: their lock files
    /// are opened apart, so the OS keeps them apart as it does processes.
    #[tokio::test]
    async fn a_copy_waits_for_the_run_of_another_process_and_no_other_request_does() {
        let folder = std::env::temp_dir().join(format!("dpkit-same-{}", std::process::id()));
        let (here, there) = (
            SameRequests::new(&folder).unwrap(),
            SameRequests::new(&folder).unwrap(),
        );
        let first = here.take("ann/adult", "a request").await.unwrap();
        let other = tokio::time::timeout(
            Duration::from_millis(100),
            there.take("ann/adult", "another request"),
        );
        let _other = other
            .await
            .expect("another request (on another stripe) runs at once");
        // Another account's requests, enough to meet every stripe of one
        // shared pool of 1,024 (with ann's two held, all pass by chance
        // once in 3,000).
        for i in 0..4096 {
            let request = format!("request {i}");
            let bobs = tokio::time::timeout(
                Duration::from_millis(100),
                there.take("bob/adult", &request),
            );
            assert!(bobs.await.is_ok(), "another analyst's request waited");
        }
        let copy = tokio::time::timeout(
            Duration::from_millis(100),
            there.take("ann/adult", "a request"),
        );
        assert!(copy.await.is_err(), "a copy ran beside the first");
        drop(first);
        let copy =
            tokio::time::timeout(Duration::from_secs(5), there.take("ann/adult", "a request"));
        assert!(copy.await.is_ok(), "a copy waits only while the first runs");
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
