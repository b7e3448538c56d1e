//! When the recorder may take its finalizer off a pod: a pure function of the pod's facts, so the
//! rule can be tested on its own and shared by the watch path and reconcile.
//!
//! The rule: a pod carrying the finalizer is released only once it is being deleted (it has a
//! deletionTimestamp) and its state can no longer change, and only after the observation showing
//! that state is committed (the caller's part: the release ticket rides with the observation
//! through the store transaction). The state can no longer change when
//!
//! - the phase is terminal (`Succeeded`/`Failed`: since Kubernetes 1.27 the kubelet moves a
//!   deleted pod to a terminal phase before it lets the object go), or
//! - the pod never ran (no `spec.nodeName`: no kubelet will ever report anything), or
//! - the deletion's grace period is 0 while it is being deleted (the kubelet's final delete after
//!   its containers stopped, or a forced delete: nobody will write the status again).
//!
//! Safety valve: a pod being deleted that shows none of these (its node is gone, its kubelet
//! hung) is released once its deletionTimestamp (the end of its grace period) plus a margin has
//! passed, with whatever state was recorded, so a dead node never holds a pod forever.

use std::time::Duration;

use jiff::Timestamp;

use crate::lifecycle::phase;
/// Re-exported: why a pod is released, the reason a [`Verdict::ReleaseAfterCommit`] carries
/// (defined with the release ticket the queue carries).
pub use crate::ticket::ReleaseReason;

/// What the decision needs to know about a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodFacts<'a> {
    /// Whether the pod lists the recorder's own finalizer.
    pub carries_finalizer: bool,
    /// Whether it lists the finalizer the recorder adopts on the pods of its scope
    /// (`FinalizeConfig::adopt`: the launcher's, under a sharded recorder). That one
    /// holds the pod until this recorder releases it, but it is no reason not to add the own one.
    pub carries_adopted: bool,
    /// `metadata.deletionTimestamp`: when the grace period of its deletion ends.
    pub deletion_timestamp: Option<Timestamp>,
    /// `metadata.deletionGracePeriodSeconds`.
    pub deletion_grace_seconds: Option<i64>,
    /// `status.phase`.
    pub phase: &'a str,
    /// Whether `spec.nodeName` is set.
    pub bound: bool,
}

/// What to do with a recorded pod's finalizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The pod lacks the recorder's own finalizer and is not being deleted: add it.
    Add,
    /// Nothing to do (no finalizer of this recorder on a pod being deleted, or one that still
    /// runs).
    Keep,
    /// Being deleted, not final yet: look again at this time (the safety valve's deadline).
    RecheckAt(Timestamp),
    /// Release it once this observation is committed.
    ReleaseAfterCommit(ReleaseReason),
}

/// Whether a pod being deleted shows a state that can no longer change (see the module docs);
/// `None` while it may still change. Used for the stored state in reconcile as well.
pub fn final_state(facts: &PodFacts<'_>) -> Option<ReleaseReason> {
    facts.deletion_timestamp?;
    if phase::is_terminal(facts.phase) {
        Some(ReleaseReason::Terminal)
    } else if !facts.bound {
        Some(ReleaseReason::NeverRan)
    } else if facts.deletion_grace_seconds == Some(0) {
        Some(ReleaseReason::Stopped)
    } else {
        None
    }
}

