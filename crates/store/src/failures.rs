//! Why pods failed: one classification shared by the failures page, the JSON API and tests.
//!
//! A pod's failure can be told by the pod (`status.reason`: `Evicted`, `DeadlineExceeded`), by a
//! container that terminated (`OOMKilled`, a non-zero exit code) or by one that never started
//! (an image that cannot be pulled). [`classify`] reads a [`PodRecord`] and names the one reason
//! a person would look for first; [`group`] puts pods with the same reason together.

use podline_phase::Phase;
use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Serialize;

use crate::model::ContainerState;
use crate::records::PodRecord;

/// Container waiting reasons that mean the image cannot be pulled (grouped as `ImagePull`).
pub const IMAGE_PULL_REASONS: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "ErrImageInspect",
];

/// Which failed pods to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailureFilter {
    /// Only pods in this namespace.
    pub namespace: Option<String>,
    /// Only pods of this run.
    pub run: Option<String>,
}

/// Why one pod failed, as [`classify`] reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// The group: `OOMKilled`, `ImagePull`, `Error (exit N)`, `Evicted`, `DeadlineExceeded`,
    /// another pod `status.reason`, or `Failed` when nothing more is known.
    pub reason: String,
    /// The container the reason comes from, if it comes from one.
    pub container: Option<String>,
    /// The container's exit code, if it terminated.
    pub exit_code: Option<i32>,
    /// The most specific message found (container message, else pod message, else the raw
    /// waiting reason such as `ImagePullBackOff`).
    pub detail: Option<String>,
}

/// A failed pod with its failure, one row of the failures view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailedPod {
    /// `metadata.uid`.
    pub uid: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The run, if any.
    pub run: Option<String>,
    /// Latest phase.
    pub phase: Option<String>,
    /// Node it was on.
    pub node: Option<String>,
    /// When it finished (or was deleted, for pods that never started).
    pub at: Option<Timestamp>,
    /// Why it failed.
    pub failure: Failure,
}

/// Pods that failed for the same reason, largest group first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailureGroup {
    /// The shared [`Failure::reason`].
    pub reason: String,
    /// The pods, most recent first.
    pub pods: Vec<FailedPod>,
}

/// Names why `pod` failed, or `None` if it succeeded or has not failed (yet).
///
/// Order: the pod's own reason when the kubelet or controller gave one (`Evicted`,
/// `DeadlineExceeded`: the containers' exit codes are a consequence), then an OOM kill, then an
/// image that cannot be pulled, then a non-zero exit code, then a `Failed` phase with no detail.
pub fn classify(pod: &PodRecord) -> Option<Failure> {
    let phase = pod.phase.as_deref().and_then(Phase::parse);
    if phase == Some(Phase::Succeeded) {
        return None;
    }
    let failed = phase == Some(Phase::Failed);
    let pod_level = |reason: &str| Failure {
        reason: reason.to_owned(),
        container: None,
        exit_code: None,
        detail: pod.message.clone(),
    };
    // The kubelet copies a container's reason (`Error`, `OOMKilled`) to the pod; only a reason
    // of the pod's own (`Evicted`, `DeadlineExceeded`, ...) is about the pod.
    if let Some(reason) = pod.reason.as_deref()
        && !pod
            .containers
            .iter()
            .any(|c| c.reason.as_deref() == Some(reason))
        && (failed || matches!(reason, "Evicted" | "DeadlineExceeded"))
    {
        return Some(pod_level(reason));
    }
    let terminated = |c: &&crate::ContainerObservation| c.state == Some(ContainerState::Terminated);
    if let Some(c) = pod
        .containers
        .iter()
        .filter(terminated)
        .find(|c| c.reason.as_deref() == Some("OOMKilled"))
    {
        return Some(Failure {
            reason: "OOMKilled".to_owned(),
            container: Some(c.name.clone()),
            exit_code: c.exit_code,
            detail: c.message.clone(),
        });
    }
    if let Some(c) = pod.containers.iter().find(|c| {
        c.state == Some(ContainerState::Waiting)
            && c.reason
                .as_deref()
                .is_some_and(|r| IMAGE_PULL_REASONS.contains(&r))
    }) {
        return Some(Failure {
            reason: "ImagePull".to_owned(),
            container: Some(c.name.clone()),
            exit_code: None,
            detail: c.message.clone().or_else(|| c.reason.clone()),
        });
    }
    if let Some((c, code)) = pod
        .containers
        .iter()
        .filter(terminated)
        .find_map(|c| c.exit_code.filter(|code| *code != 0).map(|code| (c, code)))
    {
        return Some(Failure {
            reason: format!("Error (exit {code})"),
            container: Some(c.name.clone()),
            exit_code: Some(code),
            detail: c.message.clone().or_else(|| pod.message.clone()),
        });
    }
    failed.then(|| pod_level(Phase::Failed.as_str()))
}

