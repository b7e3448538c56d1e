//! [`ApiError`] (podline-sim-core's `Status` of a failed call) as an HTTP answer: the status code,
//! the `Status` JSON, and `Retry-After` when the error carries one.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
pub use podline_sim_core::status::ApiError;

/// Renders an [`ApiError`] as the response kube-apiserver sends for it. A trait of this crate
/// because the error is podline-sim-core's, which has no HTTP (so no `IntoResponse`).
pub trait ErrorResponse {
    /// The HTTP answer of this error.
    fn into_response(self) -> Response;
}

impl ErrorResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (code, self.to_json()).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(secs) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}
