//! Who is asking: the bearer key, checked against the state database on
//! every request (a key revoked while the server runs fails at once), and
//! each key's rate limit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;

use super::App;
use super::error::ApiError;
use crate::analysts::Analysts;

/// The analyst a request's key belongs to.
#[derive(Debug, Clone)]
pub struct Analyst(pub String);

impl FromRequestParts<Arc<App>> for Analyst {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, ApiError> {
        let key = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|key| !key.is_empty() && key.len() <= 256)
            .ok_or_else(ApiError::unauthorized)?
            .to_string();
        let name = app
            .off_executor(move |app| {
                let mut analysts = app.analysts.lock().map_err(|_| ApiError::internal())?;
                // A state server that restarted closed the connection.
                if analysts.is_closed() {
                    *analysts = Analysts::open(&app.store)?;
                }
                // The state's failures go to the curator's log (they never
                // hold the key, which is hashed before any statement).
                Ok(analysts.authenticate(&key)?)
            })
            .await?
            .ok_or_else(ApiError::unauthorized)?;
        app.rate.admit(&name)?;
        Ok(Self(name))
    }
}

/// A token bucket per analyst: `burst` requests at once, refilled at
/// `per_second`.
pub struct RateLimiter {
    per_second: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl RateLimiter {
    /// A limiter of `per_second` on average and `burst` at once.
    pub fn new(per_second: f64, burst: u32) -> Self {
        Self {
            per_second,
            burst: f64::from(burst),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token of `analyst`'s, or refuses with 429.
    pub fn admit(&self, analyst: &str) -> Result<(), ApiError> {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().map_err(|_| ApiError::internal())?;
        let (tokens, last) = buckets
            .entry(analyst.to_string())
            .or_insert((self.burst, now));
        let refilled = *tokens + now.duration_since(*last).as_secs_f64() * self.per_second;
        *tokens = refilled.min(self.burst);
        *last = now;
        if *tokens < 1.0 {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                "too many requests with this key; wait and retry",
            ));
        }
        *tokens -= 1.0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_the_rate_holds_per_analyst() {
        let limiter = RateLimiter::new(0.001, 3);
        for _ in 0..3 {
            assert!(limiter.admit("ann").is_ok());
        }
        assert_eq!(
            limiter.admit("ann").unwrap_err().status,
            StatusCode::TOO_MANY_REQUESTS
        );
        assert!(limiter.admit("bob").is_ok(), "bob has his own bucket");
    }
}
