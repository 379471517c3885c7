//! Private synthetic tables: the same path as `dpkit synth` (plan, charge
//! once, count where the rows live, fit, sample) and the same ledger file.

use std::path::{Path, PathBuf};

use dpkit_core::rng::SecureRng;
use dpkit_query::synth::{self, Columns, MethodName};
use dpkit_query::{Description, QueryEngine, QueryError as EngineError};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde_json::{Value, json};

use crate::query::{budget_json, open_ledger, query_error, warn_of};

/// What to synthesize, as `dpkit.synthesize` passes it.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct Asked {
    epsilon: f64,
    delta: f64,
    method: String,
    rows: Option<usize>,
    table: Option<String>,
    columns: Vec<String>,
    without: Vec<String>,
    bins: u32,
}

/// Plans the table and, unless `explain`, charges and draws it: JSON with
/// the columns (name, type, values), what was measured, the cost and the
/// budget; with `explain`, the explanation alone. A note about the
/// ledger's total goes to `note`.
fn synthesized(
    path: &Path,
    (asked, method): (&Asked, MethodName),
    (analyst, ledger_path): (&str, Option<PathBuf>),
    explain: bool,
    note: &mut Option<String>,
) -> Result<Value, EngineError> {
    let description = Description::load(path)?;
    let (ledger, found) = open_ledger(path, &description, analyst, ledger_path, false)?;
    *note = found;
    let engine = QueryEngine::open(description)?;
    let columns = Columns {
        table: asked.table.clone(),
        only: asked.columns.clone(),
        without: asked.without.clone(),
        bins: Some(asked.bins),
    };
    let planned = synth::plan(&engine, &columns, method, (asked.epsilon, asked.delta))?;
    if explain {
        let more = ledger.how_many_more(planned.cost)?;
        return Ok(json!({ "explanation": planned.explain()?, "tables_left": more }));
    }
    let mut rng = SecureRng::from_os()?;
    let drawn = planned.run(&engine, &ledger, asked.rows, &mut rng)?;
    let columns = synth::output::to_json(&drawn.rows);
    let dataset = planned.table.table.clone();
    Ok(json!({
        "dataset": dataset,
        "method": planned.method_name(),
        "columns": columns,
        "measured": drawn.chosen,
        "epsilon": planned.cost.loss.epsilon(),
        "delta": planned.cost.loss.delta(),
        "one_way_fit": { "mean": drawn.one_way.mean, "max": drawn.one_way.max },
        "measured_fit": drawn
            .measured
            .iter()
            .map(|m| json!({ "columns": m.columns, "distance": m.distance }))
            .collect::<Vec<_>>(),
        "budget": budget_json(&dataset, &ledger.state()?),
    }))
}

/// Draws a private synthetic table, charged once to the analyst's ledger;
/// JSON (see [`synthesized`]).
#[pyfunction]
#[pyo3(signature = (description, asked, analyst, ledger, explain))]
pub(crate) fn _synthesize(
    py: Python<'_>,
    description: PathBuf,
    asked: Asked,
    analyst: &str,
    ledger: Option<PathBuf>,
    explain: bool,
) -> PyResult<String> {
    let method = MethodName::from_name(&asked.method)
        .ok_or_else(|| PyValueError::new_err("method must be mst or aim"))?;
    let mut note = None;
    let done = py.detach(|| {
        synthesized(
            &description,
            (&asked, method),
            (analyst, ledger),
            explain,
            &mut note,
        )
    });
    warn_of(py, note)?;
    done.map(|value| value.to_string()).map_err(query_error)
}
