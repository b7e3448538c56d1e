//! Ground truth: every pod ever created, with its phase transitions, exit codes and removal time,
//! derived from what the pod's own status says (so a recorder that only saw the final object can
//! still agree with it). Updated inside the pod table's write path, whoever wrote.

use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

/// The life of one pod as the sim knows it. Compare times at second precision (k8s `Time`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodHistory {
    /// The pod's uid.
    pub uid: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its labels at creation (updated when they change).
    pub labels: BTreeMap<String, String>,
    /// Phases reached, in order, with when: Pending = creationTimestamp; Running = earliest
    /// container startedAt; Succeeded/Failed = latest finishedAt (or the Ready condition's
    /// lastTransitionTime when no container terminated).
    pub transitions: Vec<(String, Timestamp)>,
    /// Exit code of every container that terminated.
    pub exit_codes: BTreeMap<String, i32>,
    /// When the object was removed from the store.
    pub deleted_at: Option<Timestamp>,
}

impl PodHistory {
    /// The time the pod reached `phase`, if it did.
    pub fn reached(&self, phase: &str) -> Option<Timestamp> {
        self.transitions
            .iter()
            .find(|(p, _)| p == phase)
            .map(|(_, at)| *at)
    }
}

/// All pod histories, in creation order.
#[derive(Debug, Default)]
pub struct GroundTruth {
    by_uid: HashMap<String, usize>,
    pods: Vec<PodHistory>,
}

fn statuses(pod: &Pod) -> impl Iterator<Item = &ContainerStatus> {
    pod.status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
}

impl GroundTruth {
    /// Records what `pod` (just written) tells about its life.
    pub fn observe(&mut self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        let index = match self.by_uid.get(&uid) {
            Some(&i) => i,
            None => {
                let created = pod
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0)
                    .unwrap_or_else(Timestamp::now);
                self.pods.push(PodHistory {
                    uid: uid.clone(),
                    namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                    name: pod.metadata.name.clone().unwrap_or_default(),
                    labels: pod.metadata.labels.clone().unwrap_or_default(),
                    transitions: vec![("Pending".to_owned(), created)],
                    exit_codes: BTreeMap::new(),
                    deleted_at: None,
                });
                self.by_uid.insert(uid, self.pods.len() - 1);
                self.pods.len() - 1
            }
        };
        let history = &mut self.pods[index];
        if let Some(labels) = &pod.metadata.labels {
            history.labels.clone_from(labels);
        }
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        let terminal = phase == "Succeeded" || phase == "Failed";

        let started = statuses(pod)
            .filter_map(|cs| {
                let state = cs.state.as_ref()?;
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
                    .map(|t| t.0)
            })
            .min();
        let running_at = started.or_else(|| {
            (phase == "Running").then(|| {
                pod.status
                    .as_ref()
                    .and_then(|s| s.start_time.as_ref())
                    .map(|t| t.0)
                    .unwrap_or_else(Timestamp::now)
            })
        });
        if let Some(at) = running_at
            && history.reached("Running").is_none()
        {
            history.transitions.push(("Running".to_owned(), at));
        }

        for cs in statuses(pod) {
            if let Some(t) = cs.state.as_ref().and_then(|s| s.terminated.as_ref()) {
                history.exit_codes.insert(cs.name.clone(), t.exit_code);
            }
        }

        if terminal && history.reached("Succeeded").is_none() && history.reached("Failed").is_none()
        {
            let finished = statuses(pod)
                .filter_map(|cs| {
                    cs.state
                        .as_ref()?
                        .terminated
                        .as_ref()?
                        .finished_at
                        .as_ref()
                        .map(|t| t.0)
                })
                .max();
            let ready_changed = || {
                pod.status
                    .as_ref()?
                    .conditions
                    .as_ref()?
                    .iter()
                    .find(|c| c.type_ == "Ready")?
                    .last_transition_time
                    .as_ref()
                    .map(|t| t.0)
            };
            let at = finished
                .or_else(ready_changed)
                .unwrap_or_else(Timestamp::now);
            history.transitions.push((phase, at));
        }
    }

    /// Records that the pod with `uid` was removed at `at`.
    pub fn removed(&mut self, uid: &str, at: Timestamp) {
        if let Some(&i) = self.by_uid.get(uid) {
            self.pods[i].deleted_at.get_or_insert(at);
        }
    }

    /// A copy of every history, in creation order.
    pub fn snapshot(&self) -> Vec<PodHistory> {
        self.pods.clone()
    }
}
