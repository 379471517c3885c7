//! # dpkit-core
//!
//! Differential-privacy noise mechanisms, privacy accounting and sensitivity
//! tools: correct beyond doubt, secure by default, fast.
//!
//! * [`mechanism`]: Laplace, staircase, two-sided geometric, discrete
//!   staircase, Gaussian and discrete Gaussian, randomized response, the
//!   exponential mechanism and report-noisy-max.
//! * [`accounting`]: ε and (ε, δ) as types, composition, a budget that refuses
//!   to be overspent.
//! * [`sensitivity`]: global sensitivity of common queries and sensitivity sampling.
//!
//! ## Secure by default
//! `privatize` draws from a per-thread ChaCha12 generator keyed by the
//! operating system ([`rng::SecureRng`]). `privatize_with_rng` takes any
//! [`rand_core::CryptoRng`], such as the reproducible
//! [`rng::InsecureSeededRng`] for tests and experiments.
//!
//! ## No floating-point leaks
//! Real-valued mechanisms release on a power-of-two grid with integer noise
//! from exact samplers ([`lattice`], [`sampling`]), so the set of possible
//! outputs never depends on the input (Mironov 2012). Every mechanism proves
//! at construction that its realised privacy loss is at most its declared ε.
//!
//! ```
//! use dpkit_core::accounting::{PrivacyBudget, PrivacyLoss};
//! use dpkit_core::accuracy::NoiseAccuracy;
//! use dpkit_core::mechanism::{IntegerMechanism, Staircase, RealMechanism, TwoSidedGeometric};
//!
//! let mut budget = PrivacyBudget::new(PrivacyLoss::pure(1.0)?);
//! let count = TwoSidedGeometric::new(0.5, 1)?;
//! let noisy_count = budget.charge_then(count.privacy(), || count.privatize(48_842))??;
//! let total_hours = Staircase::new(0.5, 99.0)?;
//! let noisy_hours = budget.charge_then(total_hours.privacy(), || total_hours.privatize(1_970_000.0))??;
//! let bars = total_hours.error_bars(0.05)?;
//! println!("{noisy_count} people, {noisy_hours:.0} ± {:.0} hours", bars.half_width);
//! assert!(budget.spend(PrivacyLoss::pure(0.1)?).is_err());
//! # Ok::<(), dpkit_core::Error>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod accounting;
pub mod accuracy;
pub mod error;
pub mod lattice;
pub mod mechanism;
pub mod rng;
pub mod sampling;
pub mod sensitivity;
mod shared_tables;
pub mod statistics;

pub use error::{Error, Result};
