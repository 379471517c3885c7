//! Random number generators: secure by default, reproducible only by explicit choice.
//!
//! Every mechanism takes its randomness through [`rand_core::CryptoRng`]. The
//! production path ([`SecureRng`], used behind [`with_thread_secure_rng`]) is
//! ChaCha12 keyed from the operating system's entropy source. The reproducible
//! generator for tests and experiments, [`InsecureSeededRng`], is the same
//! cipher keyed from a public seed: its outputs are predictable by anyone who
//! knows the seed, which is exactly why it must never protect real data.

use std::cell::RefCell;

use chacha20::{ChaCha8Rng, ChaCha12Rng};
use rand_core::{SeedableRng, TryCryptoRng, TryRng};

use crate::error::{Error, Result};

/// A cryptographically secure generator seeded by the operating system.
///
/// ```
/// use dpkit_core::rng::SecureRng;
/// use rand_core::Rng;
/// let mut rng = SecureRng::from_os().unwrap();
/// let _word = rng.next_u64();
/// ```
pub struct SecureRng(ChaCha12Rng);

impl SecureRng {
    /// Keys a new generator with 256 bits from the operating system.
    pub fn from_os() -> Result<Self> {
        let mut seed = [0u8; 32];
        getrandom_fill(&mut seed)?;
        Ok(Self(ChaCha12Rng::from_seed(seed)))
    }
}

fn getrandom_fill(seed: &mut [u8; 32]) -> Result<()> {
    use rand::rngs::SysRng;
    SysRng
        .try_fill_bytes(seed)
        .map_err(|e| Error::RandomSource(e.to_string()))
}

/// A reproducible generator keyed from a public seed: for tests and experiments
/// only, never for releasing statistics about real people.
///
/// ```
/// use dpkit_core::rng::InsecureSeededRng;
/// use rand_core::Rng;
/// let a = InsecureSeededRng::from_seed_for_testing(7).next_u64();
/// let b = InsecureSeededRng::from_seed_for_testing(7).next_u64();
/// assert_eq!(a, b);
/// ```
pub struct InsecureSeededRng(ChaCha12Rng);

impl InsecureSeededRng {
    /// A generator whose whole output is determined by `seed`.
    pub fn from_seed_for_testing(seed: u64) -> Self {
        Self(ChaCha12Rng::seed_from_u64(seed))
    }
}

/// A reproducible generator with fewer cipher rounds (ChaCha8), for
/// experiments that time mechanisms on a faster seeded source. Like
/// [`InsecureSeededRng`], anyone who knows the seed can predict it: never use
/// it to release statistics about real people.
///
/// ```
/// use dpkit_core::rng::InsecureFastSeededRng;
/// use rand_core::Rng;
/// let a = InsecureFastSeededRng::from_seed_for_experiments(7).next_u64();
/// assert_eq!(a, InsecureFastSeededRng::from_seed_for_experiments(7).next_u64());
/// ```
pub struct InsecureFastSeededRng(ChaCha8Rng);

impl InsecureFastSeededRng {
    /// A generator whose whole output is determined by `seed`.
    pub fn from_seed_for_experiments(seed: u64) -> Self {
        Self(ChaCha8Rng::seed_from_u64(seed))
    }
}

macro_rules! forward_rng {
    ($t:ty) => {
        impl TryRng for $t {
            type Error = core::convert::Infallible;
            #[inline]
            fn try_next_u32(&mut self) -> core::result::Result<u32, Self::Error> {
                self.0.try_next_u32()
            }
            #[inline]
            fn try_next_u64(&mut self) -> core::result::Result<u64, Self::Error> {
                self.0.try_next_u64()
            }
            #[inline]
            fn try_fill_bytes(&mut self, dst: &mut [u8]) -> core::result::Result<(), Self::Error> {
                self.0.try_fill_bytes(dst)
            }
        }
        impl TryCryptoRng for $t {}
    };
}
forward_rng!(SecureRng);
forward_rng!(InsecureSeededRng);
forward_rng!(InsecureFastSeededRng);

thread_local! {
    static THREAD_SECURE_RNG: RefCell<Option<SecureRng>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's [`SecureRng`], keying it from the OS on first use.
///
/// This is what every mechanism's `privatize` uses. The generator is per thread
/// and is not re-keyed after `fork`; a forked child must not release values
/// before calling a mechanism's `*_with_rng` method with a fresh [`SecureRng`].
///
/// ```
/// use dpkit_core::rng::with_thread_secure_rng;
/// use rand_core::Rng;
/// let word = with_thread_secure_rng(|rng| rng.next_u64()).unwrap();
/// # let _ = word;
/// ```
pub fn with_thread_secure_rng<T>(f: impl FnOnce(&mut SecureRng) -> T) -> Result<T> {
    THREAD_SECURE_RNG.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(SecureRng::from_os()?);
        }
        Ok(f(slot.as_mut().expect("just initialised")))
    })
}
