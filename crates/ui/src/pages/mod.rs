//! Server-rendered pages. Every interpolated value goes through maud, which escapes it, so
//! labels, annotations, messages and names with HTML in them render as text.
//!
//! The pages (`runs`, `run`, `pod`, `failures`) and the SVG timeline they draw use the shared
//! frame and helpers in `chrome`, which uses none of them; this file only declares them and
//! holds the fallback route.

mod chrome;
pub(crate) mod failures;
pub(crate) mod pod;
pub(crate) mod run;
pub(crate) mod runs;
mod svg;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use chrome::error_page;

/// Any path no route knows.
pub(crate) async fn not_found(uri: axum::http::Uri) -> Response {
    let status = StatusCode::NOT_FOUND;
    (
        status,
        error_page(status, &format!("nothing at {}", uri.path())),
    )
        .into_response()
}
