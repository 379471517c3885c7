//! The HTTP JSON API under `/v1`, its OpenAPI document, and the web page.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use utoipa::OpenApi;

use crate::analysts::{Analysts, account};
use crate::config::Limits;
use crate::datasets::Dataset;
use crate::metrics::{self, Metrics};

mod auth;
mod body;
pub mod error;
mod handlers;
mod log;
mod pool;
mod same;
#[cfg(test)]
#[path = "../../../dpkit-query/tests/support/postgres.rs"]
mod test_server;
mod turns;
pub mod types;
mod workers;

pub use error::ApiError;

/// Everything a request may use.
pub struct App {
    /// The datasets served.
    pub datasets: Vec<Dataset>,
    /// The limits.
    pub limits: Limits,
    analysts: Mutex<Analysts>,
    /// Where the state is.
    store: dpkit_ledger::Store,
    /// Ledger connections kept open between requests.
    ledgers: Arc<pool::LedgerPool>,
    /// A connection to the state for reading grants.
    grants: Mutex<dpkit_query::Ledger>,
    rate: auth::RateLimiter,
    turns: Arc<turns::Turns>,
    /// The threads that run requests, one per worker.
    workers: workers::Workers,
    /// One run at a time of each request, in every process on the state.
    same: same::SameRequests,
    metrics: Metrics,
    /// A connection of the metrics' own, so a scrape never holds `grants`.
    accounts: Mutex<dpkit_query::Ledger>,
    stopping: std::sync::atomic::AtomicBool,
    /// The server's hold on the state directory against a restore: let go
    /// when the last run, even one its client left, has ended.
    hold: Option<std::fs::File>,
}

impl App {
    /// The state of a server over `datasets`, with the analysts of its
    /// state, holding at most `connections` ledgers open at once if the
    /// state is in PostgreSQL (see [`pool`]).
    pub fn new(
        datasets: Vec<Dataset>,
        analysts: Analysts,
        limits: Limits,
        connections: usize,
    ) -> crate::Result<Self> {
        let store = analysts.store().clone();
        let grants = Mutex::new(dpkit_ledger::Ledger::reader_in(&store)?);
        let accounts = Mutex::new(dpkit_ledger::Ledger::reader_in(&store)?);
        Ok(Self {
            accounts,
            stopping: Default::default(),
            grants,
            ledgers: Arc::new(pool::LedgerPool::open(&store, connections)?),
            datasets,
            rate: auth::RateLimiter::new(limits.requests_per_second, limits.burst),
            turns: turns::Turns::new(limits.workers, limits.runs_per_analyst()),
            workers: workers::Workers::start(limits.workers)?,
            same: same::SameRequests::new(&store)?,
            store,
            analysts: Mutex::new(analysts),
            limits,
            metrics: Metrics::default(),
            hold: None,
        })
    }

    /// This state, holding `lock` (see `crate::server::serve_state`) for as
    /// long as any request or run uses it.
    pub(crate) fn holding(mut self, lock: std::fs::File) -> Self {
        self.hold = Some(lock);
        self
    }

    /// Every account in the state database, with its budget.
    pub(crate) fn accounts(&self) -> crate::Result<Vec<(String, dpkit_ledger::BudgetState)>> {
        Ok(self.reader(&self.accounts)?.every_account()?)
    }

