//! The JSON the API takes and gives.

use dpkit_ledger::{BudgetState, Concentrated, shown_epsilon};
use dpkit_query::{MechanismChoice, ReleaseSettings, ReleasedTable};
use dpkit_release::Cell;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::datasets::PublicDescription;

/// A query or an explanation to make.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"dataset": "adult", "sql": "SELECT sex, COUNT(*) AS people FROM adult GROUP BY sex", "epsilon": 0.5}))]
pub struct QueryRequest {
    /// The dataset's name.
    pub dataset: String,
    /// `SELECT … FROM <dataset> [WHERE …] [GROUP BY …]` with COUNT, SUM, AVG,
    /// VAR, STDDEV, MIN, MAX, MEDIAN or PERCENTILE_CONT.
    #[schema(min_length = 1)]
    pub sql: String,
    /// ε the query may spend.
    #[schema(exclusive_minimum = 0.0, maximum = 1000.0)]
    pub epsilon: f64,
    /// δ the query may spend (default 0): needed to GROUP BY a column
    /// without a public domain, and for the gaussian mechanism.
    #[serde(default)]
    #[schema(minimum = 0.0, exclusive_maximum = 1.0)]
    pub delta: f64,
    /// The noise (default auto: geometric for counts, staircase for sums).
    #[serde(default)]
    pub mechanism: Mechanism,
    /// The intervals' confidence level (default 0.95).
    #[serde(default = "default_confidence")]
    #[schema(exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub confidence: f64,
}

fn default_confidence() -> f64 {
    0.95
}

/// The noise for every aggregate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mechanism {
    /// Geometric for counts, staircase for sums: the least error.
    #[default]
    Auto,
    /// Laplace everywhere.
    Laplace,
    /// Gaussian everywhere (needs δ).
    Gaussian,
    /// Staircase everywhere.
    Staircase,
    /// Two-sided geometric (counts, whole-number sums).
    Geometric,
}

impl QueryRequest {
    /// The release settings it asks for.
    pub fn settings(&self) -> ReleaseSettings {
        ReleaseSettings {
            epsilon: self.epsilon,
            delta: self.delta,
            mechanism: match self.mechanism {
                Mechanism::Auto => MechanismChoice::Auto,
                Mechanism::Laplace => MechanismChoice::Laplace,
                Mechanism::Gaussian => MechanismChoice::Gaussian,
                Mechanism::Staircase => MechanismChoice::Staircase,
                Mechanism::Geometric => MechanismChoice::Geometric,
            },
            confidence: self.confidence,
        }
    }

    /// The request as the replay cache compares it: every parameter, the
    /// dataset's fingerprint, and the SQL byte for byte.
    pub fn canonical(&self, fingerprint: &str) -> String {
        let settings = self.settings();
        dpkit_query::engine::request_text("v1", &self.dataset, fingerprint, &self.sql, &settings)
    }
}

/// The datasets granted to the analyst.
#[derive(Debug, Serialize, ToSchema)]
pub struct DatasetsResponse {
    /// Their public descriptions.
    pub datasets: Vec<PublicDescription>,
}

/// One account's budget.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Budget {
    /// The dataset.
    pub dataset: String,
    /// ε granted.
    pub total_epsilon: f64,
    /// ε spent.
    pub spent_epsilon: f64,
    /// ε left.
    pub remaining_epsilon: f64,
    /// δ granted.
    pub total_delta: f64,
    /// δ spent.
    pub spent_delta: f64,
    /// δ left to plain sums: what a query's δ may still be (half of the
    /// total's at most, where the other half backs `concentrated`).
    pub remaining_delta: f64,
    /// Queries charged.
    pub queries: u64,
    /// The concentrated accountant (zCDP), which keeps half of δ and pays
    /// for queries past the plain sums of ε and δ above; absent when it
    /// does not keep this budget (δ = 0) or a query without a concentrated
    /// form closed it.
    pub concentrated: Option<ConcentratedBudget>,
}

