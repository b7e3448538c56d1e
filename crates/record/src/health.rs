//! `/metrics`, `/healthz` and `/readyz` for the recorder daemon (axum).
//!
//! Why readiness is more than "the process is up": Kubeflow's writer could sit on a dead
//! connection for 33 minutes looking healthy. The recorder is ready only while
//! - the watch is established (the first LIST or resume succeeded and no fatal error since),
//! - the watch made progress (an event, a bookmark or a successful reconnect) within its stall
//!   bound (twice the client timeout: an idle watch reconnects every client timeout, so a healthy
//!   idle watch always makes progress within that bound), and
//! - the store is writable: the last write succeeded, or, while there is nothing to write, the
//!   last periodic probe ([`probe_store`]: a real write, bounded in time) did; so a database that
//!   went away is noticed within one probe interval even when the recorder is idle.
//!
//! A SQLite disk that fills up (or goes read-only) makes every write fail, so the store part
//! turns false at the first failed write; the store replaces the connections that saw the fault,
//! so the first write (or probe) after the disk recovers succeeds and readiness comes back within
//! one retry period (the writer's backoff, at most its cap) without a restart.
//!
//! `/healthz` is liveness: it answers as long as the runtime serves requests.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use podline_store::Store;

use crate::metrics::Metrics;

/// The recorder's live health state, updated by the watch and writer tasks, read by `/readyz`.
#[derive(Debug)]
pub struct Health {
    metrics: Arc<Metrics>,
    watch_established: AtomicBool,
    store_writable: AtomicBool,
    /// When the store was last found writable or not (by a write or a probe).
    store_checked: Mutex<Instant>,
    last_progress: Mutex<Instant>,
    stall_after: Duration,
}

/// Why the recorder is (not) ready; rendered by `/readyz`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// Reasons it is not ready; empty means ready.
    pub problems: Vec<String>,
}

impl Readiness {
    /// Whether nothing is wrong.
    pub fn is_ready(&self) -> bool {
        self.problems.is_empty()
    }
}

impl Health {
    /// A new state: not ready until the watch is established and a write succeeded or the store
    /// answered. `stall_after` is how long the watch may go without progress (2 x client timeout).
    pub fn new(metrics: Arc<Metrics>, stall_after: Duration) -> Self {
        Self {
            metrics,
            watch_established: AtomicBool::new(false),
            store_writable: AtomicBool::new(false),
            store_checked: Mutex::new(Instant::now()),
            last_progress: Mutex::new(Instant::now()),
            stall_after,
        }
    }

    /// The metrics this state serves on `/metrics`.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The watch is (or is no longer) established.
    pub fn set_watch_established(&self, established: bool) {
        self.watch_established.store(established, Ordering::Relaxed);
        if established {
            self.progress();
        }
    }

    /// The watch made progress (event, bookmark, reconnect): resets the stall clock.
    pub fn progress(&self) {
        if let Ok(mut last) = self.last_progress.lock() {
            *last = Instant::now();
        }
    }

    /// The last store write (or probe) succeeded (or failed).
    pub fn set_store_writable(&self, writable: bool) {
        self.store_writable.store(writable, Ordering::Relaxed);
        if let Ok(mut checked) = self.store_checked.lock() {
            *checked = Instant::now();
        }
    }

    /// How long ago a write or a probe last told whether the store is writable.
    pub fn store_verdict_age(&self) -> Duration {
        self.store_checked
            .lock()
            .map(|checked| checked.elapsed())
            .unwrap_or_default()
    }

    /// The current readiness and what is wrong, if anything.
    pub fn readiness(&self) -> Readiness {
        let mut problems = Vec::new();
        if !self.watch_established.load(Ordering::Relaxed) {
            problems.push("watch not established".to_owned());
        } else {
            let since = self
                .last_progress
                .lock()
                .map(|last| last.elapsed())
                .unwrap_or_default();
            if since > self.stall_after {
                problems.push(format!(
                    "watch stalled: no event or reconnect for {:.1}s (bound {:.1}s)",
                    since.as_secs_f64(),
                    self.stall_after.as_secs_f64()
                ));
            }
        }
        if !self.store_writable.load(Ordering::Relaxed) {
            problems.push(STORE_PROBLEM.to_owned());
        }
        Readiness { problems }
    }
}

/// Keeps the store part of readiness true to the store while the writer has nothing to write:
/// every `every`, unless a write reported on the store within that time, runs [`Store::health`]
/// (a real write, bounded in time) and records the verdict. Returns when `stop` is cancelled.
pub async fn probe_store(
    store: Arc<dyn Store>,
    health: Arc<Health>,
    every: Duration,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        if health.store_verdict_age() < every {
            continue; // the writer just found out
        }
        match store.health().await {
            Ok(()) => health.set_store_writable(true),
            Err(err) => {
                if health
                    .readiness()
                    .problems
                    .iter()
                    .all(|p| p != STORE_PROBLEM)
                {
                    tracing::warn!(error = %err, "store probe failed: not ready until it recovers");
                }
                health.set_store_writable(false);
            }
        }
    }
}

/// The readiness problem reported while the store is not writable.
const STORE_PROBLEM: &str = "store not writable";

/// The router serving `/metrics`, `/healthz` and `/readyz` from `health`.
pub fn router(health: Arc<Health>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(health)
}

/// Binds `addr` (e.g. `127.0.0.1:9464`), so a bad `--listen` fails at startup, not later.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves [`router`] on `listener` until `shutdown` is cancelled.
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
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        health.metrics.render(),
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
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn ready_only_with_watch_established_fresh_and_store_writable() {
        let h = Health::new(Arc::new(Metrics::new()), Duration::from_secs(4));
        assert!(!h.readiness().is_ready());
        h.set_watch_established(true);
        assert_eq!(h.readiness().problems, vec!["store not writable"]);
        h.set_store_writable(true);
        assert!(h.readiness().is_ready());
        tokio::time::advance(Duration::from_secs(5)).await;
        let r = h.readiness();
        assert!(!r.is_ready());
        assert!(r.problems[0].starts_with("watch stalled"), "{r:?}");
        h.progress();
        assert!(h.readiness().is_ready());
        h.set_watch_established(false);
        assert_eq!(h.readiness().problems, vec!["watch not established"]);
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
        let get = |path: &'static str| async move {
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
        };
        assert!(get("/healthz").await.starts_with("HTTP/1.1 200"));
        let not_ready = get("/readyz").await;
        assert!(not_ready.starts_with("HTTP/1.1 503"), "{not_ready}");
        assert!(not_ready.contains("watch not established"));
        h.set_watch_established(true);
        h.set_store_writable(true);
        assert!(get("/readyz").await.starts_with("HTTP/1.1 200"));
        assert!(
            get("/metrics")
                .await
                .contains("podline_record_watch_events_total{type=\"apply\"} 1")
        );
        stop.cancel();
        server.await.unwrap().unwrap();
    }
}
