//! The HTTP API: discovery, the resource endpoints, watch and log streams, the `/_sim` control
//! endpoints, and the middleware stack (bearer auth, request counting, faults).
//!
//! [`app`] builds the whole thing as an axum [`Router`], so tests can call it in-process
//! (`tower::ServiceExt::oneshot`) as well as over a socket.

mod apply;
mod binding;
mod control;
mod decode;
pub(crate) mod delete;
mod discovery;
mod eviction;
pub(crate) mod kinds;
mod logs;
pub(crate) mod namespaces;
pub mod openapi;
mod patch;
mod pods;
mod protobuf;
mod qos;
mod quantity;
pub(crate) mod query;
mod request_info;
mod resources;
mod selector;
mod table;
mod validation;
mod watch;

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::header;

use crate::audit::{Audit, AuditEntry, StoredName};
use crate::cluster::Cluster;
use crate::counts::Counter;
use crate::fault::FaultHandle;
use crate::status::ApiError;

pub use request_info::RequestInfo;

/// A boolean query parameter read the way kube-apiserver reads it (only `0` and `false`, in any
/// case, are false); `None` and a missing key are false. For the middleware outside this module.
pub fn query_flag(query: Option<&str>, key: &str) -> bool {
    query::Query::new(query).flag(key) == Some(true)
}
pub use selector::{FieldSelector, LabelSelector};

/// Everything the handlers share. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<StateInner>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").finish_non_exhaustive()
    }
}

struct StateInner {
    cluster: Cluster,
    token: String,
    faults: FaultHandle,
    counts: Counter,
    audit: Audit,
    bookmark_interval: Duration,
    server: OnceLock<Weak<crate::server::Listener>>,
    body_limits: OnceLock<BodyLimits>,
}

/// How much of a request body the handlers read, and for how long (see
/// [`crate::SimConfig::max_request_body`] and [`crate::SimConfig::body_read_timeout`]).
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// Largest body accepted, in bytes.
    pub max_bytes: usize,
    /// Longest the body may take to arrive.
    pub read_timeout: Duration,
}

impl Default for BodyLimits {
    fn default() -> Self {
        Self {
            max_bytes: crate::config::DEFAULT_MAX_REQUEST_BODY,
            read_timeout: crate::config::DEFAULT_BODY_READ_TIMEOUT,
        }
    }
}

impl AppState {
    /// State for an API over `cluster`, requiring `token`.
    pub fn new(
        cluster: Cluster,
        token: String,
        faults: FaultHandle,
        bookmark_interval: Duration,
    ) -> Self {
        Self {
            inner: Arc::new(StateInner {
                cluster,
                token,
                faults,
                counts: Counter::default(),
                audit: Audit::default(),
                bookmark_interval,
                server: OnceLock::new(),
                body_limits: OnceLock::new(),
            }),
        }
    }

    /// The object store.
    pub fn cluster(&self) -> &Cluster {
        &self.inner.cluster
    }
    /// The live fault rules.
    pub fn faults(&self) -> &FaultHandle {
        &self.inner.faults
    }
    /// The request counters.
    pub fn counts(&self) -> &Counter {
        &self.inner.counts
    }
    /// The audit stream of answered requests.
    pub fn audit(&self) -> &Audit {
        &self.inner.audit
    }
    /// The bearer token.
    pub fn token(&self) -> &str {
        &self.inner.token
    }
    /// Period of watch bookmarks.
    pub fn bookmark_interval(&self) -> Duration {
        self.inner.bookmark_interval
    }
    /// Sets the request body limits (once, before serving; later calls are ignored).
    pub fn set_body_limits(&self, limits: BodyLimits) {
        let _ = self.inner.body_limits.set(limits);
    }
    /// The request body limits (the defaults unless set).
    pub fn body_limits(&self) -> BodyLimits {
        self.inner.body_limits.get().copied().unwrap_or_default()
    }
    pub(crate) fn set_server(&self, listener: Weak<crate::server::Listener>) {
        let _ = self.inner.server.set(listener);
    }
    pub(crate) fn server(&self) -> Option<Arc<crate::server::Listener>> {
        self.inner.server.get().and_then(Weak::upgrade)
    }
}

/// The whole API as a router (authentication, counting and faults included).
pub fn app(state: AppState) -> Router {
    let api = Router::new()
        .route("/version", get(discovery::version))
        .route("/api", get(discovery::api_versions))
        .route("/api/v1", get(discovery::core_v1))
        .route("/apis", get(discovery::api_groups))
        .route("/apis/{group}", get(discovery::api_group))
        .route("/apis/{group}/{version}", get(discovery::group_version))
        .route("/openapi/v2", get(openapi::v2))
        .route("/openapi/v3", get(openapi::v3_index))
        .route("/openapi/v3/{*gv}", get(openapi::v3_group_version))
        .merge(control::routes())
        .fallback(resources::dispatch)
        .layer(middleware::from_fn(table::negotiate))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::fault::layer::fault_layer,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            classify_and_count,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate));
    Router::new()
        .route("/healthz", get(discovery::ok))
        .route("/livez", get(discovery::ok))
        .route("/readyz", get(discovery::ok))
        .merge(api)
        .with_state(state)
}

/// 401 unless the request carries `Authorization: Bearer <token>`.
async fn authenticate(State(state): State<AppState>, req: Request, next: Next) -> Response {
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
async fn classify_and_count(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let received = tokio::time::Instant::now();
    let info = RequestInfo::parse(req.method(), req.uri().path(), req.uri().query());
    if !info.is_resource {
        return next.run(req).await;
    }
    state.counts().record(&info.verb, &info.resource_path());
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
