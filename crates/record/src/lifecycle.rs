//! Pure mapping from a Kubernetes [`Pod`] to the store's [`PodObservation`].
//!
//! Why a pure function: every fact the recorder stores is derived from one pod object, never from
//! the sequence of events that led to it. A watch that misses intermediate events (a reconnect, a
//! relist, a restart of the recorder) therefore records exactly the same transitions as one that saw
//! every event, and re-applying an object is harmless. The transition times follow the rule every
//! podline component agrees on:
//!
//! | transition | time taken from |
//! |---|---|
//! | `Pending` | `metadata.creationTimestamp` |
//! | `Running` | earliest `startedAt` of any container (running, terminated or last terminated state) |
//! | `Succeeded` / `Failed` | latest `finishedAt` of a terminated container; if none ever terminated, the `Ready` condition's `lastTransitionTime` |
//!
//! Nothing secret is copied: the observation has no place for env values, and annotations that
//! may embed a whole manifest (with its env values) are dropped, see [`REDACTED_ANNOTATIONS`].

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerState, ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::error::ObserveError;
use podline_store::{
    ContainerObservation, ContainerState as StoredState, PhaseTransition, PodObservation,
};

/// The default label whose value names the run a pod belongs to: Argo Workflows' workflow label,
/// the label Kubeflow Pipelines groups pods by.
pub const DEFAULT_RUN_LABEL: &str = "workflows.argoproj.io/workflow";

/// podline's own run label (set by `podline run`), used when the configured run label is absent.
pub const PODLINE_RUN_LABEL: &str = "podline.io/run";

/// Annotations that are never stored because their value can contain a full manifest, including
/// env values and secret references.
pub const REDACTED_ANNOTATIONS: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration"];

/// The phases a pod goes through, in lifecycle order, as the Kubernetes API spells them.
/// (The spellings of the shared [`podline_phase::Phase`], for the records' string fields.)
pub mod phase {
    use podline_phase::Phase;

    /// Accepted by the API server, not yet running.
    pub const PENDING: &str = Phase::Pending.as_str();
    /// At least one container started.
    pub const RUNNING: &str = Phase::Running.as_str();
    /// All containers exited 0.
    pub const SUCCEEDED: &str = Phase::Succeeded.as_str();
    /// At least one container failed, or the pod could not run at all.
    pub const FAILED: &str = Phase::Failed.as_str();

    /// Whether a phase is final: a pod never leaves it.
    pub fn is_terminal(phase: &str) -> bool {
        Phase::is_terminal_str(phase)
    }
}

/// What the mapping needs to know beyond the pod itself; one value per recorder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleConfig {
    run_label: String,
}

impl LifecycleConfig {
    /// A config grouping pods into runs by `run_label` (falling back to [`PODLINE_RUN_LABEL`]).
    ///
    /// Fails on an empty label, which would silently group nothing.
    pub fn new(run_label: impl Into<String>) -> Result<Self, ObserveError> {
        let run_label = run_label.into();
        if run_label.trim().is_empty() {
            return Err(ObserveError::EmptyRunLabel);
        }
        Ok(Self { run_label })
    }

    /// The label whose value names a pod's run.
    pub fn run_label(&self) -> &str {
        &self.run_label
    }
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        Self {
            run_label: DEFAULT_RUN_LABEL.to_owned(),
        }
    }
}

