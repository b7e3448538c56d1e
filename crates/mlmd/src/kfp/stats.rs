//! KFP mode's counters ([`SinkStats`]): what the sink and its releaser count, served on
//! `/metrics` under `podline_record_kfp_`. A leaf both count into, so neither depends on the
//! other for it.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

/// KFP mode's counters, served on `/metrics` as `podline_record_kfp_*`
/// (see [`SinkStats::register`]) and read by tests and benchmarks.
#[derive(Debug, Default)]
pub struct SinkStats {
    /// Pod events recorded.
    pub recorded: Counter,
    /// Pod events skipped (not Argo, already written, TFX, v2, incomplete).
    pub skipped: Counter,
    /// Pod events MLMD rejected.
    pub failed: Counter,
    /// MLMD retries after retryable errors.
    pub mlmd_retries: Counter,
    /// Pod patches applied and verified.
    pub patches: Counter,
    /// Pod patches that failed after all attempts.
    pub patch_failures: Counter,
    /// Warnings about unreadable pod data.
    pub warnings: Counter,
    /// Executions marked CANCELED because their pod vanished unseen.
    pub canceled_vanished: Counter,
    /// Finalizers added to pods being recorded.
    pub finalizers_added: Counter,
    /// Finalizers removed (final state committed, or a pod the writer will not record).
    pub finalizers_removed: Counter,
    /// Finalizer adds or removals that failed after all attempts (the pod's next event
    /// tries again).
    pub finalizer_failures: Counter,
}

impl SinkStats {
    /// Register the counters in `registry` under the `kfp_` prefix (pass it
    /// to [`Metrics::with_extra`](podline_daemon::Metrics::with_extra)).
    pub fn register(&self, registry: &mut Registry) {
        let kfp = registry.sub_registry_with_prefix("kfp");
        let counters: [(&str, &str, &Counter); 11] = [
            (
                "pods_recorded",
                "Pod events recorded into MLMD",
                &self.recorded,
            ),
            (
                "pods_skipped",
                "Pod events not recorded (not Argo, already written, TFX, v2)",
                &self.skipped,
            ),
            (
                "pods_failed",
                "Pod events MLMD rejected (logged, stream goes on)",
                &self.failed,
            ),
            (
                "mlmd_retries",
                "MLMD calls retried after a retryable error",
                &self.mlmd_retries,
            ),
            (
                "pod_patches",
                "Pod marker patches applied and verified",
                &self.patches,
            ),
            (
                "pod_patch_failures",
                "Pod marker patches that failed after all attempts",
                &self.patch_failures,
            ),
            (
                "pod_warnings",
                "Unreadable pod fields (recorded with what could be read)",
                &self.warnings,
            ),
            (
                "vanished_canceled",
                "Executions marked CANCELED because their pod vanished while unwatched",
                &self.canceled_vanished,
            ),
            (
                "finalizers_added",
                "Finalizers added to pods being recorded (held until their final state is in MLMD)",
                &self.finalizers_added,
            ),
            (
                "finalizers_removed",
                "Finalizers removed once the pod's final state was in MLMD (or from pods not recorded)",
                &self.finalizers_removed,
            ),
            (
                "finalizer_failures",
                "Finalizer adds or removals that failed after all attempts (retried on the pod's next event)",
                &self.finalizer_failures,
            ),
        ];
        for (name, help, counter) in counters {
            kfp.register(name, help, counter.clone());
        }
    }
}
