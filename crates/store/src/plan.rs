//! Folding a batch into the minimal set of rows to write (pure, no database).
//!
//! A batch is applied with a few multi-row statements instead of one statement per op. That is
//! only correct if the fold gives the same result as applying the ops one by one, in order:
//! - pods: the observation with the highest resourceVersion wins (the first of equals);
//! - transitions: the first `(uid, phase)` wins, from every observation (an older observation
//!   still tells the truth about when a phase was entered);
//! - deletions: the first `Deleted`/`Vanished` per uid wins.
//!
//! PostgreSQL also refuses a multi-row upsert that touches the same row twice, so the fold is
//! required there, and rows are sorted by key so concurrent writers lock in the same order.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use jiff::Timestamp;

use crate::model::{Batch, ContainerObservation, PodObservation, RejectedOp, StoreOp};

/// The rows one batch writes.
#[derive(Debug, Default)]
pub(crate) struct Plan<'a> {
    /// The winning observation per uid, sorted by uid.
    pub pods: Vec<&'a PodObservation>,
    /// Containers of the winning observations: (pod, position in spec, container).
    pub containers: Vec<(&'a PodObservation, usize, &'a ContainerObservation)>,
    /// First transition per (uid, phase), sorted.
    pub transitions: Vec<(&'a str, &'a str, Timestamp)>,
    /// First deletion per uid, sorted by uid.
    pub deletions: Vec<(&'a str, Deletion<'a>)>,
    /// Ops that can never be stored.
    pub rejected: Vec<RejectedOp>,
}

/// A deletion, observed (from the watch) or inferred (missing from a relist).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deletion<'a> {
    /// A `DELETED` event.
    Observed {
        namespace: &'a str,
        name: &'a str,
        resource_version: u64,
        at: Timestamp,
        final_state_observed: bool,
    },
    /// Missing from a relist.
    Vanished { at: Timestamp },
}

impl<'a> Plan<'a> {
    /// Folds `batch` as if its ops were applied one by one.
    pub(crate) fn from_batch(batch: &'a Batch) -> Self {
        let mut plan = Plan::default();
        let mut pods: BTreeMap<&'a str, &'a PodObservation> = BTreeMap::new();
        let mut transitions: BTreeMap<(&'a str, &'a str), Timestamp> = BTreeMap::new();
        let mut deletions: BTreeMap<&'a str, Deletion<'a>> = BTreeMap::new();

        for op in &batch.ops {
            if let Some(reason) = rejection(op) {
                plan.rejected.push(RejectedOp {
                    uid: op.uid().to_owned(),
                    reason,
                });
                continue;
            }
            match op {
                StoreOp::Upsert(obs) => {
                    match pods.entry(obs.uid.as_str()) {
                        Entry::Vacant(slot) => {
                            slot.insert(obs);
                        }
                        Entry::Occupied(mut slot) => {
                            if obs.resource_version > slot.get().resource_version {
                                slot.insert(obs);
                            }
                        }
                    }
                    for t in &obs.transitions {
                        transitions
                            .entry((obs.uid.as_str(), t.phase.as_str()))
                            .or_insert(t.at);
                    }
                }
                StoreOp::Deleted {
                    uid,
                    namespace,
                    name,
                    resource_version,
                    at,
                    final_state_observed,
                } => {
                    deletions.entry(uid.as_str()).or_insert(Deletion::Observed {
                        namespace,
                        name,
                        resource_version: *resource_version,
                        at: *at,
                        final_state_observed: *final_state_observed,
                    });
                }
                StoreOp::Vanished { uid, at } => {
                    deletions
                        .entry(uid.as_str())
                        .or_insert(Deletion::Vanished { at: *at });
                }
            }
        }

        plan.pods = pods.into_values().collect();
        for obs in &plan.pods {
            let mut seen = std::collections::BTreeSet::new();
            for (position, container) in obs.containers.iter().enumerate() {
                if seen.insert(container.name.as_str()) {
                    plan.containers.push((obs, position, container));
                }
            }
        }
        plan.containers
            .sort_by(|a, b| (a.0.uid.as_str(), &a.2.name).cmp(&(b.0.uid.as_str(), &b.2.name)));
        plan.transitions = transitions
            .into_iter()
            .map(|((uid, phase), at)| (uid, phase, at))
            .collect();
        plan.deletions = deletions.into_iter().collect();
        plan
    }
}

