//! The operators' listener: `/health` and `/metrics`, on an address of its
//! own (`[operations] address` in `serve.toml`), apart from the analysts'.
//! It takes no key, so it belongs where only the people who run the
//! service can reach it (loopback, or a network of theirs): its metrics
//! hold every analyst's budget and how long their queries took, which no
//! analyst may see of another (see [`crate::metrics`]).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::api::App;

/// `/health` and `/metrics` over `app`.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(|| async { (StatusCode::NOT_FOUND, "no such endpoint\n") })
        .with_state(app)
}

/// 200 while the state database answers a read, 503 otherwise, and once
/// the server is stopping.
async fn health(State(app): State<Arc<App>>) -> impl IntoResponse {
    if app.is_stopping() {
        return (StatusCode::SERVICE_UNAVAILABLE, "stopping\n");
    }
    let check = tokio::task::spawn_blocking(move || app.accounts().is_ok()).await;
    match check {
        Ok(true) => (StatusCode::OK, "ok\n"),
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the state database cannot be read\n",
        ),
    }
}

/// Every metric, in the text format (version 0.0.4).
async fn metrics(State(app): State<Arc<App>>) -> impl IntoResponse {
    let text = tokio::task::spawn_blocking(move || app.metrics_text())
        .await
        .ok()
        .flatten();
    match text {
        Some(text) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        ),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "the state database cannot be read\n".to_string(),
        ),
    }
}
