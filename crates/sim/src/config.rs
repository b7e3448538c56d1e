//! [`SimConfig`]: everything [`crate::Sim::start`] needs, with defaults that mimic a real API server.

use std::net::SocketAddr;
use std::time::Duration;

use podline_sim_core::cluster::DEFAULT_WATCH_BUFFER;
use podline_sim_core::kubelet::KubeletConfig;

use crate::api::{DEFAULT_BODY_READ_TIMEOUT, DEFAULT_MAX_REQUEST_BODY};
use crate::fault::FaultPlan;

/// How the real kube-apiserver's watch cache behaves by default: about 75 s of events.
pub const DEFAULT_HISTORY_WINDOW: Duration = Duration::from_secs(75);
/// Upper bound on the number of watch events kept per resource, whatever the window says: the
/// real watch cache's (`defaultUpperBoundCapacity`, 100 * 1024). It bounds the memory a burst
/// costs: right after 100k pods start, the window alone would keep every version of every pod.
pub const DEFAULT_HISTORY_MAX_EVENTS: usize = 100 * 1024;
/// The real server sends periodic bookmarks about once a minute.
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);
/// kube-apiserver's `ReadHeaderTimeout` (32 s), which Go's HTTP server also applies to the TLS
/// handshake: the default of both [`SimConfig::tls_handshake_timeout`] and
/// [`SimConfig::header_read_timeout`].
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);
/// kube-apiserver's `IdleTimeout` (its HTTP/1.1 and HTTP/2 servers' alike): an idle connection
/// closes after this long.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Configuration of an embedded sim. Build it with `SimConfig::default()` and the setters.
///
/// ```
/// use std::time::Duration;
/// let cfg = podline_sim::SimConfig::default()
///     .tls(false)
///     .token("secret")
///     .history_window(Duration::from_secs(5));
/// assert!(!cfg.tls);
/// ```
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Address to listen on; port 0 picks a free port (default `127.0.0.1:0`).
    pub addr: SocketAddr,
    /// Serve HTTPS with a generated self-signed CA (default true); false serves plain HTTP.
    pub tls: bool,
    /// Bearer token every request must carry (default: random).
    pub token: String,
    /// The simulated kubelet; `enabled: false` serves the API alone (pods stay Pending).
    pub kubelet: KubeletConfig,
    /// How long watch history is kept; a resume from an older resourceVersion gets 410 Expired.
    pub history_window: Duration,
    /// Cap on the number of history events kept per resource, whatever the window.
    pub history_max_events: usize,
    /// Period of BOOKMARK events on watches that asked for them.
    pub bookmark_interval: Duration,
    /// Events a watcher may have waiting (committed, not yet taken by its stream) before the
    /// watch is closed, as kube-apiserver closes a watcher whose consumer falls behind; the client
    /// must resume or re-list. 0: never closed (a lagging watcher catches up from the history).
    pub watch_buffer: usize,
    /// Fault rules active from the start (more can be pushed at runtime).
    pub faults: FaultPlan,
    /// Serve HTTP/1.1 only (default false: HTTP/2 and HTTP/1.1, like a real API server). Over
    /// TLS, ALPN then offers only `http/1.1`; over plain HTTP, HTTP/2 prior knowledge is refused.
    /// Tests the clients' fallback to HTTP/1.1.
    pub http1_only: bool,
    /// Longest a client may take to finish the TLS handshake before the connection is closed
    /// (default [`DEFAULT_HEADER_READ_TIMEOUT`], as Go's server bounds it).
    pub tls_handshake_timeout: Duration,
    /// Longest a client may take to send a request's headers, counted from its first byte (and
    /// from the connection's start for its first request); then the connection is closed.
    /// Default [`DEFAULT_HEADER_READ_TIMEOUT`].
    pub header_read_timeout: Duration,
    /// A connection idle this long is closed (default [`DEFAULT_IDLE_TIMEOUT`]): an HTTP/1.1
    /// keep-alive connection waiting for its next request, or an HTTP/2 connection without an
    /// open stream (with GOAWAY; an open watch is a stream, PINGs are not activity).
    pub idle_timeout: Duration,
    /// Longest reading a request body may take; then the request answers 504 Timeout (default
    /// [`DEFAULT_BODY_READ_TIMEOUT`]).
    pub body_read_timeout: Duration,
    /// Largest request body accepted, in bytes; a larger one answers 413 RequestEntityTooLarge,
    /// at once when its Content-Length says so (default [`DEFAULT_MAX_REQUEST_BODY`]).
    pub max_request_body: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: true,
            token: random_token(),
            kubelet: KubeletConfig::default(),
            history_window: DEFAULT_HISTORY_WINDOW,
            history_max_events: DEFAULT_HISTORY_MAX_EVENTS,
            bookmark_interval: DEFAULT_BOOKMARK_INTERVAL,
            watch_buffer: DEFAULT_WATCH_BUFFER,
            faults: FaultPlan::default(),
            http1_only: false,
            tls_handshake_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            max_request_body: DEFAULT_MAX_REQUEST_BODY,
        }
    }
}