    /// The state's reader in `slot`, replaced first if the server closed
    /// its connection (a PostgreSQL restart or failover).
    fn reader<'a>(
        &self,
        slot: &'a Mutex<dpkit_query::Ledger>,
    ) -> crate::Result<std::sync::MutexGuard<'a, dpkit_query::Ledger>> {
        let mut reader = slot
            .lock()
            .map_err(|_| crate::ServeError::State("a reader failed".into()))?;
        if reader.is_closed() {
            *reader = dpkit_ledger::Ledger::reader_in(&self.store)?;
        }
        Ok(reader)
    }

    /// The count of runs under way, which outlives the app: the server
    /// waits for it before it stops.
    pub(crate) fn running(&self) -> Arc<workers::Running> {
        self.workers.running()
    }

    /// Marks the server as stopping: `/health` then answers 503.
    pub(crate) fn stop_serving(&self) {
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the server is stopping.
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The metrics (see [`metrics`]), if the state database can be read.
    pub(crate) fn metrics_text(&self) -> Option<String> {
        let accounts = self.accounts().ok()?;
        let mut text = String::new();
        self.metrics.write(&mut text);
        let (running, waiting) = self.turns.load();
        metrics::write_load(&mut text, running, waiting);
        metrics::write_ledger(&mut text, self.ledgers.writer().counts());
        metrics::write_budgets(&mut text, &accounts);
        Some(text)
    }

    /// Runs `work` on tokio's threads for blocking calls. Every read of the
    /// state a request makes before its run (the key check, its grants, its
    /// budgets) goes there, never on the threads that serve connections:
    /// a slow disk, or a state database over the network, then holds up
    /// only the requests that wait for it.
    async fn off_executor<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&App) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let app = self.clone();
        tokio::task::spawn_blocking(move || work(&app))
            .await
            .map_err(|_| ApiError::internal())?
    }

    /// `analyst`'s ledger on dataset `index`, from the pool.
    fn ledger(&self, analyst: &str, index: usize) -> Result<pool::Pooled, dpkit_query::QueryError> {
        self.ledgers
            .take(&account(analyst, self.datasets[index].name()))
    }

    /// Whether `analyst` has been granted dataset `index`.
    fn is_granted(&self, analyst: &str, index: usize) -> Result<bool, ApiError> {
        let grants = self.reader(&self.grants)?;
        Ok(grants.has_other_account(&account(analyst, self.datasets[index].name()))?)
    }

    /// The indices of the datasets granted to `analyst`.
    fn granted_to(&self, analyst: &str) -> Result<Vec<usize>, ApiError> {
        let mut granted = Vec::new();
        for index in 0..self.datasets.len() {
            if self.is_granted(analyst, index)? {
                granted.push(index);
            }
        }
        Ok(granted)
    }

    /// The index of the dataset `request` names, if it is granted to
    /// `analyst` (403 otherwise, whether or not it exists), and its SQL
    /// within the length limit (413).
    fn granted(&self, analyst: &str, request: &types::QueryRequest) -> Result<usize, ApiError> {
        let index = self
            .datasets
            .iter()
            .position(|d| d.name() == request.dataset)
            .ok_or_else(ApiError::forbidden)?;
        if !self.is_granted(analyst, index)? {
            return Err(ApiError::forbidden());
        }
        if request.sql.len() > self.limits.max_sql_bytes {
            return Err(ApiError::too_large(format!(
                "the SQL is longer than {} bytes",
                self.limits.max_sql_bytes
            )));
        }
        Ok(index)
    }

    /// [`App::granted`], off the executor; `request` is handed back.
    async fn granted_off_executor(
        self: &Arc<Self>,
        analyst: &str,
        request: types::QueryRequest,
    ) -> Result<(usize, types::QueryRequest), ApiError> {
        let analyst = analyst.to_string();
        self.off_executor(move |app| Ok((app.granted(&analyst, &request)?, request)))
            .await
    }

    /// Runs `work` (planning, the engine, the ledger: all blocking) on a
    /// worker thread ([`workers`]) when it is `analyst`'s turn (see [`turns`]): at most
    /// `workers` runs at once, and `runs_per_analyst` of one analyst's.
    /// The worker and `guard` move into the run, which is given it and the
    /// instant it started: a client that leaves drops its request, never
    /// the run under way, which goes on holding its worker and its
    /// request's lock until it ends. `work` also says when its outcome
    /// may leave (see [`dpkit_query::timing`]); until then the response
    /// waits and `guard` is held, so that a copy of the request cannot
    /// replay the answer earlier, even if this request's client left.
    /// Returns the run's outcome and how long the request waited for its
    /// turn, in seconds.
    async fn run<T: Send + 'static, G: Send + 'static>(
        &self,
        analyst: &str,
        guard: G,
        work: impl FnOnce(&G, Instant) -> Held<T> + Send + 'static,
    ) -> Result<(T, f64), ApiError> {
        let asked = Instant::now();
        let slot = self
            .turns
            .take(analyst)
            .await
            .ok_or_else(ApiError::internal)?;
        let waited = asked.elapsed().as_secs_f64();
        self.metrics.waited(waited);
        let (outcome, held) = self
            .workers
            .run(move || {
                let held = work(&guard, Instant::now());
                // The worker is free for the next turn once the run ends.
                drop(slot);
                match held.until {
                    Some(until) => (held.outcome, Some((guard, until))),
                    None => {
                        drop(guard);
                        (held.outcome, None)
                    }
                }
            })
            .await
            .ok_or_else(ApiError::internal)?;
        if let Some((guard, until)) = held {
            hold_until(guard, until).await;
        }
        Ok((outcome.map_err(ApiError::from)?, waited))
    }
}

