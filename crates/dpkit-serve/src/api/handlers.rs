//! The endpoints under `/v1`.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use dpkit_core::rng::SecureRng;

use super::auth::Analyst;
use super::body::JsonBody;
use super::error::{ApiError, ErrorBody};
use super::types::{
    Budget, BudgetResponse, DatasetsResponse, ExplainResponse, GaussianAdvice, QueryRequest,
    QueryResponse,
};
use super::{App, Held};
use crate::analysts::account;

/// The datasets granted to you, with what is public about each.
#[utoipa::path(get, path = "/v1/datasets", security(("bearer" = [])),
    responses(
        (status = 200, body = DatasetsResponse),
        (status = 401, body = ErrorBody), (status = 429, body = ErrorBody),
    ))]
pub async fn datasets(
    State(app): State<Arc<App>>,
    Analyst(analyst): Analyst,
) -> Result<Json<DatasetsResponse>, ApiError> {
    let granted = app
        .off_executor(move |app| app.granted_to(&analyst))
        .await?;
    Ok(Json(DatasetsResponse {
        datasets: granted
            .into_iter()
            .map(|i| app.datasets[i].public.clone())
            .collect(),
    }))
}

/// Your budget on each dataset granted to you.
#[utoipa::path(get, path = "/v1/budget", security(("bearer" = [])),
    responses(
        (status = 200, body = BudgetResponse),
        (status = 401, body = ErrorBody), (status = 429, body = ErrorBody),
    ))]
pub async fn budget(
    State(app): State<Arc<App>>,
    Analyst(analyst): Analyst,
) -> Result<Json<BudgetResponse>, ApiError> {
    let budgets = app
        .off_executor(move |app| {
            let mut budgets = Vec::new();
            for i in app.granted_to(&analyst)? {
                let state = app.ledger(&analyst, i)?.state()?;
                budgets.push(Budget::of(app.datasets[i].name(), &state));
            }
            Ok(budgets)
        })
        .await?;
    Ok(Json(BudgetResponse { budgets }))
}

/// What a query would release and cost, with each aggregate's expected
/// error. Free.
#[utoipa::path(post, path = "/v1/explain", security(("bearer" = [])), request_body = QueryRequest,
    responses(
        (status = 200, body = ExplainResponse),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub async fn explain(
    State(app): State<Arc<App>>,
    Analyst(analyst): Analyst,
    JsonBody(request): JsonBody<QueryRequest>,
) -> Result<Json<ExplainResponse>, ApiError> {
    let (dataset, request) = app.granted_off_executor(&analyst, request).await?;
    let run_app = app.clone();
    let ((explained, state), waited) = app
        .run(&analyst.clone(), (), move |(), _| {
            Held::at_once((|| {
                let engine = &run_app.datasets[dataset].engine;
                let ledger = run_app.ledger(&analyst, dataset)?;
                let explained =
                    engine.explain_against(&request.sql, &request.settings(), &ledger)?;
                Ok((explained, ledger.state()?))
            })())
        })
        .await?;
    let cost = explained.cost.loss;
    let name = app.datasets[dataset].name();
    Ok(Json(ExplainResponse {
        dataset: name.into(),
        explanation: explained.explanation,
        epsilon: cost.epsilon(),
        delta: cost.delta(),
        budget: Budget::of(name, &state),
        queries_left: explained.queries_left,
        gaussian: explained.gaussian.map(GaussianAdvice::from),
        waited_seconds: waited,
    }))
}

/// Runs a query and releases its private answer, charged to your budget.
/// The same request again gets the same answer back, marked as a replay,
/// at no cost.
#[utoipa::path(post, path = "/v1/query", security(("bearer" = [])), request_body = QueryRequest,
    responses(
        (status = 200, body = QueryResponse),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 429, body = ErrorBody),
        (status = 503, body = ErrorBody),
    ))]
pub async fn query(
    State(app): State<Arc<App>>,
    Analyst(analyst): Analyst,
    JsonBody(request): JsonBody<QueryRequest>,
) -> Result<Json<QueryResponse>, ApiError> {
    let (dataset, request) = app.granted_off_executor(&analyst, request).await?;
    let name = app.datasets[dataset].name().to_string();
    let account = account(&analyst, &name);
    let canonical = request.canonical(&app.datasets[dataset].fingerprint);
    // One request text of one account runs at a time, in every process: a
    // second copy waits, then finds the first one's answer. The turn moves
    // into the run, which keeps it even if the client leaves.
    let same = app.same.take(&account, &canonical).await?;
    let run_app = app.clone();
    let ((once, state), waited) = app
        .run(&analyst.clone(), same, move |same, started| {
            let served = &run_app.datasets[dataset];
            let mut work = None;
            let outcome = (|| {
                let engine = &served.engine;
                let ledger = run_app.ledger(&analyst, dataset)?;
                same.hold_for(&ledger);
                let mut rng = SecureRng::from_os()?;
                let sql = &request.sql;
                let plan = || {
                    let planned = served
                        .plans
                        .plan(ledger.account(), sql, || engine.plan(sql))?;
                    work = Some(planned.work());
                    Ok(planned)
                };
                let once = engine.answer_once_planned(
                    plan,
                    &request.sql,
                    &request.settings(),
                    &ledger,
                    &canonical,
                    &mut rng,
                )?;
                Ok((once, ledger.state()?))
            })();
            let replay = matches!(&outcome, Ok((once, _)) if once.replay);
            let until = match (work, run_app.limits.deadlines()) {
                (Some(work), Some(deadlines)) if !replay => {
                    let fallback = Duration::from_secs_f64(run_app.limits.query_timeout_seconds);
                    Some(served.release_at(&deadlines, work, started, fallback))
                }
                _ => None,
            };
            Held { outcome, until }
        })
        .await?;
    let budget = Budget::of(&name, &state);
    Ok(Json(QueryResponse::of(
        &name,
        once.table,
        once.replay,
        budget,
        waited,
    )))
}
