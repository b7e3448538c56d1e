//! The queue between the watch and the store writer: coalesced per pod, so it never makes the
//! watch wait on the disk.
//!
//! Why coalescing instead of a plain bounded channel: with a plain channel, a slow disk fills the
//! channel, the watch task blocks on `send`, stops reading the stream, and the API server (or our
//! own client timeout) ends the watch: a slow store would turn into reconnect storms. Because every
//! observation is a full snapshot of a pod (transitions derived from the object, see
//! [`lifecycle`](crate::lifecycle)), only the newest observation of each pod needs writing: the
//! queue keeps one entry per uid, the newer resourceVersion wins, and a deletion is kept alongside
//! it. The queue's size is therefore bounded by the number of pods with unwritten changes, not by
//! the event rate.
//!
//! On top of that, a soft bound (`capacity` distinct pods): when a NEW pod would exceed it, the
//! watch waits for the writer to drain, but never longer than `max_wait` (chosen well below the
//! client timeout); after that it inserts anyway and counts an overflow. Memory then grows with the
//! number of distinct pods (which the cluster bounds), and the watch is never stalled past its
//! client timeout.
//!
//! The resume point: the writer drains *everything* pending together with the last
//! resourceVersion the watch reported, under one lock, so the resume point committed with a batch
//! covers exactly the ops in it.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use podline_store::{PodObservation, StoreOp};

use crate::ticket::Ticket;

/// What the writer takes out of the queue in one go.
#[derive(Debug, Default)]
pub(crate) struct Drained {
    /// Ops to apply, per pod an upsert before its deletion.
    pub ops: Vec<StoreOp>,
    /// The resourceVersion the batch brings the store to, if it moved.
    pub resume: Option<u64>,
    /// A relist finished: these uids existed at the list; anything else the store believes live
    /// vanished while we were not watching.
    pub reconcile: Option<HashSet<String>>,
    /// When the oldest of these changes was queued (for event-to-commit latency).
    pub oldest: Option<Instant>,
    /// Pods whose finalizer may be removed once this batch committed (queued after the
    /// observation that allows it, so they are in its batch or a later one).
    pub releases: Vec<Ticket>,
}

#[derive(Debug, Default)]
struct Entry {
    upsert: Option<PodObservation>,
    deleted: Option<StoreOp>,
    vanished: Option<StoreOp>,
    release: Option<Ticket>,
}

#[derive(Debug, Default)]
struct Inner {
    pending: HashMap<String, Entry>,
    resume: Option<u64>,
    resume_dirty: bool,
    reconcile: Option<HashSet<String>>,
    oldest: Option<Instant>,
    closed: bool,
}

/// The coalescing queue; shared by the watch task (producer) and the writer task (consumer).
#[derive(Debug)]
pub(crate) struct Queue {
    inner: Mutex<Inner>,
    /// Woken when something was added (or the queue closed).
    changed: Notify,
    /// Woken when the writer drained.
    space: Notify,
    capacity: usize,
    max_wait: Duration,
}

/// What a push did, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// Stored (new entry or coalesced into an existing one).
    Queued,
    /// Stored over the bound after waiting `max_wait` for the writer.
    Overflowed,
}

impl Queue {
    /// A queue of at most `capacity` distinct pods (soft, see module docs).
    pub fn new(capacity: usize, max_wait: Duration) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            changed: Notify::new(),
            space: Notify::new(),
            capacity: capacity.max(1),
            max_wait,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock means a panic while holding it; the data (plain maps) is still
        // consistent because no method panics halfway through an update.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Pods with unwritten changes.
    pub fn depth(&self) -> usize {
        self.lock().pending.len()
    }

    /// Queues a new observation of a pod; the newest resourceVersion wins.
    pub async fn upsert(&self, obs: PodObservation) -> Pushed {
        let pushed = self.make_room(&obs.uid).await;
        {
            let mut inner = self.lock();
            let now = Instant::now();
            inner.oldest.get_or_insert(now);
            let entry = inner.pending.entry(obs.uid.clone()).or_default();
            let newer = entry
                .upsert
                .as_ref()
                .is_none_or(|old| old.resource_version < obs.resource_version);
            if newer {
                entry.upsert = Some(obs);
            }
        }
        self.changed.notify_one();
        pushed
    }

    /// Queues a deletion (with the pod's last observation, if it had one); kept through coalescing.
    pub async fn delete(&self, last: Option<PodObservation>, deleted: StoreOp) -> Pushed {
        let uid = deleted.uid().to_owned();
        let pushed = self.make_room(&uid).await;
        {
            let mut inner = self.lock();
            let now = Instant::now();
            inner.oldest.get_or_insert(now);
            let entry = inner.pending.entry(uid).or_default();
            if let Some(obs) = last
                && entry
                    .upsert
                    .as_ref()
                    .is_none_or(|old| old.resource_version < obs.resource_version)
            {
                entry.upsert = Some(obs);
            }
            entry.deleted.get_or_insert(deleted);
        }
        self.changed.notify_one();
        pushed
    }

