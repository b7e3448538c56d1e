//! The KFP sink: pod events in, MLMD records and pod markers out.
//!
//! [`KfpSink::handle`] takes one pod event and never fails the stream:
//! MLMD being down is waited out with full-jitter backoff (forever, one log
//! line per outage), a bad pod is logged with its name and the field that
//! was wrong, and a failed pod patch is retried a few times and then left to
//! the next event (the MLMD side is idempotent, so a later retry is safe).
//! [`KfpSink::cancel_vanished`] marks CANCELED the executions of pods that
//! vanished while nobody watched. [`super::pipeline::run`] feeds it from a
//! pod watch through a keyed work queue.
//!
//! With [`SinkConfig::finalize`], the sink also holds the pods it records
//! with KFP mode's finalizer until their final state is in MLMD (the rules
//! are [`super::finalize`]'s): it adds the finalizer before a pod's first
//! write, and queues its removal on the [`Releaser`] once the execution is
//! terminal.
//!
//! Health and metrics go through `podline-daemon`'s [`Health`] (the
//! `/readyz` and `/metrics` every podline daemon serves, the SQL recorder
//! too): MLMD plays the store's part
//! (writable = reachable, `store_errors` = MLMD errors), and [`SinkStats`]
//! adds the KFP counters under `podline_record_kfp_`.

use std::sync::Arc;
use std::time::Duration;

use backon::BackoffBuilder;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::ObjectMeta;
use podline_client::backoff::FullJitter;
use podline_client::finalizer::{self, Added};
use podline_daemon::{Health, Metrics};
use serde_json::Value as Json;
use tracing::Instrument;

use super::finalize::{
    DeletionEnd, FinalizerFacts, KFP_FINALIZER, carries, should_add, should_release,
};
use super::patch::{Markers, PodPatch};
use super::pod::{KfpPod, Skip};
use super::queue::PodSnapshot;
use super::release::{ReleaseConfig, Releaser};
/// Re-exported at its old path: the counters the sink (and its releaser) count into.
pub use super::stats::SinkStats;
use super::writer::{KfpWriter, Recorded, Written, is_terminal, pod_uid_of};
use crate::error::MlmdError;
use crate::proto::GetContextTypesRequest;

/// Tuning of the sink.
#[derive(Clone, Debug)]
pub struct SinkConfig {
    /// Backoff between MLMD retries (forever) and pod patch retries.
    pub backoff: FullJitter,
    /// Attempts per pod patch (markers, finalizer add or removal) before
    /// leaving it to the next event.
    pub patch_attempts: u32,
    /// Hold recorded pods with KFP mode's finalizer until their final state
    /// is in MLMD (see [`super::finalize`]). Off, no finalizer is added, and
    /// one left from an earlier run is taken off the pods that carry it.
    pub finalize: bool,
    /// The safety valve: a held pod being deleted that shows no end is
    /// recorded as deleted and released this long after the end of its
    /// grace period (default 2 minutes, as the SQL recorder's).
    pub overdue_margin: Duration,
}

impl Default for SinkConfig {
    fn default() -> Self {
        // 200 ms doubling to 30 s: quick recovery from a blip, gentle on a
        // long MLMD outage.
        let backoff =
            const { FullJitter::doubling(Duration::from_millis(200), Duration::from_secs(30)) };
        SinkConfig {
            backoff,
            patch_attempts: 5,
            finalize: false,
            overdue_margin: Duration::from_secs(120),
        }
    }
}

/// What happened to one pod event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not a pod KFP mode records.
    Skipped(Skip),
    /// Recorded; `patched` says whether markers were written on the pod now.
    Recorded {
        /// The ids and state in MLMD.
        recorded: Recorded,
        /// Whether a pod patch was applied (and verified) for this event.
        patched: bool,
        /// Finished, but some inputs' upstream artifacts are not in MLMD
        /// yet, so `metadata_written` was held back: handle the pod again
        /// later (see [`KfpSink::handle_snapshot`]).
        awaiting_inputs: bool,
        /// Held by the finalizer while being deleted, its end not known yet:
        /// handle the pod again after this long if no event came meanwhile
        /// (the safety valve of [`super::finalize`] then ends it).
        recheck_in: Option<Duration>,
    },
    /// Finished and new to the writer, but some inputs' upstream artifacts
    /// are not in MLMD yet: nothing written, handle the pod again later
    /// (see [`KfpSink::handle_snapshot`]).
    AwaitingInputs {
        /// The input URIs without an artifact yet.
        unlinked_inputs: Vec<String>,
    },
    /// MLMD rejected the pod's data (not retryable): logged, stream goes on.
    Failed(String),
}

