//! KFP mode's finalizer on a pod ([`KFP_FINALIZER`]), and the pure rules of when the
//! writer puts it on and takes it off.
//!
//! Why: a pod deleted while no writer runs (an upgrade, a crash, a long MLMD outage) vanished
//! from the API before its final state reached MLMD, and a later relist could only mark its
//! execution CANCELED (KFP's own writer lost it silently). With the finalizer, such a pod waits
//! in Terminating, its final state intact, until a writer has committed that state.
//!
//! The rules, the SQL recorder's contract applied to MLMD:
//! - **On** ([`should_add`]): with finalizing enabled, a pod the writer records gets the
//!   finalizer before its first write, unless it is being deleted (the API refuses new
//!   finalizers then), already carries it, or is already finished (its final state is written
//!   in that same handling, so there would be nothing to wait for).
//! - **Off** ([`should_release`]): once the execution's state in MLMD is terminal (COMPLETE,
//!   FAILED, CACHED, CANCELED: "terminal" means the final state and outputs are committed), or
//!   when the writer will never commit it (MLMD rejected the pod's data, or the pod is not one
//!   KFP mode records: already written, TFX, v2). With finalizing disabled, a finalizer left
//!   from an earlier run is taken off any pod seen carrying it: nothing holds it any more.
//! - **Deleted while still running** ([`FinalizerFacts::ended_by_deletion`]): a pod being deleted whose
//!   phase is not terminal has its final state once no container runs any more (the kubelet
//!   stopped them, or none ever started) or the deletion was forced (grace period 0): it is then
//!   recorded as deleted (CANCELED), as its DELETED event would have been.

use k8s_openapi::api::core::v1::Pod;
use kube::core::ObjectMeta;

use super::writer::is_terminal;
use crate::proto::ExecutionState;

/// The finalizer KFP mode owns. Not the SQL recorder's `podline.io/record`: both modes may
/// record the same pods (each writes its own store and takes off only its own finalizer), as
/// they hold their own Leases.
pub const KFP_FINALIZER: &str = "podline.io/kfp-writer";

/// What the finalizer rules need of a pod, kept in its queued snapshot (a few short strings).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FinalizerFacts {
    /// The pod's finalizers as read (an add tests the list it read).
    pub finalizers: Option<Vec<String>>,
    /// The pod's `resourceVersion` as read (an add to a pod without finalizers tests it).
    pub resource_version: Option<String>,
    /// `deletionTimestamp` is set: the pod is being deleted.
    pub deleting: bool,
    /// `deletionGracePeriodSeconds` is 0: a forced deletion (no container reports again).
    pub forced: bool,
    /// A container (init or main) is running.
    pub running: bool,
}

impl FinalizerFacts {
    /// The finalizer-relevant facts of `pod`.
    pub fn of(pod: &Pod) -> FinalizerFacts {
        let meta = &pod.metadata;
        let running = pod.status.as_ref().is_some_and(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
                .any(|c| c.state.as_ref().is_some_and(|st| st.running.is_some()))
        });
        FinalizerFacts {
            finalizers: meta.finalizers.clone(),
            resource_version: meta.resource_version.clone(),
            deleting: meta.deletion_timestamp.is_some(),
            forced: meta.deletion_grace_period_seconds == Some(0),
            running,
        }
    }

    /// Whether the pod carries [`KFP_FINALIZER`].
    pub fn carries(&self) -> bool {
        carries(self.finalizers.as_deref())
    }

    /// Whether the pod is being deleted and will not run any more: its final state is the one
    /// it has now (see the module documentation).
    pub fn ended_by_deletion(&self) -> bool {
        self.deleting && (self.forced || !self.running)
    }

    /// The metadata the finalizer helpers patch with: the pod's identity and what was read.
    pub fn meta(&self, namespace: &str, name: &str, uid: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(namespace.to_owned()),
            name: Some(name.to_owned()),
            uid: Some(uid.to_owned()),
            finalizers: self.finalizers.clone(),
            resource_version: self.resource_version.clone(),
            ..ObjectMeta::default()
        }
    }
}

/// Whether a finalizer list holds [`KFP_FINALIZER`].
pub fn carries(finalizers: Option<&[String]>) -> bool {
    finalizers
        .unwrap_or_default()
        .iter()
        .any(|f| f == KFP_FINALIZER)
}

