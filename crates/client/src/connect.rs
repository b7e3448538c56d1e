//! Build a [`kube::Client`] the way kubectl finds its cluster, with podline's timeouts.
//!
//! Where the configuration comes from, first match wins (like kubectl):
//! 1. an explicit kubeconfig file ([`ConnectOptions::kubeconfig`]; an error if unreadable),
//! 2. `KUBECONFIG`, a list of files separated by `:` (`;` on Windows), merged by kubectl's rules,
//! 3. `~/.kube/config` if it exists,
//! 4. in-cluster (service account token and `KUBERNETES_SERVICE_HOST`).
//!
//! [`ConnectOptions::context`] picks a context from the kubeconfig; the namespace defaults to the
//! context's (or `default`) unless [`ConnectOptions::namespace`] overrides it.
//!
//! What [`client_from_config`] changes from kube's defaults, and why:
//! - the transport speaks **HTTP/2 with PING health checks** where the server offers it (ALPN),
//!   HTTP/1.1 otherwise, and multiplexes every request and watch of the client on one connection
//!   ([`crate::transport`]; PING settings in [`crate::ping`]). Build one client per process and
//!   clone it.
//! - kube's own `RetryLayer` is **off**: retries are ours ([`crate::retry`]), bounded and logged,
//!   instead of up to 15 silent retries per call.
//! - each connect attempt (TCP, proxy, TLS) is bounded by the **connect timeout** (default: the
//!   PING timeout), abandoned when it runs out and tried again with full-jitter backoff, logged
//!   at a rate ([`crate::dial`]), so a network that froze and comes back is used within about
//!   one attempt, not after a 30 s connect gives up.
//! - the bound on one dial (all attempts: the client timeout, at most 30 s), the read and write
//!   timeouts and a bound on each request's wait for its response headers are derived from the
//!   client timeout, so no call can hang on a dead connection (kube 5 has no read timeout by
//!   default). The last two are a little longer than the client timeout so
//!   the watch's own timers fire first, with a clear reason; `reset_reader_on_write` keeps a
//!   pooled connection's idle time from counting.
//! - a `Retry-After` header on an error answer is copied into the `Status` body
//!   (`details.retryAfterSeconds`), because kube drops headers when it builds `Error::Api`.
//! - TLS verification stays on; only a kubeconfig's `insecure-skip-tls-verify: true` turns it off,
//!   and that is logged as a warning. Tokens are never logged.
//!
//! The layer stack is assembled in [`client_from_config`] only.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use kube::client::{Body, DynBody};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tower::{BoxError, ServiceExt};

use crate::dial::DialLimits;
use crate::error::Chain;
use crate::ping::Http2Ping;
use crate::timeouts::DEFAULT_CLIENT_TIMEOUT;
use crate::transport::{self, TransportError, TransportTimeouts};

/// Where to find the cluster and how to talk to it: kubectl's three choices (an explicit
/// kubeconfig, a context, a namespace), plus the client's timeouts.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// An explicit kubeconfig file, which wins over `KUBECONFIG` and `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// A context name from the kubeconfig (default: its current-context).
    pub context: Option<String>,
    /// Overrides the context's namespace.
    pub namespace: Option<String>,
    /// Bounds connecting and every read and write of unary calls (see the module doc).
    pub client_timeout: Duration,
    /// HTTP/2 PING health checks (interval and timeout), used whenever the server speaks HTTP/2.
    pub http2_ping: Http2Ping,
    /// Bounds each attempt at a new connection (TCP connect and TLS handshake); an attempt that
    /// runs out is abandoned and retried ([`crate::dial`]). `None`: the PING timeout, so a new
    /// connection gets no longer to come up than a live one has to answer a PING. Check a
    /// user's value with [`crate::timeouts::connect_timeout`].
    pub connect_timeout: Option<Duration>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            context: None,
            namespace: None,
            client_timeout: DEFAULT_CLIENT_TIMEOUT,
            http2_ping: Http2Ping::default(),
            connect_timeout: None,
        }
    }
}

/// Where the configuration was found, for a one-line startup log and for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// An explicit file, chosen by the program ([`ConnectOptions::kubeconfig`]); shown as its
    /// path.
    Flag(PathBuf),
    /// From the `KUBECONFIG` list.
    Env(OsString),
    /// From `~/.kube/config`.
    Home(PathBuf),
    /// From the pod's service account.
    InCluster,
}