/// The sink. Share it behind an `Arc` if several tasks feed it.
pub struct KfpSink {
    writer: KfpWriter,
    kube: kube::Client,
    config: SinkConfig,
    stats: Arc<SinkStats>,
    health: Arc<Health>,
    releaser: Releaser,
}

impl std::fmt::Debug for KfpSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KfpSink")
            .field("writer", &self.writer)
            .field("config", &self.config)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

const WTR: (&str, &str, &str, &str) = (
    "argoproj.io",
    "v1alpha1",
    "WorkflowTaskResult",
    "workflowtaskresults",
);

impl KfpSink {
    /// A sink writing through `writer` and patching pods through `kube`.
    /// With its own counters and health (not served anywhere; see
    /// [`KfpSink::observed_by`]).
    pub fn new(writer: KfpWriter, kube: kube::Client, config: SinkConfig) -> Self {
        let stats = Arc::new(SinkStats::default());
        let metrics = Arc::new(Metrics::with_extra(|r| stats.register(r)));
        KfpSink {
            writer,
            kube,
            config,
            stats,
            health: Arc::new(Health::new(metrics, Duration::from_secs(120))),
            releaser: Releaser::default(),
        }
    }

    /// Report into `health` (served on `/readyz` and `/metrics`) and `stats`
    /// (registered in `health`'s metrics).
    pub fn observed_by(mut self, health: Arc<Health>, stats: Arc<SinkStats>) -> Self {
        self.health = health;
        self.stats = stats;
        self
    }

    /// The counters.
    pub fn stats(&self) -> Arc<SinkStats> {
        self.stats.clone()
    }

    /// The health state this sink reports into.
    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// The writer (call counts, direct use).
    pub fn writer(&self) -> &KfpWriter {
        &self.writer
    }

    /// Whether the sink holds pods with KFP mode's finalizer ([`SinkConfig::finalize`]).
    pub fn finalizes(&self) -> bool {
        self.config.finalize
    }

    /// The queue of finalizer removals ([`KfpSink::run_releaser`] works it off).
    pub fn releaser(&self) -> &Releaser {
        &self.releaser
    }

    /// Take KFP mode's finalizer off the pods queued for it until `stop` (then
    /// off those still queued). Run it once, next to the workers; without it,
    /// removals stay queued.
    pub async fn run_releaser(&self, stop: tokio_util::sync::CancellationToken) {
        let config = ReleaseConfig {
            backoff: self.config.backoff.clone(),
            attempts: self.config.patch_attempts,
        };
        self.releaser
            .run(self.kube.clone(), config, self.stats.clone(), stop)
            .await;
    }

    /// A pod KFP mode does not record (already written, TFX, v2) that carries
    /// its finalizer: nothing will be committed for it any more, so the
    /// finalizer is queued for removal.
    pub fn release_skipped(&self, meta: &ObjectMeta) {
        if carries(meta.finalizers.as_deref()) {
            self.request_release(meta.clone());
        }
    }

    /// Once at start, with finalizing on: queue the removal of KFP mode's
    /// finalizer from the pods in `namespace` (`None`: all) that it will never
    /// record (see [`super::release::release_out_of_scope`]). A failure is
    /// logged, not fatal: the pods stay held until a later start or
    /// the operator's clean-up.
    pub async fn release_out_of_scope(&self, namespace: Option<&str>) {
        match super::release::release_out_of_scope(&self.kube, namespace, &self.releaser).await {
            Ok(0) => {}
            Ok(queued) => tracing::info!(
                queued,
                "finalizers found on pods this writer does not record; removing them"
            ),
            Err(e) => tracing::warn!(
                error = %e,
                "cannot list pods for left-over finalizers; those pods stay held"
            ),
        }
    }

    fn request_release(&self, meta: ObjectMeta) {
        if !self.releaser.request(meta) {
            self.stats.finalizer_failures.inc();
            tracing::warn!("the finalizer removal queue is full; the pod's next event asks again");
        }
    }

