//! The network side of the sim: [`Sim`] (start, URLs, kubeconfig, control), and the accept loop
//! with connection tracking ([`Listener`]) that makes restarts and resets real TCP events.
//!
//! Connections speak HTTP/2 or HTTP/1.1, like a real API server: over TLS (the default) ALPN
//! offers `h2` then `http/1.1`; over plain HTTP a client may start HTTP/2 with prior knowledge.
//! [`SimConfig::http1_only`] turns HTTP/2 off, so clients' fallback can be tested. Either way one
//! [`hyper_util::server::conn::auto`] builder serves the connection, and every request carries its
//! connection's [`ConnCtl`], so a fault can reset, kill or freeze the connection a request rides
//! on (over HTTP/2 that is every request multiplexed on it), or reset the request's own stream
//! ([`ResetStream`]).
//!
//! No connection is held forever by a client that stalls: like kube-apiserver's Go server, the
//! TLS handshake, the first request and each HTTP/1.1 request's headers (from their first byte)
//! get bounded times ([`SimConfig::tls_handshake_timeout`], [`SimConfig::header_read_timeout`]:
//! 32 s by default), and an idle connection closes after [`SimConfig::idle_timeout`] (90 s): an
//! HTTP/1.1 keep-alive connection waiting for its next request, or an HTTP/2 connection without
//! an open stream (with GOAWAY; PINGs are not activity, and an open watch is a stream). HTTP/2
//! settings are kube-apiserver's: 250 concurrent streams, 256 KiB frames and stream windows.
//! Request bodies are bounded in the handlers (413, 504).

mod conn;
mod kubeconfig;
mod stream;
mod timer;
mod tls;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use timer::HeaderTimer;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use conn::TrackedIo;
pub use conn::{ConnCtl, ConnRegistry};
pub use tls::TlsMaterial;

use crate::api::{AppState, BodyLimits, Transport};
use crate::app::app;
use crate::config::SimConfig;
use crate::counts::RequestCounts;
use crate::error::SimError;
pub use crate::fault::ResetStream;
use crate::fault::{Connection, FaultHandle};
use podline_sim_core::cluster::{Cluster, HistoryLimits, PodHistory};
use podline_sim_core::kubelet::{Kubelet, KubeletHandle};

/// The HTTP/2 streams a client may open at once: kube-apiserver leaves
/// `--http2-max-streams-per-connection` at 0, and its server then makes Go's default of 250
/// explicit (`SecureServingInfo.Serve`).
const HTTP2_MAX_STREAMS: u32 = 250;

/// kube-apiserver's HTTP/2 `MaxReadFrameSize` and `MaxUploadBufferPerStream` (256 KiB, "99% of
/// serialized resources"); the connection's window is this times [`HTTP2_MAX_STREAMS`].
const HTTP2_MAX_FRAME: u32 = 256 * 1024;

/// Go's HTTP/2 header list limit for kube-apiserver's `MaxHeaderBytes` (1 MiB), plus Go's
/// allowance of 10 fields of 32 bytes.
const HTTP2_MAX_HEADER_LIST: u32 = (1 << 20) + 10 * 32;

/// How long Go's HTTP/2 server keeps a connection after a graceful GOAWAY once no stream is
/// left (`goAwayTimeout`).
const GOAWAY_TIMEOUT: Duration = Duration::from_secs(1);

/// How often expired watch history is dropped when no write does it.
const HISTORY_PRUNE_EVERY: Duration = Duration::from_secs(1);

/// How long a connection may take over each stage before the sim drops it (see the
/// `SimConfig` fields of the same names).
#[derive(Debug, Clone, Copy)]
struct ConnTimeouts {
    tls_handshake: Duration,
    header_read: Duration,
    idle: Duration,
}

/// The listening socket and its connections; restartable on the same address.
pub struct Listener {
    addr: Mutex<SocketAddr>,
    tls: Option<TlsAcceptor>,
    http1_only: bool,
    timeouts: ConnTimeouts,
    router: Router,
    registry: Arc<ConnRegistry>,
    running: tokio::sync::Mutex<Option<Running>>,
}

