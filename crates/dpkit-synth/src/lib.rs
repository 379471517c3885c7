//! # dpkit-synth
//!
//! Private synthetic data from noisy marginals, in the manner of
//! Private-PGM (McKenna, Sheldon & Miklau 2019) and its MST mechanism
//! (McKenna, Miklau & Sheldon 2021, winner of the NIST 2018 challenge):
//!
//! 1. every 1-way marginal is measured with Gaussian noise;
//! 2. r − 1 pairs of columns forming a maximum spanning tree are chosen,
//!    each by an exponential mechanism scoring how badly the 1-way model
//!    predicts the pair;
//! 3. the chosen 2-way marginals are measured with Gaussian noise;
//! 4. a graphical model on a junction tree is fitted to all the noisy
//!    marginals ([`fit`]: mirror descent with exact belief propagation);
//! 5. rows are sampled from it along the tree ([`Sampling`]).
//!
//! [`Aim`] (McKenna, Mullins, Sheldon & Miklau 2022) measures the 1-way
//! marginals, then picks round by round the workload marginal the current
//! model gets most wrong (an exponential mechanism, among the marginals
//! that keep the model under a size limit), measures it, refits the model
//! warm, and anneals its noise, until ρ is spent. Both are
//! [`Synthesizer`]s whose [`Release`] samples rows.
//!
//! Every column is discrete with a public [`Domain`]; the exact counts
//! come from a [`Marginals`] source (an in-memory [`Table`] here) and the
//! noise is added in this crate, with dpkit-core's samplers, under zCDP.
//! Privacy arguments are beside the code (the `# Privacy` sections of
//! [`Synthesizer::run_with_rng`] for [`Mst`] and for [`Aim`]).
//!
//! ```
//! use dpkit_core::accounting::concentrated::rho_within;
//! use dpkit_core::rng::InsecureSeededRng;
//! use dpkit_synth::{Domain, Marginals, Mst, Release, Sampling, Synthesizer, Table};
//!
//! let domain = Domain::new(vec![3, 2, 2])?;
//! let rows: Vec<Vec<u32>> = (0..6_000u32)
//!     .map(|i| vec![i % 3, u32::from(i % 3 == 0), (i / 7) % 2])
//!     .collect();
//! let mut table = Table::from_rows(domain, &rows)?;
//! let rho = rho_within(1.0, 1e-9)?;
//! let mst = Mst::new(rho, 1.0)?;
//! // Releases use `mst.run(&mut table)` (the OS-keyed generator); a seeded
//! // one keeps this example reproducible.
//! let mut rng = InsecureSeededRng::from_seed_for_testing(3);
//! let release = mst.run_with_rng(&mut table, &mut rng)?;
//! let synthetic = release.sample_with_rng(6_000, Sampling::Round, &mut rng)?;
//! let (mut truth, mut synth) = (table.counts(&[0, 1])?, synthetic.clone().counts(&[0, 1])?);
//! let tv: f64 = truth.iter_mut().zip(&mut synth)
//!     .map(|(a, b)| (*a as f64 - *b as f64).abs()).sum::<f64>() / 2.0 / 6_000.0;
//! assert!(tv < 0.05, "{tv}");
//! # Ok::<(), dpkit_synth::Error>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod aim;
mod domain;
mod error;
mod junction;
mod marginals;
mod measure;
mod model;
mod mst;
mod release;
mod sample;
#[cfg(test)]
mod testing;

pub use aim::{Aim, AimRelease, AimRound};
pub use domain::{Domain, MAX_CELLS};
pub use error::{Error, Result};
pub use junction::JunctionTree;
pub use marginals::{Marginals, Table};
pub use model::{FitOptions, Measurement, Model, fit};
pub use mst::{Mst, MstRelease};
pub use release::{Release, Synthesizer};
pub use sample::Sampling;
