//! The write side: what the recorder observed, as plain data with no Kubernetes types.
//!
//! The recorder maps a `Pod` into a [`PodObservation`]; the store never sees the object itself, so
//! nothing it does not list here (in particular container env values and secret contents) can be
//! stored by accident.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// One observed version of one pod: everything the store records about it.
///
/// An observation is a full snapshot, not a diff: applying the newest observation of a pod gives
/// the same row whatever older observations were (or were not) applied before. That is what makes
/// replays after a crash or a relist harmless.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodObservation {
    /// `metadata.uid`: the identity of the pod across its whole life (names are reused, uids never).
    pub uid: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.resourceVersion` as a number: an older or equal version never overwrites a newer one.
    pub resource_version: u64,
    /// The run this pod belongs to (from the configured grouping label), so pods can be listed by run.
    pub run: Option<String>,
    /// `metadata.labels`, kept for lineage and selectors.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`, kept for lineage (the recorder may drop noisy ones before this point).
    pub annotations: BTreeMap<String, String>,
    /// The controlling owner as `Kind/name`, e.g. `Workflow/wf-1`, to link a pod to what made it.
    pub owner: Option<String>,
    /// `spec.nodeName`: where the pod ran.
    pub node: Option<String>,
    /// `status.phase` (`Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`).
    pub phase: String,
    /// `status.reason` (e.g. `DeadlineExceeded`, `Evicted`).
    pub reason: Option<String>,
    /// `status.message`: the human explanation that goes with `reason`.
    pub message: Option<String>,
    /// `metadata.creationTimestamp`.
    pub created_at: Option<Timestamp>,
    /// When the `PodScheduled` condition became true.
    pub scheduled_at: Option<Timestamp>,
    /// When the first container started (`status.startTime` or the earliest container start).
    pub started_at: Option<Timestamp>,
    /// When the pod reached a terminal phase.
    pub finished_at: Option<Timestamp>,
    /// `metadata.deletionTimestamp`: someone asked for the pod to go away (it may still be running).
    pub deletion_requested_at: Option<Timestamp>,
    /// One entry per container (init containers included, in spec order).
    pub containers: Vec<ContainerObservation>,
    /// Every phase the pod went through with the time it got there, derived by the recorder from
    /// the object itself so a missed watch event loses no transition.
    pub transitions: Vec<PhaseTransition>,
}

/// A phase and the time the pod entered it: one line of a pod's timeline.
///
/// Stored unique per `(uid, phase)`, first time wins, so replays and duplicate events add nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseTransition {
    /// The phase entered (`Pending`, `Running`, `Succeeded`, `Failed`, ...).
    pub phase: String,
    /// When the pod entered it.
    pub at: Timestamp,
}

impl PhaseTransition {
    /// Builds a transition; a convenience for the recorder and tests.
    pub fn new(phase: impl Into<String>, at: Timestamp) -> Self {
        Self {
            phase: phase.into(),
            at,
        }
    }
}

/// What a container was doing, as the kubelet reports it (`state.waiting|running|terminated`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainerState {
    /// Not started yet, or restarting (see `reason`: `ContainerCreating`, `ErrImagePull`, ...).
    Waiting,
    /// Running now.
    Running,
    /// Exited; `exit_code` says how.
    Terminated,
}

impl ContainerState {
    /// The lowercase name stored in the database and shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            ContainerState::Waiting => "waiting",
            ContainerState::Running => "running",
            ContainerState::Terminated => "terminated",
        }
    }

    /// Parses the stored name back; `None` for anything unknown (a newer writer, a hand edit).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "waiting" => Some(ContainerState::Waiting),
            "running" => Some(ContainerState::Running),
            "terminated" => Some(ContainerState::Terminated),
            _ => None,
        }
    }
}

/// One container of a pod: its image and how it ended. Also the read-side container record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerObservation {
    /// Container name, unique within the pod.
    pub name: String,
    /// The image as written in the spec (what was asked for).
    pub image: String,
    /// `imageID`: the resolved digest (what actually ran), once the kubelet knows it.
    pub image_id: Option<String>,
    /// Current or last state; `None` before the kubelet reported anything.
    pub state: Option<ContainerState>,
    /// Reason of the current state (`Completed`, `Error`, `OOMKilled`, `ErrImagePull`, ...).
    pub reason: Option<String>,
    /// Message of the current state (e.g. the termination message).
    pub message: Option<String>,
    /// Exit code once terminated: the task's result.
    pub exit_code: Option<i32>,
    /// `restartCount`.
    pub restarts: u32,
    /// When the container (last) started.
    pub started_at: Option<Timestamp>,
    /// When the container terminated.
    pub finished_at: Option<Timestamp>,
}

