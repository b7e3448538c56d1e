//! The stylesheet and script, embedded in the binary (no CDN, nothing fetched at run time).

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

const CSS: &str = include_str!("../assets/ui.css");
const JS: &str = include_str!("../assets/ui.js");

/// `/static/ui.css` and `/static/ui.js`.
pub(crate) async fn serve(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "ui.css" => (CSS, "text/css; charset=utf-8"),
        "ui.js" => (JS, "text/javascript; charset=utf-8"),
        _ => return (StatusCode::NOT_FOUND, "no such asset").into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}
