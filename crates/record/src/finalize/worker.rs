//! The finalizer worker: adds and removes the recorder's finalizer off the watch's and the
//! writer's paths.
//!
//! Requests are kept one per pod uid (a removal replaces a pending add: a pod being deleted
//! cannot get a finalizer any more), so the backlog is bounded by the number of pods, and a
//! request never waits: the watch and the writer only insert into a map. A few workers (8 by
//! default) carry them out, removals first (they unblock deletions). A failed call is retried with
//! full-jitter backoff; a call the API server refuses for good (403 without `patch` on pods) is
//! logged and, for a removal, tried again at the backoff's cap (a pod held for ever is the worse
//! failure), while an add is dropped (the pod's next event asks again).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use backon::BackoffBuilder;
use kube::core::ObjectMeta;
use podline_client::backoff::{FullJitter, FullJitterBackoff};
use podline_client::finalizer::{self, Added, FinalizerError, Removed};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::RecorderMetrics;
use crate::ticket::{ReleaseReason, Ticket, slim};

/// At most this many pods are remembered as given the finalizer (see [`Finalizers::add`]).
const MAX_REMEMBERED_ADDS: usize = 100_000;

#[derive(Debug)]
enum Kind {
    Add,
    Remove(ReleaseReason),
}

#[derive(Debug)]
struct Job {
    meta: ObjectMeta,
    kind: Kind,
    due: Instant,
    /// Delays of the retries so far (None before the first failure).
    backoff: Option<FullJitterBackoff>,
}

#[derive(Debug, Default)]
struct Jobs {
    pending: HashMap<String, Job>,
    busy: HashSet<String>,
    /// Pods the finalizer was added to, with the resourceVersion the add was sent for: events
    /// older than that (still on their way) do not ask again.
    added: HashMap<String, u64>,
}

/// The add/remove worker, shared by the watch task (adds), the writer (removals after a commit)
/// and the start-up sweep.
pub(crate) struct Finalizers {
    client: kube::Client,
    finalizer: String,
    /// Also taken off a pod released after its commit (not one that left the scope).
    adopt: Option<String>,
    jobs: Mutex<Jobs>,
    wake: Notify,
    idle: Notify,
    metrics: Arc<RecorderMetrics>,
    backoff: FullJitter,
    workers: usize,
}

