//! The execution's own transactions, and reading back what was committed.
//!
//! Why a module of its own: each write here is one atomic `PutExecution`
//! (first sight, finish), keyed by the execution's deterministic external
//! id so it is safe to repeat; when MLMD answers `AlreadyExists` (a restart,
//! or another writer first), the reads here find what was really written.

use std::collections::HashMap;

use super::mapping::{
    execution_external_id, execution_proto, input_pair, is_terminal, or_empty, output_pair,
    writable,
};
use super::memo::PodMemo;
use super::record::KfpWriter;
use crate::error::MlmdError;
use crate::kfp::keys::NO_TYPE;
use crate::kfp::patch::{InputRef, OutputRef};
use crate::kfp::pod::{KfpPod, OutputArtifact};
use crate::proto::*;

impl KfpWriter {
    /// The execution podline recorded for `pod`, if any (by external id).
    pub(super) async fn find_execution(
        &self,
        pod: &KfpPod,
    ) -> Result<Option<Execution>, MlmdError> {
        let found = self
            .client
            .get_executions_by_external_ids(GetExecutionsByExternalIdsRequest {
                external_ids: vec![execution_external_id(pod)],
            })
            .await;
        Ok(or_empty(found)?.executions.into_iter().next().map(writable))
    }

    /// The first time this process sees the pod: create its execution
    /// (finished at once, outputs and all, when the pod already is), or
    /// continue from what an earlier run stored. Creating first and reading
    /// only on `AlreadyExists` saves a read per pod in the common case; the
    /// execution's external id makes the create safe to repeat.
    pub(super) async fn first_sight(
        &self,
        pod: &KfpPod,
        context: &Context,
        target: ExecutionState,
        resolved: Option<Vec<InputRef>>,
    ) -> Result<PodMemo, MlmdError> {
        // A pod phase 1 of KFP's own writer labelled: adopt its execution
        // (never for cache hits, whose label points at the original run's),
        // unless podline recorded it already. Either way its inputs are the
        // ones it has INPUT events for: an execution recorded before its
        // upstream artifact existed has none yet, and they are linked late.
        if let (Some(id), false) = (pod.labelled_execution_id, pod.cached) {
            if let Some(execution) = self.find_execution(pod).await? {
                let inputs = self.linked_inputs(pod, &execution).await?;
                return Ok(PodMemo {
                    execution,
                    inputs,
                    outputs: None,
                });
            }
            let found = self
                .client
                .get_executions_by_id(GetExecutionsByIdRequest {
                    execution_ids: vec![id],
                })
                .await;
            if let Some(execution) = or_empty(found)?.executions.into_iter().next() {
                let execution = writable(execution);
                let inputs = self.linked_inputs(pod, &execution).await?;
                return Ok(PodMemo {
                    execution,
                    inputs,
                    outputs: None,
                });
            }
        }
        let inputs = match resolved {
            Some(inputs) => inputs,
            None => self.resolve_inputs(pod).await?,
        };
        let type_id = self.execution_type(&pod.component_version).await?;
        let created = if is_terminal(target) {
            let mut execution = execution_proto(pod, type_id, target);
            let outputs = pod.outputs.clone().unwrap_or_default();
            self.finish(pod, context, &execution, target, &outputs, &inputs)
                .await
                .map(|(id, refs)| {
                    execution.id = id;
                    execution
                        .custom_properties
                        .extend(pod.output_parameters.clone());
                    PodMemo {
                        execution,
                        inputs: inputs.clone(),
                        outputs: Some(refs),
                    }
                })
        } else {
            // Created NEW or RUNNING; a terminal state comes with the outputs.
            let initial = if target == ExecutionState::Running {
                ExecutionState::Running
            } else {
                ExecutionState::New
            };
            let mut execution = execution_proto(pod, type_id, initial);
            let request = PutExecutionRequest {
                execution: Some(execution.clone()),
                artifact_event_pairs: inputs.iter().map(input_pair).collect(),
                contexts: vec![context.clone()],
                options: Some(PutExecutionOptions {
                    reuse_context_if_already_exist: Some(true),
                    reuse_artifact_if_already_exist_by_external_id: Some(true),
                }),
            };
            self.client.put_execution(request).await.map(|response| {
                execution.id = response.execution_id;
                PodMemo {
                    execution,
                    inputs: inputs.clone(),
                    outputs: None,
                }
            })
        };
        match created {
            Ok(memo) => Ok(memo),
            // Recorded before (a restart, or a lost race): go on from there,
            // with the inputs it really linked.
            Err(e) if e.is_already_exists() => {
                let execution = self.find_execution(pod).await?.ok_or(e)?;
                let inputs = self.linked_inputs(pod, &execution).await?;
                Ok(PodMemo {
                    execution,
                    inputs,
                    outputs: None,
                })
            }
            Err(e) => Err(e),
        }
    }

