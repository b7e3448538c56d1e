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
//! Its size is bounded by the number of pods with unwritten changes.
//!
//! This is the same idea as the SQL recorder's queue (`podline-record`), which
//! batches every pending pod into one transaction instead; MLMD has no
//! multi-pod transaction, so here the unit of work is one pod.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard};

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::Notify;
use tokio::time::Instant;

/// One unit of work: the newest snapshot of a pod.
#[derive(Clone, Debug)]
pub struct Job {
    /// The pod as last seen.
    pub pod: Pod,
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
    /// uid whose pod is in flight is pending but not ready.
    ready: VecDeque<String>,
    /// Pods a worker is writing now, with the snapshot it is writing.
    in_flight: HashMap<String, Pod>,
    closed: bool,
}

/// The keyed queue; shared by the watch task and the workers.
#[derive(Debug, Default)]
pub struct PodQueue {
    inner: Mutex<Inner>,
    /// Woken when a job became ready, or the queue closed and drained.
    changed: Notify,
}

fn resource_version(pod: &Pod) -> Option<u64> {
    pod.metadata.resource_version.as_deref()?.parse().ok()
}

impl PodQueue {
    /// An empty queue.
    pub fn new() -> Self {
        PodQueue::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // No method panics halfway through an update, so a poisoned lock
        // still guards consistent maps.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Pods with unwritten changes (pending, not counting those in flight).
    pub fn depth(&self) -> usize {
        self.lock().pending.len()
    }

    /// Queue a snapshot of `pod` (identified by `uid`). A newer
    /// resourceVersion replaces an older pending one; `deleted` sticks.
    pub fn push(&self, uid: &str, pod: Pod, deleted: bool) {
        let mut inner = self.lock();
        let inner = &mut *inner;
        match inner.pending.get_mut(uid) {
            Some(job) => {
                let newer = match (resource_version(&job.pod), resource_version(&pod)) {
                    (Some(old), Some(new)) => new >= old,
                    _ => true,
                };
                if newer {
                    job.pod = pod;
                }
                job.deleted |= deleted;
            }
            None => {
                inner.pending.insert(
                    uid.to_owned(),
                    Job {
                        pod,
                        deleted,
                        queued_at: Instant::now(),
                        attempt: 0,
                    },
                );
                if !inner.in_flight.contains_key(uid) {
                    inner.ready.push_back(uid.to_owned());
                    self.changed.notify_one();
                }
            }
        }
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
            {
                let mut inner = self.lock();
                if let Some(uid) = inner.ready.pop_front()
                    && let Some(job) = inner.pending.remove(&uid)
                {
                    inner.in_flight.insert(uid.clone(), job.pod.clone());
                    return Some((uid, job));
                }
                if inner.closed && inner.pending.is_empty() && inner.in_flight.is_empty() {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// The worker finished `uid`: a snapshot that arrived meanwhile becomes ready.
    pub fn done(&self, uid: &str) {
        let mut inner = self.lock();
        inner.in_flight.remove(uid);
        if inner.pending.contains_key(uid) {
            inner.ready.push_back(uid.to_owned());
            drop(inner);
            self.changed.notify_one();
        } else if inner.closed && inner.pending.is_empty() && inner.in_flight.is_empty() {
            drop(inner);
            self.changed.notify_waiters();
        }
    }

    /// No more input: workers finish what is queued, then `next` says `None`.
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn pod(uid: &str, rv: u64, phase: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("p-{uid}"), "uid": uid, "resourceVersion": rv.to_string()},
            "status": {"phase": phase},
        }))
        .expect("pod")
    }

    fn phase(job: &Job) -> &str {
        job.pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn newest_snapshot_wins_and_deletion_sticks() {
        let q = PodQueue::new();
        q.push("a", pod("a", 5, "Running"), false);
        q.push("a", pod("a", 3, "Pending"), false); // stale: loses
        q.push("a", pod("a", 6, "Succeeded"), true);
        q.push("a", pod("a", 7, "Succeeded"), false); // deletion sticks
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
        q.push("a", pod("a", 1, "Pending"), false);
        q.push("b", pod("b", 1, "Pending"), false);
        let (first, _) = q.next().await.expect("a");
        assert_eq!(first, "a");
        q.push("a", pod("a", 2, "Running"), false);
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
        q.push("gone-queued", pod("gone-queued", 1, "Running"), false);
        q.push("kept", pod("kept", 1, "Running"), false);
        q.push("gone-busy", pod("gone-busy", 1, "Running"), false);
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
        q.push("a", pod("a", 1, "Succeeded"), false);
        let (uid, mut job) = q.next().await.expect("job");
        q.done(&uid);
        job.attempt = 1;
        q.retry(&uid, job.clone());
        let (_, again) = q.next().await.expect("retried");
        assert_eq!(again.attempt, 1);
        q.done("a");
        // A newer event arrived before the retry: the newer snapshot wins.
        q.push("a", pod("a", 2, "Succeeded"), true);
        job.attempt = 2;
        q.retry("a", job);
        let (_, merged) = q.next().await.expect("merged");
        assert_eq!(merged.attempt, 2);
        assert!(merged.deleted);
        assert_eq!(merged.pod.metadata.resource_version.as_deref(), Some("2"));
    }

    #[tokio::test]
    async fn close_lets_workers_drain_then_stop() {
        let q = Arc::new(PodQueue::new());
        q.push("a", pod("a", 1, "Running"), false);
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
}
