//! Where a mechanism's randomness comes from: the OS-seeded thread
//! generator, or, only when a test asks for it by name, a seeded one.

use std::sync::{Mutex, MutexGuard};

use dpkit_core::rng::{InsecureSeededRng, with_thread_secure_rng};
use pyo3::prelude::*;
use rand_core::CryptoRng;

use crate::value_error;

/// The OS-seeded thread generator, or (for tests only) a seeded one.
pub(crate) struct Generator(Option<Mutex<InsecureSeededRng>>);

impl Generator {
    /// The OS-seeded generator, or with `seed` a seeded one for tests.
    pub(crate) fn new(seed: Option<u64>) -> Self {
        Self(seed.map(|s| Mutex::new(InsecureSeededRng::from_seed_for_testing(s))))
    }

    /// The seeded generator, if this is one.
    pub(crate) fn seeded(&self) -> Option<MutexGuard<'_, InsecureSeededRng>> {
        self.0.as_ref().map(|seeded| {
            seeded
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        })
    }

    /// Runs `draw` with the generator (through `dyn`: for single draws;
    /// batch paths match on [`Generator::seeded`] to keep their loops static).
    pub(crate) fn with<T>(&self, draw: impl FnOnce(&mut dyn CryptoRng) -> T) -> PyResult<T> {
        match self.seeded() {
            Some(mut rng) => Ok(draw(&mut *rng)),
            None => with_thread_secure_rng(|rng| draw(rng)).map_err(value_error),
        }
    }
}
