//! The answers handlers share: JSON with a status, the Success `Status` objects kube-apiserver
//! writes for deletes and object-less creates, and Go's plain-text 404 for unserved paths.

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use podline_sim_core::kinds::ApiKind;
use serde_json::json;

/// kube-apiserver's answer to a path no handler serves (an unknown group, version or
/// non-resource path): Go's `http.NotFound`, plain text, not a Status.
pub fn page_not_found() -> Response {
    let mut response = (StatusCode::NOT_FOUND, "404 page not found\n").into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// A JSON response with the given status.
pub fn json_response(status: StatusCode, body: impl Into<Body>) -> Response {
    let mut response = (status, body.into()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The answer of a create that makes no object (a binding, an eviction): `201` with a Success
/// Status whose `code` is 201, byte for byte as kube-apiserver writes it.
pub fn created_success() -> Response {
    json_response(
        StatusCode::CREATED,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}"#,
    )
}

/// A `Status` of kind Success, as the real server answers deletes of most kinds.
pub fn success_status<K: ApiKind>(obj: &K) -> Response {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {
            "name": obj.meta().name,
            "group": K::GROUP,
            "kind": K::RESOURCE,
            "uid": obj.meta().uid,
        },
    });
    json_response(StatusCode::OK, body.to_string())
}