    /// One transaction: the execution in its final `state` with its output
    /// parameters, its output artifacts (OUTPUT events, attributed to the
    /// run), and `inputs` not linked yet. `execution` without an id is
    /// created. Returns the execution id and the outputs' ids.
    pub(super) async fn finish(
        &self,
        pod: &KfpPod,
        context: &Context,
        execution: &Execution,
        state: ExecutionState,
        outputs: &[OutputArtifact],
        inputs: &[InputRef],
    ) -> Result<(Option<i64>, Vec<OutputRef>), MlmdError> {
        let mut pairs = Vec::with_capacity(outputs.len() + inputs.len());
        let mut type_names = Vec::with_capacity(outputs.len());
        for output in outputs {
            let type_id = self.artifact_type(&output.type_name).await?;
            type_names.push(output.type_name.clone());
            pairs.push(output_pair(pod, output, type_id));
        }
        // Outputs first: the response's artifact ids follow the pairs' order.
        pairs.extend(inputs.iter().map(input_pair));
        let mut update = execution.clone();
        update.last_known_state = Some(state as i32);
        update
            .custom_properties
            .extend(pod.output_parameters.clone());
        let response = self
            .client
            .put_execution(PutExecutionRequest {
                execution: Some(update),
                artifact_event_pairs: pairs,
                contexts: vec![context.clone()],
                options: Some(PutExecutionOptions {
                    reuse_context_if_already_exist: Some(true),
                    reuse_artifact_if_already_exist_by_external_id: Some(true),
                }),
            })
            .await?;
        let refs: Vec<OutputRef> = outputs
            .iter()
            .zip(response.artifact_ids)
            .zip(type_names)
            .map(|((o, id), ty)| OutputRef {
                id,
                name: o.name.clone(),
                uri: o.uri.clone(),
                r#type: ty,
            })
            .collect();
        self.remember_artifacts(refs.iter().map(|r| (r.uri.clone(), r.id)));
        Ok((response.execution_id, refs))
    }

    /// The events of an execution recorded earlier (none for one never stored): what its
    /// outputs and linked inputs are read back from.
    pub(super) async fn execution_events(
        &self,
        execution: &Execution,
    ) -> Result<Vec<Event>, MlmdError> {
        let Some(id) = execution.id else {
            return Ok(Vec::new());
        };
        let events = self
            .client
            .get_events_by_execution_ids(GetEventsByExecutionIdsRequest {
                execution_ids: vec![id],
            })
            .await;
        Ok(or_empty(events)?.events)
    }

    /// The outputs an earlier (committed) phase 2 wrote, from its events.
    pub(super) async fn read_outputs(
        &self,
        execution: &Execution,
    ) -> Result<Vec<OutputRef>, MlmdError> {
        let events = self.execution_events(execution).await?;
        let outputs: Vec<(i64, String)> = events
            .iter()
            .filter(|e| e.r#type == Some(EventType::Output as i32))
            .filter_map(|e| {
                let name = e.path.as_ref()?.first_key()?.to_owned();
                Some((e.artifact_id?, name))
            })
            .collect();
        if outputs.is_empty() {
            return Ok(Vec::new());
        }
        let artifacts = self
            .client
            .get_artifacts_by_id(GetArtifactsByIdRequest {
                artifact_ids: outputs.iter().map(|(id, _)| *id).collect(),
            })
            .await;
        let artifacts = or_empty(artifacts)?.artifacts;
        let by_id: HashMap<i64, Artifact> = artifacts
            .into_iter()
            .filter_map(|a| Some((a.id?, a)))
            .collect();
        Ok(outputs
            .into_iter()
            .filter_map(|(id, name)| {
                let a = by_id.get(&id)?;
                Some(OutputRef {
                    id,
                    name,
                    uri: a.uri.clone().unwrap_or_default(),
                    r#type: a.r#type.clone().unwrap_or_else(|| NO_TYPE.to_owned()),
                })
            })
            .collect())
    }
}
