//! Reconcile after a relist: pods the store believes live but that the relist did not return
//! vanished while nobody was watching.
//!
//! Why: a DELETED event is lost whenever the watch is down long enough for the server's history to
//! move on (the resume then answers 410 and we relist). Without this step those pods would stay
//! "running" in the store forever. They are marked deleted with their final state unknown, which
//! is the honest answer.
//!
//! Pure: the writer fetches the live pods from the store and applies the returned ops in the same
//! transaction as the relist's data and resume point.
//!
//! With finalizers ([`settle`]): a pod missing from the relist whose last recorded state is final
//! and shows its deletion (the state the recorder committed before it released the pod) did not
//! vanish with an unknown state: only its DELETED event was missed. It is marked deleted with
//! its final state observed.
//!
//! One final state the stored fields cannot show: a pod deleted with grace period 0 while it
//! was not terminal and on a node (the kubelet's final delete of a Pending pod, or a forced
//! delete). Its state is final only because of the grace period, which the store does not keep,
//! so [`settle`] would call it vanished once it is gone. Such a pod is therefore committed as
//! deleted in the same transaction as its release ticket (`stopped_deletions`), before its
//! finalizer comes off: the store never holds it live for a relist to miss.

use std::collections::HashSet;

use jiff::Timestamp;

use crate::finalize::decide::{PodFacts, final_state};
use crate::lifecycle::parse_resource_version;
use crate::selector::LabelSelector;
use crate::ticket::{ReleaseReason, Ticket};
use podline_store::{LivePod, StoreOp};

/// The `Vanished` ops for pods in `live` that the relist (`seen`) did not return.
///
/// Skipped: pods with a change in the same batch (`in_batch`: they were just observed or are being
/// deleted with a known final state) and pods outside the recorder's label selector (another
/// recorder's scope: a relist with a selector never returns them).
pub fn vanished(
    live: &[LivePod],
    seen: &HashSet<String>,
    in_batch: &HashSet<&str>,
    selector: Option<&LabelSelector>,
    at: Timestamp,
) -> Vec<StoreOp> {
    live.iter()
        .filter(|pod| !seen.contains(&pod.uid) && !in_batch.contains(pod.uid.as_str()))
        .filter(|pod| selector.is_none_or(|s| s.matches(&pod.labels)))
        .map(|pod| StoreOp::Vanished {
            uid: pod.uid.clone(),
            at,
        })
        .collect()
}

/// The last recorded state of a pod missing from a relist, as [`settle`] needs it.
#[derive(Debug, Clone, Copy)]
pub struct LastState<'a> {
    /// `metadata.uid`.
    pub uid: &'a str,
    /// Namespace.
    pub namespace: &'a str,
    /// Name.
    pub name: &'a str,
    /// The recorded resourceVersion.
    pub resource_version: u64,
    /// The recorded `deletionTimestamp`.
    pub deletion_requested_at: Option<Timestamp>,
    /// The recorded phase.
    pub phase: &'a str,
    /// Whether it was recorded on a node.
    pub bound: bool,
}

/// What a pod missing from a relist became when the recorder holds pods with finalizers: deleted
/// with its final state observed if its last recorded state was final and being deleted (what
/// the recorder commits before it releases a pod), else vanished.
pub fn settle(last: &LastState<'_>, at: Timestamp) -> StoreOp {
    let facts = PodFacts {
        carries_finalizer: true,
        carries_adopted: false,
        deletion_timestamp: last.deletion_requested_at,
        deletion_grace_seconds: None,
        phase: last.phase,
        bound: last.bound,
    };
    if final_state(&facts).is_some() {
        StoreOp::Deleted {
            uid: last.uid.to_owned(),
            namespace: last.namespace.to_owned(),
            name: last.name.to_owned(),
            resource_version: last.resource_version,
            at,
            final_state_observed: true,
        }
    } else {
        StoreOp::Vanished {
            uid: last.uid.to_owned(),
            at,
        }
    }
}

