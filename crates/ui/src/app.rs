//! The router: every route, the `Host` guard and the security headers, assembled over the
//! shared [`UiConfig`]. This is the whole UI as a [`Router`], so tests drive it in-process
//! (`tower::ServiceExt::oneshot`) and [`crate::server`] only binds and serves it.

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::routing::get;

use crate::host::HostCheck;
use crate::state::UiConfig;
use crate::{api, assets, live, pages};

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

/// Adds the Content-Security-Policy and the no-sniff and no-referrer headers to every response.
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