impl std::fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigSource::Flag(p) => write!(f, "{}", p.display()),
            ConfigSource::Env(v) => write!(f, "KUBECONFIG={}", v.to_string_lossy()),
            ConfigSource::Home(p) => write!(f, "{}", p.display()),
            ConfigSource::InCluster => write!(f, "in-cluster service account"),
        }
    }
}

/// A ready client and what it resolved to.
#[derive(Clone)]
pub struct Connected {
    /// The client, with podline's stack (see the module doc).
    pub client: kube::Client,
    /// The namespace to use when a call names none: [`ConnectOptions::namespace`], else the
    /// context's, else `default`.
    pub namespace: String,
    /// The API server's URL.
    pub cluster_url: http::Uri,
    /// Where the configuration came from.
    pub source: ConfigSource,
}

impl std::fmt::Debug for Connected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connected")
            .field("namespace", &self.namespace)
            .field("cluster_url", &self.cluster_url)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// Why no client could be built. Messages name the file or source that failed.
///
/// Each message is complete on its own (it includes what kube reported, each cause once), so
/// `source()` returns nothing: a chain printer would otherwise print the causes twice.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// A kubeconfig was found but could not be read, parsed or used (e.g. unknown context).
    #[error("cannot use kubeconfig from {source_name}: {}", Chain(error))]
    Kubeconfig {
        /// Where it came from.
        source_name: ConfigSource,
        /// What kube said.
        error: kube::config::KubeconfigError,
    },
    /// A context makes no sense without a kubeconfig.
    #[error(
        "context {0} was asked for, but no kubeconfig was found (no explicit file, KUBECONFIG unset, no ~/.kube/config)"
    )]
    ContextWithoutKubeconfig(String),
    /// No kubeconfig anywhere and not running in a cluster.
    #[error(
        "no Kubernetes configuration found: no explicit kubeconfig, KUBECONFIG unset, no ~/.kube/config, and not in a pod ({})", Chain(.0)
    )]
    NoConfig(kube::config::InClusterError),
    /// The configuration was read but the client could not be built (TLS material, auth,
    /// server name...).
    #[error("cannot build a Kubernetes client: {}", Chain(.0))]
    Transport(TransportError),
}

/// Where to look, injected so tests need not touch the process environment.
#[derive(Debug, Clone, Default)]
pub struct Lookup {
    /// An explicit kubeconfig file (the program's choice), which wins.
    pub flag: Option<PathBuf>,
    /// The `KUBECONFIG` variable.
    pub kubeconfig_env: Option<OsString>,
    /// `$HOME` (for `~/.kube/config`).
    pub home: Option<PathBuf>,
}

impl Lookup {
    /// The real process environment, plus the explicit file. An empty path or variable counts as
    /// unset, as in kubectl.
    pub fn from_env(flag: Option<PathBuf>) -> Self {
        Self {
            flag: flag.filter(|path| !path.as_os_str().is_empty()),
            kubeconfig_env: std::env::var_os("KUBECONFIG"),
            home: std::env::home_dir(),
        }
    }
}

/// Connects like kubectl (see the module doc) and returns the client and its default namespace.
pub async fn connect(opts: &ConnectOptions) -> Result<Connected, ConnectError> {
    let lookup = Lookup::from_env(opts.kubeconfig.clone());
    let loaded = load(&lookup, opts.context.as_deref()).await?;
    finish(loaded, opts).await
}

/// Builds a client from an already loaded kubeconfig (tests, the sim's own kubeconfig).
pub async fn connect_with_kubeconfig(
    kubeconfig: Kubeconfig,
    source: ConfigSource,
    opts: &ConnectOptions,
) -> Result<Connected, ConnectError> {
    let (config, ca) = config_from_kubeconfig(kubeconfig, opts.context.as_deref(), &source).await?;
    finish(Loaded { config, source, ca }, opts).await
}

/// A configuration and where it (and its CA certificates) came from.
struct Loaded {
    config: kube::Config,
    source: ConfigSource,
    /// Where the trusted CA certificates come from, for TLS error messages.
    ca: String,
}

