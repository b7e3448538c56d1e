//! The HTTP server for operators: `/metrics`, `/healthz` and `/readyz` from one [`Health`].
//!
//! [`router`] is kept apart from [`serve`] so tests can drive it in-process; [`bind`] is apart
//! from [`serve`] so a daemon binds first and an address in use fails at startup, before anything
//! is connected or created.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::health::Health;

/// The content type of `/metrics`: the OpenMetrics text format prometheus-client writes.
const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The router serving `/metrics`, `/healthz` and `/readyz` from `health`.
pub fn router(health: Arc<Health>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(health)
}

/// Binds `addr` (e.g. `127.0.0.1:9464`), so a bad or busy address fails at startup, not later.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves [`router`] on `listener` until `shutdown` is cancelled, then lets requests in flight
/// finish and returns.
pub async fn serve(
    listener: TcpListener,
    health: Arc<Health>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(health))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

async fn metrics(State(health): State<Arc<Health>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)],
        health.metrics().render(),
    )
}

async fn readyz(State(health): State<Arc<Health>>) -> impl IntoResponse {
    let readiness = health.readiness();
    if readiness.is_ready() {
        (StatusCode::OK, "ok\n".to_owned())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}\n", readiness.problems.join("; ")),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Metrics;

    /// One `GET path` over a real socket; the whole HTTP/1.1 response.
    async fn get(addr: SocketAddr, path: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn endpoints_answer_over_http() {
        let h = Arc::new(Health::new(
            Arc::new(Metrics::new()),
            Duration::from_secs(60),
        ));
        h.metrics().event("apply");
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let server = tokio::spawn(serve(listener, h.clone(), stop.clone()));
        let healthz = get(addr, "/healthz").await;
        assert!(healthz.starts_with("HTTP/1.1 200"), "{healthz}");
        assert!(healthz.ends_with("\r\n\r\nok\n"), "{healthz}");
        let not_ready = get(addr, "/readyz").await;
        assert!(not_ready.starts_with("HTTP/1.1 503"), "{not_ready}");
        assert!(
            not_ready.ends_with("not ready: watch not established; store not writable\n"),
            "{not_ready}"
        );
        h.set_watch_established(true);
        h.set_store_writable(true);
        let ready = get(addr, "/readyz").await;
        assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
        assert!(ready.ends_with("\r\n\r\nok\n"), "{ready}");
        let metrics = get(addr, "/metrics").await;
        assert!(
            metrics.contains(&format!("content-type: {METRICS_CONTENT_TYPE}")),
            "{metrics}"
        );
        assert!(
            metrics.contains("podline_record_watch_events_total{type=\"apply\"} 1"),
            "{metrics}"
        );
        stop.cancel();
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn binding_a_busy_address_fails_at_once() {
        let taken = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let err = bind(taken.local_addr().unwrap()).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    }
}
