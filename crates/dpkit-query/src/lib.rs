#![forbid(unsafe_code)]
#![deny(missing_docs)]
//! # dpkit-query
//!
//! Differentially private SQL over CSV and Parquet files. DataFusion parses
//! and plans the query; dpkit checks the plan and rewrites it to compute only
//! clamped, contribution-bounded exact aggregates (counts, sums and sums of
//! squares per group, and the histograms behind medians and percentiles)
//! with built-in functions and total expressions (`dpkit-total`), on the
//! embedded engine or on the database the table lives in (SQLite,
//! PostgreSQL, Spark). The privacy step (`dpkit-release`) then adds noise
//! in Rust to that small result, chooses which group keys to release and
//! attaches confidence intervals, and the cost is charged to a budget
//! ledger that survives restarts (`dpkit-ledger`) before anything runs.
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

pub mod alternative;
pub mod check;
pub mod draft;
pub mod engine;
pub mod error;
mod hints;
pub mod plan;
mod private_table;
mod probe_always;
mod public_table;
pub mod reuse;
pub mod synth;
pub mod timing;

/// The data description (the crate `dpkit-description`), as this crate's
/// `description` module.
pub use dpkit_description as description;
pub use dpkit_description::Description;
pub use dpkit_ledger::Ledger;
pub use dpkit_release::{MechanismChoice, ReleaseSettings, ReleasedTable};
pub use engine::{OnceAnswer, QueryEngine, RunLimits, spawn_planning_thread};
pub use error::{QueryError, Result};

/// Hooks for dpkit's tests and its auditors, not part of the API: each
/// reaches the private table around the ledger, so they exist only with the
/// non-default `internals` feature. dpkit's tests switch it on, and so does
/// dpkit-audit's `queries` feature (the end-to-end auditor compares
/// neighbouring tables without charging, as a curator's tool). No serving
/// path may call them: `workspace_shape.rs` fails if one does.
#[cfg(feature = "internals")]
pub mod internals {
    use datafusion::prelude::SessionContext;
    use dpkit_release::ExactGroups;

    use crate::plan::PrivateQuery;
    use crate::{QueryEngine, Result};

    /// The exact, uncharged measurements of `query`.
    pub fn exact(engine: &QueryEngine, query: &PrivateQuery) -> Result<ExactGroups> {
        engine.exact(query)
    }

    /// The DataFusion session over the private table.
    pub fn session(engine: &QueryEngine) -> &SessionContext {
        engine.session()
    }
}