async fn finish(loaded: Loaded, opts: &ConnectOptions) -> Result<Connected, ConnectError> {
    let Loaded {
        mut config,
        source,
        ca,
    } = loaded;
    if let Some(ns) = &opts.namespace {
        config.default_namespace = ns.clone();
    }
    let namespace = config.default_namespace.clone();
    let cluster_url = config.cluster_url.clone();
    if config.accept_invalid_certs {
        tracing::warn!(
            cluster = %cluster_url,
            "TLS certificate verification is OFF (insecure-skip-tls-verify in the kubeconfig)"
        );
    }
    let client = client_with_ca(
        config,
        opts.client_timeout,
        opts.http2_ping,
        opts.connect_timeout,
        &ca,
    )?;
    warm_up(&client, opts.client_timeout).await;
    tracing::debug!(%source, cluster = %cluster_url, %namespace, "kubernetes client ready");
    Ok(Connected {
        client,
        namespace,
        cluster_url,
        source,
    })
}

/// Longest wait for the first connection at startup.
const WARM_UP_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens the client's first connection with one cheap request (`/version`), so that the many
/// requests a process starts at once (a recorder's LIST and watches, a launcher's burst of
/// creates) find an HTTP/2 connection in the pool and share it: before a first connection has
/// negotiated its protocol, the pool would open one connection per concurrent request. Any
/// answer, or none, is fine: the real calls report their own errors.
async fn warm_up(client: &kube::Client, client_timeout: Duration) {
    let wait = client_timeout.min(WARM_UP_TIMEOUT);
    match tokio::time::timeout(wait, client.apiserver_version()).await {
        Ok(Ok(_)) => {}
        Ok(Err(err)) => tracing::debug!(%err, "first request (/version) failed"),
        Err(_) => tracing::debug!(?wait, "first request (/version) timed out"),
    }
}

/// Finds and loads the configuration (kubectl's order) without building a client.
pub async fn load_config(
    lookup: &Lookup,
    context: Option<&str>,
) -> Result<(kube::Config, ConfigSource), ConnectError> {
    let loaded = load(lookup, context).await?;
    Ok((loaded.config, loaded.source))
}

/// [`load_config`], plus where the CA certificates came from.
async fn load(lookup: &Lookup, context: Option<&str>) -> Result<Loaded, ConnectError> {
    let found = find_kubeconfig(lookup)?;
    match found {
        Some((kubeconfig, source)) => {
            let (config, ca) = config_from_kubeconfig(kubeconfig, context, &source).await?;
            Ok(Loaded { config, source, ca })
        }
        None => {
            if let Some(ctx) = context {
                return Err(ConnectError::ContextWithoutKubeconfig(ctx.to_string()));
            }
            let mut config = kube::Config::incluster().map_err(ConnectError::NoConfig)?;
            config.proxy_url = proxy_from_environment(&config.cluster_url)?;
            Ok(Loaded {
                config,
                source: ConfigSource::InCluster,
                ca: format!("the service account's CA file {IN_CLUSTER_CA}"),
            })
        }
    }
}

/// Where a pod's service account CA is mounted (kube reads it from there for in-cluster).
const IN_CLUSTER_CA: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

/// Reads the kubeconfig chosen by `lookup`, or `None` when there is none (use in-cluster).
fn find_kubeconfig(lookup: &Lookup) -> Result<Option<(Kubeconfig, ConfigSource)>, ConnectError> {
    let read = |path: &Path, source: &ConfigSource| {
        Kubeconfig::read_from(path).map_err(|error| ConnectError::Kubeconfig {
            source_name: source.clone(),
            error,
        })
    };
    if let Some(path) = &lookup.flag {
        let source = ConfigSource::Flag(path.clone());
        return read(path, &source).map(|k| Some((k, source)));
    }
    if let Some(value) = &lookup.kubeconfig_env {
        let paths: Vec<PathBuf> = std::env::split_paths(value)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        if !paths.is_empty() {
            let source = ConfigSource::Env(value.clone());
            let mut merged = Kubeconfig::default();
            for path in &paths {
                let next = read(path, &source)?;
                merged = merged
                    .merge(next)
                    .map_err(|error| ConnectError::Kubeconfig {
                        source_name: source.clone(),
                        error,
                    })?;
            }
            return Ok(Some((merged, source)));
        }
    }
    if let Some(home) = &lookup.home {
        let path = home.join(".kube").join("config");
        if path.exists() {
            let source = ConfigSource::Home(path.clone());
            return read(&path, &source).map(|k| Some((k, source)));
        }
    }
    Ok(None)
}

