//! The read side: what queries, the CLI (`podline runs|pods|show`) and the UI get back.
//!
//! Every type here is `Serialize`, so `-o json|yaml` is a one-liner for the caller.

use podline_phase::Phase;
use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Serialize;

use crate::model::{ContainerObservation, PhaseTransition};

/// Everything stored about one pod: the latest observation plus what only the store knows
/// (deletion, whether the final state was seen, when it was written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodRecord {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// resourceVersion of the stored observation (0 if only the deletion was ever seen).
    pub resource_version: u64,
    /// The run (grouping label value), if any.
    pub run: Option<String>,
    /// Labels of the latest observation.
    pub labels: BTreeMap<String, String>,
    /// Annotations of the latest observation.
    pub annotations: BTreeMap<String, String>,
    /// Controlling owner as `Kind/name`.
    pub owner: Option<String>,
    /// Node the pod ran on.
    pub node: Option<String>,
    /// Latest phase; `None` if only the deletion was ever seen.
    pub phase: Option<String>,
    /// Latest `status.reason`.
    pub reason: Option<String>,
    /// Latest `status.message`.
    pub message: Option<String>,
    /// `metadata.creationTimestamp`.
    pub created_at: Option<Timestamp>,
    /// When it was scheduled.
    pub scheduled_at: Option<Timestamp>,
    /// When it started.
    pub started_at: Option<Timestamp>,
    /// When it finished.
    pub finished_at: Option<Timestamp>,
    /// When deletion was requested (`deletionTimestamp`).
    pub deletion_requested_at: Option<Timestamp>,
    /// When the object was seen gone; `None` while the store believes it exists.
    pub deleted_at: Option<Timestamp>,
    /// Whether the last state before deletion was seen (false for pods that vanished during an
    /// outage: their recorded state may be stale).
    pub final_state_observed: bool,
    /// When the store first wrote this pod (recorder clock).
    pub recorded_at: Timestamp,
    /// When the store last moved this pod forward (recorder clock).
    pub updated_at: Timestamp,
    /// Containers of the latest observation, in spec order.
    pub containers: Vec<ContainerObservation>,
    /// Phase transitions, oldest first.
    pub transitions: Vec<PhaseTransition>,
}

impl PodRecord {
    /// What happened to the pod and when, for `podline show` and the UI's pod page: each phase
    /// transition, the scheduling, the deletion request and the removal (saying whether the final
    /// state was seen). Oldest first; events of the same second (Kubernetes times have whole
    /// seconds) in the order a pod lives them (see [`lifecycle_rank`]), not as stored (by phase
    /// name: Failed before Pending before Running).
    pub fn lifecycle_events(&self) -> Vec<(Timestamp, String)> {
        let mut events: Vec<(Timestamp, String)> = self
            .transitions
            .iter()
            .map(|t| (t.at, t.phase.clone()))
            .collect();
        if let Some(at) = self.scheduled_at {
            events.push((at, "Scheduled".into()));
        }
        if let Some(at) = self.deletion_requested_at {
            events.push((at, "Deletion requested".into()));
        }
        if let Some(at) = self.deleted_at {
            let how = if self.final_state_observed {
                "Deleted"
            } else {
                "Deleted (vanished while not watching: final state unknown)"
            };
            events.push((at, how.into()));
        }
        events.sort_by_key(|(at, what)| (*at, lifecycle_rank(what)));
        events
    }
}

/// Where an event of [`PodRecord::lifecycle_events`] comes in a pod's life, for events of the
/// same second: created (Pending), scheduled, running, ended, deletion asked, deleted. An
/// unknown phase goes with Running (it is seen while the pod lives).
fn lifecycle_rank(what: &str) -> u8 {
    match what {
        "Pending" => 0,
        "Scheduled" => 1,
        "Running" | "Unknown" => 2,
        "Succeeded" | "Failed" => 3,
        "Deletion requested" => 4,
        _ if what.starts_with("Deleted") => 5,
        _ => 2,
    }
}

