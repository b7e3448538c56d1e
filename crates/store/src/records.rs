//! The read side: what queries, the CLI (`podline runs|pods|show`) and the UI get back.
//!
//! Every type here is `Serialize`, so `-o json|yaml` is a one-liner for the caller.

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
    /// Earliest pod creation in the run.
    pub first_created_at: Option<Timestamp>,
    /// Latest pod finish in the run.
    pub last_finished_at: Option<Timestamp>,
}

/// Which runs to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only runs in this namespace.
    pub namespace: Option<String>,
    /// At most this many runs (most recently created first).
    pub limit: Option<u32>,
}

/// Which pods to list (`podline pods --run R --phase Failed -n ns`).
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