/// The client configuration for `context` of `kubeconfig`, and a description of where its CA
/// certificates come from.
async fn config_from_kubeconfig(
    kubeconfig: Kubeconfig,
    context: Option<&str>,
    source: &ConfigSource,
) -> Result<(kube::Config, String), ConnectError> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let explicit_proxy = names_a_proxy(&kubeconfig, context);
    let ca = describe_ca(&kubeconfig, context, source);
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|error| ConnectError::Kubeconfig {
            source_name: source.clone(),
            error,
        })?;
    if !explicit_proxy {
        config.proxy_url = proxy_from_environment(&config.cluster_url)?;
    }
    Ok((config, ca))
}

/// The kubeconfig's cluster for `context` (default: the current context), with its name.
fn selected_cluster<'k>(
    kubeconfig: &'k Kubeconfig,
    context: Option<&str>,
) -> Option<(&'k str, &'k kube::config::Cluster)> {
    let context = context.or(kubeconfig.current_context.as_deref())?;
    let cluster = kubeconfig
        .contexts
        .iter()
        .find(|named| named.name == context)
        .and_then(|named| named.context.as_ref())
        .map(|context| context.cluster.as_str())?;
    kubeconfig
        .clusters
        .iter()
        .find(|named| named.name == cluster)
        .and_then(|named| Some((named.name.as_str(), named.cluster.as_ref()?)))
}

/// Whether the kubeconfig's cluster for `context` (default: the current context) sets
/// `proxy-url`, which then wins over the environment, as in kubectl.
fn names_a_proxy(kubeconfig: &Kubeconfig, context: Option<&str>) -> bool {
    selected_cluster(kubeconfig, context)
        .and_then(|(_, cluster)| cluster.proxy_url.as_deref())
        .is_some_and(|url| !url.is_empty())
}

/// Where the CA certificates of the cluster for `context` come from, as a TLS error names it:
/// the kubeconfig's `certificate-authority-data` (which wins, as in kube), its
/// `certificate-authority` file, or the system's roots when it names none.
fn describe_ca(kubeconfig: &Kubeconfig, context: Option<&str>, source: &ConfigSource) -> String {
    match selected_cluster(kubeconfig, context) {
        Some((name, cluster)) if cluster.certificate_authority_data.is_some() => {
            format!("the certificate-authority-data of cluster {name:?} in {source}")
        }
        Some((name, cluster)) => match &cluster.certificate_authority {
            Some(path) => {
                format!("the certificate-authority file {path} (cluster {name:?} in {source})")
            }
            None => format!(
                "the system's trusted root certificates (cluster {name:?} in {source} names no certificate-authority)"
            ),
        },
        None => format!("the CA certificates of {source}"),
    }
}

/// The proxy the environment names for `cluster_url` (see [`crate::proxy::from_environment`]).
/// kube's own choice is replaced: it reads `HTTPS_PROXY` but not `HTTP_PROXY`, and without its
/// proxy features it ignores `NO_PROXY`, which would send a local cluster (or the sim) through a
/// corporate proxy.
fn proxy_from_environment(cluster_url: &http::Uri) -> Result<Option<http::Uri>, ConnectError> {
    crate::proxy::from_environment(cluster_url)
        .map_err(|err| ConnectError::Transport(TransportError::Proxy(err)))
}

/// Margin of the socket read timeout (and of the wait for response headers) over the client
/// timeout, so the watch's own timer (with a precise reason label) fires first.
const READ_TIMEOUT_MARGIN: Duration = Duration::from_secs(5);
/// Upper bound on one dial (every connect attempt of one request, see [`crate::dial`]): after
/// it the request fails and its caller's retry takes over.
const MAX_DIAL_BUDGET: Duration = Duration::from_secs(30);

