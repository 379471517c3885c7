//! A JSON body whose every rejection is an [`ApiError`]: too large is 413,
//! anything else 400, never axum's plain-text or 422 replies.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// A JSON request body.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(request, state).await {
            Ok(axum::Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(rejected(&rejection)),
        }
    }
}

fn rejected(rejection: &JsonRejection) -> ApiError {
    match rejection {
        _ if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::too_large("the request body is larger than the limit")
        }
        JsonRejection::MissingJsonContentType(_) => {
            ApiError::bad_request("send the body as JSON with 'Content-Type: application/json'")
        }
        // serde's message names the field and the expected type; it quotes
        // only what the analyst sent, never the data.
        JsonRejection::JsonDataError(error) => ApiError::bad_request(format!(
            "the body does not match the schema: {}",
            one_line(&error.body_text())
        )),
        _ => ApiError::bad_request("the body is not valid JSON"),
    }
}

fn one_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    line.chars().take(300).collect()
}