/// Maps a pod object to what the store records about it.
///
/// Fails only when the object cannot be identified or ordered (no uid, no numeric
/// resourceVersion); the caller logs it by namespace/name and skips it.
pub fn observe(pod: &Pod, config: &LifecycleConfig) -> Result<PodObservation, ObserveError> {
    let meta = &pod.metadata;
    let namespace = meta.namespace.clone().unwrap_or_default();
    let name = meta.name.clone().unwrap_or_default();
    let uid = match meta.uid.as_deref() {
        Some(uid) if !uid.is_empty() => uid.to_owned(),
        _ => return Err(ObserveError::MissingUid { namespace, name }),
    };
    let resource_version =
        parse_resource_version(meta.resource_version.as_deref()).ok_or_else(|| {
            ObserveError::BadResourceVersion {
                namespace: namespace.clone(),
                name: name.clone(),
                value: meta.resource_version.clone().unwrap_or_default(),
            }
        })?;

    let labels = meta.labels.clone().unwrap_or_default();
    let run = labels
        .get(config.run_label())
        .or_else(|| labels.get(PODLINE_RUN_LABEL))
        .cloned();
    let annotations: BTreeMap<String, String> = meta
        .annotations
        .iter()
        .flatten()
        .filter(|(key, _)| !REDACTED_ANNOTATIONS.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let owner = owner_of(pod);

    let status = pod.status.as_ref();
    let phase = status
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| phase::PENDING.to_owned());
    let statuses: &[ContainerStatus] = status
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or(&[]);

    let created_at = meta.creation_timestamp.as_ref().map(ts);
    let scheduled_at = condition_time(pod, "PodScheduled", true);
    let started_at = earliest_start(statuses);
    let finished_at = if phase::is_terminal(&phase) {
        latest_finish(statuses).or_else(|| condition_time(pod, "Ready", false))
    } else {
        None
    };

    let mut transitions = Vec::with_capacity(3);
    if let Some(at) = created_at {
        transitions.push(PhaseTransition::new(phase::PENDING, at));
    }
    if let Some(at) = started_at {
        transitions.push(PhaseTransition::new(phase::RUNNING, at));
    }
    if let Some(at) = finished_at {
        transitions.push(PhaseTransition::new(phase.clone(), at));
    }

    let containers = containers_of(pod, statuses);
    let reason = status.and_then(|s| s.reason.clone()).or_else(|| {
        // The pod-level reason is usually empty; the interesting one is on a container that
        // cannot start (ErrImagePull) or that failed (Error, OOMKilled).
        containers
            .iter()
            .filter(|c| {
                c.state == Some(StoredState::Waiting) || c.exit_code.is_some_and(|code| code != 0)
            })
            .find_map(|c| c.reason.clone())
    });

    Ok(PodObservation {
        uid,
        namespace,
        name,
        resource_version,
        run,
        labels,
        annotations,
        owner,
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        phase,
        reason,
        message: status.and_then(|s| s.message.clone()),
        created_at,
        scheduled_at,
        started_at,
        finished_at,
        deletion_requested_at: meta.deletion_timestamp.as_ref().map(ts),
        containers,
        transitions,
    })
}

/// Parses a resourceVersion as the number every API server in practice uses.
///
/// Kubernetes calls resourceVersions opaque, but they are etcd revisions (decimal) and are
/// comparable per resource since 1.35; podline relies on that to never move a pod backwards.
pub fn parse_resource_version(rv: Option<&str>) -> Option<u64> {
    rv?.parse().ok()
}

/// "Kind/name" of the controlling owner (else the first owner), e.g. `Workflow/wf-1`.
fn owner_of(pod: &Pod) -> Option<String> {
    let refs = pod.metadata.owner_references.as_deref()?;
    let owner = refs
        .iter()
        .find(|r| r.controller == Some(true))
        .or_else(|| refs.first())?;
    Some(format!("{}/{}", owner.kind, owner.name))
}

fn ts(time: &Time) -> Timestamp {
    time.0
}

/// `lastTransitionTime` of the condition `type_`; `require_true` only accepts it once it holds.
fn condition_time(pod: &Pod, type_: &str, require_true: bool) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .conditions
        .as_deref()?
        .iter()
        .find(|c| c.type_ == type_ && (!require_true || c.status == "True"))?
        .last_transition_time
        .as_ref()
        .map(ts)
}

fn states(status: &ContainerStatus) -> impl Iterator<Item = &ContainerState> {
    status.state.iter().chain(status.last_state.iter())
}

fn earliest_start(statuses: &[ContainerStatus]) -> Option<Timestamp> {
    statuses
        .iter()
        .flat_map(states)
        .filter_map(|state| {
            state
                .running
                .as_ref()
                .and_then(|r| r.started_at.as_ref())
                .or_else(|| {
                    state
                        .terminated
                        .as_ref()
                        .and_then(|t| t.started_at.as_ref())
                })
        })
        .map(ts)
        .min()
}

fn latest_finish(statuses: &[ContainerStatus]) -> Option<Timestamp> {
    statuses
        .iter()
        .flat_map(states)
        .filter_map(|state| state.terminated.as_ref()?.finished_at.as_ref())
        .map(ts)
        .max()
}

fn containers_of(pod: &Pod, statuses: &[ContainerStatus]) -> Vec<ContainerObservation> {
    let spec_containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[]);
    let mut out: Vec<ContainerObservation> = statuses.iter().map(container_of).collect();
    // Containers without a status yet (unscheduled pod): still record name and image.
    for container in spec_containers {
        if !out.iter().any(|c| c.name == container.name) {
            out.push(ContainerObservation {
                name: container.name.clone(),
                image: container.image.clone().unwrap_or_default(),
                state: None,
                ..ContainerObservation::default()
            });
        }
    }
    out
}