/// The concentrated accountant's side of a budget.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ConcentratedBudget {
    /// ρ spent.
    pub spent_rho: f64,
    /// ρ granted.
    pub total_rho: f64,
    /// The ε the spent ρ is, at `delta`.
    pub spent_epsilon: f64,
    /// The δ it keeps.
    pub delta: f64,
    /// Of that δ, what thresholds (keys without a public domain) have spent.
    pub spent_threshold_delta: f64,
    /// Of that δ, what it keeps for thresholds (0 on budgets granted before
    /// it kept any: there a threshold closes it).
    pub threshold_delta: f64,
}

impl From<Concentrated> for ConcentratedBudget {
    fn from(c: Concentrated) -> Self {
        Self {
            spent_rho: c.spent_rho,
            total_rho: c.total_rho,
            spent_epsilon: shown_epsilon(c.spent_epsilon),
            delta: c.delta,
            spent_threshold_delta: c.spent_threshold_delta,
            threshold_delta: c.threshold_delta,
        }
    }
}

impl Budget {
    /// `state` of the account on `dataset`.
    pub fn of(dataset: &str, state: &BudgetState) -> Self {
        Self {
            dataset: dataset.into(),
            total_epsilon: shown_epsilon(state.total_epsilon),
            spent_epsilon: shown_epsilon(state.spent_epsilon),
            remaining_epsilon: shown_epsilon(state.remaining_epsilon()),
            total_delta: state.total_delta,
            spent_delta: state.spent_delta,
            remaining_delta: state.remaining_delta(),
            queries: state.queries,
            concentrated: state.concentrated.map(ConcentratedBudget::from),
        }
    }
}

/// Every budget of the analyst's.
#[derive(Debug, Serialize, ToSchema)]
pub struct BudgetResponse {
    /// One per granted dataset.
    pub budgets: Vec<Budget>,
}

/// What a query would do, and cost.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExplainResponse {
    /// The dataset.
    pub dataset: String,
    /// The rewritten plan, each release's mechanism, ε and expected error.
    pub explanation: String,
    /// ε the query would cost.
    pub epsilon: f64,
    /// δ the query would cost.
    pub delta: f64,
    /// The budget now (nothing was spent).
    pub budget: Budget,
    /// How many more queries of this cost the budget can pay for, by the
    /// accountant that allows more of them.
    pub queries_left: u64,
    /// With `auto` noise: Gaussian noise that would pay for at least as
    /// many more queries like this one with less error in every
    /// measurement, under the ledger's concentrated accountant; null when
    /// there is none (a few large queries, a budget without δ, another
    /// mechanism asked for).
    pub gaussian: Option<GaussianAdvice>,
    /// How long the request waited for a free worker, in seconds: 0 when
    /// one was free. Other analysts' runs, and this analyst's own beyond
    /// `runs_per_analyst`, make it wait.
    pub waited_seconds: f64,
}

/// Gaussian noise for queries like one explained with `auto`.
#[derive(Debug, Serialize, ToSchema)]
pub struct GaussianAdvice {
    /// The ε to ask for with `"mechanism": "gaussian"`.
    pub epsilon: f64,
    /// The δ to ask for with it: the request's, or else the budget's.
    pub delta: f64,
    /// How many more such queries the budget can pay for.
    pub queries_left: u64,
    /// Each measurement's expected absolute error with Gaussian noise and
    /// with `auto`'s.
    pub errors: Vec<MeasurementError>,
}

/// One measurement's expected absolute error under two noises.
#[derive(Debug, Serialize, ToSchema)]
pub struct MeasurementError {
    /// What is measured (`count of rows`, `sum of age − 53`, …).
    pub measurement: String,
    /// E|error| with Gaussian noise.
    pub gaussian: f64,
    /// E|error| with `auto`'s noise.
    pub auto: f64,
}