/// A run's outcome, and when it may leave (`None`: at once).
pub(crate) struct Held<T> {
    outcome: Result<T, dpkit_query::QueryError>,
    until: Option<Instant>,
}

impl<T> Held<T> {
    /// An outcome that leaves at once: its time shows nothing of the data
    /// (an explanation, a refusal before any run).
    fn at_once(outcome: Result<T, dpkit_query::QueryError>) -> Self {
        Self {
            outcome,
            until: None,
        }
    }
}

/// Waits until `until`, holding `guard`, in a task of its own that a
/// client who leaves cannot stop; `guard` is dropped off the executor (a
/// request's lock in PostgreSQL is let go by a statement).
async fn hold_until<G: Send + 'static>(guard: G, until: Instant) {
    let held = tokio::spawn(async move {
        tokio::time::sleep_until(until.into()).await;
        let _ = tokio::task::spawn_blocking(move || drop(guard)).await;
    });
    let _ = held.await;
}

/// The OpenAPI document.
#[derive(OpenApi)]
#[openapi(
    info(title = "dpkit serve", description = "Private SQL over datasets held by a curator: noisy answers with intervals, charged to each analyst's budget."),
    paths(handlers::datasets, handlers::budget, handlers::explain, handlers::query),
    modifiers(&BearerKey)
)]
pub struct ApiDoc;

struct BearerKey;

impl utoipa::Modify for BearerKey {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let scheme =
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build());
        match openapi.components.as_mut() {
            Some(components) => components.add_security_scheme("bearer", scheme),
            None => {
                openapi.components = Some(
                    utoipa::openapi::ComponentsBuilder::new()
                        .security_scheme("bearer", scheme)
                        .build(),
                )
            }
        }
    }
}

async fn openapi() -> axum::Json<utoipa::openapi::OpenApi> {
    axum::Json(ApiDoc::openapi())
}

async fn not_found() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        "not_found",
        "no such endpoint",
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "bad_request",
        "this endpoint does not take that method",
    )
}

/// The routes: the API and its document, with `pages` (the web page's
/// routes) beside them.
pub fn router(app: Arc<App>, pages: Router<Arc<App>>) -> Router {
    let body_limit = app.limits.max_body_bytes;
    Router::new()
        .route("/v1/datasets", get(handlers::datasets))
        .route("/v1/budget", get(handlers::budget))
        .route("/v1/explain", post(handlers::explain))
        .route("/v1/query", post(handlers::query))
        .route("/v1/openapi.json", get(openapi))
        .merge(pages)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            log::log_request,
        ))
        .with_state(app)
}
