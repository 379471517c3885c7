//! The access log: one line per request on standard error, with the
//! method, the path, the status and the time taken, also counted in the
//! metrics. Never a header (keys travel in one), a body or a query string.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::App;

/// Logs `request` once it is answered, and counts it.
pub async fn log_request(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().chars().take(200).collect::<String>();
    let response = next.run(request).await;
    let seconds = started.elapsed().as_secs_f64();
    app.metrics
        .answered(&path, response.status().as_u16(), seconds);
    let line = format!(
        "dpkit serve: {method} {} {} {:.1} ms\n",
        path.escape_debug(),
        response.status().as_u16(),
        seconds * 1e3
    );
    // Not eprintln!: it panics when standard error is closed.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    response
}
