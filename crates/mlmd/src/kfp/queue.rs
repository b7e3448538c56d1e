//! The work queue between the pod watch and the MLMD workers: keyed by pod
//! uid, so pods are written in parallel while each pod's writes stay in order.
//!
//! Why keyed and coalescing: a pod event is a full snapshot, and the writer
//! derives everything from the newest snapshot (state, outputs), so only the
//! newest one of each pod needs writing. The queue keeps one entry per uid
//! (the newer `resourceVersion` wins, a deletion sticks), hands each uid to at
//! most one worker at a time, and holds a newer snapshot back until the
//! worker on that pod is done. So N workers write N different pods at once,
//! never the same pod twice at once, and the watch never waits on MLMD.
//!
//! Why slim: an entry is a [`PodSnapshot`], what the writer needs of the pod
//! (its [`KfpPod`] and the contract's markers), extracted when it is queued,
//! not the decoded `Pod` (about 40 KB for a KFP step, most of it the
//! `ARGO_TEMPLATE` env and managed fields). A backlog of thousands of
//! finished pods listed at start then costs about 1-2 KB each, and pods KFP
//! mode skips (already written, not Argo) are never queued at all.
//!
//! Why Pending pods are held: a pod first seen Pending would cost a write
//! for NEW, then another for RUNNING, then the terminal one. With a hold
//! (`PodQueue::with_pending_hold`), a Pending pod waits up to that long for
//! its next snapshot; a pod that starts within it is created RUNNING at
//! once (two write transactions for the whole lifecycle), and one still
//! Pending after it is recorded NEW as before.
//!
//! This is the same idea as the SQL recorder's queue (`podline-record`), which
//! batches every pending pod into one transaction instead; MLMD has no
//! multi-pod transaction KFP's identity rules fit, so here the unit of work
//! is one pod.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::finalize::FinalizerFacts;
use super::patch::Markers;
use super::pod::{KfpPod, Skip, classify};
use crate::proto::ExecutionState;

/// What the workers need of one pod snapshot, extracted at enqueue time.
#[derive(Clone, Debug, PartialEq)]
pub struct PodSnapshot {
    /// The pod as KFP mode records it (the template's raw input artifacts,
    /// already read into [`KfpPod::inputs`], are dropped).
    pub kfp: KfpPod,
    /// The contract's markers the pod carries (what a patch can leave out).
    pub markers: Markers,
    /// What the finalizer rules need: the pod's finalizers, deletion and running containers.
    pub finalizer: FinalizerFacts,
    /// The pod's `resourceVersion`, to keep the newest snapshot.
    pub resource_version: Option<u64>,
}

impl PodSnapshot {
    /// The snapshot of `pod`, or why KFP mode does not record it.
    pub fn of(pod: &Pod) -> Result<PodSnapshot, Skip> {
        let mut kfp = classify(pod)?;
        kfp.template.input_artifacts = Vec::new();
        kfp.template.input_artifacts.shrink_to_fit();
        let meta = &pod.metadata;
        Ok(PodSnapshot {
            kfp,
            markers: Markers::of(meta.labels.as_ref(), meta.annotations.as_ref()),
            finalizer: FinalizerFacts::of(pod),
            resource_version: meta
                .resource_version
                .as_deref()
                .and_then(|v| v.parse().ok()),
        })
    }

    /// True when the pod has not started (Pending, not finished, not a cache hit).
    fn not_started(&self) -> bool {
        self.kfp.state(false) == ExecutionState::New
    }
}

/// One unit of work: the newest snapshot of a pod.
#[derive(Clone, Debug)]
pub struct Job {
    /// The pod as last seen (shared with the queue's in-flight record).
    pub pod: Arc<PodSnapshot>,
    /// The pod is gone (a DELETED event, or missing from a relist).
    pub deleted: bool,
    /// When the oldest change folded into this job was queued (for latency).
    pub queued_at: Instant,
    /// How many times the pod was handled again waiting for its inputs'
    /// upstream artifacts (see [`PodQueue::retry`]).
    pub attempt: u32,
}

