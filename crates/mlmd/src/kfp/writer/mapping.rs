//! What a pod is in MLMD, and what MLMD's answers mean: pure functions.
//!
//! Why a module of its own: podline's identity rules (the deterministic
//! external ids a restart finds its earlier writes by) and the shape of each
//! object it writes are the contract with MLMD and KFP's UI; kept apart from
//! the calls that write them, they can be read and tested without a server.

use std::collections::BTreeMap;

use crate::error::MlmdError;
use crate::kfp::patch::InputRef;
use crate::kfp::pod::{KfpPod, OutputArtifact};
use crate::proto::*;

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

/// The pod uid podline stored on an execution (`kfp_pod_uid`).
pub fn pod_uid_of(execution: &Execution) -> Option<&str> {
    execution.custom_properties.get("kfp_pod_uid")?.as_str()
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

/// An OUTPUT artifact of a pod (artifact type `type_id`), with its event.
pub(super) fn output_pair(pod: &KfpPod, output: &OutputArtifact, type_id: i64) -> ArtifactAndEvent {
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
    ArtifactAndEvent {
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
    }
}

/// An INPUT event to an existing artifact.
pub(super) fn input_pair(input: &InputRef) -> ArtifactAndEvent {
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

/// String-typed properties of a type, by name.
pub(super) fn string_props(names: &[&str]) -> BTreeMap<String, i32> {
    names
        .iter()
        .map(|n| ((*n).to_owned(), PropertyType::String as i32))
        .collect()
}

/// MLMD answers NotFound to a batch lookup that matches nothing: an empty
/// answer for podline.
pub(super) fn or_empty<T: Default>(result: Result<T, MlmdError>) -> Result<T, MlmdError> {
    match result {
        Err(e) if e.is_not_found() => Ok(T::default()),
        other => other,
    }
}

/// The state an execution read from MLMD is in (`Unknown` when unset).
pub(super) fn state_of(execution: &Execution) -> ExecutionState {
    execution
        .last_known_state
        .and_then(|s| ExecutionState::try_from(s).ok())
        .unwrap_or(ExecutionState::Unknown)
}

/// Drop output-only fields so a read object can be written back as an update.
pub(super) fn writable(mut e: Execution) -> Execution {
    e.r#type = None;
    e.create_time_since_epoch = None;
    e.last_update_time_since_epoch = None;
    e
}

/// [`writable`] for a context.
pub(super) fn writable_context(mut c: Context) -> Context {
    c.r#type = None;
    c.create_time_since_epoch = None;
    c.last_update_time_since_epoch = None;
    c
}

#[cfg(test)]
mod tests {
    use super::*;

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