/// The one place podline's client stack is assembled (see the module doc): podline's transport
/// ([`crate::transport`]: HTTP/2 with `ping` health checks, or HTTP/1.1) under kube's auth and
/// URI layers, plus the Retry-After layer. kube's `RetryLayer` is not part of it.
pub fn client_from_config(
    config: kube::Config,
    client_timeout: Duration,
    ping: Http2Ping,
) -> Result<kube::Client, ConnectError> {
    let ca = if config.root_cert.is_some() {
        "the CA certificates of the configuration"
    } else {
        "the system's trusted root certificates"
    };
    client_with_ca(config, client_timeout, ping, None, ca)
}

/// [`client_from_config`], naming where the CA certificates came from (`ca`) in TLS errors.
fn client_with_ca(
    config: kube::Config,
    client_timeout: Duration,
    ping: Http2Ping,
    connect_timeout: Option<Duration>,
    ca: &str,
) -> Result<kube::Client, ConnectError> {
    let attempt = connect_timeout.unwrap_or(ping.timeout);
    let timeouts = TransportTimeouts {
        connect: DialLimits {
            attempt,
            budget: client_timeout.min(MAX_DIAL_BUDGET).max(attempt),
        },
        io: client_timeout + READ_TIMEOUT_MARGIN,
        headers: client_timeout + READ_TIMEOUT_MARGIN,
    };
    let builder = transport::build(&config, timeouts, ping, ca).map_err(ConnectError::Transport)?;
    Ok(builder
        .with_layer(&tower::layer::layer_fn(retry_after_into_status))
        .build())
}

/// Wraps a service so error answers carry their `Retry-After` header inside the Status body.
fn retry_after_into_status<S>(
    inner: S,
) -> impl tower::Service<
    Request<Body>,
    Response = Response<Box<DynBody>>,
    Error = BoxError,
    Future = impl Future<Output = Result<Response<Box<DynBody>>, BoxError>> + Send,
> + Send
where
    S: tower::Service<Request<Body>, Response = Response<Box<DynBody>>, Error = BoxError>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    inner.and_then(copy_retry_after)
}

/// If `resp` is an error with a `Retry-After: <seconds>` header and a JSON Status body without
/// `details.retryAfterSeconds`, puts the header's value there. Anything else passes unchanged.
pub async fn copy_retry_after(
    resp: Response<Box<DynBody>>,
) -> Result<Response<Box<DynBody>>, BoxError> {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return Ok(resp);
    }
    let Some(seconds) = resp
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u32>().ok())
    else {
        return Ok(resp);
    };
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await?.to_bytes();
    let patched = patch_status_body(&bytes, seconds).unwrap_or(bytes);
    let body: Box<DynBody> = Box::new(
        http_body_util::Full::new(patched).map_err(|never| -> BoxError { match never {} }),
    );
    Ok(Response::from_parts(parts, body))
}