impl SimConfig {
    /// Sets the listen address.
    #[must_use]
    pub fn addr(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }
    /// HTTPS (true) or plain HTTP (false).
    #[must_use]
    pub fn tls(mut self, tls: bool) -> Self {
        self.tls = tls;
        self
    }
    /// Sets the bearer token.
    #[must_use]
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = token.into();
        self
    }
    /// Sets the kubelet configuration.
    #[must_use]
    pub fn kubelet(mut self, kubelet: KubeletConfig) -> Self {
        self.kubelet = kubelet;
        self
    }
    /// Turns the simulated kubelet on or off (off: pods are stored but never run).
    #[must_use]
    pub fn kubelet_enabled(mut self, enabled: bool) -> Self {
        self.kubelet.enabled = enabled;
        self
    }
    /// Sets how long watch history is kept.
    #[must_use]
    pub fn history_window(mut self, window: Duration) -> Self {
        self.history_window = window;
        self
    }
    /// Sets the cap on history events per resource.
    #[must_use]
    pub fn history_max_events(mut self, max: usize) -> Self {
        self.history_max_events = max;
        self
    }
    /// Sets the bookmark period.
    #[must_use]
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }
    /// Sets the slow-watcher buffer ([`SimConfig::watch_buffer`]; 0 never closes a watch).
    #[must_use]
    pub fn watch_buffer(mut self, events: usize) -> Self {
        self.watch_buffer = events;
        self
    }
    /// HTTP/1.1 only (true) or HTTP/2 and HTTP/1.1 (false, the default).
    #[must_use]
    pub fn http1_only(mut self, http1_only: bool) -> Self {
        self.http1_only = http1_only;
        self
    }
    /// Sets the TLS handshake timeout.
    #[must_use]
    pub fn tls_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.tls_handshake_timeout = timeout;
        self
    }
    /// Sets the header read timeout.
    #[must_use]
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }
    /// Sets the idle timeout of HTTP/1.1 and HTTP/2 connections.
    #[must_use]
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }
    /// Sets the body read timeout.
    #[must_use]
    pub fn body_read_timeout(mut self, timeout: Duration) -> Self {
        self.body_read_timeout = timeout;
        self
    }
    /// Sets the largest request body accepted.
    #[must_use]
    pub fn max_request_body(mut self, bytes: usize) -> Self {
        self.max_request_body = bytes;
        self
    }
    /// Sets the initial fault plan.
    #[must_use]
    pub fn faults(mut self, faults: FaultPlan) -> Self {
        self.faults = faults;
        self
    }
}

/// A random 32-hex-digit token, so a sim nobody configured still is not open to everyone.
fn random_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
