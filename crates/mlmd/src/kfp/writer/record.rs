//! [`KfpWriter`], its entry points, and the per-pod state machine.
//!
//! Why a module of its own: `KfpWriter::record_with` is the one place that
//! decides, from what MLMD has for a pod (the memo, or what first sight
//! found) and what the pod is now, which single write moves it on: none,
//! RUNNING, or the finish with its outputs. The writes and reads it chooses
//! between are the other parts' methods.

use std::sync::Mutex;

use super::flight::SingleFlight;
use super::mapping::{is_terminal, state_of};
use super::memo::Memo;
use crate::client::MlmdClient;
use crate::error::MlmdError;
use crate::kfp::patch::{InputRef, OutputRef};
use crate::kfp::pod::KfpPod;
use crate::proto::*;

/// What was recorded for a pod: the ids for the pod patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The execution id.
    pub execution_id: i64,
    /// The run context id.
    pub context_id: i64,
    /// The execution's state in MLMD now.
    pub state: ExecutionState,
    /// Linked inputs.
    pub inputs: Vec<InputRef>,
    /// Outputs, once the execution is terminal.
    pub outputs: Option<Vec<OutputRef>>,
    /// URIs of inputs not linked because no artifact has them yet (the
    /// upstream pod is not recorded yet: a later call links them).
    pub unlinked_inputs: Vec<String>,
}

/// What [`KfpWriter::record_unless_inputs_missing`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Written {
    /// Recorded (see [`KfpWriter::record`]).
    Recorded(Recorded),
    /// Nothing written: the pod is finished and new to this writer, and
    /// these input URIs have no artifact in MLMD yet (the upstream pod is
    /// not recorded yet). Call again once they may have.
    AwaitingInputs(Vec<String>),
}

/// The KFP metadata writer over an [`MlmdClient`].
#[derive(Debug)]
pub struct KfpWriter {
    pub(super) client: MlmdClient,
    memo: Mutex<Memo>,
    pub(super) flights: SingleFlight,
}

impl KfpWriter {
    /// A writer with memo capacities (pods, contexts).
    pub fn new(client: MlmdClient, pod_cache: usize, context_cache: usize) -> Self {
        KfpWriter {
            client,
            memo: Mutex::new(Memo::new(pod_cache, context_cache)),
            flights: SingleFlight::default(),
        }
    }

    /// The client (for probes and call counts).
    pub fn client(&self) -> &MlmdClient {
        &self.client
    }

    /// The memo, locked; never held across an await.
    pub(super) fn memo(&self) -> std::sync::MutexGuard<'_, Memo> {
        // A panic while holding this lock cannot leave the memo inconsistent
        // in a way that matters (it is only a cache), so recover from poison.
        self.memo.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Record `pod` (its outputs already filled in `pod.outputs` when known).
    /// `deleted` means the pod is gone. Idempotent: safe to call again for
    /// the same pod after any failure or restart.
    ///
    /// MLMD calls per pod, types and contexts cached: at first sight one
    /// `GetArtifactsByURI` (only when it has inputs) and one `PutExecution`;
    /// then one `PutExecution` when it finishes (none when it was first seen
    /// finished). A restart costs one more read per pod (`AlreadyExists`, then
    /// `GetExecutionsByExternalIds`).
    pub async fn record(&self, pod: &KfpPod, deleted: bool) -> Result<Recorded, MlmdError> {
        self.record_with(pod, deleted, None).await
    }

