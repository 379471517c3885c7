//! What an analyst sees when a request fails: a status, a stable code and
//! one line that quotes nothing from the data.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use dpkit_query::QueryError;
use serde::Serialize;
use utoipa::ToSchema;

/// A failed request.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The stable code.
    pub code: &'static str,
    /// One line, without data values.
    pub message: String,
}

/// The body of every error response.
#[derive(Debug, Serialize, serde::Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// A stable code and one line.
#[derive(Debug, Serialize, serde::Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// One of: bad_request, bad_query, failed_while_running, unauthorized,
    /// forbidden, not_found, budget_exhausted, too_large, rate_limited,
    /// data_unavailable, given_back, internal.
    pub code: String,
    /// One line that quotes no data.
    pub message: String,
}

impl ApiError {
    /// An error with `status`, `code` and `message`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400: the request itself is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 401: no key, or a key that is not live.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "send a live key as 'Authorization: Bearer <key>'",
        )
    }

    /// 403: the dataset is not granted to this analyst (or does not exist:
    /// the two are not told apart).
    pub fn forbidden() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this dataset is not granted to you",
        )
    }

    /// 413: a body or an SQL text over its limit.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }

    /// [`ApiError::internal`], with `message` in the curator's log. Only
    /// for failures that name files, never data values.
    pub(crate) fn logged(message: &str) -> Self {
        let line = format!("dpkit serve: internal error: {message}\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
        Self::internal()
    }

    /// 500: the server failed; the details stay in its log.
    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the server failed; nothing was charged unless an answer was released",
        )
    }
}

impl From<QueryError> for ApiError {
    fn from(error: QueryError) -> Self {
        let message = error.to_string();
        match error {
            QueryError::Sql(_) | QueryError::NotPrivate(_) | QueryError::Mechanism(_) => {
                Self::new(StatusCode::BAD_REQUEST, "bad_query", message)
            }
            QueryError::FailedWhileRunning(_) => {
                Self::new(StatusCode::BAD_REQUEST, "failed_while_running", message)
            }
            QueryError::Budget(_) => Self::new(StatusCode::CONFLICT, "budget_exhausted", message),
            QueryError::Unreadable(_) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "data_unavailable",
                "the data could not be read; nothing was charged",
            ),
            QueryError::GivenBack(_) => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "given_back", message)
            }
            QueryError::Description(_) | QueryError::Ledger { .. } => Self::logged(&message),
        }
    }
}

impl From<dpkit_ledger::LedgerError> for ApiError {
    fn from(error: dpkit_ledger::LedgerError) -> Self {
        QueryError::from(error).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.into(),
                message: self.message,
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::TOO_MANY_REQUESTS {
            response
                .headers_mut()
                .insert("retry-after", axum::http::HeaderValue::from_static("1"));
        }
        response
    }
}

impl From<crate::ServeError> for ApiError {
    /// The state's failures (a lock file, say) name files, never data.
    fn from(error: crate::ServeError) -> Self {
        Self::logged(&error.to_string())
    }
}
