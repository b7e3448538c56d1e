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
//! - **Deleted while unfinished** ([`FinalizerFacts::deletion_end`]): a pod being deleted in a
//!   phase that is not terminal has its final state when no kubelet will report again: it was
//!   never bound to a node, or the deletion has grace period 0 (the kubelet's own final delete
//!   once the containers stopped, or a forced one). It is then recorded as deleted (CANCELED),
//!   as its DELETED event would have been. Since Kubernetes 1.27 the kubelet moves a deleted pod
//!   to a terminal phase first, which is recorded as such.
//! - **Safety valve**: a pod being deleted that shows none of this (its node is gone, its
//!   kubelet hung) is recorded as deleted and released once its `deletionTimestamp` (the end of
//!   its grace period) plus a margin has passed, so a dead node never holds a pod for ever.
//!
//! These are the SQL recorder's rules (`podline-record`'s `finalize::decide`), except that a
//! finished pod is released as soon as its final state is in MLMD, without waiting for its
//! deletion: MLMD records nothing about a pod after its final state.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
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
    /// `deletionTimestamp`: set while the pod is being deleted, the end of its grace period.
    pub deletion: Option<Timestamp>,
    /// `deletionGracePeriodSeconds` is 0: no kubelet reports on the pod again.
    pub forced: bool,
    /// `spec.nodeName` is set: a kubelet runs (or ran) the pod and reports its end.
    pub bound: bool,
}

/// How far a pod's deletion is, for the finalizer rules (its phase aside: a terminal phase is
/// final whatever this says).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeletionEnd {
    /// Not being deleted.
    NotDeleted,
    /// Being deleted, and no container will run or report again.
    Ended,
    /// Being deleted, its kubelet may still report: look again after this long (then the
    /// safety valve ends it).
    Open {
        /// Until the end of the grace period plus the margin.
        recheck_in: Duration,
    },
}

impl FinalizerFacts {
    /// The finalizer-relevant facts of `pod`.
    pub fn of(pod: &Pod) -> FinalizerFacts {
        let meta = &pod.metadata;
        FinalizerFacts {
            finalizers: meta.finalizers.clone(),
            resource_version: meta.resource_version.clone(),
            deletion: meta.deletion_timestamp.as_ref().map(|t| t.0),
            forced: meta.deletion_grace_period_seconds == Some(0),
            bound: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| !n.is_empty()),
        }
    }

    /// Whether the pod carries [`KFP_FINALIZER`].
    pub fn carries(&self) -> bool {
        carries(self.finalizers.as_deref())
    }

    /// Whether the pod is being deleted.
    pub fn deleting(&self) -> bool {
        self.deletion.is_some()
    }

    /// How far the pod's deletion is at `now`, with the safety valve's `margin` after the end
    /// of its grace period (see the module documentation).
    pub fn deletion_end(&self, now: Timestamp, margin: Duration) -> DeletionEnd {
        let Some(deletion) = self.deletion else {
            return DeletionEnd::NotDeleted;
        };
        if !self.bound || self.forced {
            return DeletionEnd::Ended;
        }
        let margin = SignedDuration::try_from(margin).unwrap_or(SignedDuration::MAX);
        let deadline = deletion.checked_add(margin).unwrap_or(Timestamp::MAX);
        match Duration::try_from(now.duration_until(deadline)) {
            Ok(left) if !left.is_zero() => DeletionEnd::Open { recheck_in: left },
            _ => DeletionEnd::Ended,
        }
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
    finalize && !deleted && !facts.deleting() && !facts.carries() && !is_terminal(target)
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
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    const MARGIN: Duration = Duration::from_secs(120);

    fn carrying() -> FinalizerFacts {
        FinalizerFacts {
            finalizers: Some(vec!["other".into(), KFP_FINALIZER.into()]),
            ..FinalizerFacts::default()
        }
    }

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).expect("a valid time")
    }

    #[test]
    fn a_pod_being_deleted_has_ended_when_no_kubelet_reports_again_or_past_the_margin() {
        let mut pod = Pod {
            spec: Some(PodSpec {
                node_name: Some("node-1".into()),
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        let facts = FinalizerFacts::of(&pod);
        assert_eq!(facts.deletion_end(t(0), MARGIN), DeletionEnd::NotDeleted);
        pod.metadata.deletion_timestamp = Some(Time(t(30)));
        pod.metadata.deletion_grace_period_seconds = Some(30);
        let facts = FinalizerFacts::of(&pod);
        assert!(facts.deleting() && facts.bound);
        assert_eq!(
            facts.deletion_end(t(0), MARGIN),
            DeletionEnd::Open {
                recheck_in: Duration::from_secs(150)
            },
            "its kubelet still stops it: look again at the grace period's end plus the margin"
        );
        assert_eq!(
            facts.deletion_end(t(150), MARGIN),
            DeletionEnd::Ended,
            "the safety valve"
        );
        pod.metadata.deletion_grace_period_seconds = Some(0);
        assert_eq!(
            FinalizerFacts::of(&pod).deletion_end(t(0), MARGIN),
            DeletionEnd::Ended,
            "the kubelet's final delete, or a forced one"
        );
        pod.metadata.deletion_grace_period_seconds = Some(30);
        pod.spec = None;
        assert_eq!(
            FinalizerFacts::of(&pod).deletion_end(t(0), MARGIN),
            DeletionEnd::Ended,
            "never bound: no kubelet will report"
        );
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
            deletion: Some(t(0)),
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