    /// [`KfpWriter::record`], except that a finished pod this writer has
    /// not recorded yet, some of whose inputs have no upstream artifact in
    /// MLMD yet, is not written at all ([`Written::AwaitingInputs`]): its
    /// single write comes once the inputs can be linked in it. (Recorded
    /// at once, it would need a second write to link them.)
    pub async fn record_unless_inputs_missing(
        &self,
        pod: &KfpPod,
        deleted: bool,
    ) -> Result<Written, MlmdError> {
        let new_to_us = self.memo().pods.get(&pod.uid).is_none();
        if new_to_us && is_terminal(pod.state(deleted)) && !pod.inputs.is_empty() {
            let inputs = self.resolve_inputs(pod).await?;
            if inputs.len() < pod.inputs.len() {
                let unlinked = pod
                    .inputs
                    .iter()
                    .filter(|i| !inputs.iter().any(|l| l.name == i.name))
                    .map(|i| i.uri.clone())
                    .collect();
                return Ok(Written::AwaitingInputs(unlinked));
            }
            return self
                .record_with(pod, deleted, Some(inputs))
                .await
                .map(Written::Recorded);
        }
        self.record_with(pod, deleted, None)
            .await
            .map(Written::Recorded)
    }

    /// [`KfpWriter::record`] with the pod's inputs already resolved, when
    /// the caller did.
    async fn record_with(
        &self,
        pod: &KfpPod,
        deleted: bool,
        resolved: Option<Vec<InputRef>>,
    ) -> Result<Recorded, MlmdError> {
        let target = pod.state(deleted);
        let context = self.run_context(&pod.namespace, &pod.workflow).await?;
        let context_id = context.id.ok_or(MlmdError::MissingField {
            method: "PutContexts",
            field: "context id",
        })?;
        let memo = self.memo().pods.get(&pod.uid).cloned();
        let mut memo = match memo {
            Some(m) => m,
            None => self.first_sight(pod, &context, target, resolved).await?,
        };
        let current = state_of(&memo.execution);
        if is_terminal(current) {
            if memo.outputs.is_none() {
                memo.outputs = Some(self.read_outputs(&memo.execution).await?);
            }
            if memo.inputs.len() < pod.inputs.len() {
                let late = self.link_late_inputs(pod, &memo).await?;
                memo.inputs.extend(late);
            }
        } else if is_terminal(target) {
            let outputs = pod.outputs.clone().unwrap_or_default();
            // Inputs whose upstream artifact did not exist at first sight
            // are linked now, in the same transaction.
            let late_inputs = if memo.inputs.len() < pod.inputs.len() {
                let linked: Vec<i64> = memo.inputs.iter().map(|i| i.id).collect();
                self.resolve_inputs(pod)
                    .await?
                    .into_iter()
                    .filter(|i| !linked.contains(&i.id))
                    .collect()
            } else {
                Vec::new()
            };
            match self
                .finish(
                    pod,
                    &context,
                    &memo.execution,
                    target,
                    &outputs,
                    &late_inputs,
                )
                .await
            {
                Ok((_, refs)) => {
                    memo.execution.last_known_state = Some(target as i32);
                    memo.inputs.extend(late_inputs);
                    memo.outputs = Some(refs);
                }
                Err(e) if e.is_already_exists() => {
                    // Another writer finished it first: read what it wrote.
                    let again = self.find_execution(pod).await?.ok_or(e)?;
                    memo.outputs = Some(self.read_outputs(&again).await?);
                    memo.execution = again;
                }
                Err(e) => return Err(e),
            }
        } else if target != current && target == ExecutionState::Running {
            let mut update = memo.execution.clone();
            update.last_known_state = Some(target as i32);
            self.client
                .put_executions(PutExecutionsRequest {
                    executions: vec![update.clone()],
                })
                .await?;
            memo.execution = update;
        }
        let recorded = Recorded {
            execution_id: memo.execution.id.unwrap_or_default(),
            context_id,
            state: state_of(&memo.execution),
            inputs: memo.inputs.clone(),
            outputs: memo.outputs.clone(),
            unlinked_inputs: pod
                .inputs
                .iter()
                .filter(|i| !memo.inputs.iter().any(|l| l.name == i.name))
                .map(|i| i.uri.clone())
                .collect(),
        };
        self.memo().pods.insert(pod.uid.clone(), memo);
        Ok(recorded)
    }
}
