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
//!   clone it. Connecting sends no request: while the client has no live connection, the
//!   requests made at once wait for the first one's dial and share its HTTP/2 connection.
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
//! - an exec credential plugin (`users[].user.exec`) is run by podline, not by kube: each run
//!   bounded by the client timeout, its output never quoted in a message, its token refreshed
//!   before it expires (`exec`).
//!
//! The layer stack is assembled in [`client_from_config`] only.
//!
//! One job per file: `kubeconfig` finds and loads the configuration (kubectl's order, the
//! context, the CA and proxy it names), `exec` runs exec credential plugins, `stack` assembles
//! the client's layers, `retry_after`
//! is the layer that keeps a `Retry-After` header, `source` and `error` say where the
//! configuration came from and what went wrong; this module ties them into [`connect`].

mod error;
mod kubeconfig;
mod retry_after;
mod source;
mod stack;

use std::path::PathBuf;
use std::time::Duration;

use kube::config::Kubeconfig;

pub use crate::exec_plugin::ExecError;
pub(crate) use crate::exec_plugin::ExecTokenLayer;
use crate::exec_plugin::{Credential, ExecPlugin};
pub use error::{ConnectError, KubeconfigText};
use kubeconfig::{Loaded, config_from_kubeconfig, load};
pub use kubeconfig::{Lookup, load_config};
pub use retry_after::copy_retry_after;
pub use source::ConfigSource;
pub use stack::client_from_config;
use stack::client_with_ca;

use crate::ping::Http2Ping;
use crate::timeouts::DEFAULT_CLIENT_TIMEOUT;

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
    /// Bounds each run of the kubeconfig's exec credential plugin (`exec`); `None`: the client
    /// timeout. `podline run` passes its create deadline when that is shorter, so a plugin that
    /// hangs never holds a run past the time it was given to create its pod.
    pub exec_timeout: Option<Duration>,
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
            exec_timeout: None,
        }
    }
}

/// A ready client and what it resolved to.
#[derive(Clone)]
pub struct Connected {
    /// The client, with podline's stack (see the module doc).
    pub client: kube::Client,
    /// The same stack over HTTP/1.1 only, for WebSocket upgrades (`pods/exec`), which the API
    /// server serves only on HTTP/1.1; it opens its own connection per upgrade.
    pub upgrade_client: kube::Client,
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
    let exec = exec_credential(
        &mut config,
        opts.exec_timeout.unwrap_or(opts.client_timeout),
    )
    .await?;
    let upgrade_client = client_with_ca(
        config.clone(),
        opts.client_timeout,
        opts.http2_ping,
        opts.connect_timeout,
        &ca,
        exec.clone(),
        true,
    )?;
    let client = client_with_ca(
        config,
        opts.client_timeout,
        opts.http2_ping,
        opts.connect_timeout,
        &ca,
        exec,
        false,
    )?;
    tracing::debug!(%source, cluster = %cluster_url, %namespace, "kubernetes client ready");
    Ok(Connected {
        client,
        upgrade_client,
        namespace,
        cluster_url,
        source,
    })
}

/// Runs the configuration's exec credential plugin, if kube would use one, in podline's bounded
/// way (see `exec`): a client certificate goes into the configuration for TLS, a token into the
/// auth layer returned (which refreshes it). The plugin is taken out of the configuration either
/// way, so kube never runs it.
async fn exec_credential(
    config: &mut kube::Config,
    timeout: Duration,
) -> Result<Option<ExecTokenLayer>, ConnectError> {
    use base64::Engine as _;
    let Some(plugin) = ExecPlugin::take(&mut config.auth_info, timeout) else {
        return Ok(None);
    };
    match plugin.run().await.map_err(ConnectError::ExecPlugin)? {
        Credential::Token { header, expires } => {
            Ok(Some(ExecTokenLayer::new(plugin, header, expires)))
        }
        Credential::Certificate { certificate, key } => {
            // kube reads the kubeconfig's `*-data` fields as base64 of the PEM.
            let encode = |pem: String| base64::engine::general_purpose::STANDARD.encode(pem);
            let auth = &mut config.auth_info;
            auth.client_certificate = None;
            auth.client_key = None;
            auth.client_certificate_data = Some(encode(certificate));
            auth.client_key_data = Some(encode(key).into());
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = r#"
apiVersion: v1
kind: Config
current-context: a
clusters:
- name: a
  cluster: { server: "http://127.0.0.1:1" }
contexts:
- name: a
  context: { cluster: a, user: u, namespace: team-a }
users:
- name: u
  user: { token: "secret-token" }
"#;

    #[tokio::test]
    async fn connect_should_apply_namespace_override_and_never_print_the_token() {
        let kubeconfig = Kubeconfig::from_yaml(KUBECONFIG).unwrap();
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
}
