#![forbid(unsafe_code)]
#![deny(missing_docs)]
//! # dpkit-audit
//!
//! An empirical privacy auditor. It runs a mechanism many times on two
//! neighbouring inputs, searches for the output event that best separates
//! the two output distributions (intervals and thresholds, likelihood-ratio
//! sets of values, floating-point grid residues), and reports a lower
//! confidence bound on the ε the mechanism really provides, next to the ε it
//! declares.
//!
//! A lower bound above the declared ε is a violation, shown at the stated
//! confidence. A lower bound at or below it is *evidence*, not proof: the
//! auditor only sees the events it searches, the inputs it is given and the
//! samples it draws.
//!
//! ```
//! use dpkit_audit::{AuditSettings, AuditTarget, RunAudit, TargetParameters, audit};
//! use dpkit_core::rng::InsecureSeededRng;
//! let mut rng = InsecureSeededRng::from_seed_for_testing(7);
//! let settings = AuditSettings { samples_per_input: 20_000, confidence: 0.99 };
//! let parameters = TargetParameters { epsilon: 1.0, delta: None, sensitivity: 1.0 };
//! let outputs = AuditTarget::Laplace.run(parameters, settings.samples_per_input, &mut rng).unwrap();
//! let report = audit(&outputs, &settings).unwrap();
//! assert!(!report.violation_found());
//! println!("{report}");
//! ```

pub mod auditor;
pub mod bounds;
pub mod error;
pub mod event;
#[cfg(feature = "queries")]
pub mod query;
pub mod search;
pub mod targets;

pub use auditor::{AuditReport, AuditSettings, NeighbouringOutputs, audit};
pub use error::{AuditError, Result};
pub use event::OutputEvent;
pub use targets::{AuditTarget, RunAudit, TargetParameters};
