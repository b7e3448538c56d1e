//! The HTTP transport under every podline [`kube::Client`]: HTTP/2 with PING health checks where
//! the server offers it (TLS ALPN `h2`), HTTP/1.1 otherwise, with kube's own auth, base-URI and
//! extra-header layers on top so every kube `Api` type keeps working.
//!
//! Why not kube's default stack: it speaks HTTP/1.1 only, one TCP connection per watch, and a
//! silently dead connection then goes unnoticed until a timer gives up on it (kube-rs 5 took
//! 297 s with default settings). Here:
//! - **one connection pool per client**, multiplexing every request and watch of the process on
//!   one HTTP/2 connection (as client-go does); clone the client, never build a second one.
//!   While the pool has no live connection (at start, after the server dropped it), the
//!   requests made at once do not each dial: the first dials, the others wait for it and share
//!   its connection if it speaks HTTP/2, or dial their own if it is HTTP/1.1 (the connector's
//!   single flight, module `flight`; hyper's pool cannot know a connection will be HTTP/2
//!   before ALPN said so, and would open one per request);
//! - **PING**: a connection silent for [`Http2Ping::interval`] gets a PING; no answer within
//!   [`Http2Ping::timeout`] closes it, failing every request and stream on it at once, so a frozen
//!   connection is noticed in seconds even when its watches are legitimately quiet;
//! - **timeouts**: connect (TCP + TLS; each attempt bounded by the connect timeout, abandoned
//!   and retried with backoff, see [`crate::dial`]), and a socket read/write timeout a little longer than the
//!   client timeout. On HTTP/2 the PING answers keep a healthy quiet connection's reads flowing,
//!   so the read timeout never cuts it; a [`tower::timeout`] bounds each request's wait for its
//!   response headers, which PING traffic would otherwise keep alive forever on a live connection;
//! - **proxies**: the kubeconfig's `proxy-url` (`http://` CONNECT or `socks5://`, see
//!   [`crate::proxy`]) carries the TCP connection; TLS, HTTP/2 and PING run end to end through it;
//! - **TLS verification stays on** (kube's rustls configuration: the kubeconfig's CA, client
//!   certificates, `tls-server-name`); only `insecure-skip-tls-verify: true` turns it off.
//!
//! A request may carry a [`ResponseVersion`] in its extensions to learn which protocol answered
//! it: the watch uses it to tell a quiet HTTP/2 stream (PING watches its connection) from a quiet
//! HTTP/1.1 one (only the client timeout can).

use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{Request, Response, Version};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::{Body, ConfigExt, DynBody};
use rustls::pki_types::ServerName;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

use crate::dial::{BoundedConnect, DialLimits};
use crate::flight::{NoteAssigned, SingleFlight};
use crate::ping::Http2Ping;
use crate::proxy::{ProxyConnector, ProxyError};

/// Which HTTP version answered a request: insert one into a request's extensions, read it after
/// the response headers arrived. Cheap to clone (clones share the slot).
#[derive(Debug, Clone, Default)]
pub struct ResponseVersion(Arc<OnceLock<Version>>);

impl ResponseVersion {
    /// The version of the response, once it arrived through podline's transport (`None` before,
    /// or when the client was built some other way, e.g. a test's mock service).
    pub fn get(&self) -> Option<Version> {
        self.0.get().copied()
    }

    /// Whether the response came over HTTP/2 (a multiplexed connection watched by PING).
    pub fn is_http2(&self) -> bool {
        self.get() == Some(Version::HTTP_2)
    }
}

/// Timeouts of the transport, derived from the client timeout by [`crate::connect`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct TransportTimeouts {
    /// Bounds each connect attempt and the whole dial (see [`crate::dial`]).
    pub connect: DialLimits,
    /// Socket reads and writes (reset by every read and write).
    pub io: Duration,
    /// From sending a request to its response headers.
    pub headers: Duration,
}