/// Whether to add the finalizer before writing a pod whose event says `deleted` and whose
/// execution is to reach `target`.
pub fn should_add(
    finalize: bool,
    facts: &FinalizerFacts,
    deleted: bool,
    target: ExecutionState,
) -> bool {
    finalize && !deleted && !facts.deleting && !facts.carries() && !is_terminal(target)
}

/// Whether to take the finalizer off after handling the pod: `committed` is the execution's
/// state in MLMD now, `None` when MLMD rejected the pod's data for good (nothing will ever be
/// committed, and holding the pod would block its deletion for ever).
pub fn should_release(
    finalize: bool,
    facts: &FinalizerFacts,
    committed: Option<ExecutionState>,
) -> bool {
    facts.carries() && (!finalize || committed.is_none_or(is_terminal))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn carrying() -> FinalizerFacts {
        FinalizerFacts {
            finalizers: Some(vec!["other".into(), KFP_FINALIZER.into()]),
            ..FinalizerFacts::default()
        }
    }

    fn status(running: bool) -> PodStatus {
        let state = if running {
            ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..ContainerState::default()
            }
        } else {
            ContainerState {
                terminated: Some(ContainerStateTerminated::default()),
                ..ContainerState::default()
            }
        };
        PodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(vec![ContainerStatus {
                name: "main".into(),
                state: Some(state),
                ..ContainerStatus::default()
            }]),
            ..PodStatus::default()
        }
    }

    #[test]
    fn a_pod_being_deleted_has_ended_once_no_container_runs_or_the_delete_is_forced() {
        let mut pod = Pod {
            status: Some(status(true)),
            ..Pod::default()
        };
        assert!(
            !FinalizerFacts::of(&pod).ended_by_deletion(),
            "not being deleted"
        );
        pod.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        pod.metadata.deletion_grace_period_seconds = Some(30);
        let hold = FinalizerFacts::of(&pod);
        assert!(hold.deleting && hold.running);
        assert!(
            !hold.ended_by_deletion(),
            "its containers are still stopping"
        );
        pod.status = Some(status(false));
        assert!(FinalizerFacts::of(&pod).ended_by_deletion(), "stopped");
        pod.status = None;
        assert!(
            FinalizerFacts::of(&pod).ended_by_deletion(),
            "never started"
        );
        pod.status = Some(status(true));
        pod.metadata.deletion_grace_period_seconds = Some(0);
        assert!(FinalizerFacts::of(&pod).ended_by_deletion(), "forced");
    }

    #[test]
    fn the_finalizer_goes_on_unfinished_pods_that_are_not_being_deleted() {
        let free = FinalizerFacts::default();
        assert!(should_add(true, &free, false, ExecutionState::Running));
        assert!(should_add(true, &free, false, ExecutionState::New));
        assert!(
            !should_add(false, &free, false, ExecutionState::Running),
            "off"
        );
        assert!(
            !should_add(true, &carrying(), false, ExecutionState::Running),
            "there"
        );
        assert!(
            !should_add(true, &free, true, ExecutionState::Canceled),
            "gone"
        );
        assert!(
            !should_add(true, &free, false, ExecutionState::Complete),
            "done"
        );
        let deleting = FinalizerFacts {
            deleting: true,
            ..FinalizerFacts::default()
        };
        assert!(!should_add(true, &deleting, false, ExecutionState::Running));
    }

    #[test]
    fn the_finalizer_comes_off_only_once_the_final_state_is_committed() {
        let hold = carrying();
        assert!(!should_release(true, &hold, Some(ExecutionState::Running)));
        assert!(!should_release(true, &hold, Some(ExecutionState::New)));
        for state in [
            ExecutionState::Complete,
            ExecutionState::Failed,
            ExecutionState::Cached,
            ExecutionState::Canceled,
        ] {
            assert!(should_release(true, &hold, Some(state)), "{state:?}");
        }
        assert!(should_release(true, &hold, None), "rejected for good");
        assert!(
            should_release(false, &hold, Some(ExecutionState::Running)),
            "off: a left-over finalizer is taken off"
        );
        assert!(
            !should_release(false, &FinalizerFacts::default(), None),
            "none to take off"
        );
        assert_eq!(
            hold.meta("ns", "p", "u").finalizers,
            Some(vec!["other".to_owned(), KFP_FINALIZER.to_owned()])
        );
    }
}