impl Finalizers {
    /// A worker for `finalizer` (and the adopted `adopt`, see `FinalizeConfig::adopt`) with
    /// `workers` calls in flight at most.
    pub fn new(
        client: kube::Client,
        finalizer: impl Into<String>,
        adopt: Option<String>,
        metrics: Arc<RecorderMetrics>,
        backoff: FullJitter,
        workers: usize,
    ) -> Self {
        Self {
            client,
            finalizer: finalizer.into(),
            adopt,
            jobs: Mutex::new(Jobs::default()),
            wake: Notify::new(),
            idle: Notify::new(),
            metrics,
            backoff,
            workers: workers.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Jobs> {
        // Plain maps, never left half-updated by a panic.
        self.jobs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Asks for the finalizer to be added to the pod `meta` describes, unless a request for it
    /// is pending or in flight, or `meta` is older than an add already done. Never waits.
    pub fn add(&self, meta: &ObjectMeta) {
        let Some(uid) = meta.uid.clone() else { return };
        let version = version_of(meta);
        {
            let mut jobs = self.lock();
            if jobs.pending.contains_key(&uid)
                || jobs.busy.contains(&uid)
                || jobs.added.get(&uid).is_some_and(|&done| version <= done)
            {
                return;
            }
            jobs.pending.insert(
                uid,
                Job {
                    meta: slim(meta),
                    kind: Kind::Add,
                    due: Instant::now(),
                    backoff: None,
                },
            );
        }
        self.wake.notify_one();
    }

    /// Asks for the finalizer to be removed (its state is committed, or it is out of scope).
    /// Replaces a pending add; keeps the retry state of a pending removal. Never waits.
    pub fn remove(&self, ticket: Ticket) {
        let uid = ticket.uid().to_owned();
        if uid.is_empty() {
            return;
        }
        {
            let mut jobs = self.lock();
            let backoff = match jobs.pending.remove(&uid) {
                Some(Job {
                    kind: Kind::Remove(_),
                    backoff,
                    ..
                }) => backoff,
                _ => None,
            };
            jobs.pending.insert(
                uid,
                Job {
                    meta: ticket.meta,
                    kind: Kind::Remove(ticket.reason),
                    due: Instant::now(),
                    backoff,
                },
            );
        }
        self.wake.notify_one();
    }

    /// Forgets a pod that is gone (its DELETED event): no request for it is useful any more.
    pub fn forget(&self, uid: &str) {
        let mut jobs = self.lock();
        jobs.added.remove(uid);
        if matches!(
            jobs.pending.get(uid),
            Some(Job {
                kind: Kind::Add,
                ..
            })
        ) {
            jobs.pending.remove(uid);
        }
    }

    /// Requests not done yet (pending or in flight).
    pub fn backlog(&self) -> usize {
        let jobs = self.lock();
        jobs.pending.len() + jobs.busy.len()
    }

    /// Waits until nothing is pending or in flight, or `deadline`; whether it got there.
    pub async fn drained(&self, deadline: Instant) -> bool {
        loop {
            let idle = self.idle.notified();
            if self.backlog() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, idle).await.is_err() {
                return self.backlog() == 0;
            }
        }
    }

    /// Runs the workers until `stop`; calls in flight then are abandoned (a removal not done is
    /// found again by the next start's sweep).
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut running: JoinSet<(String, Job, Result<Done, FinalizerError>)> = JoinSet::new();
        loop {
            let wake = self.wake.notified();
            let next_due = self.start_due(&mut running);
            tokio::select! {
                () = stop.cancelled() => {
                    running.abort_all();
                    return;
                }
                Some(done) = running.join_next(), if !running.is_empty() => {
                    if let Ok((uid, job, result)) = done {
                        self.finish(uid, job, result);
                    }
                }
                () = wake => {}
                () = sleep_until(next_due) => {}
            }
        }
    }

    /// Starts due jobs while workers are free (removals first); returns when the next one is due.
    fn start_due(
        self: &Arc<Self>,
        running: &mut JoinSet<(String, Job, Result<Done, FinalizerError>)>,
    ) -> Option<Instant> {
        let now = Instant::now();
        let mut jobs = self.lock();
        let free = self.workers.saturating_sub(running.len());
        let mut due: Vec<(bool, Instant, String)> = jobs
            .pending
            .iter()
            .filter(|(uid, job)| job.due <= now && !jobs.busy.contains(*uid))
            .map(|(uid, job)| (matches!(job.kind, Kind::Add), job.due, uid.clone()))
            .collect();
        due.sort();
        for (_, _, uid) in due.into_iter().take(free) {
            let Some(job) = jobs.pending.remove(&uid) else {
                continue;
            };
            jobs.busy.insert(uid.clone());
            let this = self.clone();
            running.spawn(async move {
                let result = this.call(&job).await;
                (uid, job, result)
            });
        }
        let idle = jobs.pending.is_empty() && jobs.busy.is_empty();
        let next = jobs
            .pending
            .iter()
            .filter(|(uid, _)| !jobs.busy.contains(*uid))
            .map(|(_, job)| job.due)
            .min();
        drop(jobs);
        if idle {
            self.idle.notify_waiters();
        }
        next
    }

    async fn call(&self, job: &Job) -> Result<Done, FinalizerError> {
        match job.kind {
            Kind::Add => finalizer::add(&self.client, &job.meta, &self.finalizer)
                .await
                .map(Done::Added),
            Kind::Remove(reason) => self.release(&job.meta, reason).await.map(Done::Removed),
        }
    }

    /// Takes the own finalizer off the pod, and the adopted one too unless the pod left the
    /// scope (then it belongs to the scope the pod moved to). `Removed` if either was removed.
    async fn release(
        &self,
        meta: &ObjectMeta,
        reason: ReleaseReason,
    ) -> Result<Removed, FinalizerError> {
        let adopted = self
            .adopt
            .as_deref()
            .filter(|_| reason != ReleaseReason::OutOfScope);
        let mut current = meta.clone();
        let mut outcome = Removed::Absent;
        for name in std::iter::once(self.finalizer.as_str()).chain(adopted) {
            match finalizer::remove(&self.client, &current, name).await? {
                Removed::Gone => return Ok(Removed::Gone),
                Removed::Removed => outcome = Removed::Removed,
                Removed::Absent => {}
            }
            // The next removal's test of its entry's index must see this one's result.
            if let Some(list) = current.finalizers.as_mut() {
                list.retain(|f| f != name);
            }
        }
        Ok(outcome)
    }

    fn finish(&self, uid: String, mut job: Job, result: Result<Done, FinalizerError>) {
        let mut jobs = self.lock();
        jobs.busy.remove(&uid);
        match (&job.kind, result) {
            (Kind::Add, Ok(Done::Added(Added::Added))) => {
                self.metrics.finalizer_added();
                if jobs.added.len() >= MAX_REMEMBERED_ADDS {
                    // Pods deleted while not watching are never forgotten one by one; starting
                    // over costs at most one redundant add (answered "present") per pod.
                    jobs.added.clear();
                }
                jobs.added.insert(uid.clone(), version_of(&job.meta));
            }
            (Kind::Remove(reason), Ok(Done::Removed(Removed::Removed))) => {
                self.metrics.finalizer_removed(reason.as_str());
                tracing::debug!(
                    namespace = job.meta.namespace.as_deref().unwrap_or_default(),
                    pod = job.meta.name.as_deref().unwrap_or_default(),
                    reason = reason.as_str(),
                    "finalizer removed"
                );
            }
            (_, Ok(_)) => {}
            (kind, Err(err)) => {
                let disposition = err.disposition();
                let operation = match kind {
                    Kind::Add => "add",
                    Kind::Remove(_) => "remove",
                };
                self.metrics
                    .finalizer_error(operation, disposition.reason().as_str());
                let newer = jobs.pending.contains_key(&uid);
                if matches!(kind, Kind::Add) && (disposition.is_fatal() || newer) {
                    tracing::warn!(error = %podline_client::error::Chain(&err), "cannot add the finalizer; the pod's next change asks again");
                } else if !newer {
                    let backoff = job
                        .backoff
                        .get_or_insert_with(|| self.backoff.clone().build());
                    let delay = if disposition.is_fatal() {
                        self.backoff.cap()
                    } else {
                        backoff.next().unwrap_or(self.backoff.cap())
                    };
                    if backoff.attempts() <= 1 || disposition.is_fatal() {
                        tracing::warn!(error = %podline_client::error::Chain(&err), retry_in = ?delay, "finalizer {operation} failed; will retry");
                    } else {
                        tracing::debug!(error = %podline_client::error::Chain(&err), retry_in = ?delay, "finalizer {operation} failed again; will retry");
                    }
                    job.due = Instant::now() + delay;
                    jobs.pending.insert(uid, job);
                }
            }
        }
        let idle = jobs.pending.is_empty() && jobs.busy.is_empty();
        drop(jobs);
        if idle {
            self.idle.notify_waiters();
        }
    }
}

impl std::fmt::Debug for Finalizers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Finalizers")
            .field("finalizer", &self.finalizer)
            .field("adopt", &self.adopt)
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

/// What a call did.
#[derive(Debug)]
enum Done {
    Added(Added),
    Removed(Removed),
}

/// A pod's resourceVersion as a number (0 when it has none that parses).
fn version_of(meta: &ObjectMeta) -> u64 {
    crate::lifecycle::parse_resource_version(meta.resource_version.as_deref()).unwrap_or(0)
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