/// With finalizers: adds to `ops` (the batch the `releases` ride in) a deletion, final state
/// observed, for each pod released because it was deleted with grace period 0
/// ([`ReleaseReason::Stopped`]); see the module docs for why.
///
/// Its deletion is complete when that delete is observed: nothing of the pod runs any more and
/// only finalizers keep the object (a recorder without finalizers would get its DELETED event at
/// once). A `Vanished` op the queue put in the batch for the pod becomes this deletion; a
/// deletion already in the batch is kept.
pub(crate) fn stopped_deletions(ops: &mut Vec<StoreOp>, releases: &[Ticket], at: Timestamp) {
    for ticket in releases {
        let uid = ticket.uid();
        if ticket.reason != ReleaseReason::Stopped || uid.is_empty() {
            continue;
        }
        let deleted = StoreOp::Deleted {
            uid: uid.to_owned(),
            namespace: ticket.meta.namespace.clone().unwrap_or_default(),
            name: ticket.meta.name.clone().unwrap_or_default(),
            resource_version: parse_resource_version(ticket.meta.resource_version.as_deref())
                .unwrap_or(0),
            at,
            final_state_observed: true,
        };
        let mut queued = ops.iter_mut().filter(|op| {
            op.uid() == uid && matches!(op, StoreOp::Deleted { .. } | StoreOp::Vanished { .. })
        });
        match queued.next() {
            Some(vanished @ StoreOp::Vanished { .. }) => *vanished = deleted,
            Some(_) => {}
            None => ops.push(deleted),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn live(uid: &str, app: &str) -> LivePod {
        LivePod {
            uid: uid.to_owned(),
            namespace: "ns".to_owned(),
            name: format!("p-{uid}"),
            resource_version: 1,
            labels: BTreeMap::from([("app".to_owned(), app.to_owned())]),
        }
    }

    fn uids(ops: &[StoreOp]) -> Vec<&str> {
        ops.iter().map(StoreOp::uid).collect()
    }

    #[test]
    fn only_pods_missing_from_the_relist_vanish() {
        let live = vec![live("a", "x"), live("b", "x"), live("c", "x")];
        let seen: HashSet<String> = ["a".to_owned()].into();
        let in_batch: HashSet<&str> = ["c"].into();
        let ops = vanished(&live, &seen, &in_batch, None, Timestamp::UNIX_EPOCH);
        assert_eq!(uids(&ops), vec!["b"]);
        assert!(matches!(ops[0], StoreOp::Vanished { .. }));
    }

    #[test]
    fn pods_outside_the_selector_are_not_ours_to_reconcile() {
        let live = vec![live("a", "x"), live("b", "other")];
        let selector = LabelSelector::parse("app=x").unwrap();
        let ops = vanished(
            &live,
            &HashSet::new(),
            &HashSet::new(),
            Some(&selector),
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(uids(&ops), vec!["a"]);
    }

    #[test]
    fn settle_keeps_a_committed_final_state_and_vanishes_the_rest() {
        let released = LastState {
            uid: "u",
            namespace: "ns",
            name: "p",
            resource_version: 7,
            deletion_requested_at: Some(Timestamp::UNIX_EPOCH),
            phase: "Succeeded",
            bound: true,
        };
        assert!(matches!(
            settle(&released, Timestamp::UNIX_EPOCH),
            StoreOp::Deleted {
                final_state_observed: true,
                resource_version: 7,
                ..
            }
        ));
        let never_ran = LastState {
            phase: "Pending",
            bound: false,
            ..released
        };
        assert!(matches!(
            settle(&never_ran, Timestamp::UNIX_EPOCH),
            StoreOp::Deleted { .. }
        ));
        for unknown in [
            LastState {
                deletion_requested_at: None,
                ..released
            },
            LastState {
                phase: "Running",
                ..released
            },
        ] {
            assert!(matches!(
                settle(&unknown, Timestamp::UNIX_EPOCH),
                StoreOp::Vanished { .. }
            ));
        }
    }

    fn ticket(uid: &str, reason: ReleaseReason) -> Ticket {
        let meta = kube::core::ObjectMeta {
            uid: Some(uid.to_owned()),
            namespace: Some("ns".to_owned()),
            name: Some(format!("p-{uid}")),
            resource_version: Some("12".to_owned()),
            ..Default::default()
        };
        Ticket::new(&meta, reason)
    }

    #[test]
    fn a_grace_zero_release_commits_the_deletion_with_its_ticket() {
        let at = Timestamp::UNIX_EPOCH;
        let mut ops = vec![
            StoreOp::Vanished {
                uid: "gone".to_owned(),
                at,
            },
            StoreOp::Deleted {
                uid: "seen".to_owned(),
                namespace: "ns".to_owned(),
                name: "p-seen".to_owned(),
                resource_version: 20,
                at,
                final_state_observed: true,
            },
        ];
        let releases = [
            ticket("stopped", ReleaseReason::Stopped),
            ticket("gone", ReleaseReason::Stopped),
            ticket("seen", ReleaseReason::Stopped),
            ticket("done", ReleaseReason::Terminal),
            ticket("valve", ReleaseReason::Overdue),
        ];
        stopped_deletions(&mut ops, &releases, at);
        assert_eq!(uids(&ops), vec!["gone", "seen", "stopped"]);
        for op in &ops {
            assert!(
                matches!(
                    op,
                    StoreOp::Deleted {
                        final_state_observed: true,
                        ..
                    }
                ),
                "{op:?}"
            );
        }
        assert!(matches!(
            &ops[2],
            StoreOp::Deleted { namespace, name, resource_version: 12, .. }
                if namespace == "ns" && name == "p-stopped"
        ));
        assert!(matches!(
            &ops[1],
            StoreOp::Deleted {
                resource_version: 20,
                ..
            }
        ));
        // Idempotent: a requeued batch with its tickets adds nothing more.
        stopped_deletions(&mut ops, &releases, at);
        assert_eq!(ops.len(), 3);
    }

    #[test]
    fn a_complete_relist_vanishes_nothing() {
        let live = vec![live("a", "x"), live("b", "x")];
        let seen: HashSet<String> = ["a".to_owned(), "b".to_owned(), "new".to_owned()].into();
        assert!(vanished(&live, &seen, &HashSet::new(), None, Timestamp::UNIX_EPOCH).is_empty());
    }
}
