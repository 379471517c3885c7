//! The end-to-end query auditor: one SQL query run many times on two
//! neighbouring tables, through the whole query path (planning, the engine,
//! the noise, key selection, post-processing), and a lower confidence
//! bound on the ε it really provides, from [`audit`](crate::audit). It needs
//! the engine's exact, uncharged answers, so it comes with the `queries`
//! feature (which the `dpkit` command line switches on), never with the engine.
//!
//! Everything the analyst sees is an output here: an answer, a refusal or
//! a failure. A statistic maps each answer to a number (a cell, how many
//! groups were released, how many cells fall near a value); failures map
//! to [`FAILED`], so a query that fails on one table and not the other is
//! as visible to the auditor as it is to an attacker.
//!
//! ```no_run
//! use dpkit_audit::query::{QueryAudit, audit_query, cell};
//! use dpkit_query::{Description, QueryEngine, ReleaseSettings, MechanismChoice};
//! use dpkit_core::rng::InsecureSeededRng;
//! let first = QueryEngine::open(Description::load("with.toml".as_ref()).unwrap()).unwrap();
//! let second = QueryEngine::open(Description::load("without.toml".as_ref()).unwrap()).unwrap();
//! let settings = ReleaseSettings { epsilon: 1.0, delta: 0.0, mechanism: MechanismChoice::Auto, confidence: 0.95 };
//! let audit = QueryAudit { sql: "SELECT COUNT(*) FROM t", settings, samples: 20_000, confidence: 0.99 };
//! let report = audit_query(&first, &second, &audit, &|t| cell(t, &[], 0), &mut InsecureSeededRng::from_seed_for_testing(1)).unwrap();
//! assert!(!report.violation_found());
//! ```

use dpkit_core::accounting::PrivacyLoss;
use dpkit_query::QueryEngine;
use dpkit_query::internals::exact;
use dpkit_release::{Cell, ReleaseSettings, ReleasedTable, plan_noise, release};
use rand_core::CryptoRng;

use crate::{AuditReport, AuditSettings, NeighbouringOutputs, Result};

/// The statistic of a query that failed or was refused.
pub const FAILED: f64 = -1e300;
/// The statistic of a cell that was not released.
pub const ABSENT: f64 = -1e299;

/// One audit: the query, its settings, samples per table and the level of
/// the lower confidence bound.
#[derive(Debug, Clone, Copy)]
pub struct QueryAudit<'a> {
    /// The query.
    pub sql: &'a str,
    /// Its privacy settings.
    pub settings: ReleaseSettings,
    /// Runs on each table.
    pub samples: usize,
    /// Confidence of the lower bound on ε.
    pub confidence: f64,
}

/// A statistic of one released answer.
pub type Statistic<'a> = dyn Fn(&ReleasedTable) -> f64 + 'a;

/// The value of column `column` in the row whose keys are `key` (`[]` for
/// a query without GROUP BY), or [`ABSENT`].
pub fn cell(table: &ReleasedTable, key: &[&str], column: usize) -> f64 {
    let keys = |row: &[Cell]| {
        row.iter()
            .filter_map(|c| match c {
                Cell::Key(k) => Some(k.clone()),
                Cell::Value { .. } => None,
            })
            .collect::<Vec<_>>()
    };
    table
        .rows
        .iter()
        .find(|row| keys(row) == key)
        .and_then(|row| match row.get(column) {
            Some(Cell::Value { value, .. }) => Some(*value),
            _ => None,
        })
        .unwrap_or(ABSENT)
}

/// Outputs of `samples` runs of the query on one table.
fn outputs<R: CryptoRng + ?Sized>(
    engine: &QueryEngine,
    audit: &QueryAudit<'_>,
    statistic: &Statistic<'_>,
    rng: &mut R,
) -> (Vec<f64>, Option<PrivacyLoss>) {
    let planned = engine
        .plan(audit.sql)
        .and_then(|query| Ok((plan_noise(&query.measured, &audit.settings)?, query)));
    let Ok((noise, query)) = planned else {
        return (vec![FAILED; audit.samples], None);
    };
    let Ok(exact) = exact(engine, &query) else {
        return (vec![FAILED; audit.samples], Some(noise.cost));
    };
    let mut values = Vec::with_capacity(audit.samples);
    for _ in 0..audit.samples {
        let answer = release(
            &query.measured,
            &noise,
            &exact,
            audit.settings.confidence,
            rng,
        );
        values.push(answer.as_ref().map_or(FAILED, statistic));
    }
    (values, Some(noise.cost))
}

/// Audits `audit.sql` on two neighbouring tables and reports the lower
/// confidence bound on the ε it provides, next to the ε it is charged.
pub fn audit_query<R: CryptoRng + ?Sized>(
    first: &QueryEngine,
    second: &QueryEngine,
    audit: &QueryAudit<'_>,
    statistic: &Statistic<'_>,
    rng: &mut R,
) -> Result<AuditReport> {
    let (first_values, first_cost) = outputs(first, audit, statistic, rng);
    let (second_values, second_cost) = outputs(second, audit, statistic, rng);
    let declared = match first_cost.or(second_cost) {
        Some(cost) => cost,
        None => PrivacyLoss::approximate(audit.settings.epsilon, audit.settings.delta)?,
    };
    let outputs = NeighbouringOutputs {
        mechanism: format!("query: {}", audit.sql),
        declared,
        first_input: "the first table".into(),
        second_input: "its neighbour".into(),
        first: first_values,
        second: second_values,
    };
    let settings = AuditSettings {
        samples_per_input: audit.samples,
        confidence: audit.confidence,
    };
    crate::audit(&outputs, &settings)
}
