#![forbid(unsafe_code)]
#![deny(missing_docs)]
//! # dpkit-query
//!
//! Differentially private SQL over CSV and Parquet files. DataFusion parses
//! and plans the query; dpkit checks the plan and rewrites it to compute only
//! clamped, contribution-bounded exact aggregates (counts, sums and sums of
//! squares per group, and the histograms behind medians and percentiles)
//! with built-in functions. It then adds noise in Rust to that small
//! result, chooses which group keys to release, attaches confidence
//! intervals and charges a budget ledger that survives restarts.
//!
//! ```no_run
//! use dpkit_query::{Description, Ledger, QueryEngine, ReleaseSettings};
//! use dpkit_core::rng::SecureRng;
//! let description = Description::load("data/adult/adult.toml".as_ref()).unwrap();
//! let ledger = Ledger::open("alice.ledger.sqlite".as_ref(), description.budget_epsilon, description.budget_delta).unwrap();
//! let engine = QueryEngine::open(description).unwrap();
//! let settings = ReleaseSettings { epsilon: 0.5, delta: 0.0, mechanism: Default::default(), confidence: 0.95 };
//! let answer = engine
//!     .answer("SELECT sex, COUNT(*) FROM adult GROUP BY sex", &settings, &ledger, &mut SecureRng::from_os().unwrap())
//!     .unwrap();
//! println!("{}", answer.to_text());
//! ```

pub mod audit;
pub mod backend;
mod clamp;
mod cut_text;
pub mod description;
pub mod engine;
pub mod error;
mod exact_sum;
mod hints;
mod matcher;
pub mod plan;
mod source;
pub mod total;
mod total_arithmetic;
mod total_math;
mod total_work;

pub use description::Description;
pub use dpkit_ledger::Ledger;
pub use dpkit_release::{MechanismChoice, ReleaseSettings, ReleasedTable};
pub use engine::{OnceAnswer, QueryEngine, RunLimits};
pub use error::{QueryError, Result};
