//! Tables built once per parameter and shared across the process.
//!
//! Building a sampler's alias tables takes up to a millisecond
//! (`benches/construction.rs`), and a query, a service or a Python session
//! builds the same noise again and again. Tables are a pure function of
//! their parameters, so sharing them changes nothing that is drawn.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::Result;

/// A process-wide cache of tables of type `V` keyed by `K`, holding at most
/// `capacity` of them (it starts over when full), so that a long-running
/// service that sees many parameters keeps a bounded amount of memory.
pub(crate) struct SharedTables<K, V> {
    map: OnceLock<Mutex<HashMap<K, Arc<V>>>>,
    capacity: usize,
}

impl<K: Eq + Hash, V> SharedTables<K, V> {
    /// An empty cache of at most `capacity` tables (for a `static`).
    pub(crate) const fn with_capacity(capacity: usize) -> Self {
        Self {
            map: OnceLock::new(),
            capacity,
        }
    }

    /// The tables for `key`, built by `build` the first time.
    pub(crate) fn get_or_build(&self, key: K, build: impl FnOnce() -> Result<V>) -> Result<Arc<V>> {
        let map = self.map.get_or_init(|| Mutex::new(HashMap::new()));
        if let Some(found) = map.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(Arc::clone(found));
        }
        // Built outside the lock: two threads may build the same tables
        // once each, which is harmless.
        let built = Arc::new(build()?);
        let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= self.capacity {
            map.clear();
        }
        map.insert(key, Arc::clone(&built));
        Ok(built)
    }
}