    /// Wait until MLMD answers a probe, retrying forever with backoff (KFP's
    /// writer gave up after 100 s and crash-looped).
    pub async fn wait_for_mlmd(&self) {
        let mut backoff = self.config.backoff.clone().build();
        let mut logged = false;
        loop {
            match self
                .writer
                .client()
                .get_context_types(GetContextTypesRequest {})
                .await
            {
                Ok(_) => {
                    if logged {
                        tracing::info!("MLMD is reachable again");
                    }
                    self.health.set_store_writable(true);
                    return;
                }
                Err(e) => {
                    if !logged {
                        tracing::warn!(error = %e, "MLMD is not reachable; retrying with backoff");
                        logged = true;
                    }
                    tokio::time::sleep(backoff.next().unwrap_or(self.config.backoff.cap())).await;
                }
            }
        }
    }

    /// Handle one pod event. `deleted` for a DELETED event.
    pub async fn handle(&self, pod: &Pod, deleted: bool) -> Outcome {
        match PodSnapshot::of(pod) {
            Ok(snapshot) => self.handle_snapshot(&snapshot, deleted, false).await,
            Err(skip) => {
                self.stats.skipped.inc();
                if !deleted {
                    self.release_skipped(&pod.metadata);
                }
                Outcome::Skipped(skip)
            }
        }
    }

    /// [`KfpSink::handle`] for a pod already reduced to what the writer
    /// needs (the work queue's entry). With `may_wait_for_inputs`, a
    /// finished pod whose upstream artifacts are not recorded yet (its
    /// upstream pod is still queued: a relist or backlog is written in no
    /// particular order) is not written yet if the writer has not recorded
    /// it ([`Outcome::AwaitingInputs`]), and does not get `metadata_written`
    /// yet if it has (`awaiting_inputs`): the caller handles it again later,
    /// and the writer links the inputs then. Without it, the pod is recorded
    /// and marked written with what could be linked.
    pub async fn handle_snapshot(
        &self,
        snapshot: &PodSnapshot,
        deleted: bool,
        may_wait_for_inputs: bool,
    ) -> Outcome {
        let kfp = snapshot.kfp.clone();
        let span = tracing::info_span!(
            "kfp_pod", namespace = %kfp.namespace, pod = %kfp.name, uid = %kfp.uid
        );
        self.handle_kfp(
            &snapshot.markers,
            &snapshot.finalizer,
            kfp,
            deleted,
            may_wait_for_inputs,
        )
        .instrument(span)
        .await
    }

    /// `gone`: the pod is no longer in the API (a DELETED event, or missing
    /// from a relist).
    async fn handle_kfp(
        &self,
        markers: &Markers,
        facts: &FinalizerFacts,
        mut kfp: KfpPod,
        gone: bool,
        may_wait_for_inputs: bool,
    ) -> Outcome {
        let finalize = self.config.finalize;
        // A pod held here while being deleted that no kubelet reports on any
        // more ends as its DELETED event would have ended it.
        let unfinished = !is_terminal(kfp.state(false));
        let ending = facts.deletion_end(Timestamp::now(), self.config.overdue_margin);
        let deleted = gone || (finalize && unfinished && ending == DeletionEnd::Ended);
        let recheck_in = match ending {
            DeletionEnd::Open { recheck_in } if finalize && unfinished && facts.carries() => {
                Some(recheck_in)
            }
            _ => None,
        };
        if should_add(finalize, facts, deleted, kfp.state(deleted)) {
            self.add_finalizer(&kfp, facts).await;
        }
        let wants_task_result =
            is_terminal(kfp.state(deleted)) && kfp.outputs.is_none() && !deleted;
        if wants_task_result && let Some(doc) = self.task_result_outputs(&kfp).await {
            let outputs = kfp.parse_outputs(&doc);
            kfp.outputs = Some(outputs);
        }
        for w in &kfp.warnings {
            self.stats.warnings.inc();
            tracing::warn!(
                namespace = %kfp.namespace, pod = %kfp.name, field = %w.field,
                "bad pod data in {}/{} field {}: {}; recording what can be read",
                kfp.namespace, kfp.name, w.field, w.message
            );
        }
        let written = if may_wait_for_inputs {
            self.with_retry(|| self.writer.record_unless_inputs_missing(&kfp, deleted))
                .await
        } else {
            self.record_with_retry(&kfp, deleted)
                .await
                .map(Written::Recorded)
        };
        let recorded = match written {
            Ok(Written::Recorded(r)) => r,
            Ok(Written::AwaitingInputs(unlinked_inputs)) => {
                tracing::debug!(
                    unlinked = ?unlinked_inputs,
                    "finished before its upstream artifacts were recorded; writing it once they are"
                );
                return Outcome::AwaitingInputs { unlinked_inputs };
            }
            Err(e) => {
                self.stats.failed.inc();
                self.health.metrics().store_error("rejected");
                tracing::warn!(error = %e, "MLMD rejected the pod's metadata; skipping this event");
                if !gone && should_release(finalize, facts, None) {
                    self.request_release(facts.meta(&kfp.namespace, &kfp.name, &kfp.uid));
                }
                return Outcome::Failed(e.to_string());
            }
        };
        self.stats.recorded.inc();
        let mut patched = false;
        let awaiting_inputs = may_wait_for_inputs
            && recorded.outputs.is_some()
            && !recorded.unlinked_inputs.is_empty();
        if awaiting_inputs {
            tracing::debug!(
                unlinked = ?recorded.unlinked_inputs,
                "finished before its upstream artifacts were recorded; linking them later"
            );
        } else if !recorded.unlinked_inputs.is_empty() && recorded.outputs.is_some() {
            tracing::info!(
                unlinked = ?recorded.unlinked_inputs,
                "inputs without an upstream artifact in MLMD; recorded without them"
            );
        }
        // Cache hits keep the webhook's markers; deleted pods cannot be patched.
        if !deleted && !kfp.cached {
            let mut patch =
                PodPatch::started(recorded.execution_id, recorded.context_id, &recorded.inputs);
            if let (Some(outputs), false) = (&recorded.outputs, awaiting_inputs) {
                patch = patch.merge(PodPatch::finished(outputs));
            }
            let missing = patch.missing_from(Some(&markers.labels), Some(&markers.annotations));
            if !missing.is_empty() {
                patched = self.patch_pod(&kfp, &missing).await;
            }
        }
        // The final state is in MLMD now (or the finalizer is not ours to keep).
        if !gone && should_release(finalize, facts, Some(recorded.state)) {
            self.request_release(facts.meta(&kfp.namespace, &kfp.name, &kfp.uid));
        }
        Outcome::Recorded {
            recorded,
            patched,
            awaiting_inputs,
            recheck_in: recheck_in.filter(|_| !gone),
        }
    }

