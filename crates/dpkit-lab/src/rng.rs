//! The experiments' random source: seeded for reproducible runs, else fresh from the OS.

use dpkit_core::rng::{InsecureSeededRng, SecureRng};
use rand_core::{TryCryptoRng, TryRng};

use crate::error::Result;

/// The generator one experiment draws from.
pub enum ExperimentRng {
    /// `--seed` given: reproducible (and so not for real releases).
    Seeded(InsecureSeededRng),
    /// No seed: a fresh OS-seeded generator.
    Fresh(SecureRng),
}

impl ExperimentRng {
    /// Experiment number `stream` under `seed` (independent streams per
    /// experiment), or a fresh OS-seeded generator.
    pub fn new(seed: Option<u64>, stream: u64) -> Result<Self> {
        Ok(match seed {
            Some(seed) => Self::Seeded(InsecureSeededRng::from_seed_for_testing(
                seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    .wrapping_add(stream),
            )),
            None => Self::Fresh(SecureRng::from_os()?),
        })
    }
}

impl TryRng for ExperimentRng {
    type Error = core::convert::Infallible;
    #[inline]
    fn try_next_u32(&mut self) -> core::result::Result<u32, Self::Error> {
        match self {
            Self::Seeded(rng) => rng.try_next_u32(),
            Self::Fresh(rng) => rng.try_next_u32(),
        }
    }
    #[inline]
    fn try_next_u64(&mut self) -> core::result::Result<u64, Self::Error> {
        match self {
            Self::Seeded(rng) => rng.try_next_u64(),
            Self::Fresh(rng) => rng.try_next_u64(),
        }
    }
    #[inline]
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> core::result::Result<(), Self::Error> {
        match self {
            Self::Seeded(rng) => rng.try_fill_bytes(dst),
            Self::Fresh(rng) => rng.try_fill_bytes(dst),
        }
    }
}

impl TryCryptoRng for ExperimentRng {}
