//! Errors a request can end with, and their JSON rendering under `/api/`. Pages render them
//! as HTML with [`crate::pages`]' own wrapper, so this module depends on nothing in the crate.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use podline_store::StoreError;

/// Why a request failed. The message is safe to show: it never contains secrets (store
/// targets are redacted by the store) and pages escape it like any other text.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    /// A query parameter or path segment is not what the route expects.
    #[error("{0}")]
    BadRequest(String),
    /// The run or pod is not in the store.
    #[error("{0}")]
    NotFound(String),
    /// The store failed to answer.
    #[error("the store could not answer: {0}")]
    Store(#[from] StoreError),
}

impl UiError {
    /// The HTTP status for this error.
    pub fn status(&self) -> StatusCode {
        match self {
            UiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            UiError::NotFound(_) => StatusCode::NOT_FOUND,
            UiError::Store(err) if err.is_retryable() => StatusCode::SERVICE_UNAVAILABLE,
            UiError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The message with its causes, on one line.
    pub fn message(&self) -> String {
        let mut text = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(err) = source {
            // `Store(#[from])` displays the store error itself; skip it once.
            let next = err.to_string();
            if !text.ends_with(&next) {
                text.push_str(": ");
                text.push_str(&next);
            }
            source = err.source();
        }
        text
    }

    /// Logs store failures (bad requests and misses are the client's business).
    pub(crate) fn log(&self) {
        if let UiError::Store(_) = self {
            tracing::warn!(error = %self.message(), "ui request failed");
        }
    }
}

/// JSON API error: `{"error": "..."}` with the matching status.
pub(crate) struct ApiError(pub UiError);

impl<E: Into<UiError>> From<E> for ApiError {
    fn from(err: E) -> Self {
        ApiError(err.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.0.log();
        let body = serde_json::json!({ "error": self.0.message() });
        (self.0.status(), Json(body)).into_response()
    }
}