    /// Put KFP mode's finalizer on the pod (bounded attempts; on failure the
    /// pod is recorded anyway and its next event tries again).
    async fn add_finalizer(&self, kfp: &KfpPod, facts: &FinalizerFacts) {
        let meta = facts.meta(&kfp.namespace, &kfp.name, &kfp.uid);
        let mut backoff = self.config.backoff.clone().build();
        for attempt in 1..=self.config.patch_attempts.max(1) {
            match finalizer::add(&self.kube, &meta, KFP_FINALIZER).await {
                Ok(Added::Added) => {
                    self.stats.finalizers_added.inc();
                    return;
                }
                Ok(Added::Present | Added::BeingDeleted | Added::Gone) => return,
                Err(e) if e.is_retryable() && attempt < self.config.patch_attempts => {
                    tracing::debug!(attempt, error = %e, "finalizer add failed; retrying");
                    tokio::time::sleep(backoff.next().unwrap_or(self.config.backoff.cap())).await;
                }
                Err(e) => {
                    self.stats.finalizer_failures.inc();
                    tracing::warn!(
                        error = %e,
                        "cannot add the finalizer {KFP_FINALIZER}; recording the pod without it, its next event tries again"
                    );
                    return;
                }
            }
        }
    }

    async fn record_with_retry(&self, kfp: &KfpPod, deleted: bool) -> Result<Recorded, MlmdError> {
        self.with_retry(|| self.writer.record(kfp, deleted)).await
    }

