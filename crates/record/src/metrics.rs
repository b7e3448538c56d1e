//! The recorder's own Prometheus metrics, served next to the ones every daemon exports.
//!
//! The watch, queue and write metrics are [`podline_daemon::Metrics`]'s (KFP mode exports the
//! same); these are the ones only the SQL recorder has: pod objects it could not record, and its
//! finalizer's adds, removals and failures. [`RecorderMetrics::register`] puts them into the
//! daemon's registry, so `/metrics` shows them under the same `podline_record_` prefix.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// One label set with a single label, e.g. `reason="terminal"`.
type OneLabel = [(&'static str, String); 1];
/// A label set with two labels, e.g. `operation="remove",reason="forbidden"`.
type TwoLabels = [(&'static str, String); 2];

/// The counters only the SQL recorder reports. Create with `default()`, then pass
/// [`register`](RecorderMetrics::register) to [`podline_daemon::Metrics::with_extra`].
#[derive(Debug, Default)]
pub struct RecorderMetrics {
    skipped_objects: Counter,
    finalizers_added: Counter,
    finalizers_removed: Family<OneLabel, Counter>,
    finalizer_errors: Family<TwoLabels, Counter>,
    finalizer_sweeps: Counter,
    finalizer_overlaps: Counter,
}

impl RecorderMetrics {
    /// Registers every counter in `registry` (the daemon's, already prefixed `podline_record_`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "skipped_objects",
            "Pod objects that could not be recorded (a spec or status the Pod model can't read, no \
             uid, bad resourceVersion) and were skipped; objects the watch itself could not decode \
             are in watch_skipped",
            self.skipped_objects.clone(),
        );
        registry.register(
            "finalizers_added",
            "Pods the recorder's finalizer was added to",
            self.finalizers_added.clone(),
        );
        registry.register(
            "finalizers_removed",
            "Pods the recorder's finalizer was removed from, by reason (terminal, never_ran, \
             stopped, overdue, out_of_scope)",
            self.finalizers_removed.clone(),
        );
        registry.register(
            "finalizer_errors",
            "Failed finalizer patches, by operation (add, remove) and reason (forbidden, \
             server_error, ...); failed removals are retried",
            self.finalizer_errors.clone(),
        );
        registry.register(
            "finalizer_sweeps",
            "Start-up finalizer sweeps done (each lists the pods' metadata once)",
            self.finalizer_sweeps.clone(),
        );
        registry.register(
            "finalizer_overlapping_pods",
            "Pods a sweep found in this recorder's scope carrying another recorder's finalizer \
             (another shard's scope overlaps this one's)",
            self.finalizer_overlaps.clone(),
        );
    }

    /// Counts one start-up sweep done, and the pods of its scope it found held by another
    /// recorder too (overlapping scopes: each holds and records them, each releases only its
    /// own finalizer, so nothing is lost, but the work is doubled).
    pub fn finalizer_sweep_done(&self, overlapping: usize) {
        self.finalizer_sweeps.inc();
        self.finalizer_overlaps
            .inc_by(u64::try_from(overlapping).unwrap_or(u64::MAX));
    }

    /// Counts one pod object that was skipped because it could not be recorded.
    pub fn skipped_object(&self) {
        self.skipped_objects.inc();
    }

    /// Counts one pod the finalizer was added to.
    pub fn finalizer_added(&self) {
        self.finalizers_added.inc();
    }

    /// Counts one pod the finalizer was removed from, labelled by why it was released.
    pub fn finalizer_removed(&self, reason: &'static str) {
        self.finalizers_removed
            .get_or_create(&[("reason", reason.to_owned())])
            .inc();
    }

    /// Counts one failed finalizer patch (`operation`: add or remove; `reason`: the client's
    /// retry classification label).
    pub fn finalizer_error(&self, operation: &'static str, reason: &'static str) {
        self.finalizer_errors
            .get_or_create(&[
                ("operation", operation.to_owned()),
                ("reason", reason.to_owned()),
            ])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use podline_client::watch::Reason;
    use podline_daemon::Metrics;

    use super::*;

    /// The recorder's counters and the shared ones on one page, in the order they always had.
    #[test]
    fn the_recorders_counters_render_after_the_shared_ones() {
        let own = RecorderMetrics::default();
        let m = Metrics::with_extra(|r| own.register(r));
        m.event("apply");
        m.reconnect(Reason::ClientTimeout.as_str());
        own.skipped_object();
        own.finalizer_added();
        own.finalizer_removed("terminal");
        own.finalizer_error("remove", "forbidden");
        own.finalizer_sweep_done(2);
        let text = m.render();
        let mut at = 0;
        for needle in [
            "podline_record_watch_events_total{type=\"apply\"} 1",
            "podline_record_watch_reconnects_total{reason=\"client_timeout\"} 1",
            "podline_record_skipped_objects_total 1",
            "podline_record_finalizers_added_total 1",
            "podline_record_finalizers_removed_total{reason=\"terminal\"} 1",
            "podline_record_finalizer_errors_total{operation=\"remove\",reason=\"forbidden\"} 1",
            "podline_record_finalizer_sweeps_total 1",
            "podline_record_finalizer_overlapping_pods_total 2",
        ] {
            let found = text[at..].find(needle);
            assert!(found.is_some(), "missing {needle} (in order) in\n{text}");
            at += found.unwrap_or_default();
        }
    }
}