/// Why the transport could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// kube could not build the TLS configuration or an auth layer from the kubeconfig.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// The kubeconfig's `tls-server-name` is not a valid DNS name or IP address.
    #[error("tls-server-name {name:?} in the kubeconfig is not a valid server name: {reason}")]
    TlsServerName {
        /// The name.
        name: String,
        /// What rustls said (in the message, so not also a `source()`).
        reason: rustls::pki_types::InvalidDnsNameError,
    },
    /// The kubeconfig's `proxy-url` cannot be used (see [`crate::proxy`]).
    #[error(transparent)]
    Proxy(#[from] ProxyError),
}

/// Builds the client: the transport (see the module doc) under kube's auth and URI layers.
/// `ca` says where the trusted CA certificates came from, for the message of a rejected server
/// certificate.
///
/// `exec` is the auth layer of an exec credential plugin's token, run by podline
/// ([`crate::connect`]); without it, kube's auth layer for the kubeconfig's credentials.
pub(crate) fn build(
    config: &kube::Config,
    timeouts: TransportTimeouts,
    ping: Http2Ping,
    ca: &str,
    exec: Option<crate::exec_plugin::ExecTokenLayer>,
    http1_only: bool,
) -> Result<kube::client::ClientBuilder<Stack>, TransportError> {
    let peer = Arc::new(Peer {
        server: without_userinfo(&config.cluster_url),
        plain_http: config.cluster_url.scheme_str() == Some("http"),
        ca: ca.to_owned(),
    });
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    let tcp = ProxyConnector::new(config.proxy_url.as_ref(), tcp)?;
    let tls = config.rustls_client_config()?;
    let mut https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let server_name =
            ServerName::try_from(name.clone()).map_err(|reason| TransportError::TlsServerName {
                name: name.clone(),
                reason,
            })?;
        https = https
            .with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(server_name));
    }
    // ALPN offers h2 then http/1.1: a server (or proxy) without HTTP/2 gets HTTP/1.1. A client
    // for WebSocket upgrades (`pods/exec`) offers http/1.1 only: the API server upgrades only
    // HTTP/1.1 requests, as client-go's dialer for upgrades knows.
    let https = if http1_only {
        https.enable_http1().wrap_connector(tcp)
    } else {
        https.enable_all_versions().wrap_connector(tcp)
    };
    let https = BoundedConnect::new(https, timeouts.connect, &peer.server);
    // Concurrent requests without a live connection share one dial (and its HTTP/2 connection).
    let https = SingleFlight::new(https);
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    // Connects are bounded (and retried) by `BoundedConnect`; this adds the socket timeouts.
    connector.set_connect_timeout(None);
    connector.set_read_timeout(Some(timeouts.io));
    connector.set_write_timeout(Some(timeouts.io));
    // A pooled connection's idle time must not count against the next response.
    connector.set_reset_reader_on_write(true);
    let client: hyper_util::client::legacy::Client<_, Body> =
        hyper_util::client::legacy::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .http2_keep_alive_interval(ping.interval)
            .http2_keep_alive_timeout(ping.timeout)
            .http2_keep_alive_while_idle(true)
            .build(connector);

    let answered = peer.clone();
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(match exec {
            Some(exec) => Some(tower::util::Either::Right(exec)),
            None => config.auth_layer()?.map(tower::util::Either::Left),
        })
        .layer(config.extra_headers_layer()?)
        .layer(tower::timeout::TimeoutLayer::new(timeouts.headers))
        .layer(tower::layer::layer_fn(NoteVersion))
        .map_err(move |err| -> BoxError { Box::new(TransportFailure::new(err, &peer)) })
        .layer(tower::layer::layer_fn(NoteAssigned))
        .service(client)
        .map_response(|resp: Response<hyper::body::Incoming>| {
            resp.map(|body| {
                Box::new(http_body_util::BodyExt::map_err(body, BoxError::from)) as Box<DynBody>
            })
        })
        .and_then(move |resp| check_plain_answer(resp, answered.clone()))
        .boxed();
    Ok(kube::client::ClientBuilder::new(
        service,
        config.default_namespace.clone(),
    ))
}

/// The server a transport talks to, for its error messages.
#[derive(Debug)]
struct Peer {
    /// The cluster URL.
    server: String,
    /// Whether the URL is `http://` (no TLS).
    plain_http: bool,
    /// Where the trusted CA certificates came from.
    ca: String,
}

