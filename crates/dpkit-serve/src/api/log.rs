//! The access log: one line per request on standard error, with the
//! method, the path, the status and the time taken. Never a header (keys
//! travel in one), a body or a query string.

use std::io::Write;
use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;

/// Logs `request` once it is answered.
pub async fn log_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().chars().take(200).collect::<String>();
    let response = next.run(request).await;
    let line = format!(
        "dpkit serve: {method} {} {} {:.1} ms\n",
        path.escape_debug(),
        response.status().as_u16(),
        started.elapsed().as_secs_f64() * 1e3
    );
    // Not eprintln!: it panics when standard error is closed.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    response
}
