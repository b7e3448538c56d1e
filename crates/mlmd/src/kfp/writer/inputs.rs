//! Linking a pod's inputs to their upstream artifacts.
//!
//! Why a module of its own: an input is linked by URI to the newest artifact
//! with it, and that artifact may not exist yet (a backlog is written in
//! parallel, in no particular order), so inputs are resolved from the memo or
//! one `GetArtifactsByURI`, read back from INPUT events after a restart, and
//! linked late once their upstream pod is recorded.

use std::collections::HashMap;

use super::mapping::{input_pair, or_empty};
use super::memo::PodMemo;
use super::record::KfpWriter;
use crate::error::MlmdError;
use crate::kfp::patch::InputRef;
use crate::kfp::pod::KfpPod;
use crate::proto::*;

impl KfpWriter {
    /// The inputs an execution recorded earlier has INPUT events for.
    pub(super) async fn linked_inputs(
        &self,
        pod: &KfpPod,
        execution: &Execution,
    ) -> Result<Vec<InputRef>, MlmdError> {
        Ok(self
            .execution_events(execution)
            .await?
            .iter()
            .filter(|e| e.r#type == Some(EventType::Input as i32))
            .filter_map(|e| {
                let name = e.path.as_ref()?.first_key()?.to_owned();
                let uri = pod.inputs.iter().find(|i| i.name == name)?.uri.clone();
                Some(InputRef {
                    id: e.artifact_id?,
                    name,
                    uri,
                })
            })
            .collect())
    }

    /// Link inputs of a finished execution whose upstream artifact appeared
    /// since (the upstream pod was recorded after this one: a relist or a
    /// backlog is written in parallel, in no particular order).
    pub(super) async fn link_late_inputs(
        &self,
        pod: &KfpPod,
        memo: &PodMemo,
    ) -> Result<Vec<InputRef>, MlmdError> {
        let Some(execution_id) = memo.execution.id else {
            return Ok(Vec::new());
        };
        let linked: Vec<&str> = memo.inputs.iter().map(|i| i.name.as_str()).collect();
        let late: Vec<InputRef> = self
            .resolve_inputs(pod)
            .await?
            .into_iter()
            .filter(|i| !linked.contains(&i.name.as_str()))
            .collect();
        if late.is_empty() {
            return Ok(late);
        }
        let events = late
            .iter()
            .filter_map(|i| {
                let mut event = input_pair(i).event?;
                event.execution_id = Some(execution_id);
                Some(event)
            })
            .collect();
        match self.client.put_events(PutEventsRequest { events }).await {
            Ok(_) => Ok(late),
            // Linked meanwhile by another writer: read what is there.
            Err(e) if e.is_already_exists() => {
                self.linked_inputs(pod, &memo.execution).await.map(|all| {
                    all.into_iter()
                        .filter(|i| !linked.contains(&i.name.as_str()))
                        .collect()
                })
            }
            Err(e) => Err(e),
        }
    }

    /// Inputs linked by URI to the newest artifact with that URI: from the
    /// memo when this writer wrote or read it, else one `GetArtifactsByURI`.
    pub(super) async fn resolve_inputs(&self, pod: &KfpPod) -> Result<Vec<InputRef>, MlmdError> {
        if pod.inputs.is_empty() {
            return Ok(Vec::new());
        }
        let mut newest: HashMap<String, i64> = {
            let memo = self.memo();
            pod.inputs
                .iter()
                .filter_map(|i| Some((i.uri.clone(), *memo.artifacts.get(&i.uri)?)))
                .collect()
        };
        let missing: Vec<String> = pod
            .inputs
            .iter()
            .filter(|i| !newest.contains_key(&i.uri))
            .map(|i| i.uri.clone())
            .collect();
        if !missing.is_empty() {
            let found = self
                .client
                .get_artifacts_by_uri(GetArtifactsByUriRequest { uris: missing })
                .await;
            for a in or_empty(found)?.artifacts {
                if let (Some(uri), Some(id)) = (a.uri, a.id) {
                    let e = newest.entry(uri).or_insert(id);
                    *e = (*e).max(id);
                }
            }
            self.remember_artifacts(newest.iter().map(|(u, id)| (u.clone(), *id)));
        }
        let mut inputs = Vec::new();
        for input in &pod.inputs {
            match newest.get(&input.uri) {
                Some(&id) => inputs.push(InputRef {
                    id,
                    name: input.name.clone(),
                    uri: input.uri.clone(),
                }),
                None => tracing::debug!(
                    namespace = %pod.namespace, pod = %pod.name, input = %input.name, uri = %input.uri,
                    "no upstream artifact with this URI yet; input not linked"
                ),
            }
        }
        Ok(inputs)
    }

    /// Keep the newest artifact id per URI.
    pub(super) fn remember_artifacts(&self, artifacts: impl IntoIterator<Item = (String, i64)>) {
        let mut memo = self.memo();
        for (uri, id) in artifacts {
            let newest = memo.artifacts.get(&uri).map_or(id, |&old| old.max(id));
            memo.artifacts.insert(uri, newest);
        }
    }
}
