//! The readiness state machine behind `/readyz`.
//!
//! Why readiness is more than "the process is up": Kubeflow's metadata-writer could sit on a dead
//! connection for 33 minutes looking healthy. A podline daemon is ready only while
//! - the watch is established (the first LIST or resume succeeded and no fatal error since),
//! - the watch made progress (an event, a bookmark or a successful reconnect) within its stall
//!   bound (twice the client timeout: an idle watch reconnects every client timeout, so a healthy
//!   idle watch always makes progress within that bound), and
//! - the sink ("store") is writable: the last write succeeded, or, while there is nothing to
//!   write, the daemon's last probe of it did. Each daemon decides what writable means for its
//!   sink (the SQL recorder: a real write, also probed while idle; KFP mode: MLMD answered).
//!
//! A daemon reports into [`Health`] as things happen; `/readyz` reads [`Health::readiness`].
//! `/healthz` is liveness: it answers as long as the runtime serves requests.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::metrics::Metrics;

/// The readiness problem reported while the sink is not writable.
const STORE_PROBLEM: &str = "store not writable";

/// A daemon's live health state, updated by its watch and writer tasks, read by `/readyz`; it
/// also carries the [`Metrics`] served on `/metrics`, so one handle is all the server needs.
#[derive(Debug)]
pub struct Health {
    metrics: Arc<Metrics>,
    watch_established: AtomicBool,
    store_writable: AtomicBool,
    /// When the sink was last found writable or not (by a write or a probe).
    store_checked: Mutex<Instant>,
    last_progress: Mutex<Instant>,
    stall_after: Duration,
}

/// Why a daemon is (not) ready; rendered by `/readyz`.
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
    /// A new state: not ready until the watch is established and a write succeeded or the sink
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

    /// The last sink write (or probe) succeeded (or failed).
    pub fn set_store_writable(&self, writable: bool) {
        self.store_writable.store(writable, Ordering::Relaxed);
        if let Ok(mut checked) = self.store_checked.lock() {
            *checked = Instant::now();
        }
    }

    /// Whether the last write or probe found the sink writable, so a prober can log a failure
    /// once per outage rather than at every probe.
    pub fn is_store_writable(&self) -> bool {
        self.store_writable.load(Ordering::Relaxed)
    }

    /// How long ago a write or a probe last told whether the sink is writable, so a prober can
    /// skip its probe while writes keep reporting.
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
        if !self.is_store_writable() {
            problems.push(STORE_PROBLEM.to_owned());
        }
        Readiness { problems }
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
        assert!(!h.is_store_writable());
        h.set_store_writable(true);
        assert!(h.is_store_writable());
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

    #[tokio::test(start_paused = true)]
    async fn the_store_verdict_ages_until_the_next_write_or_probe() {
        let h = Health::new(Arc::new(Metrics::new()), Duration::from_secs(4));
        h.set_store_writable(false);
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(h.store_verdict_age(), Duration::from_secs(3));
        h.set_store_writable(true);
        assert_eq!(h.store_verdict_age(), Duration::ZERO);
    }
}