    /// The watch reached `rv` (an event or a bookmark); the next batch commits it as the resume
    /// point. Never moves backwards.
    pub fn advance(&self, rv: u64) {
        {
            let mut inner = self.lock();
            if inner.resume.is_none_or(|old| rv > old) {
                inner.resume = Some(rv);
                inner.resume_dirty = true;
            }
        }
        self.changed.notify_one();
    }

    /// A relist finished and saw exactly `seen`. Queued pods not in it (changes from before the
    /// gap) get a vanished mark after their upsert; the writer compares the store with `seen`.
    pub fn reconcile(&self, seen: HashSet<String>, at: jiff::Timestamp) {
        {
            let mut inner = self.lock();
            for (uid, entry) in inner.pending.iter_mut() {
                // A release-only entry (no change of its own) is not a pod the queue knows.
                let known = entry.upsert.is_some() || entry.vanished.is_some();
                if known && entry.deleted.is_none() && !seen.contains(uid) {
                    entry.vanished = Some(StoreOp::Vanished {
                        uid: uid.clone(),
                        at,
                    });
                }
            }
            inner.reconcile = Some(seen);
        }
        self.changed.notify_one();
    }

    /// Queues a release ticket behind whatever is queued for its pod: it is handed back in the
    /// batch that writes the pod's queued changes, or in a later one, never before.
    pub fn release(&self, ticket: Ticket) {
        {
            let mut inner = self.lock();
            inner.oldest.get_or_insert_with(Instant::now);
            let entry = inner.pending.entry(ticket.uid().to_owned()).or_default();
            entry.release = Some(ticket);
        }
        self.changed.notify_one();
    }

    /// No more input: the writer drains what is left and stops.
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_one();
    }

    /// Takes everything pending, or `None` once closed and empty.
    ///
    /// Waits for a first change, then lingers up to `linger` (or until `max_batch` pods are
    /// pending) so that bursts become one transaction.
    pub async fn next_batch(&self, linger: Duration, max_batch: usize) -> Option<Drained> {
        // Wait for anything at all.
        loop {
            let notified = self.changed.notified();
            {
                let inner = self.lock();
                if has_work(&inner) {
                    break;
                }
                if inner.closed {
                    return None;
                }
            }
            notified.await;
        }
        // Linger so a burst becomes one transaction.
        let deadline = Instant::now() + linger;
        loop {
            let notified = self.changed.notified();
            {
                let inner = self.lock();
                if inner.closed || inner.pending.len() >= max_batch {
                    break;
                }
            }
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => break,
                () = notified => {}
            }
        }
        let drained = {
            let mut inner = self.lock();
            // Take the map rather than drain it: a drained map keeps the capacity of its
            // largest burst (an initial LIST of 10k pods), touched memory the daemon would carry
            // for the rest of its life.
            let pending = std::mem::take(&mut inner.pending);
            let mut ops = Vec::with_capacity(pending.len() + 1);
            let mut releases = Vec::new();
            for (_, entry) in pending {
                ops.extend(entry.upsert.map(StoreOp::Upsert));
                ops.extend(entry.deleted);
                ops.extend(entry.vanished);
                releases.extend(entry.release);
            }
            let resume = if inner.resume_dirty {
                inner.resume
            } else {
                None
            };
            inner.resume_dirty = false;
            Drained {
                ops,
                resume,
                reconcile: inner.reconcile.take(),
                oldest: inner.oldest.take(),
                releases,
            }
        };
        self.space.notify_waiters();
        Some(drained)
    }

    /// Puts a batch that could not be written back (to be retried with what arrived since).
    ///
    /// Newer queued changes win over the returned ones; the resume point is kept at the newest.
    pub fn requeue(&self, drained: Drained) {
        let mut inner = self.lock();
        for op in drained.ops {
            let uid = op.uid().to_owned();
            let entry = inner.pending.entry(uid).or_default();
            match op {
                StoreOp::Upsert(obs) => {
                    if entry
                        .upsert
                        .as_ref()
                        .is_none_or(|newer| newer.resource_version < obs.resource_version)
                    {
                        entry.upsert = Some(obs);
                    }
                }
                deleted @ StoreOp::Deleted { .. } => {
                    entry.deleted.get_or_insert(deleted);
                }
                vanished @ StoreOp::Vanished { .. } => {
                    if entry.deleted.is_none() {
                        entry.vanished.get_or_insert(vanished);
                    }
                }
            }
        }
        for ticket in drained.releases {
            let entry = inner.pending.entry(ticket.uid().to_owned()).or_default();
            entry.release.get_or_insert(ticket);
        }
        if drained.resume.is_some() {
            inner.resume_dirty = true;
        }
        if let Some(seen) = drained.reconcile {
            // A newer relist's set supersedes an older one.
            inner.reconcile.get_or_insert(seen);
        }
        if let Some(oldest) = drained.oldest {
            inner.oldest = Some(inner.oldest.map_or(oldest, |o| o.min(oldest)));
        }
    }

    /// The soft bound: wait (at most `max_wait`) for room when a new pod would exceed capacity.
    async fn make_room(&self, uid: &str) -> Pushed {
        let deadline = Instant::now() + self.max_wait;
        loop {
            let space = self.space.notified();
            {
                let inner = self.lock();
                if inner.pending.len() < self.capacity || inner.pending.contains_key(uid) {
                    return Pushed::Queued;
                }
            }
            if tokio::time::timeout_at(deadline, space).await.is_err() {
                return Pushed::Overflowed;
            }
        }
    }
}

