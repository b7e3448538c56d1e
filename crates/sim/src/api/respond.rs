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

/// Ends every whole JSON body with `\n`, as kube-apiserver's JSON serializer does (its
/// `json.Encoder` writes a newline after each object: apimachinery
/// `pkg/runtime/serializer/json/json.go` `Encode`); measured on 1.32.13 for objects, lists and
/// Status bodies, `pods/binding`'s and `pods/eviction`'s included. Streams (watch) are left as
/// they are (each event already ends with one), and so are the OpenAPI documents, which
/// kube-openapi writes as marshalled bytes (their hash is of those bytes).
pub async fn end_json_with_newline(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    use http_body::Body as _;
    let openapi = req.uri().path().starts_with("/openapi/");
    let response = next.run(req).await;
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"));
    let whole = response.body().size_hint().exact().is_some();
    if openapi || !json || !whole {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(collected) = http_body_util::BodyExt::collect(body).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let bytes = collected.to_bytes();
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let mut out = Vec::with_capacity(bytes.len() + 1);
    out.extend_from_slice(&bytes);
    out.push(b'\n');
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(out))
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
/// Status whose `code` is 201, byte for byte as kube-apiserver writes it (the `\n` it ends
/// with is added by [`end_json_with_newline`], as for every JSON body).
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
