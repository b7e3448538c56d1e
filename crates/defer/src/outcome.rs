//! How a deferred task ended ([`Outcome`]), judged on its base container ([`judge`]).

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use podline_phase::Phase;
use serde::Serialize;

/// The end of a deferred task's pod, as the operator reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// The pod's name.
    pub pod: String,
    /// Its namespace.
    pub namespace: String,
    /// The task succeeded: its base container exited 0 (or the pod Succeeded).
    pub succeeded: bool,
    /// The base container's exit code, when it terminated.
    pub exit_code: Option<i32>,
    /// The pod's phase when it was judged.
    pub phase: Option<String>,
    /// Why it ended, when the container or pod says (`Error`, `OOMKilled`, `DeadlineExceeded`).
    pub reason: Option<String>,
    /// The base container's termination message, or the pod's status message.
    pub message: Option<String>,
    /// The pod was deleted (or vanished) before it finished.
    pub gone: bool,
    /// Why the pod could not be followed to its end (not the pod's own failure).
    pub error: Option<String>,
}

impl Outcome {
    fn of(pod: &Pod) -> Self {
        Self {
            pod: pod.metadata.name.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            phase: pod.status.as_ref().and_then(|s| s.phase.clone()),
            ..Self::default()
        }
    }

    /// The pod `namespace/name` is gone before its end was seen.
    pub fn gone(namespace: &str, name: &str) -> Self {
        Self {
            pod: name.to_owned(),
            namespace: namespace.to_owned(),
            gone: true,
            error: Some("the pod was deleted before it finished (by someone else?)".to_owned()),
            ..Self::default()
        }
    }

    /// The pod `namespace/name` could not be followed: `error` says why.
    pub fn failed_to_follow(namespace: &str, name: &str, error: String) -> Self {
        Self {
            pod: name.to_owned(),
            namespace: namespace.to_owned(),
            error: Some(error),
            ..Self::default()
        }
    }
}

/// The task's outcome if its pod has ended: the base container terminated (sidecars that never
/// exit do not hold the task, as KubernetesPodOperator judges it), or the pod reached a final
/// phase without it (deadline exceeded, evicted, never started). `None` while it runs.
pub fn judge(pod: &Pod, base_container: &str) -> Option<Outcome> {
    let status = pod.status.as_ref();
    let base = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|all| all.iter().find(|c| c.name == base_container));
    if let Some(terminated) = base
        .and_then(|c: &ContainerStatus| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
    {
        return Some(Outcome {
            succeeded: terminated.exit_code == 0,
            exit_code: Some(terminated.exit_code),
            reason: terminated.reason.clone(),
            message: terminated.message.clone(),
            ..Outcome::of(pod)
        });
    }
    match status
        .and_then(|s| s.phase.as_deref())
        .and_then(Phase::parse)
    {
        Some(Phase::Succeeded) => Some(Outcome {
            succeeded: true,
            ..Outcome::of(pod)
        }),
        Some(Phase::Failed) => Some(Outcome {
            reason: status.and_then(|s| s.reason.clone()),
            message: status.and_then(|s| s.message.clone()),
            ..Outcome::of(pod)
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateTerminated, PodStatus,
    };

    use super::*;

    fn pod(phase: &str, containers: Vec<(&str, Option<i32>)>) -> Pod {
        let statuses = containers
            .into_iter()
            .map(|(name, code)| ContainerStatus {
                name: name.to_owned(),
                state: Some(match code {
                    Some(exit_code) => ContainerState {
                        terminated: Some(ContainerStateTerminated {
                            exit_code,
                            ..ContainerStateTerminated::default()
                        }),
                        ..ContainerState::default()
                    },
                    None => ContainerState {
                        running: Some(ContainerStateRunning::default()),
                        ..ContainerState::default()
                    },
                }),
                ..ContainerStatus::default()
            })
            .collect();
        Pod {
            status: Some(PodStatus {
                phase: Some(phase.to_owned()),
                container_statuses: Some(statuses),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    /// The base container's end is the task's, whatever a sidecar still does; a running base
    /// container is no end, even when another container has exited.
    #[test]
    fn the_base_container_should_decide_the_outcome() {
        let done = judge(
            &pod("Running", vec![("base", Some(3)), ("sidecar", None)]),
            "base",
        );
        let done = done.expect("ended");
        assert_eq!((done.succeeded, done.exit_code), (false, Some(3)));
        assert!(
            judge(
                &pod("Running", vec![("base", None), ("sidecar", Some(0))]),
                "base"
            )
            .is_none()
        );
        let ok = judge(
            &pod("Running", vec![("base", Some(0)), ("sidecar", None)]),
            "base",
        );
        assert!(ok.expect("ended").succeeded);
    }

    /// A pod that failed without its base container's end (a deadline, an eviction) has ended.
    #[test]
    fn a_failed_pod_should_end_the_task_without_an_exit_code() {
        let out = judge(&pod("Failed", vec![("base", None)]), "base").expect("ended");
        assert!(!out.succeeded && out.exit_code.is_none());
        assert!(judge(&pod("Pending", vec![]), "base").is_none());
    }
}