fn has_work(inner: &Inner) -> bool {
    !inner.pending.is_empty() || inner.resume_dirty || inner.reconcile.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(uid: &str, rv: u64, phase: &str) -> PodObservation {
        PodObservation {
            uid: uid.to_owned(),
            namespace: "ns".to_owned(),
            name: format!("pod-{uid}"),
            resource_version: rv,
            phase: phase.to_owned(),
            ..PodObservation::default()
        }
    }

    fn deleted(uid: &str, rv: u64) -> StoreOp {
        StoreOp::Deleted {
            uid: uid.to_owned(),
            namespace: "ns".to_owned(),
            name: format!("pod-{uid}"),
            resource_version: rv,
            at: jiff::Timestamp::UNIX_EPOCH,
            final_state_observed: true,
        }
    }

    fn phases(d: &Drained) -> Vec<String> {
        let mut v: Vec<String> = d
            .ops
            .iter()
            .map(|op| match op {
                StoreOp::Upsert(o) => format!("{}:{}@{}", o.uid, o.phase, o.resource_version),
                StoreOp::Deleted { uid, .. } => format!("{uid}:deleted"),
                StoreOp::Vanished { uid, .. } => format!("{uid}:vanished"),
            })
            .collect();
        v.sort();
        v
    }

    #[tokio::test(start_paused = true)]
    async fn newest_observation_wins_and_deletion_is_kept() {
        let q = Queue::new(10, Duration::from_secs(1));
        q.upsert(obs("a", 5, "Running")).await;
        q.upsert(obs("a", 3, "Pending")).await; // stale, loses
        q.upsert(obs("b", 4, "Pending")).await;
        q.delete(Some(obs("b", 9, "Succeeded")), deleted("b", 9))
            .await;
        q.upsert(obs("b", 8, "Running")).await; // stale after the delete
        q.advance(9);
        assert_eq!(q.depth(), 2);
        let d = q.next_batch(Duration::from_millis(50), 500).await.unwrap();
        assert_eq!(
            phases(&d),
            vec!["a:Running@5", "b:Succeeded@9", "b:deleted"],
            "one upsert per pod (newest), deletion kept"
        );
        let b_ops: Vec<_> = d.ops.iter().filter(|op| op.uid() == "b").collect();
        assert!(
            matches!(b_ops[0], StoreOp::Upsert(_)),
            "upsert before deletion"
        );
        assert_eq!(d.resume, Some(9));
        assert_eq!(q.depth(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn resume_point_never_moves_backwards_and_bookmark_alone_is_a_batch() {
        let q = Queue::new(10, Duration::from_secs(1));
        q.advance(10);
        q.advance(7);
        let d = q.next_batch(Duration::from_millis(50), 500).await.unwrap();
        assert!(d.ops.is_empty());
        assert_eq!(d.resume, Some(10));
        q.advance(10);
        q.close();
        assert!(
            q.next_batch(Duration::from_millis(50), 500).await.is_none(),
            "nothing new"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_waits_for_the_writer_but_never_past_max_wait() {
        let q = Queue::new(2, Duration::from_millis(300));
        assert_eq!(q.upsert(obs("a", 1, "Pending")).await, Pushed::Queued);
        assert_eq!(q.upsert(obs("b", 1, "Pending")).await, Pushed::Queued);
        // Coalescing into an existing pod never waits.
        assert_eq!(q.upsert(obs("a", 2, "Running")).await, Pushed::Queued);
        let started = Instant::now();
        assert_eq!(q.upsert(obs("c", 1, "Pending")).await, Pushed::Overflowed);
        assert_eq!(started.elapsed(), Duration::from_millis(300));
        assert_eq!(q.depth(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_resumes_as_soon_as_the_writer_drains() {
        let q = std::sync::Arc::new(Queue::new(1, Duration::from_secs(30)));
        q.upsert(obs("a", 1, "Pending")).await;
        let q2 = q.clone();
        let producer = tokio::spawn(async move { q2.upsert(obs("b", 1, "Pending")).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let d = q.next_batch(Duration::from_millis(10), 500).await.unwrap();
        assert_eq!(phases(&d), vec!["a:Pending@1"]);
        assert_eq!(producer.await.unwrap(), Pushed::Queued);
        assert_eq!(q.depth(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn linger_batches_a_burst_but_a_full_batch_goes_at_once() {
        let q = std::sync::Arc::new(Queue::new(10_000, Duration::from_secs(1)));
        for i in 0..3 {
            q.upsert(obs(&format!("p{i}"), 1, "Pending")).await;
        }
        let started = Instant::now();
        let d = q.next_batch(Duration::from_millis(50), 500).await.unwrap();
        assert_eq!(d.ops.len(), 3);
        assert_eq!(
            started.elapsed(),
            Duration::from_millis(50),
            "lingered for more"
        );
        for i in 0..500 {
            q.upsert(obs(&format!("p{i}"), 2, "Running")).await;
        }
        let started = Instant::now();
        let d = q.next_batch(Duration::from_millis(50), 500).await.unwrap();
        assert_eq!(d.ops.len(), 500);
        assert_eq!(
            started.elapsed(),
            Duration::ZERO,
            "a full batch does not linger"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn reconcile_marks_queued_pods_missing_from_the_relist_as_vanished() {
        let q = Queue::new(10, Duration::from_secs(1));
        q.upsert(obs("gone", 3, "Running")).await;
        q.upsert(obs("kept", 4, "Running")).await;
        q.delete(None, deleted("dead", 5)).await;
        q.reconcile(
            ["kept".to_owned()].into_iter().collect(),
            jiff::Timestamp::UNIX_EPOCH,
        );
        let d = q.next_batch(Duration::from_millis(1), 500).await.unwrap();
        assert_eq!(
            phases(&d),
            vec![
                "dead:deleted",
                "gone:Running@3",
                "gone:vanished",
                "kept:Running@4"
            ]
        );
        assert!(d.reconcile.unwrap().contains("kept"));
    }

    fn ticket(uid: &str) -> Ticket {
        let meta = kube::core::ObjectMeta {
            uid: Some(uid.to_owned()),
            namespace: Some("ns".to_owned()),
            name: Some(format!("pod-{uid}")),
            ..Default::default()
        };
        Ticket::new(&meta, crate::ticket::ReleaseReason::Terminal)
    }

    #[tokio::test(start_paused = true)]
    async fn a_release_ticket_rides_with_its_pods_changes_and_survives_a_requeue() {
        let q = Queue::new(10, Duration::from_secs(1));
        q.upsert(obs("a", 5, "Succeeded")).await;
        q.release(ticket("a"));
        let d = q.next_batch(Duration::from_millis(1), 500).await.unwrap();
        assert_eq!(phases(&d), vec!["a:Succeeded@5"]);
        assert_eq!(d.releases.len(), 1, "in the batch of the observation");

        // The write failed: ops and ticket go back and come out together again.
        q.requeue(d);
        let d = q.next_batch(Duration::from_millis(1), 500).await.unwrap();
        assert_eq!(phases(&d), vec!["a:Succeeded@5"]);
        assert_eq!(d.releases.len(), 1);

        // A ticket alone is work (the next commit releases it), and not a pod to reconcile.
        q.release(ticket("b"));
        q.reconcile(HashSet::new(), jiff::Timestamp::UNIX_EPOCH);
        let d = q.next_batch(Duration::from_millis(1), 500).await.unwrap();
        assert!(d.ops.is_empty(), "{:?}", phases(&d));
        assert_eq!(d.releases.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn requeued_batch_merges_with_newer_changes() {
        let q = Queue::new(10, Duration::from_secs(1));
        q.upsert(obs("a", 3, "Running")).await;
        q.advance(3);
        let d = q.next_batch(Duration::from_millis(1), 500).await.unwrap();
        q.upsert(obs("a", 5, "Succeeded")).await;
        q.advance(5);
        q.requeue(d);
        let d = q.next_batch(Duration::from_millis(1), 500).await.unwrap();
        assert_eq!(phases(&d), vec!["a:Succeeded@5"]);
        assert_eq!(d.resume, Some(5));
    }
}
