//! The pod watch feeding the sink through a keyed work queue and a pool of
//! workers: pods are written to MLMD in parallel, each pod's writes in order.
//!
//! ```text
//! watch (podline_client::watch) ──► PodQueue (one entry per uid) ──► N workers ──► KfpSink
//!        │ relist done                                                        (MLMD, pod patch)
//!        └──► vanished-pod sweep: unfinished executions of unseen pods ──► CANCELED
//! ```
//!
//! With finalizing on (see [`super::finalize`]), a task next to the workers
//! takes the finalizer off pods whose final state is in MLMD, and once at
//! start off the pods in scope that KFP mode will never record.
//!
//! The watch task never waits on MLMD: it only updates the queue and the
//! health state. One MLMD round trip is ~1 ms, so one pod at a time capped
//! KFP mode at a few dozen pods/s; N workers overlap N pods' round trips.
//! On shutdown the watch stops, workers drain the queue for at most
//! `drain_timeout`, and what is left is recorded at the next start (the
//! writes are idempotent and the next start re-lists).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use podline_client::watch::{Event, WatchConfig, WatchError, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::keys::SELECTOR;
use super::queue::{Job, PodQueue, PodSnapshot};
use super::sink::{KfpSink, Outcome};

/// How the pipeline runs.
#[derive(Clone, Debug)]
pub struct PipelineConfig {
    /// The watch (timeouts, paging); the Argo pod selector is added.
    pub watch: WatchConfig,
    /// The watched namespace, `None` for all: scopes the vanished-pod sweep.
    pub namespace: Option<String>,
    /// Pods written at once.
    pub workers: usize,
    /// How long shutdown waits for queued pods to be written.
    pub drain_timeout: Duration,
    /// How long a pod first seen Pending waits in the queue for its next
    /// snapshot before it is recorded NEW: a pod that starts sooner is
    /// created RUNNING at once, saving a write transaction (see
    /// [`PodQueue::with_pending_hold`]). Zero records Pending pods at once.
    pub pending_hold: Duration,
    /// Pods queued at most: at the bound the watch waits for the workers
    /// (see [`PodQueue::wait_for_room`]), so memory follows the bound, not
    /// a backlog of finished pods listed at start.
    pub queue_bound: usize,
}

/// Default [`PipelineConfig::queue_bound`]: enough to keep 8 workers busy
/// and coalesce a burst, a few MB at most (1-2 KB per queued pod).
pub const DEFAULT_QUEUE_BOUND: usize = 1000;

/// Default [`PipelineConfig::pending_hold`]: most pods leave Pending
/// (scheduling, image pull) within it, and nothing KFP reads needs a
/// Pending pod's execution sooner (the cache server reads the execution id
/// of finished pods, the UI shows Pending steps from the workflow).
pub const DEFAULT_PENDING_HOLD: Duration = Duration::from_secs(10);

/// Default number of workers: enough to overlap MLMD round trips, few
/// enough not to queue up at MLMD's own thread pool.
pub const DEFAULT_WORKERS: usize = 8;

impl PipelineConfig {
    /// Defaults for watching `namespace` (`None`: all namespaces).
    pub fn new(namespace: Option<String>) -> Self {
        PipelineConfig {
            watch: WatchConfig::default(),
            namespace,
            workers: DEFAULT_WORKERS,
            drain_timeout: Duration::from_secs(20),
            pending_hold: DEFAULT_PENDING_HOLD,
            queue_bound: DEFAULT_QUEUE_BOUND,
        }
    }
}