/// One run: the pods sharing a grouping-label value in a namespace, summarised for `podline runs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunSummary {
    /// Namespace of the run's pods.
    pub namespace: String,
    /// The run (grouping label value).
    pub run: String,
    /// Pods in the run.
    pub pods: u64,
    /// Pods per latest phase (`Succeeded: 48, Failed: 2`).
    pub phases: BTreeMap<String, u64>,
    /// Pods of the run that are deleted.
    pub deleted: u64,
    /// Pods still in progress: not deleted and not in a terminal phase (`Succeeded`, `Failed`).
    pub active: u64,
    /// Earliest pod creation in the run.
    pub first_created_at: Option<Timestamp>,
    /// Latest pod finish in the run.
    pub last_finished_at: Option<Timestamp>,
}

impl RunSummary {
    /// Pods that ended `Succeeded`.
    pub fn succeeded(&self) -> u64 {
        self.phases
            .get(Phase::Succeeded.as_str())
            .copied()
            .unwrap_or(0)
    }

    /// Pods that did not succeed and are no longer in progress: `Failed`, and pods deleted
    /// before they finished (e.g. an image that never pulled).
    pub fn failed(&self) -> u64 {
        self.pods
            .saturating_sub(self.succeeded())
            .saturating_sub(self.active)
    }

    /// The run's overall state: running while any pod is in progress, else failed if any pod
    /// did not succeed, else succeeded.
    pub fn status(&self) -> RunStatus {
        if self.active > 0 {
            RunStatus::Running
        } else if self.failed() > 0 {
            RunStatus::Failed
        } else {
            RunStatus::Succeeded
        }
    }
}

/// A run's overall state (see [`RunSummary::status`]), for filtering and colouring runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Some pod is still pending or running.
    Running,
    /// Every pod is done and at least one did not succeed.
    Failed,
    /// Every pod succeeded.
    Succeeded,
}

impl RunStatus {
    /// The lowercase name used in URLs, JSON and CSS classes.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Failed => "failed",
            RunStatus::Succeeded => "succeeded",
        }
    }

    /// Parses `running`, `failed` or `succeeded` (any case); `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "running" => Some(RunStatus::Running),
            "failed" => Some(RunStatus::Failed),
            "succeeded" => Some(RunStatus::Succeeded),
            _ => None,
        }
    }
}

/// Which runs to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only runs in this namespace.
    pub namespace: Option<String>,
    /// Only runs in this overall state.
    pub status: Option<RunStatus>,
    /// Only runs whose first pod was created at or after this time.
    pub created_after: Option<Timestamp>,
    /// Only runs whose first pod was created before this time.
    pub created_before: Option<Timestamp>,
    /// At most this many runs (most recently created first).
    pub limit: Option<u32>,
}

/// Which pods to list: by run, phase and namespace (what the pod queries and the UI filter on).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodFilter {
    /// Only pods of this run.
    pub run: Option<String>,
    /// Only pods whose latest phase is this (exact, e.g. `Failed`).
    pub phase: Option<String>,
    /// Only pods in this namespace.
    pub namespace: Option<String>,
    /// At most this many pods (most recently created first).
    pub limit: Option<u32>,
}

/// How a user names one pod (`podline show POD`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodKey {
    /// By uid: exact, whatever the name.
    Uid(String),
    /// By namespace and name: the most recently created pod with that name (names are reused).
    /// If none matches, the name is also tried as a uid, so `show <uid>` works without a flag.
    Name {
        /// Namespace to look in.
        namespace: String,
        /// Pod name (or a uid).
        name: String,
    },
}

impl PodKey {
    /// Parses `namespace/name` or `name` (in `default_namespace`), as `kubectl` users type it.
    pub fn parse(input: &str, default_namespace: &str) -> Self {
        match input.split_once('/') {
            Some((namespace, name)) => PodKey::Name {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            },
            None => PodKey::Name {
                namespace: default_namespace.to_owned(),
                name: input.to_owned(),
            },
        }
    }
}