impl From<dpkit_query::alternative::GaussianAlternative> for GaussianAdvice {
    fn from(found: dpkit_query::alternative::GaussianAlternative) -> Self {
        Self {
            epsilon: found.epsilon,
            delta: found.delta,
            queries_left: found.queries,
            errors: found
                .errors
                .into_iter()
                .map(|(measurement, gaussian, auto)| MeasurementError {
                    measurement,
                    gaussian,
                    auto,
                })
                .collect(),
        }
    }
}

/// A private answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueryResponse {
    /// The dataset.
    pub dataset: String,
    /// Column names: group keys, then aggregates.
    pub columns: Vec<String>,
    /// For each column, whether it holds released values (with intervals)
    /// rather than group keys; said even when no row is released.
    pub released: Vec<bool>,
    /// Released rows: keys as strings, aggregates as values with intervals.
    pub rows: Vec<Vec<AnswerCell>>,
    /// The intervals' confidence level.
    pub confidence: f64,
    /// ε the answer cost when it was first released.
    pub epsilon: f64,
    /// δ the answer cost when it was first released.
    pub delta: f64,
    /// Whether this is the kept answer of an earlier identical request.
    pub replay: bool,
    /// ε charged by this request (0 for a replay).
    pub charged_epsilon: f64,
    /// δ charged by this request (0 for a replay).
    pub charged_delta: f64,
    /// The budget after it.
    pub budget: Budget,
    /// What to know to read the answer, from public facts only: a literal
    /// outside a column's public domain, or that thresholded groups of few
    /// people may be missing.
    pub notes: Vec<String>,
    /// How long the request waited for a free worker, in seconds (see
    /// [`ExplainResponse::waited_seconds`]).
    pub waited_seconds: f64,
}

/// One cell: a group key, or a released value with its interval.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum AnswerCell {
    /// A group key.
    Key(String),
    /// A released value.
    Value(AnswerValue),
}

/// A released value, its interval and expected absolute error.
#[derive(Debug, Serialize, ToSchema)]
pub struct AnswerValue {
    /// The released value.
    pub value: f64,
    /// The interval's lower end.
    pub low: f64,
    /// The interval's upper end.
    pub high: f64,
    /// Its expected absolute error, where there is a closed form.
    pub expected_error: Option<f64>,
}

impl QueryResponse {
    /// `table` on `dataset`, after which `budget` is left.
    pub fn of(
        dataset: &str,
        table: ReleasedTable,
        replay: bool,
        budget: Budget,
        waited_seconds: f64,
    ) -> Self {
        let (charged_epsilon, charged_delta) = if replay {
            (0.0, 0.0)
        } else {
            (table.epsilon, table.delta)
        };
        Self {
            dataset: dataset.into(),
            columns: table.columns,
            released: table.released,
            rows: table
                .rows
                .into_iter()
                .map(|row| row.into_iter().map(AnswerCell::from).collect())
                .collect(),
            confidence: table.confidence,
            epsilon: table.epsilon,
            delta: table.delta,
            replay,
            charged_epsilon,
            charged_delta,
            budget,
            notes: table.notes,
            waited_seconds,
        }
    }
}

impl From<Cell> for AnswerCell {
    fn from(cell: Cell) -> Self {
        match cell {
            Cell::Key(key) => Self::Key(key),
            Cell::Value {
                value,
                low,
                high,
                expected_error,
            } => Self::Value(AnswerValue {
                value,
                low,
                high,
                expected_error,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_concentrated_budget_reads_as_the_cli_and_python_give_it() {
        let c = Concentrated {
            spent_rho: 0.005,
            total_rho: 0.02285,
            spent_epsilon: 0.1 + 0.2,
            delta: 5e-7,
            spent_threshold_delta: 2e-8,
            threshold_delta: 1.25e-7,
        };
        let served = serde_json::to_value(ConcentratedBudget::from(c)).unwrap();
        assert_eq!(served, serde_json::to_value(c).unwrap());
    }
}