/// Run until `shutdown` is cancelled (Ok, after draining) or the watch fails
/// in a way no retry can fix (401/403/404 namespace). Waits for MLMD first.
pub async fn run(
    sink: Arc<KfpSink>,
    pods: Api<Pod>,
    config: PipelineConfig,
    shutdown: CancellationToken,
) -> Result<(), WatchError> {
    tokio::select! {
        () = sink.wait_for_mlmd() => {}
        () = shutdown.cancelled() => return Ok(()),
    }
    let stop_releasing = CancellationToken::new();
    let mut releasing = AbortOnDrop({
        let (sink, stop) = (sink.clone(), stop_releasing.clone());
        let namespace = config.namespace.clone();
        tokio::spawn(async move {
            let sweep = async {
                if sink.finalizes() {
                    sink.release_out_of_scope(namespace.as_deref()).await;
                }
            };
            tokio::join!(sweep, sink.run_releaser(stop.clone()));
        })
    });
    let queue = Arc::new(PodQueue::with_pending_hold(config.pending_hold));
    let waiting = SharedWaiting::default();
    let mut workers = JoinSet::new();
    for _ in 0..config.workers.max(1) {
        workers.spawn(work(sink.clone(), queue.clone(), waiting.clone()));
    }
    let mut watcher = Watcher {
        sink: sink.clone(),
        queue: queue.clone(),
        bound: config.queue_bound,
        namespace: config.namespace.clone(),
        relist: None,
        sweep: None,
        unidentified: false,
    };
    let result = watcher.run(pods, config.watch.clone(), &shutdown).await;
    watcher.stop_sweep();
    sink.health().set_watch_established(false);
    queue.close();
    let drained = tokio::time::timeout(config.drain_timeout, async {
        while workers.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            pending = queue.depth(),
            "shutdown: pods not written within the drain timeout; the next start records them"
        );
        workers.shutdown().await;
    }
    // Finalizers of pods recorded by now come off; what is left is asked
    // again by the next start's relist.
    stop_releasing.cancel();
    if tokio::time::timeout(config.drain_timeout, &mut releasing.0)
        .await
        .is_err()
    {
        tracing::warn!(
            "shutdown: finalizers not removed within the drain timeout; the next start removes them"
        );
    }
    result
}

/// A task aborted when its handle is dropped: a pipeline dropped halfway (its
/// task aborted) leaves no finalizer task behind.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How many times a finished pod is handled again while its inputs'
/// upstream artifacts are missing (at the latest after 0.5 s doubling: ~30 s
/// in all), before it is marked written with what could be linked.
const INPUT_WAITS: u32 = 6;

/// Finished pods waiting for their upstream outputs, by missing URI: woken
/// as soon as a worker records an output with that URI (a timer is the
/// fallback, for an upstream output recorded elsewhere or never).
#[derive(Debug, Default)]
struct Waiting {
    by_uri: HashMap<String, Vec<String>>,
    /// The parked job and the URIs it waits for.
    jobs: HashMap<String, (Job, Vec<String>)>,
}

impl Waiting {
    fn park(&mut self, uid: &str, job: Job, uris: &[String]) {
        for uri in uris {
            self.by_uri
                .entry(uri.clone())
                .or_default()
                .push(uid.to_owned());
        }
        self.jobs.insert(uid.to_owned(), (job, uris.to_vec()));
    }

    /// The jobs waiting for any of `uris` (each once).
    fn wake(&mut self, uris: impl Iterator<Item = String>) -> Vec<(String, Job)> {
        let mut woken = Vec::new();
        for uri in uris {
            for uid in self.by_uri.remove(&uri).unwrap_or_default() {
                if let Some(job) = self.take(&uid) {
                    woken.push((uid, job));
                }
            }
        }
        woken
    }

    /// Unpark `uid`, forgetting it under every URI (so nothing leaks when
    /// an upstream output never comes).
    fn take(&mut self, uid: &str) -> Option<Job> {
        let (job, uris) = self.jobs.remove(uid)?;
        for uri in uris {
            if let Some(waiters) = self.by_uri.get_mut(&uri) {
                waiters.retain(|w| w != uid);
                if waiters.is_empty() {
                    self.by_uri.remove(&uri);
                }
            }
        }
        Some(job)
    }
}

type SharedWaiting = Arc<Mutex<Waiting>>;

fn lock(waiting: &SharedWaiting) -> std::sync::MutexGuard<'_, Waiting> {
    waiting.lock().unwrap_or_else(|p| p.into_inner())
}

/// One worker: write pods from the queue until it closes and drains.
async fn work(sink: Arc<KfpSink>, queue: Arc<PodQueue>, waiting: SharedWaiting) {
    let metrics = sink.health().metrics().clone();
    while let Some((uid, job)) = queue.next().await {
        let started = Instant::now();
        let outcome = sink
            .handle_snapshot(&job.pod, job.deleted, job.attempt < INPUT_WAITS)
            .await;
        match outcome {
            Outcome::Recorded {
                recorded,
                awaiting_inputs,
                recheck_in,
                ..
            } => {
                if let Some(after) = recheck_in {
                    recheck(&queue, &uid, job.clone(), after);
                }
                metrics.write(
                    started.elapsed().as_secs_f64(),
                    1,
                    Some(job.queued_at.elapsed().as_secs_f64()),
                );
                // Downstream pods that finished first get their inputs now.
                let outputs = recorded.outputs.iter().flatten().map(|o| o.uri.clone());
                for (waiter, job) in lock(&waiting).wake(outputs) {
                    queue.retry(&waiter, job);
                }
                if awaiting_inputs {
                    park(&queue, &waiting, &uid, job, &recorded.unlinked_inputs);
                }
            }
            Outcome::AwaitingInputs { unlinked_inputs } => {
                park(&queue, &waiting, &uid, job, &unlinked_inputs);
            }
            Outcome::Skipped(_) | Outcome::Failed(_) => {}
        }
        queue.done(&uid);
        metrics.queue_depth(queue.depth());
    }
}