/// The Status JSON with `details.retryAfterSeconds` set, or `None` if the body is not a Status
/// object or already has a value.
fn patch_status_body(bytes: &Bytes, seconds: u32) -> Option<Bytes> {
    let mut value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let object = value.as_object_mut()?;
    let details = object
        .entry("details")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()?;
    if details
        .get("retryAfterSeconds")
        .and_then(serde_json::Value::as_u64)
        .is_some_and(|s| s > 0)
    {
        return None;
    }
    details.insert("retryAfterSeconds".into(), seconds.into());
    serde_json::to_vec(&value).ok().map(Bytes::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::{Disposition, classify};

    const KUBECONFIG_A: &str = r#"
apiVersion: v1
kind: Config
current-context: a
clusters:
- name: a
  cluster: { server: "http://127.0.0.1:1" }
- name: b
  cluster: { server: "https://127.0.0.1:2", insecure-skip-tls-verify: true }
contexts:
- name: a
  context: { cluster: a, user: u, namespace: team-a }
- name: b
  context: { cluster: b, user: u }
users:
- name: u
  user: { token: "secret-token" }
"#;

    const KUBECONFIG_C: &str = r#"
apiVersion: v1
kind: Config
current-context: c
clusters:
- name: c
  cluster: { server: "http://127.0.0.1:3" }
contexts:
- name: c
  context: { cluster: c, user: u, namespace: team-c }
users:
- name: u
  user: { token: "other" }
"#;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[tokio::test]
    async fn explicit_kubeconfig_should_win_and_give_the_context_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a", KUBECONFIG_A);
        let c = write(dir.path(), "c", KUBECONFIG_C);
        let lookup = Lookup {
            flag: Some(a.clone()),
            kubeconfig_env: Some(c.into_os_string()),
            home: None,
        };
        let (config, source) = load_config(&lookup, None).await.unwrap();
        assert_eq!(source, ConfigSource::Flag(a));
        assert_eq!(config.default_namespace, "team-a");
        assert_eq!(config.cluster_url, "http://127.0.0.1:1/");
        assert!(!config.accept_invalid_certs);
    }

    #[tokio::test]
    async fn context_should_select_cluster_and_default_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a", KUBECONFIG_A);
        let lookup = Lookup {
            flag: Some(a),
            ..Default::default()
        };
        let (config, _) = load_config(&lookup, Some("b")).await.unwrap();
        assert_eq!(config.default_namespace, "default");
        assert!(
            config.accept_invalid_certs,
            "insecure only when the kubeconfig says so"
        );
        let err = load_config(&lookup, Some("nope")).await.unwrap_err();
        assert!(matches!(err, ConnectError::Kubeconfig { .. }), "{err}");
    }

    #[tokio::test]
    async fn kubeconfig_env_list_should_merge_first_wins() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a", KUBECONFIG_A);
        let c = write(dir.path(), "c", KUBECONFIG_C);
        let list = std::env::join_paths([c, a]).unwrap();
        let lookup = Lookup {
            flag: None,
            kubeconfig_env: Some(list.clone()),
            home: None,
        };
        let (config, source) = load_config(&lookup, None).await.unwrap();
        assert_eq!(source, ConfigSource::Env(list.clone()));
        assert_eq!(
            config.default_namespace, "team-c",
            "first file's current-context"
        );
        // Contexts of the second file are reachable too.
        let (config, _) = load_config(&lookup, Some("a")).await.unwrap();
        assert_eq!(config.default_namespace, "team-a");
    }

    #[tokio::test]
    async fn home_config_should_be_used_last_and_missing_files_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".kube")).unwrap();
        write(&dir.path().join(".kube"), "config", KUBECONFIG_C);
        let lookup = Lookup {
            home: Some(dir.path().to_path_buf()),
            ..Default::default()
        };
        let (config, source) = load_config(&lookup, None).await.unwrap();
        assert!(matches!(source, ConfigSource::Home(_)));
        assert_eq!(config.default_namespace, "team-c");

        let lookup = Lookup {
            flag: Some(dir.path().join("missing")),
            ..Default::default()
        };
        let err = load_config(&lookup, None).await.unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }

    #[tokio::test]
    async fn connect_should_apply_namespace_override_and_never_print_the_token() {
        let kubeconfig = Kubeconfig::from_yaml(KUBECONFIG_A).unwrap();
        let opts = ConnectOptions {
            namespace: Some("override".into()),
            ..Default::default()
        };
        let connected = connect_with_kubeconfig(kubeconfig, ConfigSource::InCluster, &opts)
            .await
            .unwrap();
        assert_eq!(connected.namespace, "override");
        assert!(!format!("{connected:?}").contains("secret-token"));
    }

    #[tokio::test]
    async fn retry_after_header_should_reach_classify() {
        let service = tower::service_fn(|_req: Request<Body>| async {
            let body: Box<DynBody> = Box::new(
                http_body_util::Full::new(Bytes::from_static(
                    br#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}"#,
                ))
                .map_err(|never| -> BoxError { match never {} }),
            );
            Ok::<_, BoxError>(
                Response::builder()
                    .status(429)
                    .header("Retry-After", "7")
                    .body(body)
                    .unwrap(),
            )
        });
        let client = kube::Client::new(retry_after_into_status(service), "default");
        let api: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::default_namespaced(client);
        let err = api.get("x").await.unwrap_err();
        assert_eq!(
            classify(&err),
            Disposition::Retry {
                reason: crate::reason::Reason::TooManyRequests,
                retry_after: Some(Duration::from_secs(7))
            }
        );
    }

    #[test]
    fn patch_should_keep_a_retry_after_already_in_the_body() {
        let body = Bytes::from_static(br#"{"code":429,"details":{"retryAfterSeconds":3}}"#);
        assert_eq!(patch_status_body(&body, 9), None);
        let not_json = Bytes::from_static(b"too many requests");
        assert_eq!(patch_status_body(&not_json, 9), None);
    }
}