/// One change to apply to the store. Every op is idempotent, so a batch can be re-applied safely.
// Boxing the observation would make every recorder call site noisier for a few hundred bytes
// per queued op; batches are short-lived.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoreOp {
    /// A newer (or replayed) observation of a pod. Ignored if the store already holds this or a
    /// newer resource version. Never changes whether the pod was deleted.
    Upsert(PodObservation),
    /// The pod object is gone (a watch `DELETED` event). Recorded once: the first deletion wins and
    /// a stale upsert arriving later never "un-deletes" the pod. If the store never saw the pod, a
    /// minimal row is created so the deletion is not lost.
    Deleted {
        /// `metadata.uid` of the deleted pod.
        uid: String,
        /// Namespace, to create the minimal row for a pod never seen alive.
        namespace: String,
        /// Name, likewise.
        name: String,
        /// Resource version of the deletion event (kept for audit, not used for ordering).
        resource_version: u64,
        /// When the deletion was observed.
        at: Timestamp,
        /// Whether the object's last state was seen (true for a watch `DELETED` event that
        /// carried the final object).
        final_state_observed: bool,
    },
    /// The pod disappeared while nobody was watching (found missing on a relist): deleted, final
    /// state unknown. Only affects pods the store knows and has not already marked deleted.
    Vanished {
        /// `metadata.uid` of the pod that vanished.
        uid: String,
        /// When the disappearance was noticed.
        at: Timestamp,
    },
}

impl StoreOp {
    /// The uid the op is about, for logging and per-pod error reports.
    pub fn uid(&self) -> &str {
        match self {
            StoreOp::Upsert(obs) => &obs.uid,
            StoreOp::Deleted { uid, .. } | StoreOp::Vanished { uid, .. } => uid,
        }
    }
}

/// Where a watch should resume after a restart: stored in the same transaction as the data it
/// covers, so a restart (even after `kill -9`) neither skips nor repeats an effect.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResumePoint {
    /// Identifies the watch (e.g. cluster + namespace + selector), so several watches can share a
    /// store without mixing their positions.
    pub watch_key: String,
    /// The last resourceVersion whose effects are in the store.
    pub resource_version: u64,
}

/// A unit of work for [`Store::apply`](crate::Store::apply): applied in ONE transaction, all or
/// nothing, together with the resume point that covers it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// The changes, in the order they were observed.
    pub ops: Vec<StoreOp>,
    /// The watch position reached once these ops are applied; `None` to leave it unchanged.
    pub resume: Option<ResumePoint>,
}

impl Batch {
    /// A batch of ops without a resume point (tests, reconcile-only writes).
    pub fn new(ops: Vec<StoreOp>) -> Self {
        Self { ops, resume: None }
    }

    /// Sets the resume point committed with this batch.
    pub fn with_resume(mut self, watch_key: impl Into<String>, resource_version: u64) -> Self {
        self.resume = Some(ResumePoint {
            watch_key: watch_key.into(),
            resource_version,
        });
        self
    }
}

/// What one [`Store::apply`](crate::Store::apply) did: for metrics and for reporting bad pods.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ApplyReport {
    /// Ops in the batch.
    pub ops: usize,
    /// Pod rows inserted or moved forward (older/equal versions and in-batch duplicates don't count).
    pub pods_written: u64,
    /// New transitions stored (duplicates are skipped).
    pub transitions_added: u64,
    /// Pods newly marked deleted (by `Deleted` or `Vanished`).
    pub deletions_recorded: u64,
    /// Ops the store refused because they can never be stored (the rest of the batch is applied).
    pub rejected: Vec<RejectedOp>,
}

/// An op that can never be stored (e.g. an empty uid): reported, not retried, never blocks others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RejectedOp {
    /// The uid of the op (possibly empty, which is one reason to reject it).
    pub uid: String,
    /// Why it was rejected, for the log line.
    pub reason: String,
}
