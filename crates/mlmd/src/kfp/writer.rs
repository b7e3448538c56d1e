//! Records KFP pods into MLMD, idempotently.
//!
//! Differences from KFP's writer, each for a failure it had:
//! - Identity is deterministic: execution external id `podline/kfp/<ns>/<uid>`,
//!   output artifacts `…/<uid>/<output>`, run context `podline/kfp-run/<ns>/<wf>`.
//!   A restart at any point finds its earlier writes instead of duplicating them.
//! - Each phase is one atomic `PutExecution` (execution, events, artifacts,
//!   association, attributions), so there are no half-written steps.
//! - Contexts are created first and looked up (`GetContextByTypeAndName`, no
//!   full scans) only when the create says `AlreadyExists` (a restart, or the
//!   name taken in another namespace). Resolving a context or a type is
//!   single-flight: the workers that need the same one wait for the first,
//!   so a backlog of N pods of one workflow makes one `PutContexts`, not N
//!   racing ones answered `AlreadyExists`.
//! - Write transactions per pod: one when the pod is first seen (NEW or
//!   RUNNING, its inputs linked), one when it finishes (state, outputs,
//!   output parameters, late inputs), both in one `PutExecution`; a pod
//!   first seen finished costs one. [`KfpWriter::record_unless_inputs_missing`]
//!   holds a finished pod back, writing nothing, while its upstream artifacts
//!   are missing, so a backlog written out of order does not cost a second
//!   write (`PutEvents`) per downstream pod.
//! - `last_known_state` follows the pod: NEW/RUNNING, then COMPLETE, FAILED,
//!   CACHED or CANCELED. A terminal state is written in the same transaction
//!   as the outputs, so "terminal" means "outputs recorded".
//!
//! The writer holds no lock across an await; its memo only saves round trips
//! and may be lost at any time.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use super::keys::{NO_TYPE, RUN_CONTEXT_TYPE};
use super::patch::{InputRef, OutputRef};
use super::pod::{KfpPod, OutputArtifact};
use crate::client::MlmdClient;
use crate::error::MlmdError;
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

/// Whether a state is final (outputs recorded with it).
pub fn is_terminal(state: ExecutionState) -> bool {
    matches!(
        state,
        ExecutionState::Complete
            | ExecutionState::Failed
            | ExecutionState::Cached
            | ExecutionState::Canceled
    )
}

/// The external id of a pod's execution.
pub fn execution_external_id(pod: &KfpPod) -> String {
    format!("podline/kfp/{}/{}", pod.namespace, pod.uid)
}

/// The external id of a pod's output artifact.
pub fn artifact_external_id(pod: &KfpPod, output: &str) -> String {
    format!("podline/kfp/{}/{}/{}", pod.namespace, pod.uid, output)
}

/// The external id of a workflow's run context.
pub fn context_external_id(namespace: &str, workflow: &str) -> String {
    format!("podline/kfp-run/{namespace}/{workflow}")
}

#[derive(Clone, Debug)]
struct PodMemo {
    execution: Execution,
    inputs: Vec<InputRef>,
    outputs: Option<Vec<OutputRef>>,
}

/// A bounded map that forgets its oldest entries (the original's LRUs,
/// sized by the same variables).
#[derive(Debug)]
struct Bounded<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
    cap: usize,
}