/// Which pods [`Store::live_pods`](crate::Store::live_pods) considers, matching what a relist saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveScope {
    /// Only pods in this namespace (`None`: all namespaces).
    pub namespace: Option<String>,
}

/// A pod the store believes still exists: the input of reconcile after a relist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LivePod {
    /// `metadata.uid`.
    pub uid: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Stored resourceVersion.
    pub resource_version: u64,
    /// Stored labels, so a recorder with a label selector can restrict reconcile to its pods.
    pub labels: BTreeMap<String, String>,
}

/// Totals for the summary line, the demo's check and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Pods ever recorded.
    pub pods: u64,
    /// Pods not marked deleted.
    pub live: u64,
    /// Pods marked deleted (observed or vanished).
    pub deleted: u64,
    /// Deleted pods whose final state was not observed.
    pub vanished: u64,
    /// Distinct `(namespace, run)` pairs.
    pub runs: u64,
    /// Stored phase transitions.
    pub transitions: u64,
    /// Stored containers.
    pub containers: u64,
    /// Pods per latest phase.
    pub phases: BTreeMap<String, u64>,
}

/// What [`Store::migrate`](crate::Store::migrate) did, for the startup log line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MigrationReport {
    /// Schema version before.
    pub from_version: i64,
    /// Schema version after.
    pub to_version: i64,
    /// Migrations applied now (empty when already up to date).
    pub applied: Vec<i64>,
}

/// What changed in the store after a mark: the cheap query behind live pages.
///
/// Marks are the store's own `updated_at` clock (the recorder's clock when it wrote), so a
/// reader passes back the `mark` it got and never misses a write that commits later.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    /// The newest write seen; pass it as `since` next time. `None` while the store is empty.
    pub mark: Option<Timestamp>,
    /// Pods written after `since`, oldest write first (at most the limit asked for).
    pub pods: Vec<ChangedPod>,
    /// More pods changed than the limit: reload everything rather than patching.
    pub truncated: bool,
}

/// One pod in [`Changes`]: enough to decide which page needs refreshing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangedPod {
    /// `metadata.uid`.
    pub uid: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The run (grouping label value), if any.
    pub run: Option<String>,
    /// Latest phase.
    pub phase: Option<String>,
    /// Whether the pod is now marked deleted.
    pub deleted: bool,
    /// When the store wrote this change (recorder clock).
    pub updated_at: Timestamp,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// `podline show` and the UI's pod page list one second's events in the order a pod lives
    /// them, not as stored (the store lists transitions by phase name), and an `Unknown` phase
    /// with Running.
    #[test]
    fn lifecycle_events_of_one_second_come_in_lifecycle_order() {
        let t = Timestamp::from_second(1_700_000_000).unwrap();
        let later = Timestamp::from_second(1_700_000_001).unwrap();
        let pod = PodRecord {
            uid: "u".into(),
            namespace: "ns".into(),
            name: "p".into(),
            resource_version: 1,
            run: None,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            owner: None,
            node: None,
            phase: Some("Failed".into()),
            reason: None,
            message: None,
            created_at: Some(t),
            scheduled_at: Some(t),
            started_at: None,
            finished_at: None,
            deletion_requested_at: Some(t),
            deleted_at: Some(later),
            final_state_observed: false,
            recorded_at: t,
            updated_at: t,
            containers: Vec::new(),
            transitions: ["Failed", "Pending", "Running", "Unknown"]
                .into_iter()
                .map(|phase| PhaseTransition::new(phase, t))
                .collect(),
        };
        let order: Vec<String> = pod
            .lifecycle_events()
            .into_iter()
            .map(|(_, what)| what)
            .collect();
        assert_eq!(
            order,
            [
                "Pending",
                "Scheduled",
                "Running",
                "Unknown",
                "Failed",
                "Deletion requested",
                "Deleted (vanished while not watching: final state unknown)",
            ]
        );
    }
}