    /// Run `call` until it succeeds or fails for good, waiting out MLMD
    /// outages with backoff (forever; one warning per outage).
    async fn with_retry<T, F, Fut>(&self, call: F) -> Result<T, MlmdError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, MlmdError>>,
    {
        let mut backoff = self.config.backoff.clone().build();
        let mut logged = false;
        loop {
            match call().await {
                Ok(r) => {
                    if logged {
                        tracing::info!("MLMD is reachable again");
                    }
                    self.health.set_store_writable(true);
                    return Ok(r);
                }
                Err(e) if e.is_retryable() => {
                    self.stats.mlmd_retries.inc();
                    self.health.set_store_writable(false);
                    self.health.metrics().store_error("retryable");
                    if logged {
                        tracing::debug!(error = %e, "MLMD still unavailable");
                    } else {
                        tracing::warn!(error = %e, "MLMD unavailable; retrying with backoff until it is back");
                        logged = true;
                    }
                    tokio::time::sleep(backoff.next().unwrap_or(self.config.backoff.cap())).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// After a relist: mark CANCELED every unfinished execution (in
    /// `namespace`, or all namespaces) whose pod is gone, i.e. for which
    /// `known(uid)` is false. `known` must cover the pods the relist saw,
    /// those seen since, and those the work queue still owns, so that no
    /// execution a worker may still write is touched. MLMD outages are
    /// waited out. Returns how many were canceled.
    pub async fn cancel_vanished(
        &self,
        namespace: Option<&str>,
        known: impl Fn(&str) -> bool,
    ) -> u64 {
        let candidates = match self
            .with_retry(|| self.writer.unfinished_executions(namespace))
            .await
        {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list unfinished executions; vanished pods stay as they are");
                return 0;
            }
        };
        let mut canceled = 0;
        for execution in candidates {
            let Some(uid) = pod_uid_of(&execution) else {
                continue;
            };
            if known(uid) {
                continue;
            }
            let pod = execution
                .custom_properties
                .get("kfp_pod_name")
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned();
            match self.with_retry(|| self.writer.cancel(&execution)).await {
                Ok(()) => {
                    canceled += 1;
                    self.stats.canceled_vanished.inc();
                    tracing::info!(
                        pod,
                        uid,
                        execution_id = execution.id,
                        "pod vanished while unwatched: execution marked CANCELED"
                    );
                }
                Err(e) => {
                    tracing::warn!(pod, uid, error = %e, "cannot mark the vanished pod's execution CANCELED")
                }
            }
        }
        canceled
    }

    /// Outputs from the pod's WorkflowTaskResult (Argo >= 3.4 writes them
    /// there instead of the pod annotation). Named by the node id.
    async fn task_result_outputs(&self, kfp: &KfpPod) -> Option<Json> {
        let (group, version, kind, plural) = WTR;
        let resource = ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: format!("{group}/{version}"),
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.kube.clone(), &kfp.namespace, &resource);
        let name = kfp.node_id.as_deref().unwrap_or(&kfp.name);
        let mut backoff = self.config.backoff.clone().build();
        for attempt in 1..=self.config.patch_attempts {
            match api.get_opt(name).await {
                Ok(found) => return found.and_then(|o| o.data.get("outputs").cloned()),
                Err(e)
                    if attempt < self.config.patch_attempts
                        && podline_client::retry::classify(&e).is_retryable() =>
                {
                    tokio::time::sleep(backoff.next().unwrap_or(self.config.backoff.cap())).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, task_result = name, "cannot read the WorkflowTaskResult; outputs not recorded");
                    return None;
                }
            }
        }
        None
    }

    /// Merge-patch the markers onto the pod and verify them on the answer.
    /// The patch carries the pod's uid, so a new pod with the same name is
    /// never marked by mistake. Returns whether the patch is verified.
    async fn patch_pod(&self, kfp: &KfpPod, patch: &PodPatch) -> bool {
        let api: Api<Pod> = Api::namespaced(self.kube.clone(), &kfp.namespace);
        let mut body = patch.to_merge_patch();
        body["metadata"]["uid"] = Json::String(kfp.uid.clone());
        let mut backoff = self.config.backoff.clone().build();
        for attempt in 1..=self.config.patch_attempts {
            match api
                .patch(&kfp.name, &PatchParams::default(), &Patch::Merge(&body))
                .await
            {
                Ok(pod)
                    if pod.metadata.uid.as_deref() == Some(&kfp.uid)
                        && patch.applied_to(
                            pod.metadata.labels.as_ref(),
                            pod.metadata.annotations.as_ref(),
                        ) =>
                {
                    self.stats.patches.inc();
                    return true;
                }
                Ok(_) => {
                    tracing::warn!(attempt, "pod patch answered without the markers; retrying")
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    // The pod is gone: nothing left to mark.
                    return false;
                }
                Err(e) if podline_client::retry::classify(&e).is_retryable() => {
                    tracing::debug!(attempt, error = %e, "pod patch failed; retrying");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "pod patch rejected; the next event will retry");
                    break;
                }
            }
            tokio::time::sleep(backoff.next().unwrap_or(self.config.backoff.cap())).await;
        }
        self.stats.patch_failures.inc();
        false
    }
}
