//! The router and the server loop.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, header};
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
}

impl UiConfig {
    /// Defaults for `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            poll: Duration::from_secs(1),
        }
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
pub fn router(config: UiConfig) -> Router {
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
        .layer(axum::middleware::map_response(secure_headers))
        .with_state(config)
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
    let app = router(config);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}