/// Handle a pod held while being deleted again after `after`, in case no
/// event comes meanwhile (see [`super::finalize`]'s safety valve). A newer
/// snapshot queued by then is kept.
fn recheck(queue: &Arc<PodQueue>, uid: &str, job: Job, after: Duration) {
    let (queue, uid) = (queue.clone(), uid.to_owned());
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        queue.retry(&uid, job);
    });
}

/// Park a finished pod until an output with one of `uris` is recorded, or
/// at the latest after its attempt's delay (0.5 s doubling).
fn park(queue: &Arc<PodQueue>, waiting: &SharedWaiting, uid: &str, job: Job, uris: &[String]) {
    let delay = Duration::from_millis(500) * 2u32.pow(job.attempt);
    let mut job = job;
    job.attempt += 1;
    lock(waiting).park(uid, job, uris);
    let (queue, waiting, uid) = (queue.clone(), waiting.clone(), uid.to_owned());
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let job = lock(&waiting).take(&uid);
        if let Some(job) = job {
            queue.retry(&uid, job);
        }
    });
}

/// Uids the vanished-pod sweep must leave alone, growing while it runs.
type Known = Arc<Mutex<HashSet<String>>>;

struct Watcher {
    sink: Arc<KfpSink>,
    queue: Arc<PodQueue>,
    /// [`PipelineConfig::queue_bound`].
    bound: usize,
    namespace: Option<String>,
    /// Uids seen since a relist started.
    relist: Option<HashSet<String>>,
    /// The running sweep and the uids it must not cancel.
    sweep: Option<(Known, JoinHandle<()>)>,
    /// The relist in progress returned a pod that did not decode and had no readable uid.
    unidentified: bool,
}

impl Watcher {
    async fn run(
        &mut self,
        pods: Api<Pod>,
        config: WatchConfig,
        shutdown: &CancellationToken,
    ) -> Result<(), WatchError> {
        let health = self.sink.health().clone();
        let metrics = health.metrics().clone();
        let stream = watch(pods, config.labels(SELECTOR));
        futures::pin_mut!(stream);
        loop {
            let item = tokio::select! {
                item = stream.next() => item,
                () = shutdown.cancelled() => return Ok(()),
            };
            let Some(item) = item else { return Ok(()) };
            if matches!(
                item,
                Ok(Event::InitApply(_) | Event::Apply(_) | Event::Delete(_))
            ) {
                tokio::select! {
                    waited = self.queue.wait_for_room(self.bound) => if waited {
                        metrics.queue_overflow();
                    },
                    () = shutdown.cancelled() => return Ok(()),
                }
            }
            match item {
                Ok(Event::Connected { reason, .. }) => {
                    health.set_watch_established(true);
                    if !reason.is_first_connect() {
                        metrics.reconnect(reason.as_str());
                    }
                    tracing::debug!(reason = reason.as_str(), "pod watch connected");
                }
                Ok(Event::Init) => {
                    metrics.event("init");
                    metrics.relist();
                    self.relist = Some(HashSet::new());
                    self.unidentified = false;
                }
                Ok(Event::InitApply(pod)) => {
                    metrics.event("init_apply");
                    self.enqueue(pod, false);
                }
                Ok(Event::InitDone) => {
                    metrics.event("init_done");
                    self.relist_done();
                }
                Ok(Event::Apply(pod)) => {
                    metrics.event("apply");
                    self.enqueue(pod, false);
                }
                Ok(Event::Delete(pod)) => {
                    metrics.event("delete");
                    self.enqueue(pod, true);
                }
                Ok(Event::Bookmark(_)) => metrics.event("bookmark"),
                Ok(Event::Skipped(skipped)) => {
                    metrics.skipped(skipped.kind.as_str());
                    tracing::warn!(
                        object = %skipped.object_name(),
                        kind = skipped.kind.as_str(),
                        "pod watch skipped an object: {skipped}"
                    );
                    self.skipped(&skipped);
                }
                Err(e) if e.is_fatal() => return Err(e),
                Err(e) => {
                    // Counted as a reconnect by reason when the watch is back.
                    tracing::debug!(reason = e.reason().as_str(), error = %e, "pod watch interrupted; resuming");
                    continue;
                }
            }
            health.progress();
            metrics.queue_depth(self.queue.depth());
        }
    }