fn container_of(status: &ContainerStatus) -> ContainerObservation {
    let state = status.state.as_ref();
    let last_terminated = status
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref());
    let mut obs = ContainerObservation {
        name: status.name.clone(),
        image: status.image.clone(),
        image_id: Some(status.image_id.clone()).filter(|id| !id.is_empty()),
        state: Some(StoredState::Waiting),
        restarts: u32::try_from(status.restart_count).unwrap_or(0),
        ..ContainerObservation::default()
    };
    if let Some(terminated) = state.and_then(|s| s.terminated.as_ref()) {
        obs.state = Some(StoredState::Terminated);
        obs.reason = terminated.reason.clone();
        obs.message = terminated.message.clone();
        obs.exit_code = Some(terminated.exit_code);
        obs.started_at = terminated.started_at.as_ref().map(ts);
        obs.finished_at = terminated.finished_at.as_ref().map(ts);
    } else if let Some(running) = state.and_then(|s| s.running.as_ref()) {
        obs.state = Some(StoredState::Running);
        obs.started_at = running.started_at.as_ref().map(ts);
    } else {
        if let Some(waiting) = state.and_then(|s| s.waiting.as_ref()) {
            obs.reason = waiting.reason.clone();
            obs.message = waiting.message.clone();
        }
        // A restarting container: its last run's outcome is the one worth keeping.
        if let Some(last) = last_terminated {
            obs.exit_code = Some(last.exit_code);
            obs.started_at = last.started_at.as_ref().map(ts);
            obs.finished_at = last.finished_at.as_ref().map(ts);
        }
    }
    obs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).expect("valid pod json")
    }

    fn base() -> serde_json::Value {
        json!({
            "metadata": {
                "name": "p1", "namespace": "ns", "uid": "u-1", "resourceVersion": "42",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"podline.io/run": "r1"},
                "annotations": {
                    "note": "kept",
                    "kubectl.kubernetes.io/last-applied-configuration": "{\"env\":\"SECRET\"}"
                },
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "o0"},
                    {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "name": "wf-1", "uid": "o1", "controller": true}
                ]
            },
            "spec": {"nodeName": "sim-node-1", "containers": [
                {"name": "main", "image": "busybox", "env": [{"name": "TOKEN", "value": "hunter2"}]}
            ]},
            "status": {"phase": "Pending"}
        })
    }

    fn t(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn pending_pod_maps_identity_run_owner_and_one_transition() {
        let obs = observe(&pod(base()), &LifecycleConfig::default()).unwrap();
        assert_eq!(obs.uid, "u-1");
        assert_eq!((obs.namespace.as_str(), obs.name.as_str()), ("ns", "p1"));
        assert_eq!(obs.resource_version, 42);
        assert_eq!(
            obs.run.as_deref(),
            Some("r1"),
            "falls back to podline's run label"
        );
        assert_eq!(
            obs.owner.as_deref(),
            Some("Workflow/wf-1"),
            "controller owner wins"
        );
        assert_eq!(obs.node.as_deref(), Some("sim-node-1"));
        assert_eq!(obs.phase, "Pending");
        assert_eq!(
            obs.transitions,
            vec![PhaseTransition::new("Pending", t("2026-01-01T00:00:00Z"))]
        );
        assert_eq!(
            obs.containers.len(),
            1,
            "spec container recorded before it has a status"
        );
        assert_eq!(obs.containers[0].image, "busybox");
        assert_eq!(obs.containers[0].state, None);
    }

    #[test]
    fn secrets_are_never_copied() {
        let obs = observe(&pod(base()), &LifecycleConfig::default()).unwrap();
        let dump = format!("{obs:?}");
        assert!(!dump.contains("hunter2"), "env value leaked: {dump}");
        assert!(
            !dump.contains("SECRET"),
            "last-applied-configuration leaked: {dump}"
        );
        assert_eq!(
            obs.annotations.get("note").map(String::as_str),
            Some("kept")
        );
    }

    #[test]
    fn configured_run_label_wins_over_podline_label() {
        let mut value = base();
        value["metadata"]["labels"]["workflows.argoproj.io/workflow"] = json!("wf-9");
        let obs = observe(&pod(value.clone()), &LifecycleConfig::default()).unwrap();
        assert_eq!(obs.run.as_deref(), Some("wf-9"));
        let custom = LifecycleConfig::new("team/run").unwrap();
        value["metadata"]["labels"]["team/run"] = json!("t-3");
        assert_eq!(
            observe(&pod(value), &custom).unwrap().run.as_deref(),
            Some("t-3")
        );
        assert!(LifecycleConfig::new(" ").is_err());
    }

    #[test]
    fn finished_pod_yields_every_transition_from_the_final_object_alone() {
        let mut value = base();
        value["status"] = json!({
            "phase": "Failed",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"},
                {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:09Z"}
            ],
            "containerStatuses": [
                {"name": "main", "image": "busybox", "imageID": "sha256:abc", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 3, "reason": "Error",
                    "startedAt": "2026-01-01T00:00:03Z", "finishedAt": "2026-01-01T00:00:07Z"}}},
                {"name": "side", "image": "envoy", "imageID": "", "ready": false, "restartCount": 1,
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                    "startedAt": "2026-01-01T00:00:02Z", "finishedAt": "2026-01-01T00:00:08Z"}}}
            ]
        });
        let obs = observe(&pod(value), &LifecycleConfig::default()).unwrap();
        assert_eq!(
            obs.transitions,
            vec![
                PhaseTransition::new("Pending", t("2026-01-01T00:00:00Z")),
                PhaseTransition::new("Running", t("2026-01-01T00:00:02Z")),
                PhaseTransition::new("Failed", t("2026-01-01T00:00:08Z")),
            ]
        );
        assert_eq!(obs.scheduled_at, Some(t("2026-01-01T00:00:01Z")));
        assert_eq!(obs.started_at, Some(t("2026-01-01T00:00:02Z")));
        assert_eq!(obs.finished_at, Some(t("2026-01-01T00:00:08Z")));
        assert_eq!(
            obs.reason.as_deref(),
            Some("Error"),
            "the failing container's reason"
        );
        assert_eq!(obs.containers[0].exit_code, Some(3));
        assert_eq!(obs.containers[0].image_id.as_deref(), Some("sha256:abc"));
        assert_eq!(obs.containers[1].image_id, None);
        assert_eq!(obs.containers[1].restarts, 1);
    }

    #[test]
    fn pod_failed_before_any_container_ran_ends_at_ready_transition() {
        let mut value = base();
        value["status"] = json!({
            "phase": "Failed", "reason": "DeadlineExceeded",
            "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:05Z"}],
            "containerStatuses": [
                {"name": "main", "image": "x/does-not-exist", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"waiting": {"reason": "ErrImagePull", "message": "manifest unknown"}}}
            ]
        });
        let obs = observe(&pod(value), &LifecycleConfig::default()).unwrap();
        assert_eq!(
            obs.transitions,
            vec![
                PhaseTransition::new("Pending", t("2026-01-01T00:00:00Z")),
                PhaseTransition::new("Failed", t("2026-01-01T00:00:05Z")),
            ]
        );
        assert_eq!(obs.reason.as_deref(), Some("DeadlineExceeded"));
        assert_eq!(obs.containers[0].reason.as_deref(), Some("ErrImagePull"));
    }

    #[test]
    fn running_pod_has_no_terminal_transition() {
        let mut value = base();
        value["status"] = json!({
            "phase": "Running",
            "containerStatuses": [
                {"name": "main", "image": "busybox", "imageID": "", "ready": true, "restartCount": 2,
                 "state": {"running": {"startedAt": "2026-01-01T00:00:30Z"}},
                 "lastState": {"terminated": {"exitCode": 1, "startedAt": "2026-01-01T00:00:04Z", "finishedAt": "2026-01-01T00:00:06Z"}}}
            ]
        });
        let obs = observe(&pod(value), &LifecycleConfig::default()).unwrap();
        assert_eq!(obs.transitions.len(), 2);
        assert_eq!(
            obs.transitions[1],
            PhaseTransition::new("Running", t("2026-01-01T00:00:04Z")),
            "earliest start, incl. last state"
        );
        assert_eq!(obs.finished_at, None);
        assert_eq!(obs.containers[0].state, Some(StoredState::Running));
    }

    #[test]
    fn unidentifiable_objects_are_errors_naming_the_pod() {
        let mut value = base();
        value["metadata"]["resourceVersion"] = json!("abc");
        let err = observe(&pod(value), &LifecycleConfig::default()).unwrap_err();
        assert!(err.to_string().contains("ns/p1"), "{err}");
        let mut value = base();
        value["metadata"].as_object_mut().unwrap().remove("uid");
        let err = observe(&pod(value), &LifecycleConfig::default()).unwrap_err();
        assert!(matches!(err, ObserveError::MissingUid { .. }));
        assert!(err.to_string().contains("ns/p1"), "{err}");
    }

    #[test]
    fn observing_is_deterministic() {
        let p = pod(base());
        let config = LifecycleConfig::default();
        assert_eq!(observe(&p, &config).unwrap(), observe(&p, &config).unwrap());
    }
}