/// The verdict for a pod the recorder records, seen at `now`, with the valve's `margin`.
pub fn decide(facts: &PodFacts<'_>, now: Timestamp, margin: Duration) -> Verdict {
    let Some(deleting) = facts.deletion_timestamp else {
        return if facts.carries_finalizer {
            Verdict::Keep
        } else {
            Verdict::Add
        };
    };
    if !facts.carries_finalizer && !facts.carries_adopted {
        // Nothing of ours holds it, and kube-apiserver refuses new finalizers on an object being
        // deleted.
        return Verdict::Keep;
    }
    if let Some(reason) = final_state(facts) {
        return Verdict::ReleaseAfterCommit(reason);
    }
    let deadline = deleting
        .checked_add(jiff::SignedDuration::try_from(margin).unwrap_or(jiff::SignedDuration::MAX))
        .unwrap_or(Timestamp::MAX);
    if now >= deadline {
        Verdict::ReleaseAfterCommit(ReleaseReason::Overdue)
    } else {
        Verdict::RecheckAt(deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARGIN: Duration = Duration::from_secs(60);

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn running() -> PodFacts<'static> {
        PodFacts {
            carries_finalizer: true,
            carries_adopted: false,
            deletion_timestamp: None,
            deletion_grace_seconds: None,
            phase: phase::RUNNING,
            bound: true,
        }
    }

    #[test]
    fn a_live_pod_is_kept_and_one_without_the_finalizer_gets_it() {
        assert_eq!(decide(&running(), t(0), MARGIN), Verdict::Keep);
        let bare = PodFacts {
            carries_finalizer: false,
            ..running()
        };
        assert_eq!(decide(&bare, t(0), MARGIN), Verdict::Add);
        // Finished but not deleted: still held (it may be deleted while no recorder runs).
        let done = PodFacts {
            phase: phase::SUCCEEDED,
            ..running()
        };
        assert_eq!(decide(&done, t(0), MARGIN), Verdict::Keep);
    }

    #[test]
    fn a_pod_being_deleted_never_gets_the_finalizer() {
        let deleting = PodFacts {
            carries_finalizer: false,
            deletion_timestamp: Some(t(0)),
            deletion_grace_seconds: Some(30),
            ..running()
        };
        assert_eq!(decide(&deleting, t(0), MARGIN), Verdict::Keep);
    }

    #[test]
    fn a_deleted_pod_is_released_once_its_state_is_final() {
        let deleting = PodFacts {
            deletion_timestamp: Some(t(30)),
            deletion_grace_seconds: Some(30),
            ..running()
        };
        for (phase, reason) in [
            (phase::SUCCEEDED, ReleaseReason::Terminal),
            (phase::FAILED, ReleaseReason::Terminal),
        ] {
            let f = PodFacts { phase, ..deleting };
            assert_eq!(
                decide(&f, t(0), MARGIN),
                Verdict::ReleaseAfterCommit(reason)
            );
        }
        let unbound = PodFacts {
            phase: phase::PENDING,
            bound: false,
            ..deleting
        };
        assert_eq!(
            decide(&unbound, t(0), MARGIN),
            Verdict::ReleaseAfterCommit(ReleaseReason::NeverRan)
        );
        let stopped = PodFacts {
            deletion_grace_seconds: Some(0),
            ..deleting
        };
        assert_eq!(
            decide(&stopped, t(0), MARGIN),
            Verdict::ReleaseAfterCommit(ReleaseReason::Stopped)
        );
    }

    /// Under a sharded recorder, the launcher's finalizer on a pod of its scope is
    /// no reason to skip its own (each scope holds its pods itself), and on a pod being deleted
    /// it is a hold the recorder releases like its own once the state is final.
    #[test]
    fn an_adopted_finalizer_gets_the_own_one_added_and_is_released_like_it() {
        let launched = PodFacts {
            carries_finalizer: false,
            carries_adopted: true,
            ..running()
        };
        assert_eq!(decide(&launched, t(0), MARGIN), Verdict::Add);
        let deleted = PodFacts {
            deletion_timestamp: Some(t(30)),
            deletion_grace_seconds: Some(30),
            phase: phase::SUCCEEDED,
            ..launched
        };
        assert_eq!(
            decide(&deleted, t(0), MARGIN),
            Verdict::ReleaseAfterCommit(ReleaseReason::Terminal)
        );
        let still_running = PodFacts {
            phase: phase::RUNNING,
            ..deleted
        };
        assert_eq!(
            decide(&still_running, t(0), MARGIN),
            Verdict::RecheckAt(t(90))
        );
        let neither = PodFacts {
            carries_adopted: false,
            ..deleted
        };
        assert_eq!(decide(&neither, t(0), MARGIN), Verdict::Keep);
    }

    #[test]
    fn a_deleted_pod_still_running_waits_until_the_valve_deadline() {
        let deleting = PodFacts {
            deletion_timestamp: Some(t(30)),
            deletion_grace_seconds: Some(30),
            ..running()
        };
        assert_eq!(decide(&deleting, t(0), MARGIN), Verdict::RecheckAt(t(90)));
        assert_eq!(decide(&deleting, t(89), MARGIN), Verdict::RecheckAt(t(90)));
        assert_eq!(
            decide(&deleting, t(90), MARGIN),
            Verdict::ReleaseAfterCommit(ReleaseReason::Overdue)
        );
        assert_eq!(final_state(&deleting), None);
        assert_eq!(final_state(&running()), None, "not being deleted");
    }
}