/// Classifies `pods` and groups the failed ones by reason: largest group first, then by name;
/// within a group, in the order given (the store returns newest first).
pub fn group(pods: &[PodRecord]) -> Vec<FailureGroup> {
    let mut groups: BTreeMap<String, Vec<FailedPod>> = BTreeMap::new();
    for pod in pods {
        let Some(failure) = classify(pod) else {
            continue;
        };
        groups
            .entry(failure.reason.clone())
            .or_default()
            .push(FailedPod {
                uid: pod.uid.clone(),
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                run: pod.run.clone(),
                phase: pod.phase.clone(),
                node: pod.node.clone(),
                at: pod.finished_at.or(pod.deleted_at),
                failure,
            });
    }
    let mut groups: Vec<FailureGroup> = groups
        .into_iter()
        .map(|(reason, pods)| FailureGroup { reason, pods })
        .collect();
    groups.sort_by(|a, b| {
        b.pods
            .len()
            .cmp(&a.pods.len())
            .then_with(|| a.reason.cmp(&b.reason))
    });
    groups
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::ContainerObservation;

    fn pod(phase: &str, containers: Vec<ContainerObservation>) -> PodRecord {
        let t: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        PodRecord {
            uid: format!("u-{phase}"),
            namespace: "ns".into(),
            name: "p".into(),
            resource_version: 1,
            run: Some("r".into()),
            labels: Default::default(),
            annotations: Default::default(),
            owner: None,
            node: None,
            phase: Some(phase.into()),
            reason: None,
            message: None,
            created_at: Some(t),
            scheduled_at: None,
            started_at: None,
            finished_at: None,
            deletion_requested_at: None,
            deleted_at: None,
            final_state_observed: true,
            recorded_at: t,
            updated_at: t,
            containers,
            transitions: Vec::new(),
        }
    }

    fn container(
        state: ContainerState,
        reason: &str,
        exit_code: Option<i32>,
    ) -> ContainerObservation {
        ContainerObservation {
            name: "main".into(),
            image: "busybox".into(),
            state: Some(state),
            reason: Some(reason.into()),
            exit_code,
            ..Default::default()
        }
    }

    #[test]
    fn each_kind_of_failure_should_get_its_reason() {
        use ContainerState::*;
        let oom = pod(
            "Failed",
            vec![container(Terminated, "OOMKilled", Some(137))],
        );
        assert_eq!(classify(&oom).unwrap().reason, "OOMKilled");
        assert_eq!(classify(&oom).unwrap().exit_code, Some(137));

        let mut pull = pod("Pending", vec![container(Waiting, "ErrImagePull", None)]);
        pull.containers[0].message = Some("image not found".into());
        let failure = classify(&pull).unwrap();
        assert_eq!(failure.reason, "ImagePull");
        assert_eq!(failure.detail.as_deref(), Some("image not found"));

        let mut exit = pod("Failed", vec![container(Terminated, "Error", Some(3))]);
        exit.reason = Some("Error".into()); // copied from the container, as the kubelet does
        assert_eq!(classify(&exit).unwrap().reason, "Error (exit 3)");
        let mut oom = oom.clone();
        oom.reason = Some("OOMKilled".into());
        assert_eq!(classify(&oom).unwrap().container.as_deref(), Some("main"));

        for reason in ["Evicted", "DeadlineExceeded"] {
            let mut p = pod("Failed", vec![container(Terminated, "Error", Some(137))]);
            p.reason = Some(reason.into());
            assert_eq!(classify(&p).unwrap().reason, reason, "pod reason wins");
        }

        assert_eq!(classify(&pod("Failed", vec![])).unwrap().reason, "Failed");
    }

    #[test]
    fn pods_that_did_not_fail_should_not_be_classified() {
        use ContainerState::*;
        let ok = pod(
            "Succeeded",
            vec![container(Terminated, "Completed", Some(0))],
        );
        assert!(classify(&ok).is_none());
        let creating = pod(
            "Pending",
            vec![container(Waiting, "ContainerCreating", None)],
        );
        assert!(classify(&creating).is_none());
        assert!(classify(&pod("Running", vec![container(Running, "x", None)])).is_none());
    }

    #[test]
    fn groups_should_be_largest_first() {
        use ContainerState::*;
        let mut pods = vec![pod(
            "Failed",
            vec![container(Terminated, "OOMKilled", Some(137))],
        )];
        for i in 0..2 {
            let mut p = pod("Failed", vec![container(Terminated, "Error", Some(1))]);
            p.uid = format!("e{i}");
            pods.push(p);
        }
        pods.push(pod("Succeeded", vec![]));
        let groups = group(&pods);
        let summary: Vec<(&str, usize)> = groups
            .iter()
            .map(|g| (g.reason.as_str(), g.pods.len()))
            .collect();
        assert_eq!(summary, [("Error (exit 1)", 2), ("OOMKilled", 1)]);
    }
}
