//! What every request passes before the handlers: the public paths (served without a token),
//! bearer authentication, and the classification that attaches each request's [`RequestInfo`],
//! counts resource requests and audits them. [`crate::app`] layers these outermost, the fault
//! layer between them and the handlers.

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::get;
use http::header;

use super::discovery;
use super::request_info::RequestInfo;
use super::state::AppState;
use crate::audit::{AuditEntry, StoredName};
use crate::status::{ApiError, ErrorResponse};

/// `/healthz`, `/livez`, `/readyz` (always ok) and `/version`, outside authentication: what
/// kube-apiserver's `system:public-info-viewer` role lets anyone read, so a probe or a
/// `kubectl version` without credentials gets an answer.
pub(crate) fn probes() -> Router<AppState> {
    Router::new()
        .route("/version", get(discovery::version))
        // The Python client's VersionApi asks for `/version/`; kube-apiserver serves both.
        .route("/version/", get(discovery::version))
        .route("/healthz", get(discovery::ok))
        .route("/livez", get(discovery::ok))
        .route("/readyz", get(discovery::ok))
}

/// 401 for a public path (`/version`, the health probes) when the request sends a bearer token
/// the sim does not accept; without one it is anonymous, and allowed. kube-apiserver
/// authenticates every path, and its union authenticator with the anonymous fallback fails on a
/// token error instead of falling back (apiserver `pkg/endpoints/filters/authentication.go`,
/// `pkg/kubeapiserver/authenticator/config.go`; measured on 1.32.13).
pub(crate) async fn refuse_bad_tokens(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let sent = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty());
    match sent {
        Some(t) if !constant_time_eq(t.as_bytes(), state.token().as_bytes()) => {
            ApiError::unauthorized().into_response()
        }
        _ => next.run(req).await,
    }
}

/// 401 unless the request carries `Authorization: Bearer <token>`.
pub(crate) async fn authenticate(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let ok = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| constant_time_eq(t.trim().as_bytes(), state.token().as_bytes()));
    if ok {
        next.run(req).await
    } else {
        ApiError::unauthorized().into_response()
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Attaches the [`RequestInfo`], counts resource requests and audits them (see
/// [`crate::audit`]).
pub(crate) async fn classify_and_count(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let received = tokio::time::Instant::now();
    let info = RequestInfo::parse(req.method(), req.uri().path(), req.uri().query());
    if !info.is_resource {
        return next.run(req).await;
    }
    state
        .counts()
        .record(info.verb.as_str(), &info.resource_path());
    let audited = state.audit().is_watched().then(|| info.clone());
    req.extensions_mut().insert(info);
    let response = next.run(req).await;
    if let Some(info) = audited {
        let name = match response.extensions().get::<StoredName>() {
            Some(StoredName(stored)) => stored.clone(),
            None => info.name.clone(),
        };
        state.audit().publish(AuditEntry {
            resource: info.resource_path(),
            verb: info.verb,
            namespace: info.namespace,
            name,
            code: response.status().as_u16(),
            received,
            answered: tokio::time::Instant::now(),
        });
    }
    response
}
