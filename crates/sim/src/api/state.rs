//! [`AppState`]: what every handler shares (the object store, the token, counters, the audit
//! stream, body limits), and [`Transport`], the one thing the API asks of the server it is served
//! on.

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use podline_sim_core::cluster::Cluster;

use crate::audit::Audit;
use crate::counts::Counter;

/// kube-apiserver's default `--request-timeout` (60 s), which bounds reading a request body.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);
/// kube-apiserver's `MaxRequestBodyBytes` (3 MiB): larger bodies get 413.
pub const DEFAULT_MAX_REQUEST_BODY: usize = 3 * 1024 * 1024;

/// What the `/_sim/restart` and `/_sim/freeze` endpoints ask of the socket the API is served
/// on. The server implements it and hands itself to [`AppState`], so the API, which sits below
/// the transport, never names it.
pub trait Transport: Send + Sync {
    /// Drops every connection, refuses new ones for `down`, then serves again.
    fn restart(&self, down: Duration) -> BoxFuture<'_, ()>;
    /// A network freeze of `duration`: every connection, and every one accepted meanwhile,
    /// stops reading and writing.
    fn freeze_all_for(&self, duration: Duration);
}

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
    counts: Counter,
    audit: Audit,
    bookmark_interval: Duration,
    server: OnceLock<Weak<dyn Transport>>,
    body_limits: OnceLock<BodyLimits>,
    exec_processes: OnceLock<bool>,
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
            max_bytes: DEFAULT_MAX_REQUEST_BODY,
            read_timeout: DEFAULT_BODY_READ_TIMEOUT,
        }
    }
}

impl AppState {
    /// State for an API over `cluster`, requiring `token`.
    pub fn new(cluster: Cluster, token: String, bookmark_interval: Duration) -> Self {
        Self {
            inner: Arc::new(StateInner {
                cluster,
                token,
                counts: Counter::default(),
                audit: Audit::default(),
                bookmark_interval,
                server: OnceLock::new(),
                body_limits: OnceLock::new(),
                exec_processes: OnceLock::new(),
            }),
        }
    }

    /// The object store.
    pub fn cluster(&self) -> &Cluster {
        &self.inner.cluster
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
    /// Lets `pods/exec` run commands as local processes: set from the kubelet's exec mode
    /// (opt-in, as it executes whatever a client asks for); only the first call counts.
    pub fn set_exec_processes(&self, on: bool) {
        let _ = self.inner.exec_processes.set(on);
    }

    /// Whether `pods/exec` runs commands as local processes (see [`Self::set_exec_processes`]).
    pub fn exec_processes(&self) -> bool {
        self.inner.exec_processes.get().copied().unwrap_or(false)
    }

    /// The request body limits (the defaults unless set).
    pub fn body_limits(&self) -> BodyLimits {
        self.inner.body_limits.get().copied().unwrap_or_default()
    }
    /// Tells the API which server it is served on (once; later calls are ignored).
    pub(crate) fn set_server(&self, server: Weak<dyn Transport>) {
        let _ = self.inner.server.set(server);
    }
    /// The server the API is served on, while it lives; None in process.
    pub(crate) fn server(&self) -> Option<Arc<dyn Transport>> {
        self.inner.server.get().and_then(Weak::upgrade)
    }
}