    fn enqueue(&mut self, pod: Pod, deleted: bool) {
        let Some(uid) = pod.metadata.uid.clone() else {
            self.sink.stats().skipped.inc();
            return;
        };
        if let Some(seen) = &mut self.relist {
            seen.insert(uid.clone());
        }
        if self
            .sweep
            .as_ref()
            .is_some_and(|(_, task)| task.is_finished())
        {
            self.sweep = None;
        }
        if let Some((known, _)) = &self.sweep {
            known
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(uid.clone());
        }
        // Only what the writer needs is queued; skipped pods not at all.
        match PodSnapshot::of(&pod) {
            Ok(snapshot) => self.queue.push(&uid, snapshot, deleted),
            Err(_) => {
                // E.g. `metadata_written` is on it now: an older snapshot
                // still queued has nothing left to do either, and a
                // finalizer on it holds nothing any more.
                self.queue.discard(&uid);
                self.sink.stats().skipped.inc();
                if !deleted {
                    self.sink.release_skipped(&pod.metadata);
                }
            }
        }
    }

    /// A pod the watch could not decode: nothing of it can be written. A listed one exists, so
    /// it is kept out of the vanished-pod sweep (by uid; one without a readable uid makes this
    /// relist's sweep cancel nothing, as any execution may be that pod's). A deleted one is left
    /// to the next relist's sweep, as a pod deleted while unwatched is.
    fn skipped(&mut self, skipped: &podline_client::watch::Skipped) {
        if !skipped.is_listed() {
            return;
        }
        match (&skipped.uid, &mut self.relist) {
            (Some(uid), Some(seen)) => {
                seen.insert(uid.clone());
            }
            (None, Some(_)) => self.unidentified = true,
            _ => {}
        }
    }

    /// A relist completed: pods missing from it vanished while nobody
    /// watched. Queued ones become deletions; for the rest, a sweep marks
    /// their unfinished executions CANCELED.
    fn relist_done(&mut self) {
        let seen = self.relist.take().unwrap_or_default();
        if std::mem::take(&mut self.unidentified) {
            tracing::warn!(
                "a listed pod object had no readable uid: no pod is judged vanished after this list"
            );
            return;
        }
        let owned_by_queue = self.queue.mark_vanished(&seen);
        self.stop_sweep();
        let mut known = seen;
        known.extend(owned_by_queue);
        let known: Known = Arc::new(Mutex::new(known));
        let sink = self.sink.clone();
        let namespace = self.namespace.clone();
        let task_known = known.clone();
        let task = tokio::spawn(async move {
            let canceled = sink
                .cancel_vanished(namespace.as_deref(), |uid| {
                    task_known
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .contains(uid)
                })
                .await;
            tracing::debug!(canceled, "vanished-pod sweep done");
        });
        self.sweep = Some((known, task));
    }

    fn stop_sweep(&mut self) {
        if let Some((_, task)) = self.sweep.take() {
            task.abort();
        }
    }
}

impl Drop for Watcher {
    /// A dropped pipeline (aborted task) leaves no sweep behind.
    fn drop(&mut self) {
        self.stop_sweep();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> Job {
        let pod = crate::kfp::fixture::Step::new("ns", "wf", "s").pod(Some("u"));
        Job {
            pod: Arc::new(PodSnapshot::of(&pod).expect("a KFP pod")),
            deleted: false,
            queued_at: Instant::now(),
            attempt: 1,
        }
    }

    #[test]
    fn an_output_wakes_each_waiting_pod_once_and_a_timeout_forgets_it() {
        let mut w = Waiting::default();
        w.park("down", job(), &["u1".into(), "u2".into()]);
        w.park("other", job(), &["u2".into()]);
        let woken: Vec<String> = w
            .wake(["u1".to_owned(), "u2".to_owned()].into_iter())
            .into_iter()
            .map(|(uid, _)| uid)
            .collect();
        assert_eq!(woken, ["down", "other"]);
        assert!(w.jobs.is_empty() && w.by_uri.is_empty());

        w.park("late", job(), &["never".into()]);
        assert!(w.take("late").is_some(), "the fallback timer takes it");
        assert!(w.by_uri.is_empty(), "nothing left under its URIs");
        assert!(w.wake(["never".to_owned()].into_iter()).is_empty());
    }
}
