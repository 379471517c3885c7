#![forbid(unsafe_code)]
#![deny(missing_docs)]
//! # dpkit-release
//!
//! The privacy step of a private query, and all that it proves: given what
//! a query measures (a [`MeasuredQuery`], which the planner in
//! `dpkit-query` produces) and the exact per-group measurements, it plans
//! the noise and its cost ([`plan_noise`]), adds the noise, chooses which
//! group keys to release, post-processes each aggregate and attaches its
//! confidence interval ([`release`]), and keeps the rows a HAVING condition
//! holds for ([`having`]). It also explains a plan
//! ([`explanation`]) and finds the smallest ε that meets a target error
//! ([`smallest_epsilon`]). Nothing here reads data or runs SQL: it sees
//! only the small exact result, and depends on `dpkit-core` alone.
//!
//! ```
//! use dpkit_core::rng::InsecureSeededRng;
//! use dpkit_core::sensitivity::Neighbouring;
//! use dpkit_release::{
//!     AggregateKind, AggregateRequest, ExactGroups, KeySelection, MeasuredQuery, Measurement,
//!     OutputColumn, ReleaseSettings, plan_noise, release,
//! };
//! use dpkit_core::lattice::GridValue;
//! // SELECT COUNT(*) AS n FROM people: one aggregate, one measurement.
//! let query = MeasuredQuery {
//!     sql: "SELECT COUNT(*) AS n FROM people".into(),
//!     group_names: vec![],
//!     aggregates: vec![AggregateRequest { name: "n".into(), kind: AggregateKind::CountRows }],
//!     outputs: vec![("n".into(), OutputColumn::Aggregate(0))],
//!     measurements: vec![Measurement::Count],
//!     measurement_of: vec![vec![0]],
//!     threshold_measurement: None,
//!     keys: KeySelection::Single,
//!     having: None,
//!     order_by: vec![],
//!     limit: None,
//!     contribution: dpkit_core::sensitivity::Contribution::rows(1),
//!     joins: Vec::new(),
//!     combinations: Vec::new(),
//!     neighbouring: Neighbouring::AddRemove,
//!     count_ceiling: None,
//!     notes: vec![],
//! };
//! let settings = ReleaseSettings { epsilon: 1.0, delta: 0.0, mechanism: Default::default(), confidence: 0.95 };
//! let noise = plan_noise(&query, &settings).unwrap();
//! let exact = ExactGroups::merged([(vec![], vec![GridValue::whole(1000)])]);
//! let answer = release(&query, &noise, &exact, 0.95, &mut InsecureSeededRng::from_seed_for_testing(7)).unwrap();
//! assert_eq!((answer.epsilon, answer.rows.len()), (1.0, 1));
//! ```

mod answer;
pub mod combined;
pub mod error;
mod explain;
mod grid;
pub mod having;
pub mod measured;
mod noise_plan;
mod post_processing;
mod release;
mod target_error;

pub use answer::{Cell, ReleasedTable, interval_columns};
pub use error::{ReleaseError, Result};
pub use explain::explanation;
pub use measured::{
    AggregateKind, AggregateRequest, Dispersion, Grid, KeySelection, MeasuredQuery, Measurement,
    OutputColumn, QuantileRole,
};
pub use noise_plan::{
    MechanismChoice, NoisePlan, PlannedNoise, ReleaseSettings, composite_error, plan_noise,
};
pub use release::{ExactGroups, Histogram, add_counts, release};
pub use target_error::{TargetError, smallest_epsilon, widest_half_width};
