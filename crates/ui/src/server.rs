//! The router and the server loop.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse as _;
use axum::routing::get;
use podline_store::Store;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{api, assets, live, pages};

/// What the UI serves from and how often live pages look for changes.
#[derive(Clone)]
pub struct UiConfig {
    /// The store to read (open it with `podline_store::open_read_only`).
    pub store: Arc<dyn Store>,
    /// How often the event stream asks the store what changed (default 1 s).
    pub poll: Duration,
    /// Host names served besides the loopback names (`localhost`, `127.0.0.1`, `[::1]`) and
    /// the listen address: every other `Host` is refused, so a web page whose name an attacker
    /// re-points at this server (DNS rebinding) cannot read it. Any port.
    pub allowed_hosts: Vec<String>,
    /// Appended to the refusal text: how the operator allows another name.
    pub host_hint: Option<String>,
}

impl UiConfig {
    /// Defaults for `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            poll: Duration::from_secs(1),
            allowed_hosts: Vec::new(),
            host_hint: None,
        }
    }

    /// Serves these host names too (any port); see [`UiConfig::allowed_hosts`].
    #[must_use]
    pub fn allow_hosts(mut self, hosts: impl IntoIterator<Item = String>) -> Self {
        self.allowed_hosts.extend(
            hosts
                .into_iter()
                .map(|host| host_name(&host).to_ascii_lowercase()),
        );
        self
    }

    /// Sets [`UiConfig::host_hint`].
    #[must_use]
    pub fn host_hint(mut self, hint: impl Into<String>) -> Self {
        self.host_hint = Some(hint.into());
        self
    }

    /// Sets the change poll interval.
    #[must_use]
    pub fn poll(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }
}

/// The state handlers share.
pub(crate) type State = axum::extract::State<UiConfig>;

/// Only scripts, styles and connections from this server; no framing, no sniffing.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

/// Every route, `GET` only: pages, the JSON API, the event stream and the embedded assets.
/// Requests whose `Host` is not allowed ([`UiConfig::allowed_hosts`]) get 403.
pub fn router(config: UiConfig) -> Router {
    let hosts = Arc::new(HostCheck {
        allowed: config.allowed_hosts.clone(),
        hint: config.host_hint.clone(),
    });
    Router::new()
        .route("/", get(pages::runs::page))
        .route("/runs/{namespace}/{run}", get(pages::run::page))
        .route("/pods/{uid}", get(pages::pod::page))
        .route("/failures", get(pages::failures::page))
        .route("/api/runs", get(api::runs))
        .route("/api/runs/{namespace}/{run}", get(api::run))
        .route("/api/pods", get(api::pods))
        .route("/api/pods/{uid}", get(api::pod))
        .route("/api/failures", get(api::failures))
        .route("/api/counts", get(api::counts))
        .route("/api/changes", get(api::changes))
        .route("/api/events", get(live::events))
        .route("/static/{file}", get(assets::serve))
        .fallback(pages::not_found)
        .layer(axum::middleware::from_fn(move |request, next| {
            let hosts = Arc::clone(&hosts);
            async move { hosts.check(request, next).await }
        }))
        .layer(axum::middleware::map_response(secure_headers))
        .with_state(config)
}

/// The `Host` allow-list (DNS rebinding protection).
struct HostCheck {
    /// Lower-case names besides the loopback ones.
    allowed: Vec<String>,
    hint: Option<String>,
}

impl HostCheck {
    fn allows(&self, host: &str) -> bool {
        let name = host_name(host).to_ascii_lowercase();
        matches!(name.as_str(), "localhost" | "127.0.0.1" | "[::1]")
            || self.allowed.contains(&name)
    }

    async fn check(
        &self,
        request: axum::extract::Request,
        next: axum::middleware::Next,
    ) -> axum::response::Response {
        // HTTP/1.1 sends Host; HTTP/2 may send only the :authority of the URI.
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()));
        match host {
            Some(host) if self.allows(&host) => next.run(request).await,
            host => {
                let shown = host.map_or_else(|| "(none)".to_owned(), |h| format!("{h:?}"));
                let mut text = format!(
                    "podline ui does not serve the host {shown}: only localhost, 127.0.0.1, \
                     [::1], the listen address and explicitly allowed names are served (a guard \
                     against DNS rebinding)"
                );
                if let Some(hint) = &self.hint {
                    text.push_str("; ");
                    text.push_str(hint);
                }
                text.push('\n');
                (
                    axum::http::StatusCode::FORBIDDEN,
                    [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                    text,
                )
                    .into_response()
            }
        }
    }
}

/// The name part of a `Host` value: `[::1]:8080` -> `[::1]`, `example.com:80` -> `example.com`.
fn host_name(host: &str) -> &str {
    let host = host.trim();
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => host,
    }
}

async fn secure_headers(mut response: axum::response::Response) -> axum::response::Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// Serves the UI on `listener` until `shutdown` is cancelled. Open event streams end at
/// shutdown too.
pub async fn serve(
    listener: TcpListener,
    config: UiConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    // The address it listens on is a name it serves (an unspecified one, 0.0.0.0, is not a
    // name anyone browses to; a routable one is).
    let local = listener.local_addr()?;
    let listen_name = match local.ip() {
        std::net::IpAddr::V4(ip) => ip.to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
    };
    let app = router(config.allow_hosts([listen_name]));
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}
