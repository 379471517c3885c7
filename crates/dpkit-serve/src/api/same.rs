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

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::error::{Result, ServeError};

/// Lock stripes: requests whose stripes meet wait for each other.
const STRIPES: u64 = 1024;

/// How long a copy sleeps between tries of another process's lock.
const RETRY: Duration = Duration::from_millis(2);

/// The stripes of one process, and the folder of their lock files.
pub(crate) struct SameRequests {
    stripes: Vec<Arc<Mutex<()>>>,
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
            stripes: (0..STRIPES).map(|_| Arc::default()).collect(),
            folder: folder.to_path_buf(),
        })
    }

    /// Waits until no other copy of `request` of `account` runs, here or
    /// in another process, and takes its turn.
    pub(crate) async fn take(&self, account: &str, request: &str) -> Result<SameRequest> {
        let stripe = stripe(account, request);
        let guard = self.stripes[stripe as usize].clone().lock_owned().await;
        let path = self.folder.join(format!("{stripe}.lock"));
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

/// The stripe of `request` of `account`.
fn stripe(account: &str, request: &str) -> u64 {
    let digest = Sha256::new()
        .chain_update(account.as_bytes())
        .chain_update([0])
        .chain_update(request.as_bytes())
        .finalize();
    let first: [u8; 8] = digest[..8].try_into().expect("SHA-256 has 32 bytes");
    u64::from_le_bytes(first) % STRIPES
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
        let other = there.take("ann/adult", "another request").await;
        assert!(other.is_ok(), "another request runs at once");
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
