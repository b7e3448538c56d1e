//! The Prometheus metrics every podline daemon serves, and the one registry they are served from.
//!
//! Why these: an operator must be able to tell from `/metrics` alone whether a daemon is keeping
//! up (events by type, queue depth, write latency, last event age), whether the API is
//! misbehaving (reconnects by reason, relists) and whether its sink is (sink errors). Kubeflow's
//! metadata-writer had none, so a stuck writer looked healthy for 33 minutes.
//!
//! Every name starts with `podline_record_`: both daemons are modes of `podline record`, and
//! their names must stay stable for the dashboards and alerts built on them. A daemon registers
//! its own metrics into the same registry with [`Metrics::with_extra`], so one `/metrics` page
//! serves them all.

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::time::Instant;

/// The prefix of every metric a podline daemon exports.
const PREFIX: &str = "podline_record";

/// One label set with a single label, e.g. `type="apply"`.
type OneLabel = [(&'static str, String); 1];

/// The registry and the watch -> queue -> sink metrics both daemons export.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    events: Family<OneLabel, Counter>,
    reconnects: Family<OneLabel, Counter>,
    relists: Counter,
    skipped: Family<OneLabel, Counter>,
    last_event_age: Gauge<f64, AtomicU64>,
    last_event: Mutex<Option<Instant>>,
    queue_depth: Gauge,
    queue_overflows: Counter,
    write_latency: Histogram,
    batch_size: Histogram,
    commit_lag: Histogram,
    store_errors: Family<OneLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates and registers the pipeline's metrics, and nothing else.
    pub fn new() -> Self {
        Self::with_extra(|_| {})
    }

    /// Creates and registers the pipeline's metrics, then those `extra` registers in the same
    /// registry (under the same `podline_record_` prefix; use a sub-registry for a further one,
    /// as KFP mode does with `kfp_`), so one `/metrics` serves them all. Metrics are rendered in
    /// the order they were registered.
    pub fn with_extra(extra: impl FnOnce(&mut Registry)) -> Self {
        let mut registry = Registry::with_prefix(PREFIX);
        let events = Family::<OneLabel, Counter>::default();
        let reconnects = Family::<OneLabel, Counter>::default();
        let relists = Counter::default();
        let skipped = Family::<OneLabel, Counter>::default();
        let last_event_age = Gauge::<f64, AtomicU64>::default();
        let queue_depth = Gauge::default();
        let queue_overflows = Counter::default();
        // 0.5 ms .. ~8 s: a batch commit is normally a few ms; seconds mean a sick disk or DB.
        let write_latency = Histogram::new(exponential_buckets(0.0005, 2.0, 15));
        let batch_size = Histogram::new(exponential_buckets(1.0, 2.0, 14));
        let commit_lag = Histogram::new(exponential_buckets(0.001, 2.0, 15));
        let store_errors = Family::<OneLabel, Counter>::default();
        registry.register(
            "watch_events",
            "Watch events received, by type (init, init_apply, init_done, apply, delete, bookmark)",
            events.clone(),
        );
        registry.register(
            "watch_reconnects",
            "Watch reconnects, by reason (server_timeout, client_timeout, reset, http_5xx, gone, ...)",
            reconnects.clone(),
        );
        registry.register(
            "watch_relists",
            "Full LISTs of the watched pods (the first one and every one after a 410 Gone)",
            relists.clone(),
        );
        registry.register(
            "watch_skipped",
            "Watch lines and LIST items that did not decode and were skipped (the watch went on \
             past them), by kind (object, not_an_event, not_json, too_long)",
            skipped.clone(),
        );
        registry.register(
            "last_event_age_seconds",
            "Seconds since the last watch event or bookmark",
            last_event_age.clone(),
        );
        registry.register(
            "queue_depth",
            "Pods with changes waiting to be written (coalesced per pod)",
            queue_depth.clone(),
        );
        registry.register(
            "queue_overflows",
            "Times the queue was over its bound and the watch waited for the writer",
            queue_overflows.clone(),
        );
        registry.register(
            "write_latency_seconds",
            "Duration of one store transaction (a batch of pod changes plus the resume point)",
            write_latency.clone(),
        );
        registry.register(
            "batch_ops",
            "Pod changes per store transaction",
            batch_size.clone(),
        );
        registry.register(
            "event_to_commit_seconds",
            "Time from the oldest change of a batch entering the queue to its commit",
            commit_lag.clone(),
        );
        registry.register(
            "store_errors",
            "Failed store writes, by kind (retryable, rejected)",
            store_errors.clone(),
        );
        extra(&mut registry);
        Self {
            registry,
            events,
            reconnects,
            relists,
            skipped,
            last_event_age,
            last_event: Mutex::new(None),
            queue_depth,
            queue_overflows,
            write_latency,
            batch_size,
            commit_lag,
            store_errors,
        }
    }

    /// Counts one watch event of `kind` and resets the last-event age.
    pub fn event(&self, kind: &'static str) {
        self.events
            .get_or_create(&[("type", kind.to_owned())])
            .inc();
        if let Ok(mut last) = self.last_event.lock() {
            *last = Some(Instant::now());
        }
    }

    /// Counts one reconnect of the watch, labelled by why it reconnected (the watch's reason
    /// label, e.g. `client_timeout`).
    pub fn reconnect(&self, reason: &str) {
        self.reconnects
            .get_or_create(&[("reason", reason.to_owned())])
            .inc();
    }

    /// Counts one full LIST.
    pub fn relist(&self) {
        self.relists.inc();
    }

    /// Counts one watch line or LIST item that did not decode and was skipped, labelled by how
    /// it failed (the label of podline-client's `SkipKind`: `object`, `not_an_event`, ...).
    pub fn skipped(&self, kind: &str) {
        self.skipped
            .get_or_create(&[("kind", kind.to_owned())])
            .inc();
    }

    /// Sets the current queue depth.
    pub fn queue_depth(&self, depth: usize) {
        self.queue_depth
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// Counts one time the queue was over its bound.
    pub fn queue_overflow(&self) {
        self.queue_overflows.inc();
    }

    /// Records one committed transaction: its duration, how many pod changes it carried, and how
    /// long its oldest change waited since the watch delivered it.
    pub fn write(&self, seconds: f64, ops: usize, lag: Option<f64>) {
        self.write_latency.observe(seconds);
        self.batch_size.observe(ops as f64);
        if let Some(lag) = lag {
            self.commit_lag.observe(lag);
        }
    }

    /// Counts one failed sink write of `kind` ("retryable" or "rejected").
    pub fn store_error(&self, kind: &'static str) {
        self.store_errors
            .get_or_create(&[("kind", kind.to_owned())])
            .inc();
    }

    /// Seconds since the last watch event, if any arrived yet.
    pub fn last_event_age(&self) -> Option<f64> {
        let last = *self.last_event.lock().ok()?;
        last.map(|at| at.elapsed().as_secs_f64())
    }

    /// Renders every registered metric in the Prometheus text format (refreshing the last-event
    /// age first).
    pub fn render(&self) -> String {
        if let Some(age) = self.last_event_age() {
            self.last_event_age.set(age);
        }
        let mut out = String::new();
        // Writing into a String cannot fail; an error here would be a bug in an encoder.
        if let Err(err) = encode(&mut out, &self.registry) {
            tracing::error!(%err, "cannot encode metrics");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn render_shows_every_family_with_labels() {
        let m = Metrics::new();
        m.event("apply");
        m.event("apply");
        m.reconnect("client_timeout");
        m.relist();
        m.skipped("object");
        m.queue_depth(7);
        m.queue_overflow();
        m.write(0.002, 10, Some(0.01));
        m.store_error("retryable");
        let text = m.render();
        for needle in [
            "podline_record_watch_events_total{type=\"apply\"} 2",
            "podline_record_watch_reconnects_total{reason=\"client_timeout\"} 1",
            "podline_record_watch_relists_total 1",
            "podline_record_watch_skipped_total{kind=\"object\"} 1",
            "podline_record_queue_depth 7",
            "podline_record_queue_overflows_total 1",
            "podline_record_write_latency_seconds_count 1",
            "podline_record_batch_ops_count 1",
            "podline_record_event_to_commit_seconds_count 1",
            "podline_record_store_errors_total{kind=\"retryable\"} 1",
            "podline_record_last_event_age_seconds",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }

    #[test]
    fn extra_metrics_are_served_after_the_pipelines_own() {
        let extra = Counter::<u64>::default();
        let registered = extra.clone();
        let m = Metrics::with_extra(|r| {
            r.sub_registry_with_prefix("kfp")
                .register("pods", "Pods recorded", registered)
        });
        extra.inc();
        let text = m.render();
        assert!(text.contains("podline_record_kfp_pods_total 1"), "{text}");
        let own = text.find("podline_record_event_to_commit_seconds").unwrap();
        let added = text.find("podline_record_kfp_pods").unwrap();
        assert!(own < added, "registration order is render order:\n{text}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_event_age_is_refreshed_at_each_render() {
        let m = Metrics::new();
        assert_eq!(m.last_event_age(), None);
        m.event("bookmark");
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(
            m.render()
                .contains("podline_record_last_event_age_seconds 3.0"),
            "{}",
            m.render()
        );
    }
}
