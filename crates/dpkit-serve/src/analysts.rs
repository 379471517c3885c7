//! Analysts and their keys, in the state database beside the ledger's
//! accounts. A key is 256 bits from the OS's generator, shown once; only
//! its SHA-256 is stored (a key that random needs no slow hash). An
//! analyst's budget on a dataset is the ledger account `analyst/dataset`.
//!
//! ```
//! use dpkit_serve::analysts::Analysts;
//! # let dir = std::env::temp_dir().join(format!("doc-analysts-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! # std::fs::create_dir_all(&dir).unwrap();
//! let state = dpkit_ledger::Store::file(&dir.join("state.sqlite"));
//! let analysts = Analysts::open(&state).unwrap();
//! let key = analysts.add("ann").unwrap();
//! dpkit_serve::analysts::grant(&state, "ann", "adult", 5.0, 1e-6).unwrap();
//! assert_eq!(analysts.authenticate(&key).unwrap().as_deref(), Some("ann"));
//! analysts.revoke("ann").unwrap();
//! assert_eq!(analysts.authenticate(&key).unwrap(), None);
//! # drop(analysts);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use dpkit_core::rng::SecureRng;
use dpkit_ledger::{Ledger, Store};
use rand_core::Rng;
use sha2::{Digest, Sha256};

use crate::error::{Result, ServeError};

pub use dpkit_ledger::AnalystRow;

/// The prefix of every key, so a leaked one is easy to recognise.
pub const KEY_PREFIX: &str = "dpk_";

/// The analysts of a state database (kept by `dpkit_ledger::Analysts`),
/// with their keys made and checked here.
pub struct Analysts {
    table: dpkit_ledger::Analysts,
}

/// Names are what accounts are made of: letters, digits, '-' and '_'.
pub fn check_name(name: &str) -> Result<()> {
    let fits = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if fits {
        Ok(())
    } else {
        Err(ServeError::Analyst(
            "an analyst's name is 1 to 64 letters, digits, '-' and '_'".into(),
        ))
    }
}

/// The ledger account of `analyst` on `dataset`.
pub fn account(analyst: &str, dataset: &str) -> String {
    format!("{analyst}/{dataset}")
}

/// Grants `analyst` a total budget on `dataset`, or sets it (raise or
/// lower; what was spent stays spent).
pub fn grant(state: &Store, analyst: &str, dataset: &str, epsilon: f64, delta: f64) -> Result<()> {
    check_name(analyst)?;
    Ok(Ledger::grant_in(
        state,
        &account(analyst, dataset),
        epsilon,
        delta,
    )?)
}

/// `bytes` in lower-case hexadecimal.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hash(key: &str) -> String {
    hex(&Sha256::digest(key.as_bytes()))
}

fn new_key() -> Result<String> {
    let mut rng = SecureRng::from_os().map_err(|e| ServeError::State(e.to_string()))?;
    let mut bytes = [0u8; 32];
    rng.fill_bytes(&mut bytes);
    Ok(format!("{KEY_PREFIX}{}", hex(&bytes)))
}

impl Analysts {
    /// Opens (creating) the state database `state`: a file's folder is
    /// made if need be.
    pub fn open(state: &Store) -> Result<Self> {
        if let Store::File(path) = state
            && let Some(folder) = path.parent()
        {
            std::fs::create_dir_all(folder).map_err(|e| {
                ServeError::State(format!("cannot create {}: {e}", folder.display()))
            })?;
        }
        Ok(Self {
            table: dpkit_ledger::Analysts::open(state)?,
        })
    }

    /// Where the state database is.
    pub fn store(&self) -> &Store {
        self.table.store()
    }

    /// Whether the connection to the state has ended for good (a
    /// PostgreSQL server that closed its session): open them again.
    pub fn is_closed(&self) -> bool {
        self.table.is_closed()
    }

    /// Adds `name` with a new key, and returns the key: the only time it is seen.
    pub fn add(&self, name: &str) -> Result<String> {
        check_name(name)?;
        let key = new_key()?;
        if !self.table.add(name, &hash(&key))? {
            return Err(ServeError::Analyst(format!(
                "analyst {name} exists already"
            )));
        }
        Ok(key)
    }

    /// Every analyst, by name.
    pub fn list(&self) -> Result<Vec<AnalystRow>> {
        Ok(self.table.list()?)
    }

    /// Whether `name` is an analyst (revoked or not).
    pub fn exists(&self, name: &str) -> Result<bool> {
        Ok(self.table.exists(name)?)
    }

    /// Revokes `name`'s key: every later request with it is refused.
    pub fn revoke(&self, name: &str) -> Result<()> {
        if !self.table.revoke(name)? && !self.exists(name)? {
            return Err(ServeError::Analyst(format!("no analyst is named {name}")));
        }
        Ok(())
    }

    /// Gives `name` a new key and returns it (the only time it is seen),
    /// whether the old one was revoked or is live: the old key fails from
    /// the next request on, and the analyst's budgets, and what they have
    /// spent, stay as they were.
    pub fn rekey(&self, name: &str) -> Result<String> {
        let key = new_key()?;
        if !self.table.rekey(name, &hash(&key))? {
            return Err(ServeError::Analyst(format!("no analyst is named {name}")));
        }
        Ok(key)
    }

    /// The analyst whose live key `key` is, if any.
    pub fn authenticate(&self, key: &str) -> Result<Option<String>> {
        Ok(self.table.named_by(&hash(key))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_and_stored_only_as_hashes() {
        let path =
            std::env::temp_dir().join(format!("dpkit-analysts-{}.sqlite", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let analysts = Analysts::open(&Store::file(&path)).unwrap();
        let ann = analysts.add("ann").unwrap();
        let bob = analysts.add("bob").unwrap();
        assert_ne!(ann, bob);
        assert_eq!(ann.len(), KEY_PREFIX.len() + 64);
        assert!(analysts.add("ann").is_err(), "a name is added once");
        assert!(analysts.add("a/b").is_err() && analysts.add("").is_err());
        let bytes = std::fs::read(&path).unwrap();
        for key in [&ann, &bob] {
            let needle = &key.as_bytes()[KEY_PREFIX.len()..];
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle),
                "a key is in the file"
            );
        }
        assert_eq!(analysts.authenticate(&bob).unwrap().as_deref(), Some("bob"));
        assert_eq!(analysts.authenticate("dpk_0").unwrap(), None);
        assert!(analysts.revoke("carl").is_err());
        std::fs::remove_file(&path).unwrap();
    }
}