struct Running {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("addr", &self.addr())
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Listener {
    fn new(
        addr: SocketAddr,
        tls: Option<TlsAcceptor>,
        http1_only: bool,
        timeouts: ConnTimeouts,
        router: Router,
    ) -> Self {
        Self {
            addr: Mutex::new(addr),
            tls,
            http1_only,
            timeouts,
            router,
            registry: Arc::new(ConnRegistry::default()),
            running: tokio::sync::Mutex::new(None),
        }
    }

    /// The bound address (after the first start: with its real port).
    pub fn addr(&self) -> SocketAddr {
        *self.addr.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(1024)
    }

    /// Binds (the same address as before, after a restart) and starts accepting.
    async fn start(&self) -> Result<SocketAddr, SimError> {
        let mut running = self.running.lock().await;
        if running.is_some() {
            return Ok(self.addr());
        }
        let wanted = self.addr();
        let mut attempt = 0;
        let listener = loop {
            match Self::bind(wanted) {
                Ok(listener) => break listener,
                // Right after a restart the port can linger briefly; retry for a moment.
                Err(_) if attempt < 50 && wanted.port() != 0 => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(source) => {
                    return Err(SimError::Bind {
                        addr: wanted,
                        source,
                    });
                }
            }
        };
        let bound = listener.local_addr()?;
        *self.addr.lock().unwrap_or_else(|p| p.into_inner()) = bound;
        let stop = CancellationToken::new();
        let task = tokio::spawn(accept_loop(
            listener,
            stop.clone(),
            self.tls.clone(),
            self.http1_only,
            self.timeouts,
            self.router.clone(),
            self.registry.clone(),
        ));
        *running = Some(Running { stop, task });
        Ok(bound)
    }

    /// Stops accepting (the socket is closed: connects are refused) and drops every connection.
    async fn stop(&self) {
        let mut running = self.running.lock().await;
        if let Some(Running { stop, task }) = running.take() {
            stop.cancel();
            let _ = task.await;
        }
        self.registry.kill_all();
    }

    /// Drops every connection, refuses new ones for `down`, then serves again on the same
    /// address with the same state.
    pub async fn restart(&self, down: Duration) {
        tracing::info!(?down, "sim API restarting");
        self.stop().await;
        tokio::time::sleep(down).await;
        if let Err(err) = self.start().await {
            tracing::error!(%err, "sim API could not listen again after a restart");
        }
    }

    /// Number of open connections.
    pub fn connections(&self) -> usize {
        self.registry.len()
    }

    /// The live connections (count, frozen, accepted so far).
    pub fn registry(&self) -> &ConnRegistry {
        &self.registry
    }
}

/// The `/_sim/restart` and `/_sim/freeze` endpoints reach the listener through this.
impl Transport for Listener {
    fn restart(&self, down: Duration) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(Listener::restart(self, down))
    }
    fn freeze_all_for(&self, duration: Duration) {
        self.registry.freeze_all_for(duration);
    }
}

