//! Taking KFP mode's finalizer off pods, off the workers' path.
//!
//! Why a task of its own: a removal is an API round trip (more when the pod changed meanwhile)
//! that nothing downstream waits for; a worker queues it here and goes on to the next pod. Each
//! removal has bounded attempts with backoff; one that still fails is counted and logged, and
//! the pod's next event (at the latest the next start's relist) asks again. The queue is
//! bounded too: when it is full a request is dropped the same way. A pod is removed by one
//! attempt at a time.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use backon::BackoffBuilder;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use kube::core::ObjectMeta;
use podline_client::backoff::FullJitter;
use podline_client::finalizer::{self, Removed};
use podline_client::list::Pages;
use podline_client::retry::RetryPolicy;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::finalize::{KFP_FINALIZER, carries};
use super::keys::WORKFLOW_LABEL;
use super::stats::SinkStats;

/// Removals queued at most (a few hundred bytes each).
pub const QUEUE_BOUND: usize = 10_000;
/// Removals in flight at once.
const CONCURRENT: usize = 4;

/// How removals are retried.
#[derive(Clone, Debug)]
pub struct ReleaseConfig {
    /// Backoff between attempts.
    pub backoff: FullJitter,
    /// Attempts per removal.
    pub attempts: u32,
}

/// The queue of pods to release and the task that releases them.
#[derive(Debug)]
pub struct Releaser {
    tx: mpsc::Sender<ObjectMeta>,
    rx: Mutex<Option<mpsc::Receiver<ObjectMeta>>>,
}

impl Default for Releaser {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_BOUND);
        Releaser {
            tx,
            rx: Mutex::new(Some(rx)),
        }
    }
}

impl Releaser {
    /// Queue the pod `meta` describes (namespace, name, uid, its finalizers as read) for
    /// release. False when the queue is full or closed: the pod's next event asks again.
    pub fn request(&self, meta: ObjectMeta) -> bool {
        self.tx.try_send(meta).is_ok()
    }

    /// Release queued pods until `stop`, then those still queued, then return. Runs once: a
    /// second call returns at once.
    pub async fn run(
        &self,
        kube: kube::Client,
        config: ReleaseConfig,
        stats: Arc<SinkStats>,
        stop: CancellationToken,
    ) {
        let taken = self.rx.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(mut rx) = taken else { return };
        let busy: Arc<Mutex<HashSet<String>>> = Arc::default();
        let mut running = JoinSet::new();
        let mut stopping = false;
        loop {
            tokio::select! {
                biased;
                Some(_) = running.join_next(), if !running.is_empty() => {}
                () = stop.cancelled(), if !stopping => {
                    stopping = true;
                    rx.close();
                }
                next = rx.recv(), if running.len() < CONCURRENT => {
                    let Some(meta) = next else { break };
                    let uid = meta.uid.clone().unwrap_or_default();
                    if !lock(&busy).insert(uid.clone()) {
                        continue; // its removal is in flight: that one reads the pod anew
                    }
                    let (kube, config, stats, busy) =
                        (kube.clone(), config.clone(), stats.clone(), busy.clone());
                    running.spawn(async move {
                        release(&kube, &meta, &config, &stats).await;
                        lock(&busy).remove(&uid);
                    });
                }
            }
        }
        while running.join_next().await.is_some() {}
    }
}

fn lock(set: &Mutex<HashSet<String>>) -> std::sync::MutexGuard<'_, HashSet<String>> {
    set.lock().unwrap_or_else(|p| p.into_inner())
}

/// One removal, with bounded attempts.
async fn release(
    kube: &kube::Client,
    meta: &ObjectMeta,
    config: &ReleaseConfig,
    stats: &SinkStats,
) {
    let (namespace, pod) = (
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    );
    let mut backoff = config.backoff.clone().build();
    for attempt in 1..=config.attempts.max(1) {
        match finalizer::remove(kube, meta, KFP_FINALIZER).await {
            Ok(Removed::Removed) => {
                stats.finalizers_removed.inc();
                tracing::debug!(namespace, pod, "finalizer removed");
                return;
            }
            Ok(Removed::Absent | Removed::Gone) => return,
            Err(e) if e.is_retryable() && attempt < config.attempts => {
                tracing::debug!(namespace, pod, attempt, error = %e, "finalizer removal failed; retrying");
                tokio::time::sleep(backoff.next().unwrap_or(config.backoff.cap())).await;
            }
            Err(e) => {
                stats.finalizer_failures.inc();
                tracing::warn!(
                    namespace, pod, error = %e,
                    "cannot remove the finalizer {KFP_FINALIZER} from {namespace}/{pod}; the pod's next event retries"
                );
                return;
            }
        }
    }
}

/// Once at start: queue the release of every pod in scope (`namespace`, `None` for all) that
/// carries [`KFP_FINALIZER`] but is not an Argo pod, so this writer will never record it (its
/// label was removed, or a writer of another scope left it). Pods of the watch's own selector
/// are released as they are listed (see [`super::pipeline`]). Metadata only, paged. Returns how
/// many were queued.
pub async fn release_out_of_scope(
    kube: &kube::Client,
    namespace: Option<&str>,
    releaser: &Releaser,
) -> Result<usize, kube::Error> {
    let api: Api<Pod> = match namespace {
        Some(ns) => Api::namespaced(kube.clone(), ns),
        None => Api::all(kube.clone()),
    };
    let params = ListParams::default()
        .labels(&format!("!{WORKFLOW_LABEL}"))
        .limit(500);
    // One attempt per page, as before: the caller logs a failure and the next start asks again.
    let policy = RetryPolicy::default().with_max_attempts(1);
    let mut pages = Pages::metadata(&api, params);
    let mut queued = 0;
    while let Some(page) = pages
        .next(&policy, "list pods for the out-of-scope release")
        .await
    {
        // A pod that does not decode is logged by the lister and skipped: the rest are released.
        for pod in page?.items {
            if carries(pod.metadata.finalizers.as_deref()) && releaser.request(pod.metadata) {
                queued += 1;
            }
        }
    }
    Ok(queued)
}
