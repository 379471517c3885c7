//! Private SQL on the embedded engine: the same path as `dpkit query`
//! (plan, noise plan, charge, run, release) and the same ledger file.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use dpkit_core::rng::SecureRng;
use dpkit_ledger::{BudgetState, default_path, shown_epsilon};
use dpkit_query::{
    Description, Ledger, MechanismChoice, QueryEngine, QueryError as EngineError, ReleaseSettings,
};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyUserWarning, PyValueError};
use pyo3::prelude::*;
use serde_json::{Value, json};

create_exception!(
    dpkit,
    QueryError,
    PyException,
    "A private query dpkit refused or could not answer (one line, never a data value)."
);

/// Bad parameters are a `ValueError`, as everywhere in `dpkit`; the rest
/// is a `QueryError` with the engine's one line.
pub(crate) fn query_error(error: EngineError) -> PyErr {
    match error {
        EngineError::Mechanism(error) => PyValueError::new_err(error.to_string()),
        error => QueryError::new_err(error.to_string()),
    }
}

fn settings(
    epsilon: f64,
    delta: f64,
    mechanism: &str,
    confidence: f64,
) -> PyResult<ReleaseSettings> {
    let mechanism = MechanismChoice::from_name(mechanism).ok_or_else(|| {
        PyValueError::new_err("mechanism must be auto, laplace, gaussian, staircase or geometric")
    })?;
    Ok(ReleaseSettings {
        epsilon,
        delta,
        mechanism,
        confidence,
    })
}

/// The analyst's ledger: `ledger`, or the one `dpkit query` uses by default,
/// created with the description's budget. With `grant`, its total is set to
/// the description's; without, a total that differs (the description was
/// edited) comes back as a note, for [`warn_of`].
pub(crate) fn open_ledger(
    path: &Path,
    description: &Description,
    analyst: &str,
    ledger: Option<PathBuf>,
    grant: bool,
) -> Result<(Ledger, Option<String>), EngineError> {
    let ledger = match ledger {
        Some(ledger) => ledger,
        None => default_path(path, &description.table, analyst)?,
    };
    let (epsilon, delta) = (description.budget_epsilon, description.budget_delta);
    let (ledger, edited) = Ledger::open_declared(&ledger, epsilon, delta, grant)?;
    let note = edited.map(|edited| {
        format!(
            "{} {edited}; dpkit.budget(..., grant=True) sets the description's",
            path.display()
        )
    });
    Ok((ledger, note))
}

/// The budget in the shape `dpkit serve` returns it.
pub(crate) fn budget_json(dataset: &str, state: &BudgetState) -> Value {
    json!({
        "dataset": dataset,
        "total_epsilon": shown_epsilon(state.total_epsilon),
        "spent_epsilon": shown_epsilon(state.spent_epsilon),
        "remaining_epsilon": shown_epsilon(state.remaining_epsilon()),
        "total_delta": state.total_delta,
        "spent_delta": state.spent_delta,
        "remaining_delta": state.remaining_delta(),
        "queries": state.queries,
        "concentrated": state.concentrated,
    })
}

/// A `UserWarning` with `note`, if there is one, pointing at the caller of
/// the `dpkit` function that called in here.
pub(crate) fn warn_of(py: Python<'_>, note: Option<String>) -> PyResult<()> {
    let Some(note) = note else { return Ok(()) };
    let note = CString::new(note).map_err(|e| PyValueError::new_err(e.to_string()))?;
    PyErr::warn(py, &py.get_type::<PyUserWarning>(), &note, 2)
}

/// Answers `sql` and returns it as the JSON text of `dpkit serve`'s answer,
/// so that Python builds the same DataFrame from either. A note about the
/// ledger's total goes to `note` even when the query is refused.
fn answer(
    path: &Path,
    sql: &str,
    settings: &ReleaseSettings,
    analyst: &str,
    ledger_path: Option<PathBuf>,
    note: &mut Option<String>,
) -> Result<String, EngineError> {
    let description = Description::load(path)?;
    let (ledger, found) = open_ledger(path, &description, analyst, ledger_path, false)?;
    *note = found;
    let dataset = description.table.clone();
    let engine = QueryEngine::open(description)?;
    let mut rng = SecureRng::from_os()?;
    // Held to its deadline as on the command line: the time a script
    // takes for the call shows no more of one person than the release
    // time allows (`dpkit_query::timing`).
    let deadlines = dpkit_query::timing::Deadlines::default();
    let table = engine.answer_by_deadline(sql, settings, &ledger, &deadlines, &mut rng)?;
    let state = ledger.state()?;
    Ok(json!({
        "dataset": dataset,
        "columns": table.columns,
        "released": table.released,
        "rows": table.rows,
        "confidence": table.confidence,
        "epsilon": table.epsilon,
        "delta": table.delta,
        "replay": false,
        "charged_epsilon": table.epsilon,
        "charged_delta": table.delta,
        "budget": budget_json(&dataset, &state),
        "notes": table.notes,
    })
    .to_string())
}

/// Runs a private query, charged to the analyst's ledger; the answer as JSON.
#[pyfunction]
#[pyo3(signature = (description, sql, epsilon, delta, mechanism, confidence, analyst, ledger))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _query(
    py: Python<'_>,
    description: PathBuf,
    sql: &str,
    epsilon: f64,
    delta: f64,
    mechanism: &str,
    confidence: f64,
    analyst: &str,
    ledger: Option<PathBuf>,
) -> PyResult<String> {
    let settings = settings(epsilon, delta, mechanism, confidence)?;
    let mut note = None;
    let answered = py.detach(|| answer(&description, sql, &settings, analyst, ledger, &mut note));
    warn_of(py, note)?;
    answered.map_err(query_error)
}

/// What the query would release and cost: text. Spends nothing.
#[pyfunction]
#[pyo3(signature = (description, sql, epsilon, delta, mechanism, confidence))]
pub(crate) fn _explain(
    py: Python<'_>,
    description: PathBuf,
    sql: &str,
    epsilon: f64,
    delta: f64,
    mechanism: &str,
    confidence: f64,
) -> PyResult<String> {
    let settings = settings(epsilon, delta, mechanism, confidence)?;
    py.detach(|| {
        let engine = QueryEngine::open(Description::load(&description)?)?;
        engine.explain(sql, &settings)
    })
    .map_err(query_error)
}

/// The analyst's budget on the dataset, as JSON (with `grant`, after
/// setting its total to the description's).
#[pyfunction]
#[pyo3(signature = (description, analyst, ledger, grant))]
pub(crate) fn _budget(
    py: Python<'_>,
    description: PathBuf,
    analyst: &str,
    ledger: Option<PathBuf>,
    grant: bool,
) -> PyResult<String> {
    let (budget, note) = py
        .detach(|| {
            let loaded = Description::load(&description)?;
            let (ledger, note) = open_ledger(&description, &loaded, analyst, ledger, grant)?;
            Ok((budget_json(&loaded.table, &ledger.state()?), note))
        })
        .map_err(query_error)?;
    warn_of(py, note)?;
    Ok(budget.to_string())
}
