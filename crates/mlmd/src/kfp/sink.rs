//! The KFP sink: pod events in, MLMD records and pod markers out.
//!
//! [`KfpSink::handle`] takes one pod event and never fails the stream:
//! MLMD being down is waited out with full-jitter backoff (forever, one log
//! line per outage), a bad pod is logged with its name and the field that
//! was wrong, and a failed pod patch is retried a few times and then left to
//! the next event (the MLMD side is idempotent, so a later retry is safe).
//! [`run`] drives it from [`podline_client::watch`] when no recorder does.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backon::BackoffBuilder;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use podline_client::backoff::FullJitter;
use podline_client::watch::{Event, WatchConfig, WatchError, watch};
use serde_json::Value as Json;
use tracing::Instrument;

use super::keys::SELECTOR;
use super::patch::PodPatch;
use super::pod::{KfpPod, Skip, classify};
use super::writer::{KfpWriter, Recorded, is_terminal};
use crate::proto::GetContextTypesRequest;

/// Tuning of the sink.
#[derive(Clone, Debug)]
pub struct SinkConfig {
    /// Backoff between MLMD retries (forever) and pod patch retries.
    pub backoff: FullJitter,
    /// Attempts per pod patch before leaving it to the next event.
    pub patch_attempts: u32,
}

impl Default for SinkConfig {
    fn default() -> Self {
        // 200 ms doubling to 30 s: quick recovery from a blip, gentle on a
        // long MLMD outage. Valid constants (base <= cap, factor > 1).
        let backoff = FullJitter::try_new(Duration::from_millis(200), Duration::from_secs(30), 2.0)
            .unwrap_or_else(|_| unreachable!("constant backoff is valid"));
        SinkConfig {
            backoff,
            patch_attempts: 5,
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
    },
    /// MLMD rejected the pod's data (not retryable): logged, stream goes on.
    Failed(String),
}

/// Counters for metrics and benchmarks.
#[derive(Debug, Default)]
pub struct SinkStats {
    /// Pod events recorded.
    pub recorded: AtomicU64,
    /// Pod events skipped.
    pub skipped: AtomicU64,
    /// Pod events MLMD rejected.
    pub failed: AtomicU64,
    /// MLMD retries after retryable errors.
    pub mlmd_retries: AtomicU64,
    /// Pod patches applied and verified.
    pub patches: AtomicU64,
    /// Pod patches that failed after all attempts.
    pub patch_failures: AtomicU64,
    /// Warnings about unreadable pod data.
    pub warnings: AtomicU64,
}

/// The sink. Share it behind an `Arc` if several tasks feed it.
pub struct KfpSink {
    writer: KfpWriter,
    kube: kube::Client,
    config: SinkConfig,
    stats: Arc<SinkStats>,
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
    pub fn new(writer: KfpWriter, kube: kube::Client, config: SinkConfig) -> Self {
        KfpSink {
            writer,
            kube,
            config,
            stats: Arc::new(SinkStats::default()),
        }
    }

    /// The counters.
    pub fn stats(&self) -> Arc<SinkStats> {
        self.stats.clone()
    }

    /// The writer (call counts, direct use).
    pub fn writer(&self) -> &KfpWriter {
        &self.writer
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
        let kfp = match classify(pod) {
            Ok(kfp) => kfp,
            Err(skip) => {
                self.stats.skipped.fetch_add(1, Ordering::Relaxed);
                return Outcome::Skipped(skip);
            }
        };
        let span = tracing::info_span!(
            "kfp_pod", namespace = %kfp.namespace, pod = %kfp.name, uid = %kfp.uid
        );
        self.handle_kfp(pod, kfp, deleted).instrument(span).await
    }

    async fn handle_kfp(&self, pod: &Pod, mut kfp: KfpPod, deleted: bool) -> Outcome {
        let wants_task_result =
            is_terminal(kfp.state(deleted)) && kfp.outputs.is_none() && !deleted;
        if wants_task_result && let Some(doc) = self.task_result_outputs(&kfp).await {
            let outputs = kfp.parse_outputs(&doc);
            kfp.outputs = Some(outputs);
        }
        for w in &kfp.warnings {
            self.stats.warnings.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                namespace = %kfp.namespace, pod = %kfp.name, field = %w.field,
                "bad pod data in {}/{} field {}: {}; recording what can be read",
                kfp.namespace, kfp.name, w.field, w.message
            );
        }
        let recorded = match self.record_with_retry(&kfp, deleted).await {
            Ok(r) => r,
            Err(e) => {
                self.stats.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "MLMD rejected the pod's metadata; skipping this event");
                return Outcome::Failed(e.to_string());
            }
        };
        self.stats.recorded.fetch_add(1, Ordering::Relaxed);
        let mut patched = false;
        // Cache hits keep the webhook's markers; deleted pods cannot be patched.
        if !deleted && !kfp.cached {
            let mut patch =
                PodPatch::started(recorded.execution_id, recorded.context_id, &recorded.inputs);
            if let Some(outputs) = &recorded.outputs {
                patch = patch.merge(PodPatch::finished(outputs));
            }
            let missing = patch.missing_from(
                pod.metadata.labels.as_ref(),
                pod.metadata.annotations.as_ref(),
            );
            if !missing.is_empty() {
                patched = self.patch_pod(&kfp, &missing).await;
            }
        }
        Outcome::Recorded { recorded, patched }
    }

    async fn record_with_retry(
        &self,
        kfp: &KfpPod,
        deleted: bool,
    ) -> Result<Recorded, crate::MlmdError> {
        let mut backoff = self.config.backoff.clone().build();
        let mut logged = false;
        loop {
            match self.writer.record(kfp, deleted).await {
                Ok(r) => {
                    if logged {
                        tracing::info!("MLMD is reachable again; pod recorded");
                    }
                    return Ok(r);
                }
                Err(e) if e.is_retryable() => {
                    self.stats.mlmd_retries.fetch_add(1, Ordering::Relaxed);
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
                    self.stats.patches.fetch_add(1, Ordering::Relaxed);
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
        self.stats.patch_failures.fetch_add(1, Ordering::Relaxed);
        false
    }
}

/// Drive `sink` from a watch of Argo pods (`workflows.argoproj.io/workflow`
/// exists) through [`podline_client::watch`]. Returns only on a fatal watch
/// error (401/403/404 namespace); every other failure is retried inside.
pub async fn run(sink: &KfpSink, pods: Api<Pod>, config: WatchConfig) -> Result<(), WatchError> {
    sink.wait_for_mlmd().await;
    let stream = watch(pods, config.labels(SELECTOR));
    futures::pin_mut!(stream);
    while let Some(item) = stream.next().await {
        match item {
            Ok(Event::InitApply(pod) | Event::Apply(pod)) => {
                sink.handle(&pod, false).await;
            }
            Ok(Event::Delete(pod)) => {
                sink.handle(&pod, true).await;
            }
            Ok(Event::Connected { reason, .. }) => {
                tracing::debug!(reason, "pod watch connected");
            }
            Ok(_) => {}
            Err(e) if e.is_fatal() => return Err(e),
            Err(e) => {
                tracing::debug!(reason = e.reason(), error = %e, "pod watch interrupted; resuming")
            }
        }
    }
    Ok(())
}