#[derive(Debug, Default)]
struct Inner {
    /// Jobs not yet taken, by uid.
    pending: HashMap<String, Job>,
    /// Uids of `pending` jobs that a worker may take now, oldest first. A
    /// uid whose pod is in flight or held is pending but not ready.
    ready: VecDeque<String>,
    /// Pending pods not started yet, held until the instant given (or a
    /// snapshot that is not Pending); `hold_order` lists them by instant.
    held: HashMap<String, Instant>,
    hold_order: VecDeque<(Instant, String)>,
    /// Pods a worker is writing now, with the snapshot it is writing.
    in_flight: HashMap<String, Arc<PodSnapshot>>,
    closed: bool,
}

impl Inner {
    /// `uid` may be taken now if it is pending and no worker has it.
    fn release(&mut self, uid: &str) -> bool {
        self.held.remove(uid);
        if self.pending.contains_key(uid) && !self.in_flight.contains_key(uid) {
            self.ready.push_back(uid.to_owned());
            return true;
        }
        false
    }

    /// Release the holds that ran out by `now`; the next one's instant.
    fn release_expired(&mut self, now: Instant) -> Option<Instant> {
        while let Some((at, uid)) = self.hold_order.front() {
            if self.held.get(uid) != Some(at) {
                // Released early (a newer snapshot, a deletion): forget it.
                self.hold_order.pop_front();
                continue;
            }
            if *at > now {
                return Some(*at);
            }
            if let Some((_, uid)) = self.hold_order.pop_front() {
                self.release(&uid);
            }
        }
        None
    }
}

/// The keyed queue; shared by the watch task and the workers.
#[derive(Debug, Default)]
pub struct PodQueue {
    inner: Mutex<Inner>,
    /// Woken when a job became ready, or the queue closed and drained.
    changed: Notify,
    /// Woken when a job was taken or dropped (room for the watch).
    room: Notify,
    /// How long a Pending pod waits for its next snapshot (zero: no hold).
    pending_hold: Duration,
}

impl PodQueue {
    /// An empty queue that hands out every snapshot at once.
    pub fn new() -> Self {
        PodQueue::default()
    }