/// `url` for messages, with any `user:password@` replaced (a credential never reaches output).
fn without_userinfo(url: &http::Uri) -> String {
    let text = url.to_string();
    match url.authority().map(|a| a.as_str()) {
        Some(authority) if authority.contains('@') => {
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            text.replacen(authority, &format!("***@{host}"), 1)
        }
        _ => text,
    }
}

/// What kind of failure a [`TransportFailure`] is, for classification ([`crate::retry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureKind {
    /// TLS rejected the server's certificate (unknown issuer, name mismatch, expired...): no
    /// retry can fix it.
    UntrustedCertificate,
    /// An `http://` URL names a server that speaks TLS: it answered the plain request with a
    /// TLS alert or other non-HTTP bytes. No retry can fix it.
    SpeaksTls,
    /// An `https://` URL names a plain-HTTP server: it answered the TLS handshake with HTTP
    /// (rustls: a record of an invalid content type). No retry can fix it.
    SpeaksPlainHttp,
    /// Anything else (refused, reset, timed out, a failed handshake...): [`crate::retry`]
    /// classifies it by its cause.
    Other,
}

/// A request that failed below HTTP (connect, TLS, the connection itself), described for an
/// operator: which server, what went wrong, and for a rejected certificate which CA was used.
///
/// Why it exists: hyper reports these as `client error (Connect)` and keeps the cause in its
/// `source()` chain, which most messages (kube's `ServiceError: ...` among them) never show. The
/// message here is complete, each cause once, so `source()` returns nothing (a chain printer
/// would repeat it); the original error stays reachable through [`TransportFailure::cause`].
#[derive(Debug)]
pub struct TransportFailure {
    kind: FailureKind,
    message: String,
    /// What hyper reported (`None` when the failure is an answer, e.g. Go's 400 to plain HTTP).
    cause: Option<hyper_util::client::legacy::Error>,
}

impl TransportFailure {
    fn new(cause: hyper_util::client::legacy::Error, peer: &Peer) -> Self {
        let detail = match std::error::Error::source(&cause) {
            Some(source) => crate::error::Chain(source).to_string(),
            None => cause.to_string(),
        };
        let server = &peer.server;
        let (kind, message) = if let Some(problem) =
            find_cause(&cause, |e| match e.downcast_ref::<rustls::Error>() {
                Some(rustls::Error::InvalidCertificate(c)) => Some(certificate_problem(c)),
                _ => None,
            }) {
            (
                FailureKind::UntrustedCertificate,
                format!(
                    "the server's TLS certificate was not trusted ({problem}): {detail}; \
                     verified against {ca} (server {server})",
                    ca = peer.ca
                ),
            )
        } else if peer.plain_http
            && find_cause(&cause, |e| {
                e.downcast_ref::<hyper::Error>()
                    .is_some_and(hyper::Error::is_parse)
                    .then_some(())
            })
            .is_some()
        {
            (
                FailureKind::SpeaksTls,
                format!(
                    "the server at {server} did not answer in HTTP ({detail}): it speaks TLS; \
                     use https:// in the server URL"
                ),
            )
        } else if !peer.plain_http
            && find_cause(&cause, |e| {
                matches!(
                    e.downcast_ref::<rustls::Error>(),
                    Some(rustls::Error::InvalidMessage(
                        rustls::InvalidMessage::InvalidContentType
                    ))
                )
                .then_some(())
            })
            .is_some()
        {
            (
                FailureKind::SpeaksPlainHttp,
                format!(
                    "the server at {server} did not answer the TLS handshake in TLS ({detail}): \
                     it speaks plain HTTP; use http:// in the server URL"
                ),
            )
        } else if cause.is_connect() {
            (
                FailureKind::Other,
                format!("cannot connect to {server}: {detail}"),
            )
        } else {
            (
                FailureKind::Other,
                format!("request to {server} failed: {detail}"),
            )
        };
        Self {
            kind,
            message,
            cause: Some(cause),
        }
    }