impl<K: Eq + Hash + Clone, V> Bounded<K, V> {
    fn new(cap: usize) -> Self {
        Bounded {
            map: HashMap::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
        }
    }
    fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k)
    }
    fn remove<Q>(&mut self, k: &Q)
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        // The key stays in `order` until it is the oldest: harmless, as
        // eviction of a missing key removes nothing.
        self.map.remove(k);
    }
    fn insert(&mut self, k: K, v: V) {
        if self.map.insert(k.clone(), v).is_none() {
            self.order.push_back(k);
            while self.order.len() > self.cap {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }
}

#[derive(Debug)]
struct Memo {
    execution_types: HashMap<String, i64>,
    artifact_types: HashMap<String, i64>,
    context_type: Option<i64>,
    contexts: Bounded<(String, String), Context>,
    pods: Bounded<String, PodMemo>,
    /// The newest artifact id per URI this writer wrote or read: inputs
    /// whose upstream it recorded need no `GetArtifactsByURI`.
    artifacts: Bounded<String, i64>,
}

/// One resolution at a time per key: the first caller resolves (and
/// memoizes), the others wait for it and then find the memo.
///
/// Why: 8 workers starting on a backlog of one workflow's pods would all
/// miss the memo at once and race to create the same context (a 1000-pod
/// backlog made 440 `PutContexts`, 338 of them answered `AlreadyExists`).
#[derive(Debug, Default)]
struct SingleFlight {
    keys: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl SingleFlight {
    fn keys(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<tokio::sync::Mutex<()>>>> {
        // A map of locks only; it stays consistent if a holder panicked.
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn lock(&self, key: String) -> FlightGuard<'_> {
        let cell = self.keys().entry(key.clone()).or_default().clone();
        let guard = cell.lock_owned().await;
        FlightGuard {
            flights: self,
            key,
            guard: Some(guard),
        }
    }
}

/// Held while resolving a key; forgets the key when nobody waits for it.
struct FlightGuard<'a> {
    flights: &'a SingleFlight,
    key: String,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for FlightGuard<'_> {
    fn drop(&mut self) {
        self.guard.take();
        let mut keys = self.flights.keys();
        // Only the map holds it: no waiter (waiters clone it under this lock).
        if keys
            .get(&self.key)
            .is_some_and(|cell| Arc::strong_count(cell) == 1)
        {
            keys.remove(&self.key);
        }
    }
}

/// The KFP metadata writer over an [`MlmdClient`].
#[derive(Debug)]
pub struct KfpWriter {
    client: MlmdClient,
    memo: Mutex<Memo>,
    flights: SingleFlight,
}

impl KfpWriter {
    /// A writer with memo capacities (pods, contexts).
    pub fn new(client: MlmdClient, pod_cache: usize, context_cache: usize) -> Self {
        KfpWriter {
            client,
            memo: Mutex::new(Memo {
                execution_types: HashMap::new(),
                artifact_types: HashMap::new(),
                context_type: None,
                contexts: Bounded::new(context_cache),
                pods: Bounded::new(pod_cache),
                artifacts: Bounded::new(pod_cache),
            }),
            flights: SingleFlight::default(),
        }
    }

    /// The client (for probes and call counts).
    pub fn client(&self) -> &MlmdClient {
        &self.client
    }

    fn memo(&self) -> std::sync::MutexGuard<'_, Memo> {
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

    async fn find_execution(&self, pod: &KfpPod) -> Result<Option<Execution>, MlmdError> {
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
    async fn first_sight(
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

    /// The inputs an execution recorded earlier has INPUT events for.
    async fn linked_inputs(
        &self,
        pod: &KfpPod,
        execution: &Execution,
    ) -> Result<Vec<InputRef>, MlmdError> {
        let Some(id) = execution.id else {
            return Ok(Vec::new());
        };
        let events = self
            .client
            .get_events_by_execution_ids(GetEventsByExecutionIdsRequest {
                execution_ids: vec![id],
            })
            .await;
        Ok(or_empty(events)?
            .events
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
    async fn link_late_inputs(
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
    async fn resolve_inputs(&self, pod: &KfpPod) -> Result<Vec<InputRef>, MlmdError> {
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
    fn remember_artifacts(&self, artifacts: impl IntoIterator<Item = (String, i64)>) {
        let mut memo = self.memo();
        for (uri, id) in artifacts {
            let newest = memo.artifacts.get(&uri).map_or(id, |&old| old.max(id));
            memo.artifacts.insert(uri, newest);
        }
    }

    /// One transaction: the execution in its final `state` with its output
    /// parameters, its output artifacts (OUTPUT events, attributed to the
    /// run), and `inputs` not linked yet. `execution` without an id is
    /// created. Returns the execution id and the outputs' ids.
    async fn finish(
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
            let custom: Properties = [
                ("name".to_owned(), Value::string(output.name.clone())),
                (
                    "pipeline_name".to_owned(),
                    Value::string(pod.workflow.clone()),
                ),
                ("run_id".to_owned(), Value::string(pod.workflow.clone())),
                (
                    "argo_artifact".to_owned(),
                    Value::string(output.argo_artifact.clone()),
                ),
            ]
            .into();
            pairs.push(ArtifactAndEvent {
                artifact: Some(Artifact {
                    type_id: Some(type_id),
                    uri: Some(output.uri.clone()),
                    external_id: Some(artifact_external_id(pod, &output.name)),
                    custom_properties: custom,
                    ..Default::default()
                }),
                event: Some(Event {
                    r#type: Some(EventType::Output as i32),
                    path: Some(EventPath::key(output.name.clone())),
                    ..Default::default()
                }),
            });
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

    /// Executions this writer recorded that are not finished (NEW or
    /// RUNNING), in `namespace` or in all namespaces: the candidates for
    /// CANCELED when their pod vanished while nobody watched. Paged (MLMD
    /// caps a page at 100), never a full unfiltered scan.
    pub async fn unfinished_executions(
        &self,
        namespace: Option<&str>,
    ) -> Result<Vec<Execution>, MlmdError> {
        let prefix = match namespace {
            Some(ns) => format!("podline/kfp/{ns}/%"),
            None => "podline/kfp/%".to_owned(),
        };
        let filter = format!("external_id LIKE '{prefix}' AND last_known_state IN (NEW, RUNNING)");
        let mut all = Vec::new();
        let mut token = None;
        loop {
            let page = self
                .client
                .get_executions(GetExecutionsRequest {
                    options: Some(ListOperationOptions {
                        max_result_size: Some(100),
                        next_page_token: token.take(),
                        filter_query: Some(filter.clone()),
                    }),
                })
                .await;
            let page = or_empty(page)?;
            all.extend(page.executions.into_iter().map(writable));
            match page.next_page_token {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => return Ok(all),
            }
        }
    }

    /// Mark an unfinished execution CANCELED (its pod is gone; the caller
    /// makes sure no pod event of it is being written). The memo forgets it.
    pub async fn cancel(&self, execution: &Execution) -> Result<(), MlmdError> {
        let mut update = execution.clone();
        update.last_known_state = Some(ExecutionState::Canceled as i32);
        self.client
            .put_executions(PutExecutionsRequest {
                executions: vec![update],
            })
            .await?;
        if let Some(uid) = pod_uid_of(execution) {
            self.memo().pods.remove(uid);
        }
        Ok(())
    }

    /// The outputs an earlier (committed) phase 2 wrote, from its events.
    async fn read_outputs(&self, execution: &Execution) -> Result<Vec<OutputRef>, MlmdError> {
        let Some(id) = execution.id else {
            return Ok(Vec::new());
        };
        let events = self
            .client
            .get_events_by_execution_ids(GetEventsByExecutionIdsRequest {
                execution_ids: vec![id],
            })
            .await;
        let events = or_empty(events)?.events;
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

    /// The run context of a workflow: created if missing, else found by
    /// type and name. When the name is taken by the same workflow name in
    /// another namespace, `<namespace>.<workflow>` is used. Single-flight:
    /// concurrent callers for one workflow make one resolution.
    pub async fn run_context(&self, namespace: &str, workflow: &str) -> Result<Context, MlmdError> {
        let key = (namespace.to_owned(), workflow.to_owned());
        if let Some(c) = self.memo().contexts.get(&key) {
            return Ok(c.clone());
        }
        let _flight = self
            .flights
            .lock(format!("context\0{namespace}\0{workflow}"))
            .await;
        if let Some(c) = self.memo().contexts.get(&key) {
            return Ok(c.clone());
        }
        let context = self.resolve_context(namespace, workflow).await?;
        self.memo().contexts.insert(key, context.clone());
        Ok(context)
    }

    /// Create the run context, or find it when the create says it exists.
    /// Creating first costs one call for a new workflow (the common case)
    /// and two for one recorded before this process started.
    async fn resolve_context(&self, namespace: &str, workflow: &str) -> Result<Context, MlmdError> {
        let ours = context_external_id(namespace, workflow);
        let type_id = self.context_type().await?;
        let names = [workflow.to_owned(), format!("{namespace}.{workflow}")];
        for name in &names {
            let mut context = Context {
                type_id: Some(type_id),
                name: Some(name.clone()),
                external_id: Some(ours.clone()),
                properties: [
                    ("pipeline_name".to_owned(), Value::string(workflow)),
                    ("run_id".to_owned(), Value::string(workflow)),
                ]
                .into(),
                custom_properties: [("namespace".to_owned(), Value::string(namespace))].into(),
                ..Default::default()
            };
            match self
                .client
                .put_contexts(PutContextsRequest {
                    contexts: vec![context.clone()],
                })
                .await
            {
                Ok(r) => {
                    context.id = r.context_ids.first().copied();
                    return Ok(context);
                }
                // Taken: by us before a restart, by KFP's own writer (no
                // external id), or by the same workflow name in another
                // namespace; or our external id is taken under the other name.
                Err(e) if e.is_already_exists() => {}
                Err(e) => return Err(e),
            }
            let found = self
                .client
                .get_context_by_type_and_name(GetContextByTypeAndNameRequest {
                    type_name: Some(RUN_CONTEXT_TYPE.into()),
                    context_name: Some(name.clone()),
                    type_version: None,
                })
                .await?
                .context;
            if let Some(found) = found {
                let owner = found.external_id.as_deref();
                if owner.is_none() || owner == Some(ours.as_str()) {
                    return Ok(writable_context(found));
                }
            }
            // Someone else's name: the next one.
        }
        // Both names belong to others: find ours by external id.
        let found = self
            .client
            .get_contexts_by_external_ids(GetContextsByExternalIdsRequest {
                external_ids: vec![ours],
            })
            .await;
        or_empty(found)?
            .contexts
            .into_iter()
            .next()
            .map(writable_context)
            .ok_or(MlmdError::Rpc {
                method: "PutContexts",
                code: tonic::Code::AlreadyExists,
                message: format!("no free KfpRun context name for {namespace}/{workflow}"),
            })
    }

    async fn context_type(&self) -> Result<i64, MlmdError> {
        if let Some(id) = self.memo().context_type {
            return Ok(id);
        }
        let _flight = self.flights.lock("context-type".to_owned()).await;
        if let Some(id) = self.memo().context_type {
            return Ok(id);
        }
        let id = self
            .client
            .put_context_type(PutContextTypeRequest {
                context_type: Some(ContextType {
                    name: Some(RUN_CONTEXT_TYPE.into()),
                    properties: string_props(&["pipeline_name", "run_id"]),
                    ..Default::default()
                }),
                can_add_fields: Some(true),
                can_omit_fields: Some(true),
            })
            .await?
            .type_id
            .ok_or(MlmdError::MissingField {
                method: "PutContextType",
                field: "type_id",
            })?;
        self.memo().context_type = Some(id);
        Ok(id)
    }

    async fn execution_type(&self, component_version: &str) -> Result<i64, MlmdError> {
        let name = format!("components.{component_version}");
        if let Some(&id) = self.memo().execution_types.get(&name) {
            return Ok(id);
        }
        let _flight = self.flights.lock(format!("execution-type\0{name}")).await;
        if let Some(&id) = self.memo().execution_types.get(&name) {
            return Ok(id);
        }
        let id = self
            .client
            .put_execution_type(PutExecutionTypeRequest {
                execution_type: Some(ExecutionType {
                    name: Some(name.clone()),
                    properties: string_props(&["pipeline_name", "run_id", "component_id"]),
                    ..Default::default()
                }),
                can_add_fields: Some(true),
                can_omit_fields: Some(true),
            })
            .await?
            .type_id
            .ok_or(MlmdError::MissingField {
                method: "PutExecutionType",
                field: "type_id",
            })?;
        self.memo().execution_types.insert(name, id);
        Ok(id)
    }

    async fn artifact_type(&self, name: &str) -> Result<i64, MlmdError> {
        if let Some(&id) = self.memo().artifact_types.get(name) {
            return Ok(id);
        }
        let _flight = self.flights.lock(format!("artifact-type\0{name}")).await;
        if let Some(&id) = self.memo().artifact_types.get(name) {
            return Ok(id);
        }
        let id = self
            .client
            .put_artifact_type(PutArtifactTypeRequest {
                artifact_type: Some(ArtifactType {
                    name: Some(name.to_owned()),
                    ..Default::default()
                }),
                can_add_fields: Some(true),
                can_omit_fields: Some(true),
            })
            .await?
            .type_id
            .ok_or(MlmdError::MissingField {
                method: "PutArtifactType",
                field: "type_id",
            })?;
        self.memo().artifact_types.insert(name.to_owned(), id);
        Ok(id)
    }
}

/// An INPUT event to an existing artifact.
fn input_pair(input: &InputRef) -> ArtifactAndEvent {
    ArtifactAndEvent {
        artifact: None,
        event: Some(Event {
            artifact_id: Some(input.id),
            r#type: Some(EventType::Input as i32),
            path: Some(EventPath::key(input.name.clone())),
            ..Default::default()
        }),
    }
}

/// MLMD answers NotFound to a batch lookup that matches nothing: an empty
/// answer for podline.
fn or_empty<T: Default>(result: Result<T, MlmdError>) -> Result<T, MlmdError> {
    match result {
        Err(e) if e.is_not_found() => Ok(T::default()),
        other => other,
    }
}

fn string_props(names: &[&str]) -> BTreeMap<String, i32> {
    names
        .iter()
        .map(|n| ((*n).to_owned(), PropertyType::String as i32))
        .collect()
}

/// The pod uid podline stored on an execution (`kfp_pod_uid`).
pub fn pod_uid_of(execution: &Execution) -> Option<&str> {
    execution.custom_properties.get("kfp_pod_uid")?.as_str()
}

fn state_of(execution: &Execution) -> ExecutionState {
    execution
        .last_known_state
        .and_then(|s| ExecutionState::try_from(s).ok())
        .unwrap_or(ExecutionState::Unknown)
}

/// Drop output-only fields so a read object can be written back as an update.
fn writable(mut e: Execution) -> Execution {
    e.r#type = None;
    e.create_time_since_epoch = None;
    e.last_update_time_since_epoch = None;
    e
}

fn writable_context(mut c: Context) -> Context {
    c.r#type = None;
    c.create_time_since_epoch = None;
    c.last_update_time_since_epoch = None;
    c
}

/// The execution KFP writes for a pod, plus podline's external id and state.
pub fn execution_proto(pod: &KfpPod, type_id: i64, state: ExecutionState) -> Execution {
    let mut custom = pod.parameters.clone();
    custom.insert("kfp_pod_name".into(), Value::string(pod.name.clone()));
    custom.insert(
        "kfp_pod_namespace".into(),
        Value::string(pod.namespace.clone()),
    );
    custom.insert("kfp_pod_uid".into(), Value::string(pod.uid.clone()));
    Execution {
        type_id: Some(type_id),
        external_id: Some(execution_external_id(pod)),
        last_known_state: Some(state as i32),
        properties: [
            // KFP: "mistakenly used for grouping in the UX"; kept for the UI.
            (
                "pipeline_name".to_owned(),
                Value::string(pod.workflow.clone()),
            ),
            ("run_id".to_owned(), Value::string(pod.workflow.clone())),
            (
                "component_id".to_owned(),
                Value::string(pod.component_name.clone()),
            ),
        ]
        .into(),
        custom_properties: custom,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_should_forget_the_oldest_entry() {
        let mut b = Bounded::new(2);
        b.insert(1, "a");
        b.insert(2, "b");
        b.insert(1, "a2");
        b.insert(3, "c");
        assert_eq!(b.get(&1), None);
        assert_eq!(b.get(&2), Some(&"b"));
        assert_eq!(b.get(&3), Some(&"c"));
    }

    #[test]
    fn terminal_states_are_the_four_final_ones() {
        for s in [
            ExecutionState::Complete,
            ExecutionState::Failed,
            ExecutionState::Cached,
            ExecutionState::Canceled,
        ] {
            assert!(is_terminal(s));
        }
        for s in [
            ExecutionState::New,
            ExecutionState::Running,
            ExecutionState::Unknown,
        ] {
            assert!(!is_terminal(s));
        }
    }
}