async fn accept_loop(
    listener: TcpListener,
    stop: CancellationToken,
    tls: Option<TlsAcceptor>,
    http1_only: bool,
    timeouts: ConnTimeouts,
    router: Router,
    registry: Arc<ConnRegistry>,
) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _peer)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve_connection(
                    stream,
                    tls.clone(),
                    http1_only,
                    timeouts,
                    router.clone(),
                    registry.clone(),
                ));
            }
            Err(err) => {
                // Out of file descriptors and the like: back off a little instead of spinning.
                tracing::debug!(%err, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Serves one connection. Every stage is bounded like kube-apiserver's (Go's) server does it:
/// the TLS handshake, the first request's arrival, each later request's headers (from their
/// first byte) and the idle time between requests (HTTP/1.1 keep-alive, by the header timer) or
/// without an open stream (HTTP/2, closed with GOAWAY); a stage over its timeout closes the
/// connection.
async fn serve_connection(
    stream: TcpStream,
    tls: Option<TlsAcceptor>,
    http1_only: bool,
    timeouts: ConnTimeouts,
    router: Router,
    registry: Arc<ConnRegistry>,
) {
    let (ctl, _guard) = registry.register();
    let io = TrackedIo::new(stream, ctl.clone());
    if ctl.is_frozen() {
        // Accepted during a network freeze: never answered, never closed (until killed).
        let _held = io;
        ctl.killed().await;
        return;
    }
    let request_ctl = ctl.clone();
    let counts = registry.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let version = req.version();
        counts.note_request(version);
        request_ctl.note_request();
        request_ctl.note_version(version);
        let open = request_ctl.open_stream();
        let ctl = request_ctl.clone();
        let mut req = req.map(Body::new);
        req.extensions_mut()
            .insert::<Arc<dyn Connection>>(request_ctl.clone());
        let call = router.clone().oneshot(req);
        async move {
            let response = match call.await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            stream::answer(response, version, &ctl, open)
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(HeaderTimer::new(ctl.clone(), timeouts.idle))
        .header_read_timeout(timeouts.header_read)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(HTTP2_MAX_STREAMS)
        .max_frame_size(HTTP2_MAX_FRAME)
        .initial_stream_window_size(HTTP2_MAX_FRAME)
        .initial_connection_window_size(HTTP2_MAX_FRAME * HTTP2_MAX_STREAMS)
        .max_header_list_size(HTTP2_MAX_HEADER_LIST);
    let builder = if http1_only {
        builder.http1_only()
    } else {
        builder
    };
    // The first request must arrive within the header timeout: this also bounds what hyper's
    // own header timer does not see (the protocol sniffing before it, e.g. a connection that
    // sends nothing at all, or half an HTTP/2 preface).
    let first_request = async {
        tokio::time::sleep(timeouts.header_read).await;
        // A frozen connection stays open (see `ConnCtl::freeze`), whatever it sent.
        if ctl.requests() == 0 && !ctl.is_frozen() {
            tracing::debug!("sim: no request within the header timeout; closing");
            return;
        }
        std::future::pending::<()>().await;
    };
    let io: Box<dyn Io> = match tls {
        Some(acceptor) => {
            let handshake = tokio::time::timeout(timeouts.tls_handshake, acceptor.accept(io));
            tokio::select! {
                () = ctl.killed() => return,
                accepted = handshake => match accepted {
                    Ok(Ok(s)) => Box::new(s),
                    Ok(Err(err)) => {
                        tracing::debug!(%err, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!("sim: TLS handshake timed out; closing");
                        return;
                    }
                },
            }
        }
        None => Box::new(io),
    };
    if http1_only {
        // hyper-util's auto builder sniffs the preface when serving upgrades even if HTTP/1
        // only, so an HTTP/1-only sim serves with hyper's HTTP/1 builder (the same settings),
        // upgrades (`pods/exec` WebSockets) included.
        let mut h1 = hyper::server::conn::http1::Builder::new();
        h1.timer(HeaderTimer::new(ctl.clone(), timeouts.idle))
            .header_read_timeout(timeouts.header_read)
            .keep_alive(true);
        let conn = h1
            .serve_connection(TokioIo::new(io), service)
            .with_upgrades();
        let result = tokio::select! {
            () = ctl.killed() => return,
            () = first_request => return,
            result = conn => result,
        };
        if let Err(err) = result {
            tracing::debug!(%err, "connection ended with an error");
        }
        return;
    }
    // The auto builder reads the client's preface, so ALPN needs no branch here; it serves
    // upgrades (`pods/exec` WebSockets) over HTTP/1.1.
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    let mut conn = std::pin::pin!(conn);
    let result = tokio::select! {
        () = ctl.killed() => return,
        () = first_request => return,
        result = conn.as_mut() => result,
        () = http2_idle(&ctl, timeouts.idle) => {
            tracing::debug!("sim: HTTP/2 connection idle; sending GOAWAY");
            conn.as_mut().graceful_shutdown();
            // Go's server closes within its GOAWAY timeout once no stream is left, whether or
            // not the client answered the GOAWAY's PING.
            tokio::select! {
                () = ctl.killed() => return,
                result = conn.as_mut() => result,
                () = ctl.idle_for(GOAWAY_TIMEOUT) => return,
            }
        }
    };
    if let Err(err) = result {
        tracing::debug!(%err, "connection ended with an error");
    }
}

/// The transport under a connection: TCP, or TLS over it.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// Resolves when an HTTP/2 connection has had no open stream for `idle` (Go's `IdleTimeout`;
/// PINGs do not count as activity). HTTP/1.1 connections are left to the header timer, which
/// closes an idle keep-alive connection itself; a frozen connection is never closed.
async fn http2_idle(ctl: &ConnCtl, idle: Duration) {
    loop {
        ctl.idle_for(idle).await;
        if ctl.is_http2() && !ctl.is_frozen() {
            return;
        }
        // Not known to be HTTP/2 yet (or frozen): look again after the next stream.
        ctl.stream_changed().await;
    }
}

/// A running sim: an API server on 127.0.0.1 with its object store, kubelet and fault rules.
/// Cheap to clone; [`Sim::shutdown`] stops it.
#[derive(Clone)]
pub struct Sim {
    inner: Arc<SimInner>,
}

struct SimInner {
    state: AppState,
    faults: FaultHandle,
    listener: Arc<Listener>,
    url: String,
    ca_pem: Option<String>,
    kubelet: Mutex<Option<KubeletHandle>>,
    /// Frees expired watch history while the sim is idle (see [`Cluster::spawn_history_pruner`]).
    history_pruner: JoinHandle<()>,
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim").field("url", &self.inner.url).finish()
    }
}

impl Sim {
    /// Starts a sim: binds, generates TLS material (unless plain HTTP), starts the kubelet.
    pub async fn start(cfg: SimConfig) -> Result<Sim, SimError> {
        for rule in &cfg.faults.rules {
            rule.validate()?;
        }
        let cluster = Cluster::new(HistoryLimits {
            window: cfg.history_window,
            max_events: cfg.history_max_events.max(1),
        });
        cluster.set_kubelet_enabled(cfg.kubelet.enabled);
        cluster.set_watch_buffer(cfg.watch_buffer);
        let history_pruner = cluster.spawn_history_pruner(HISTORY_PRUNE_EVERY);
        // What kube-apiserver's post-start hooks make: the system PriorityClasses.
        podline_sim_core::kinds::priority_class::ensure_system_classes(&cluster);
        // What kind installs: its default StorageClass.
        podline_sim_core::kinds::storage_class::ensure_default_class(&cluster);
        // kube-controller-manager's part; each ends by itself with the cluster.
        podline_sim_core::controllers::spawn_all(&cluster);
        let state = AppState::new(cluster.clone(), cfg.token.clone(), cfg.bookmark_interval);
        let faults = FaultHandle::new(cfg.faults.clone());
        state.set_body_limits(BodyLimits {
            max_bytes: cfg.max_request_body,
            read_timeout: cfg.body_read_timeout,
        });
        state.set_exec_processes(cfg.kubelet.exec);
        let tls = if cfg.tls {
            Some(TlsMaterial::generate(!cfg.http1_only)?)
        } else {
            None
        };
        // The root-ca-cert-publisher publishes the CA clients trust (a plain-HTTP sim has none
        // of its own: it publishes one made for the purpose).
        let root_ca = match &tls {
            Some(t) => t.ca_pem.clone(),
            None => TlsMaterial::generate(false)?.ca_pem,
        };
        drop(podline_sim_core::controllers::root_ca::spawn(
            &cluster, root_ca,
        ));
        let listener = Arc::new(Listener::new(
            cfg.addr,
            tls.as_ref().map(|t| t.acceptor.clone()),
            cfg.http1_only,
            ConnTimeouts {
                tls_handshake: cfg.tls_handshake_timeout,
                header_read: cfg.header_read_timeout,
                idle: cfg.idle_timeout,
            },
            app(state.clone(), faults.clone()),
        ));
        let transport: Arc<dyn Transport> = listener.clone();
        state.set_server(Arc::downgrade(&transport));
        let addr = listener.start().await?;
        let scheme = if cfg.tls { "https" } else { "http" };
        let url = format!("{scheme}://{addr}");
        let kubelet = cfg
            .kubelet
            .enabled
            .then(|| Kubelet::spawn(cluster.clone(), cfg.kubelet.clone()));
        tracing::info!(%url, kubelet = cfg.kubelet.enabled, "sim API listening");
        Ok(Sim {
            inner: Arc::new(SimInner {
                state,
                faults,
                listener,
                url,
                ca_pem: tls.map(|t| t.ca_pem),
                kubelet: Mutex::new(kubelet),
                history_pruner,
            }),
        })
    }

    /// The base URL, `https://127.0.0.1:PORT` (or `http://`).
    pub fn url(&self) -> String {
        self.inner.url.clone()
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.inner.listener.addr()
    }

    /// The bearer token clients must send.
    pub fn token(&self) -> &str {
        self.inner.state.token()
    }

    /// The CA certificate (PEM) that signed the serving certificate; None over plain HTTP.
    pub fn ca_pem(&self) -> Option<String> {
        self.inner.ca_pem.clone()
    }

    /// A kubeconfig for this sim: cluster, user (token) and context `podline-sim`, namespace
    /// `default`.
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig::render(&self.inner.url, self.inner.ca_pem.as_deref(), self.token())
    }

    /// The object store (for tests and the kubelet).
    pub fn cluster(&self) -> &Cluster {
        self.inner.state.cluster()
    }

    /// The API as an in-process router (same state as the socket).
    pub fn router(&self) -> Router {
        app(self.inner.state.clone(), self.inner.faults.clone())
    }

    /// The live fault rules: push / clear / list, same as `/_sim/faults`.
    pub fn faults(&self) -> FaultHandle {
        self.inner.faults.clone()
    }

    /// Request counts by verb and resource so far.
    pub fn counts(&self) -> RequestCounts {
        self.inner.state.counts().snapshot()
    }

    /// Every resource request answered from now on, with when it was received and answered
    /// (like kube-apiserver's audit log; see [`crate::audit`]).
    pub fn audit(&self) -> tokio::sync::broadcast::Receiver<std::sync::Arc<crate::AuditEntry>> {
        self.inner.state.audit().subscribe()
    }

    /// Resets the request counts to zero.
    pub fn reset_counts(&self) {
        self.inner.state.counts().reset();
    }

    /// Every pod ever created, with its transitions, exit codes and removal time.
    pub fn ground_truth(&self) -> Vec<PodHistory> {
        self.cluster().ground_truth()
    }

    /// The ground-truth ledger as JSON, byte for byte what `GET /_sim/ground-truth` answers (it
    /// is that answer, asked in process), so a copy written to a file audits like the endpoint.
    /// Works after [`Sim::shutdown`] too, for a last copy once nothing can change any more.
    pub async fn ground_truth_json(&self) -> Result<bytes::Bytes, SimError> {
        use http_body_util::BodyExt;

        let request = http::Request::get("/_sim/ground-truth")
            .header(
                http::header::AUTHORIZATION,
                format!("Bearer {}", self.token()),
            )
            .body(Body::empty())
            .map_err(std::io::Error::other)?;
        let response = match self.router().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(std::io::Error::other)?
            .to_bytes();
        if status != http::StatusCode::OK {
            return Err(std::io::Error::other(format!(
                "the ground-truth endpoint answered {status}"
            ))
            .into());
        }
        Ok(body)
    }

    /// Drops every connection and refuses new ones for `down`, then serves the same state.
    pub async fn restart(&self, down: Duration) {
        self.inner.listener.restart(down).await;
    }

    /// Freezes the network for `duration`: every open connection, and every connection accepted
    /// until it has passed, neither reads nor writes another byte (see
    /// [`ConnRegistry::freeze_all_for`]). Why: a client must abandon a new connection whose TLS
    /// handshake never completes, not only an old one whose PINGs go unanswered.
    pub fn freeze_all_for(&self, duration: Duration) {
        self.inner.listener.registry().freeze_all_for(duration);
    }

    /// Drops the watch history: resumes from older resourceVersions answer 410 Expired.
    pub fn compact(&self) {
        self.cluster().compact();
    }

    /// Number of open client connections (frozen ones included).
    pub fn connections(&self) -> usize {
        self.inner.listener.connections()
    }

    /// Number of open connections a freeze fault has frozen.
    pub fn frozen_connections(&self) -> usize {
        self.inner.listener.registry().frozen()
    }

    /// Requests served over sockets so far, as (HTTP/1.x, HTTP/2).
    pub fn requests_by_version(&self) -> (u64, u64) {
        self.inner.listener.registry().requests_by_version()
    }

    /// Number of TCP connections accepted since the sim started: with HTTP/2 a client process
    /// should need very few, however many requests and watches it runs.
    pub fn accepted_connections(&self) -> u64 {
        self.inner.listener.registry().accepted()
    }

    /// Stops the kubelet, closes the socket and drops every connection.
    pub async fn shutdown(self) {
        if let Some(kubelet) = self
            .inner
            .kubelet
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            kubelet.stop();
        }
        self.inner.history_pruner.abort();
        self.inner.listener.stop().await;
    }
}