    /// A plain-HTTP request that a TLS server answered with 400 and its "client sent an HTTP
    /// request to an HTTPS server" text (Go's servers, kube-apiserver among them, do).
    fn plain_http_to_tls(peer: &Peer, answer: &str) -> Self {
        Self {
            kind: FailureKind::SpeaksTls,
            message: format!(
                "the server at {server} answered 400 {answer:?}: it speaks TLS; use https:// \
                 in the server URL",
                server = peer.server,
                answer = answer.trim()
            ),
            cause: None,
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// The error hyper reported, whose causes the message already describes (for code that
    /// inspects the cause chain; not for printing). `None` when the server answered.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.cause.as_ref().map(|cause| cause as _)
    }
}

impl std::fmt::Display for TransportFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TransportFailure {}

/// Turns a TLS server's 400 answer to a plain-HTTP request into a [`TransportFailure`] (not
/// worth retrying, and clearer than kube's "ApiError: ..."); every other answer passes unchanged.
async fn check_plain_answer(
    resp: Response<Box<DynBody>>,
    peer: Arc<Peer>,
) -> Result<Response<Box<DynBody>>, BoxError> {
    if !peer.plain_http || resp.status() != http::StatusCode::BAD_REQUEST {
        return Ok(resp);
    }
    let (parts, body) = resp.into_parts();
    // Read whole, as kube reads every error answer whole to decode its Status anyway.
    let bytes = http_body_util::BodyExt::collect(body).await?.to_bytes();
    let text = String::from_utf8_lossy(&bytes);
    if text
        .to_ascii_lowercase()
        .contains("http request to an https server")
    {
        return Err(Box::new(TransportFailure::plain_http_to_tls(&peer, &text)));
    }
    let body: Box<DynBody> = Box::new(http_body_util::BodyExt::map_err(
        http_body_util::Full::new(bytes),
        |never| -> BoxError { match never {} },
    ));
    Ok(Response::from_parts(parts, body))
}

/// The first `Some` that `found` returns for an error of `err`'s cause chain (including the
/// errors wrapped in `io::Error`s, which their `source()` skips).
fn find_cause<T>(
    err: &(dyn std::error::Error + 'static),
    found: impl Fn(&(dyn std::error::Error + 'static)) -> Option<T> + Copy,
) -> Option<T> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cause {
        if let Some(hit) = found(e) {
            return Some(hit);
        }
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            && let Some(hit) = find_cause(inner, found)
        {
            return Some(hit);
        }
        cause = e.source();
    }
    None
}

/// A few words on why rustls rejected a certificate.
fn certificate_problem(err: &rustls::CertificateError) -> &'static str {
    use rustls::CertificateError as C;
    match err {
        C::UnknownIssuer => "unknown issuer: it is not signed by a trusted CA",
        C::NotValidForName | C::NotValidForNameContext { .. } => {
            "name mismatch: it is not valid for the server's name"
        }
        C::Expired | C::ExpiredContext { .. } => "expired",
        C::NotValidYet | C::NotValidYetContext { .. } => "not valid yet",
        C::Revoked => "revoked",
        C::BadSignature => {
            "bad signature: it is not signed by the trusted CA of its issuer's name (another CA?)"
        }
        _ => "rejected",
    }
}

/// The service under kube's client: requests in, boxed bodies out.
pub(crate) type Stack = tower::util::BoxService<Request<Body>, Response<Box<DynBody>>, BoxError>;

/// Fills a request's [`ResponseVersion`] (if it has one) when the response headers arrive.
#[derive(Debug, Clone)]
struct NoteVersion<S>(S);

impl<S, B> Service<Request<Body>> for NoteVersion<S>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<B>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let slot = req.extensions().get::<ResponseVersion>().cloned();
        let fut = self.0.call(req);
        Box::pin(async move {
            let resp = fut.await?;
            if let Some(slot) = slot {
                let _ = slot.0.set(resp.version());
            }
            Ok(resp)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_should_never_show_a_password_in_the_server_url() {
        let url: http::Uri = "https://admin:s3cret@10.0.0.1:6443/".parse().unwrap();
        let shown = without_userinfo(&url);
        assert_eq!(shown, "https://***@10.0.0.1:6443/");
        let plain: http::Uri = "https://10.0.0.1:6443".parse().unwrap();
        assert_eq!(without_userinfo(&plain), "https://10.0.0.1:6443/");
    }
}