/// Why an op can never be stored, if it can't.
fn rejection(op: &StoreOp) -> Option<String> {
    if op.uid().is_empty() {
        return Some("empty uid".to_owned());
    }
    let rv = match op {
        StoreOp::Upsert(obs) => obs.resource_version,
        StoreOp::Deleted {
            resource_version, ..
        } => *resource_version,
        StoreOp::Vanished { .. } => 0,
    };
    if i64::try_from(rv).is_err() {
        return Some(format!("resourceVersion {rv} is out of range"));
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::PhaseTransition;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn obs(uid: &str, rv: u64, phase: &str) -> PodObservation {
        PodObservation {
            uid: uid.into(),
            namespace: "ns".into(),
            name: uid.into(),
            resource_version: rv,
            phase: phase.into(),
            transitions: vec![PhaseTransition::new(phase, ts(rv as i64))],
            ..Default::default()
        }
    }

    #[test]
    fn highest_resource_version_should_win_regardless_of_order() {
        let batch = Batch::new(vec![
            StoreOp::Upsert(obs("a", 5, "Running")),
            StoreOp::Upsert(obs("a", 9, "Succeeded")),
            StoreOp::Upsert(obs("a", 7, "Running")),
        ]);
        let plan = Plan::from_batch(&batch);
        assert_eq!(plan.pods.len(), 1);
        assert_eq!(plan.pods[0].resource_version, 9);
        // Transitions from every observation, first time per phase wins.
        assert_eq!(
            plan.transitions,
            vec![("a", "Running", ts(5)), ("a", "Succeeded", ts(9))]
        );
    }

    #[test]
    fn first_deletion_should_win() {
        let batch = Batch::new(vec![
            StoreOp::Vanished {
                uid: "a".into(),
                at: ts(1),
            },
            StoreOp::Deleted {
                uid: "a".into(),
                namespace: "ns".into(),
                name: "a".into(),
                resource_version: 3,
                at: ts(2),
                final_state_observed: true,
            },
        ]);
        let plan = Plan::from_batch(&batch);
        assert_eq!(
            plan.deletions,
            vec![("a", Deletion::Vanished { at: ts(1) })]
        );
    }

    #[test]
    fn unstorable_ops_should_be_rejected_not_fail_the_batch() {
        let batch = Batch::new(vec![
            StoreOp::Upsert(obs("", 1, "Pending")),
            StoreOp::Upsert(obs("b", u64::MAX, "Pending")),
            StoreOp::Upsert(obs("c", 2, "Pending")),
        ]);
        let plan = Plan::from_batch(&batch);
        assert_eq!(plan.rejected.len(), 2);
        assert_eq!(plan.pods.len(), 1);
        assert_eq!(plan.pods[0].uid, "c");
    }

    #[test]
    fn duplicate_container_names_should_keep_the_first() {
        let mut o = obs("a", 1, "Pending");
        o.containers = vec![
            ContainerObservation {
                name: "main".into(),
                image: "one".into(),
                ..Default::default()
            },
            ContainerObservation {
                name: "main".into(),
                image: "two".into(),
                ..Default::default()
            },
        ];
        let batch = Batch::new(vec![StoreOp::Upsert(o)]);
        let plan = Plan::from_batch(&batch);
        assert_eq!(plan.containers.len(), 1);
        assert_eq!(plan.containers[0].2.image, "one");
    }

    proptest::proptest! {
        /// The fold equals sequential application for any interleaving of versions.
        #[test]
        fn fold_should_equal_sequential_application(
            ops in proptest::collection::vec((0u8..4, 1u64..20, 0u8..3), 0..40)
        ) {
            let phases = ["Pending", "Running", "Succeeded"];
            let batch = Batch::new(ops.iter().map(|(uid, rv, phase)| {
                StoreOp::Upsert(obs(&format!("p{uid}"), *rv, phases[*phase as usize]))
            }).collect());
            let plan = Plan::from_batch(&batch);
            // Sequential model: keep a row if strictly newer; transitions first wins.
            let mut rows: BTreeMap<String, u64> = BTreeMap::new();
            let mut first: BTreeMap<(String, String), Timestamp> = BTreeMap::new();
            for op in &batch.ops {
                let StoreOp::Upsert(o) = op else { unreachable!() };
                let cur = rows.entry(o.uid.clone()).or_insert(0);
                if o.resource_version > *cur { *cur = o.resource_version; }
                for t in &o.transitions {
                    first.entry((o.uid.clone(), t.phase.clone())).or_insert(t.at);
                }
            }
            let got: BTreeMap<String, u64> =
                plan.pods.iter().map(|o| (o.uid.clone(), o.resource_version)).collect();
            proptest::prop_assert_eq!(got, rows);
            let got_t: BTreeMap<(String, String), Timestamp> = plan.transitions.iter()
                .map(|(u, p, at)| ((u.to_string(), p.to_string()), *at)).collect();
            proptest::prop_assert_eq!(got_t, first);
        }
    }
}