    /// An empty queue that holds a pod first queued Pending for up to
    /// `hold`, unless a snapshot that is not Pending (or a deletion) comes
    /// sooner: see the module documentation.
    pub fn with_pending_hold(hold: Duration) -> Self {
        PodQueue {
            pending_hold: hold,
            ..PodQueue::default()
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // No method panics halfway through an update, so a poisoned lock
        // still guards consistent maps.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Pods with unwritten changes (pending or held, not counting those in flight).
    pub fn depth(&self) -> usize {
        self.lock().pending.len()
    }

    /// Wait until fewer than `bound` pods are queued (or the queue is
    /// closed). Returns whether it had to wait.
    ///
    /// Why: the watch calls this before queueing, so a backlog far larger
    /// than the workers can write at once (thousands of finished pods
    /// listed at start) is read from the API server as the workers make
    /// room, and memory follows the bound, not the backlog. The watch's LIST
    /// is paged, so waiting here just delays the next page.
    pub async fn wait_for_room(&self, bound: usize) -> bool {
        let mut waited = false;
        loop {
            let room = self.room.notified();
            {
                let inner = self.lock();
                if inner.closed || inner.pending.len() < bound.max(1) {
                    return waited;
                }
            }
            waited = true;
            room.await;
        }
    }

    /// Queue a snapshot of the pod `uid`. A newer resourceVersion replaces an
    /// older pending one; `deleted` sticks.
    pub fn push(&self, uid: &str, pod: PodSnapshot, deleted: bool) {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let hold = !deleted && !self.pending_hold.is_zero() && pod.not_started();
        match inner.pending.get_mut(uid) {
            Some(job) => {
                let newer = match (job.pod.resource_version, pod.resource_version) {
                    (Some(old), Some(new)) => new >= old,
                    _ => true,
                };
                if newer {
                    job.pod = Arc::new(pod);
                }
                job.deleted |= deleted;
                let started = job.deleted || !job.pod.not_started();
                if started && inner.held.contains_key(uid) && inner.release(uid) {
                    self.changed.notify_one();
                }
            }
            None => {
                inner.pending.insert(
                    uid.to_owned(),
                    Job {
                        pod: Arc::new(pod),
                        deleted,
                        queued_at: Instant::now(),
                        attempt: 0,
                    },
                );
                if hold {
                    let until = Instant::now() + self.pending_hold;
                    inner.held.insert(uid.to_owned(), until);
                    inner.hold_order.push_back((until, uid.to_owned()));
                    // A waiting worker must learn the new deadline.
                    self.changed.notify_one();
                } else if !inner.in_flight.contains_key(uid) {
                    inner.ready.push_back(uid.to_owned());
                    self.changed.notify_one();
                }
            }
        }
    }

    /// Forget the queued (not in-flight) snapshot of `uid`, if any: its
    /// newest snapshot says there is nothing to record.
    pub fn discard(&self, uid: &str) {
        let mut inner = self.lock();
        inner.pending.remove(uid);
        inner.held.remove(uid);
        // A stale uid left in `ready` is passed over by `next`.
        drop(inner);
        self.room.notify_waiters();
    }

    /// A relist finished and saw exactly `seen`: every queued or in-flight
    /// pod missing from it was deleted while nobody watched, so its job
    /// becomes a deletion (in-flight ones get one queued after them).
    /// Returns those uids: their executions are the queue's to finish, not
    /// the vanished-pod sweep's.
    pub fn mark_vanished(&self, seen: &HashSet<String>) -> HashSet<String> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let mut marked = HashSet::new();
        for (uid, job) in inner.pending.iter_mut() {
            if !seen.contains(uid) {
                job.deleted = true;
                marked.insert(uid.clone());
            }
        }
        for (uid, pod) in &inner.in_flight {
            if !seen.contains(uid) && !inner.pending.contains_key(uid) {
                inner.pending.insert(
                    uid.clone(),
                    Job {
                        pod: pod.clone(),
                        deleted: true,
                        queued_at: Instant::now(),
                        attempt: 0,
                    },
                );
                marked.insert(uid.clone());
            }
        }
        let mut released = false;
        for uid in &marked {
            if inner.held.contains_key(uid) {
                released |= inner.release(uid);
            }
        }
        if released {
            self.changed.notify_waiters();
        }
        marked
    }

    /// Queue `job` again (a later attempt, e.g. waiting for upstream
    /// artifacts). A newer snapshot queued meanwhile is kept, with the
    /// higher attempt count.
    pub fn retry(&self, uid: &str, job: Job) {
        let mut inner = self.lock();
        if let Some(pending) = inner.pending.get_mut(uid) {
            pending.attempt = pending.attempt.max(job.attempt);
            pending.deleted |= job.deleted;
            return;
        }
        inner.pending.insert(uid.to_owned(), job);
        if !inner.in_flight.contains_key(uid) {
            inner.ready.push_back(uid.to_owned());
            self.changed.notify_one();
        }
    }

    /// Take the oldest ready job, waiting for one. `None` once the queue is
    /// closed and nothing is pending or in flight.
    pub async fn next(&self) -> Option<(String, Job)> {
        loop {
            let notified = self.changed.notified();
            let next_hold = {
                let mut inner = self.lock();
                let next_hold = inner.release_expired(Instant::now());
                while let Some(uid) = inner.ready.pop_front() {
                    if let Some(job) = inner.pending.remove(&uid) {
                        inner.in_flight.insert(uid.clone(), job.pod.clone());
                        self.room.notify_waiters();
                        return Some((uid, job));
                    }
                }
                if inner.closed && inner.pending.is_empty() && inner.in_flight.is_empty() {
                    return None;
                }
                next_hold
            };
            match next_hold {
                Some(at) => {
                    tokio::select! {
                        () = notified => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// The worker finished `uid`: a snapshot that arrived meanwhile becomes
    /// ready (unless it is held).
    pub fn done(&self, uid: &str) {
        let mut inner = self.lock();
        inner.in_flight.remove(uid);
        if inner.pending.contains_key(uid) && !inner.held.contains_key(uid) {
            inner.ready.push_back(uid.to_owned());
            drop(inner);
            self.changed.notify_one();
        } else if inner.closed && inner.pending.is_empty() && inner.in_flight.is_empty() {
            drop(inner);
            self.changed.notify_waiters();
        }
    }

    /// No more input: held pods are released, workers finish what is
    /// queued, then `next` says `None`.
    pub fn close(&self) {
        let mut inner = self.lock();
        inner.closed = true;
        let held: Vec<String> = inner.held.keys().cloned().collect();
        for uid in held {
            inner.release(&uid);
        }
        inner.hold_order.clear();
        drop(inner);
        self.changed.notify_waiters();
        self.room.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kfp::fixture::Step;

    fn snapshot(uid: &str, rv: u64, phase: &str) -> PodSnapshot {
        let mut pod = Step::new("ns", "wf", &format!("p-{uid}")).pod(Some(uid));
        pod.metadata.resource_version = Some(rv.to_string());
        pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some(phase.into()),
            ..Default::default()
        });
        PodSnapshot::of(&pod).expect("a KFP pod")
    }

    fn phase(job: &Job) -> &str {
        &job.pod.kfp.phase
    }

    #[tokio::test]
    async fn newest_snapshot_wins_and_deletion_sticks() {
        let q = PodQueue::new();
        q.push("a", snapshot("a", 5, "Running"), false);
        q.push("a", snapshot("a", 3, "Pending"), false); // stale: loses
        q.push("a", snapshot("a", 6, "Succeeded"), true);
        q.push("a", snapshot("a", 7, "Succeeded"), false); // deletion sticks
        assert_eq!(q.depth(), 1);
        let (uid, job) = q.next().await.expect("job");
        assert_eq!(uid, "a");
        assert_eq!(phase(&job), "Succeeded");
        assert!(job.deleted);
        assert_eq!(q.depth(), 0);
    }

    #[tokio::test]
    async fn a_pod_in_flight_is_never_handed_to_a_second_worker() {
        let q = PodQueue::new();
        q.push("a", snapshot("a", 1, "Pending"), false);
        q.push("b", snapshot("b", 1, "Pending"), false);
        let (first, _) = q.next().await.expect("a");
        assert_eq!(first, "a");
        q.push("a", snapshot("a", 2, "Running"), false);
        // "a" is in flight: the next job is "b", and then nothing is ready.
        let (second, _) = q.next().await.expect("b");
        assert_eq!(second, "b");
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), q.next()).await;
        assert!(
            waiting.is_err(),
            "a's newer snapshot must wait for its worker"
        );
        q.done("a");
        let (again, job) = q.next().await.expect("a again");
        assert_eq!(again, "a");
        assert_eq!(phase(&job), "Running");
    }

    #[tokio::test]
    async fn a_relist_marks_missing_pods_deleted_even_in_flight() {
        let q = PodQueue::new();
        q.push("gone-queued", snapshot("gone-queued", 1, "Running"), false);
        q.push("kept", snapshot("kept", 1, "Running"), false);
        q.push("gone-busy", snapshot("gone-busy", 1, "Running"), false);
        // A worker is writing the first one when the relist ends.
        let (uid, _) = q.next().await.expect("job");
        assert_eq!(uid, "gone-queued");
        let seen: HashSet<String> = ["kept".to_owned()].into();
        let marked = q.mark_vanished(&seen);
        assert_eq!(
            marked,
            ["gone-queued".to_owned(), "gone-busy".to_owned()].into()
        );
        // gone-queued is in flight now: it gets a deletion after its worker.
        q.done("gone-queued");
        let mut jobs = HashMap::new();
        for _ in 0..3 {
            let (uid, job) = q.next().await.expect("job");
            jobs.insert(uid.clone(), job.deleted);
            q.done(&uid);
        }
        assert!(jobs["gone-queued"]);
        assert!(jobs["gone-busy"]);
        assert!(!jobs["kept"]);
    }

    #[tokio::test]
    async fn a_retry_keeps_a_newer_snapshot_and_counts_attempts() {
        let q = PodQueue::new();
        q.push("a", snapshot("a", 1, "Succeeded"), false);
        let (uid, mut job) = q.next().await.expect("job");
        q.done(&uid);
        job.attempt = 1;
        q.retry(&uid, job.clone());
        let (_, again) = q.next().await.expect("retried");
        assert_eq!(again.attempt, 1);
        q.done("a");
        // A newer event arrived before the retry: the newer snapshot wins.
        q.push("a", snapshot("a", 2, "Succeeded"), true);
        job.attempt = 2;
        q.retry("a", job);
        let (_, merged) = q.next().await.expect("merged");
        assert_eq!(merged.attempt, 2);
        assert!(merged.deleted);
        assert_eq!(merged.pod.resource_version, Some(2));
    }

    #[tokio::test]
    async fn close_lets_workers_drain_then_stop() {
        let q = Arc::new(PodQueue::new());
        q.push("a", snapshot("a", 1, "Running"), false);
        q.close();
        let (uid, _) = q.next().await.expect("queued work is still handed out");
        let waiter = {
            let q = q.clone();
            tokio::spawn(async move { q.next().await.map(|(u, _)| u) })
        };
        tokio::task::yield_now().await;
        q.done(&uid);
        assert_eq!(waiter.await.expect("join"), None);
    }

    /// Without the hold, a pod seen Pending, Running and Succeeded by the
    /// workers costs three MLMD writes (NEW, RUNNING, the outputs).
    #[tokio::test(start_paused = true)]
    async fn a_pending_pod_is_held_until_it_starts_or_the_hold_runs_out() {
        let hold = Duration::from_secs(5);
        let q = PodQueue::with_pending_hold(hold);
        q.push("starts", snapshot("starts", 1, "Pending"), false);
        q.push("stuck", snapshot("stuck", 1, "Pending"), false);
        q.push("gone", snapshot("gone", 1, "Pending"), false);
        q.push("done", snapshot("done", 1, "Succeeded"), false);
        let (uid, _) = q.next().await.expect("a finished pod is not held");
        assert_eq!(uid, "done");
        q.done(&uid);
        // Started within the hold: handed out at once, as Running.
        q.push("starts", snapshot("starts", 2, "Running"), false);
        let (uid, job) = q.next().await.expect("started");
        assert_eq!((uid.as_str(), phase(&job)), ("starts", "Running"));
        q.done(&uid);
        // Deleted while Pending: a deletion is not held.
        q.push("gone", snapshot("gone", 2, "Pending"), true);
        let (uid, job) = q.next().await.expect("deleted");
        assert_eq!(uid, "gone");
        assert!(job.deleted);
        q.done(&uid);
        // Still Pending: handed out when the hold runs out.
        let before = Instant::now();
        let (uid, job) = q.next().await.expect("hold ran out");
        assert_eq!((uid.as_str(), phase(&job)), ("stuck", "Pending"));
        assert_eq!(before.elapsed(), hold, "exactly the hold (paused clock)");
    }

    #[tokio::test]
    async fn the_watch_waits_for_room_when_the_queue_is_at_its_bound() {
        let q = Arc::new(PodQueue::new());
        q.push("a", snapshot("a", 1, "Succeeded"), false);
        q.push("b", snapshot("b", 1, "Succeeded"), false);
        assert!(!q.wait_for_room(3).await, "below the bound: no wait");
        let watch = {
            let q = q.clone();
            tokio::spawn(async move { q.wait_for_room(2).await })
        };
        tokio::task::yield_now().await;
        assert!(!watch.is_finished(), "at the bound: the watch waits");
        let (uid, _) = q.next().await.expect("a worker takes one");
        assert!(watch.await.expect("join"), "room made: the watch goes on");
        q.done(&uid);
    }

    /// Heap bytes allocated and not freed by `f` on this thread.
    fn retained<T>(f: impl FnOnce() -> T) -> (T, i64) {
        let before = counting::net();
        let value = f();
        (value, counting::net() - before)
    }

    /// The queue's footprint follows what the writer needs of each pod,
    /// not the pod: 2,000 finished KFP pods, each padded with 30 KB of what
    /// real pods carry (managed fields, env, unrelated annotations), cost
    /// the queue under 4 KiB each; the decoded pods alone are over 30 KiB
    /// each (the queue held them whole before).
    #[test]
    fn a_backlog_of_2000_pods_costs_the_queue_a_few_kib_per_pod() {
        let pods: Vec<Pod> = (0..2000)
            .map(|i| {
                let mut step = Step::new("team-a", &format!("wf-{}", i / 10), &format!("s{i}"));
                step.component_spec = Some(crate::kfp::fixture::component_spec(
                    "Step",
                    &[("out", "Dataset")],
                ));
                step.inputs = vec![("in".into(), format!("artifacts/in-{i}.tgz"))];
                step.outputs_on_pod = Some(vec![("out".into(), step.key("out"))]);
                step.annotations
                    .push(("example.com/bulk".into(), "x".repeat(30 * 1024)));
                let mut pod = step.pod(Some(&format!("uid-{i}")));
                pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
                    phase: Some("Succeeded".into()),
                    ..Default::default()
                });
                pod
            })
            .collect();
        let (decoded, pod_bytes) = retained(|| {
            let text = serde_json::to_string(&pods[0]).expect("json");
            serde_json::from_str::<Pod>(&text).expect("pod")
        });
        drop(decoded);
        let q = PodQueue::new();
        let ((), queue_bytes) = retained(|| {
            for (i, pod) in pods.iter().enumerate() {
                let snapshot = PodSnapshot::of(pod).expect("a KFP pod");
                q.push(&format!("uid-{i}"), snapshot, false);
            }
        });
        assert_eq!(q.depth(), 2000);
        let per_pod = queue_bytes / 2000;
        assert!(pod_bytes > 30 * 1024, "a decoded pod: {pod_bytes} bytes");
        assert!(
            per_pod < 4 * 1024,
            "the queue retains {per_pod} bytes per pod (a decoded pod is {pod_bytes})"
        );
    }
}

/// A global allocator for this crate's unit tests that counts, per thread,
/// the bytes allocated and not yet freed (so tests running in parallel on
/// other threads do not disturb a measurement).
#[cfg(test)]
#[allow(unsafe_code)] // a GlobalAlloc impl; see the SAFETY notes.
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static NET: Cell<i64> = const { Cell::new(0) };
    }

    struct Counting;

    fn add(bytes: usize, sign: i64) {
        // `try_with`: the thread-local is gone while the thread exits.
        let _ = NET.try_with(|n| n.set(n.get() + sign * bytes as i64));
    }

    // SAFETY: every call is forwarded to `System` unchanged; the counter
    // is a const-initialized thread-local `Cell` that never allocates.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            add(layout.size(), 1);
            // SAFETY: the caller's contract is System's.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            add(layout.size(), -1);
            // SAFETY: the caller's contract is System's.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            add(layout.size(), 1);
            // SAFETY: the caller's contract is System's.
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            add(layout.size(), -1);
            add(new_size, 1);
            // SAFETY: the caller's contract is System's.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// Bytes allocated minus bytes freed on this thread so far.
    pub fn net() -> i64 {
        NET.with(Cell::get)
    }
}
