//! Ground truth: every pod ever created, with its phase transitions, exit codes and removal time,
//! derived from what the pod's own status says (so a recorder that only saw the final object can
//! still agree with it). Updated inside the pod table's write path, whoever wrote.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

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
    by_uid: HashMap<Arc<str>, usize>,
    pods: Vec<Life>,
}

/// The compact form of a [`PodHistory`] kept for every pod ever created (100k pods make the
/// usual maps and strings add up): converted on [`GroundTruth::snapshot`].
#[derive(Debug)]
struct Life {
    uid: Arc<str>,
    namespace: Box<str>,
    name: Box<str>,
    labels: Box<[(Box<str>, Box<str>)]>,
    transitions: Vec<(&'static str, Timestamp)>,
    exit_codes: Vec<(Box<str>, i32)>,
    deleted_at: Option<Timestamp>,
}

impl Life {
    fn reached(&self, phase: &str) -> bool {
        self.transitions.iter().any(|(p, _)| *p == phase)
    }

    fn set_labels(&mut self, labels: &BTreeMap<String, String>) {
        let same = self.labels.len() == labels.len()
            && self
                .labels
                .iter()
                .zip(labels)
                .all(|((k, v), (k2, v2))| **k == **k2 && **v == **v2);
        if !same {
            self.labels = labels
                .iter()
                .map(|(k, v)| (k.as_str().into(), v.as_str().into()))
                .collect();
        }
    }

    fn history(&self) -> PodHistory {
        PodHistory {
            uid: self.uid.to_string(),
            namespace: self.namespace.to_string(),
            name: self.name.to_string(),
            labels: self
                .labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            transitions: self
                .transitions
                .iter()
                .map(|(phase, at)| ((*phase).to_owned(), *at))
                .collect(),
            exit_codes: self
                .exit_codes
                .iter()
                .map(|(name, code)| (name.to_string(), *code))
                .collect(),
            deleted_at: self.deleted_at,
        }
    }
}

fn statuses(pod: &Pod) -> impl Iterator<Item = &ContainerStatus> {
    pod.status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
}

impl GroundTruth {
    /// Records what `pod` (just written) tells about its life.
    pub fn observe(&mut self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return;
        };
        let index = match self.by_uid.get(uid) {
            Some(&i) => i,
            None => {
                let created = pod
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0)
                    .unwrap_or_else(Timestamp::now);
                let uid: Arc<str> = uid.into();
                self.pods.push(Life {
                    uid: uid.clone(),
                    namespace: pod.metadata.namespace.as_deref().unwrap_or_default().into(),
                    name: pod.metadata.name.as_deref().unwrap_or_default().into(),
                    labels: Box::default(),
                    transitions: vec![("Pending", created)],
                    exit_codes: Vec::new(),
                    deleted_at: None,
                });
                self.by_uid.insert(uid, self.pods.len() - 1);
                self.pods.len() - 1
            }
        };
        let history = &mut self.pods[index];
        if let Some(labels) = &pod.metadata.labels {
            history.set_labels(labels);
        }
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or_default();
        let terminal = match phase {
            "Succeeded" => Some("Succeeded"),
            "Failed" => Some("Failed"),
            _ => None,
        };

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
            && !history.reached("Running")
        {
            history.transitions.push(("Running", at));
        }

        for cs in statuses(pod) {
            if let Some(t) = cs.state.as_ref().and_then(|s| s.terminated.as_ref()) {
                match history.exit_codes.iter_mut().find(|(n, _)| **n == *cs.name) {
                    Some((_, code)) => *code = t.exit_code,
                    None => history
                        .exit_codes
                        .push((cs.name.as_str().into(), t.exit_code)),
                }
            }
        }

        if let Some(terminal) = terminal
            && !history.reached("Succeeded")
            && !history.reached("Failed")
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
            history.transitions.push((terminal, at));
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
        self.pods.iter().map(Life::history).collect()
    }
}
