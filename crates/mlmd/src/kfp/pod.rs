//! From a Kubernetes pod to what KFP mode records about it (pure).

use podline_phase::Phase;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value as Json;

use super::argo::{self, NoUri, Template};
use super::component::{self, ComponentSpec};
use super::keys::*;
use crate::proto::{ExecutionState, Value};

/// Why a pod is not recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// No `workflows.argoproj.io/workflow` label: not an Argo pod.
    NotArgo,
    /// `metadata_written` is set (by a writer, or the cache webhook on a
    /// cache hit podline does not track): nothing left to do.
    AlreadyWritten,
    /// A TFX pod: TFX writes its own metadata.
    Tfx,
    /// A KFP v2 pod: the v2 driver and launcher write their own metadata.
    V2,
    /// The pod has no uid or name yet (not a stored object).
    Incomplete,
}

/// Something unreadable on a pod: recorded with what could be read, and
/// logged naming the pod and the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// The annotation, env var or field that was wrong.
    pub field: String,
    /// What was wrong with it.
    pub message: String,
}

/// An input artifact of a step, by URI (linked to an upstream output).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputArtifact {
    /// Input name (event path key).
    pub name: String,
    /// Artifact URI.
    pub uri: String,
}

/// An output artifact of a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputArtifact {
    /// Output name (event path key, `name` custom property).
    pub name: String,
    /// Artifact URI.
    pub uri: String,
    /// MLMD artifact type name: the component's output type, or `NoType`.
    pub type_name: String,
    /// The Argo artifact as KFP stores it (`argo_artifact`).
    pub argo_artifact: String,
}

/// Everything KFP mode records about one Argo pod.
#[derive(Clone, Debug, PartialEq)]
pub struct KfpPod {
    /// Namespace.
    pub namespace: String,
    /// Pod name (`kfp_pod_name`).
    pub name: String,
    /// Pod uid: the identity (names are reused, uids are not).
    pub uid: String,
    /// Workflow name (the `KfpRun` context name).
    pub workflow: String,
    /// Argo template.
    pub template: Template,
    /// Component name (`component_id`).
    pub component_name: String,
    /// Component version: the execution type is `components.<version>`.
    pub component_version: String,
    /// Output types by sanitized output name.
    pub output_types: BTreeMap<String, String>,
    /// `input:<param>` custom properties.
    pub parameters: BTreeMap<String, Value>,
    /// Input artifacts.
    pub inputs: Vec<InputArtifact>,
    /// Outputs from the pod annotation; `None` when the annotation is absent
    /// (then a WorkflowTaskResult may have them).
    pub outputs: Option<Vec<OutputArtifact>>,
    /// `output:<name>` custom properties: the step's output parameters (KFP's
    /// writer dropped them; see [`argo::output_parameters`]).
    pub output_parameters: BTreeMap<String, Value>,
    /// The node id (WorkflowTaskResult name), if annotated.
    pub node_id: Option<String>,
    /// The pod phase.
    pub phase: String,
    /// Argo's `completed` label is `"true"`.
    pub completed: bool,
    /// A cache hit (`reused_from_cache=true`).
    pub cached: bool,
    /// Execution and context ids from the writer's labels (legacy adoption).
    pub labelled_execution_id: Option<i64>,
    /// The context id label.
    pub labelled_context_id: Option<i64>,
    /// What could not be read.
    pub warnings: Vec<Warning>,
}

impl KfpPod {
    /// The execution state this pod is in now. `deleted` means the pod is
    /// gone (a DELETED event): unfinished work was canceled.
    pub fn state(&self, deleted: bool) -> ExecutionState {
        if self.cached {
            return ExecutionState::Cached;
        }
        match Phase::parse(&self.phase) {
            Some(Phase::Succeeded) => ExecutionState::Complete,
            Some(Phase::Failed) => ExecutionState::Failed,
            _ if deleted => ExecutionState::Canceled,
            _ if self.completed => ExecutionState::Complete,
            Some(Phase::Running) => ExecutionState::Running,
            _ => ExecutionState::New,
        }
    }

    /// Parse outputs from an Argo outputs document (annotation or
    /// WorkflowTaskResult), typing them from the component spec. Output
    /// parameters go to [`KfpPod::output_parameters`].
    pub fn parse_outputs(&mut self, outputs: &Json) -> Vec<OutputArtifact> {
        self.output_parameters = argo::output_parameters(outputs, &self.template.name);
        let mut result = Vec::new();
        for artifact in argo::output_artifacts(outputs) {
            let argo_name = artifact["name"].as_str().unwrap_or_default();
            let name = argo::output_name(argo_name, &self.template.name);
            match argo::artifact_uri(&artifact, self.template.archive_location.as_ref()) {
                Ok(uri) => result.push(OutputArtifact {
                    type_name: self
                        .output_types
                        .get(&name)
                        .cloned()
                        .unwrap_or_else(|| NO_TYPE.to_owned()),
                    name,
                    uri,
                    argo_artifact: argo::python_json(&artifact),
                }),
                Err(NoUri::Inline) => {}
                Err(NoUri::UnknownKind(kind)) => self.warnings.push(Warning {
                    field: format!("outputs.artifacts[{argo_name}]"),
                    message: format!("unknown artifact kind {kind:?}: not recorded"),
                }),
            }
        }
        result
    }
}

/// Classify a pod: skip it, or read what KFP mode records about it.
pub fn classify(pod: &Pod) -> Result<KfpPod, Skip> {
    let meta = &pod.metadata;
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);
    let workflow = labels.get(WORKFLOW_LABEL).ok_or(Skip::NotArgo)?.clone();
    let cached = labels.get(REUSED_FROM_CACHE_LABEL).map(String::as_str) == Some("true");
    if labels.contains_key(WRITTEN_LABEL) && !cached {
        return Err(Skip::AlreadyWritten);
    }
    if labels
        .get(SDK_TYPE_LABEL)
        .is_some_and(|t| t.contains("tfx"))
        || is_tfx_main(pod)
    {
        return Err(Skip::Tfx);
    }
    if annotations.get(V2_ANNOTATION).map(String::as_str) == Some("true") {
        return Err(Skip::V2);
    }
    let (Some(namespace), Some(name), Some(uid)) = (&meta.namespace, &meta.name, &meta.uid) else {
        return Err(Skip::Incomplete);
    };

    let mut warnings = Vec::new();
    let template = match template_text(pod, annotations) {
        None => Template::default(),
        Some((field, text)) => Template::parse(&text).unwrap_or_else(|e| {
            warnings.push(Warning {
                field,
                message: format!("invalid JSON: {e}"),
            });
            Template::default()
        }),
    };
    let (component_name, component_version, output_types) =
        match annotations.get(COMPONENT_SPEC_ANNOTATION) {
            None => (
                template.name.clone(),
                template.name.clone(),
                BTreeMap::new(),
            ),
            Some(text) => match ComponentSpec::parse(text) {
                Ok(spec) => (spec.name, spec.version, spec.output_types),
                Err(e) => {
                    warnings.push(Warning {
                        field: COMPONENT_SPEC_ANNOTATION.into(),
                        message: format!("{e}; using the template name"),
                    });
                    (
                        template.name.clone(),
                        template.name.clone(),
                        BTreeMap::new(),
                    )
                }
            },
        };
    let parameters = match annotations.get(PARAMETERS_ANNOTATION) {
        None => BTreeMap::new(),
        Some(text) => component::parameters(text).unwrap_or_else(|e| {
            warnings.push(Warning {
                field: PARAMETERS_ANNOTATION.into(),
                message: e,
            });
            BTreeMap::new()
        }),
    };
    let mut inputs = Vec::new();
    for artifact in &template.input_artifacts {
        match argo::artifact_uri(artifact, template.archive_location.as_ref()) {
            Ok(uri) => inputs.push(InputArtifact {
                name: argo::input_name(artifact),
                uri,
            }),
            Err(NoUri::Inline) => {}
            Err(NoUri::UnknownKind(kind)) => warnings.push(Warning {
                field: format!(
                    "{ARGO_TEMPLATE_ENV}.inputs.artifacts[{}]",
                    argo::input_name(artifact)
                ),
                message: format!("unknown artifact kind {kind:?}: not linked"),
            }),
        }
    }
    let parse_id = |key: &str, warnings: &mut Vec<Warning>| {
        labels.get(key).and_then(|v| match v.parse::<i64>() {
            Ok(id) => Some(id),
            Err(_) => {
                warnings.push(Warning {
                    field: key.into(),
                    message: format!("{v:?} is not an integer id; ignored"),
                });
                None
            }
        })
    };
    let labelled_execution_id = parse_id(EXECUTION_ID_LABEL, &mut warnings);
    let labelled_context_id = parse_id(CONTEXT_ID_LABEL, &mut warnings);
    let mut kfp = KfpPod {
        namespace: namespace.clone(),
        name: name.clone(),
        uid: uid.clone(),
        workflow,
        template,
        component_name,
        component_version,
        output_types,
        parameters,
        inputs,
        outputs: None,
        output_parameters: BTreeMap::new(),
        node_id: annotations.get(NODE_ID_ANNOTATION).cloned(),
        phase: pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| Phase::Pending.as_str().into()),
        completed: labels.get(COMPLETED_LABEL).map(String::as_str) == Some("true"),
        cached,
        labelled_execution_id,
        labelled_context_id,
        warnings,
    };
    if let Some(text) = annotations.get(OUTPUTS_ANNOTATION) {
        match serde_json::from_str::<Json>(text) {
            Ok(json) => kfp.outputs = Some(kfp.parse_outputs(&json)),
            Err(e) => kfp.warnings.push(Warning {
                field: OUTPUTS_ANNOTATION.into(),
                message: format!("invalid JSON: {e}"),
            }),
        }
    }
    Ok(kfp)
}

/// The template JSON and where it came from: `ARGO_TEMPLATE` on any
/// container (Argo puts it on `wait` and `main`; KFP only looked at the
/// first), else the legacy annotation.
fn template_text(pod: &Pod, annotations: &BTreeMap<String, String>) -> Option<(String, String)> {
    let spec = pod.spec.as_ref()?;
    let from_env = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .flat_map(|c| c.env.iter().flatten())
        .find(|e| e.name == ARGO_TEMPLATE_ENV)
        .and_then(|e| e.value.clone());
    match from_env {
        Some(text) => Some((ARGO_TEMPLATE_ENV.into(), text)),
        None => annotations
            .get(TEMPLATE_ANNOTATION)
            .map(|t| (TEMPLATE_ANNOTATION.into(), t.clone())),
    }
}

fn is_tfx_main(pod: &Pod) -> bool {
    pod.spec.iter().flat_map(|s| &s.containers).any(|c| {
        c.name == "main"
            && c.command
                .as_ref()
                .and_then(|cmd| cmd.last())
                .is_some_and(|last| last.ends_with(TFX_ENTRYPOINT_SUFFIX))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kfp::fixture::{Step, component_spec};

    fn step() -> Step {
        let mut s = Step::new("team-a", "wf-1", "train");
        s.component_spec = Some(component_spec("Train", &[("model", "Model")]));
        s.parameters = Some(r#"{"lr": "0.1"}"#.into());
        s.inputs = vec![("data".into(), "artifacts/wf-1/prep/data.tgz".into())];
        s
    }

    fn with_labels(mut pod: Pod, labels: &[(&str, &str)]) -> Pod {
        let l = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
        for (k, v) in labels {
            l.insert((*k).into(), (*v).into());
        }
        pod
    }

    #[test]
    fn an_argo_kfp_pod_should_be_read_fully() {
        let kfp = classify(&step().pod(Some("uid-1"))).expect("recorded");
        assert_eq!(kfp.workflow, "wf-1");
        assert_eq!(kfp.uid, "uid-1");
        assert_eq!(kfp.template.name, "train");
        assert_eq!(kfp.component_name, "Train");
        assert!(kfp.component_version.starts_with("Train@sha256="));
        assert_eq!(kfp.output_types["model"], "Model");
        assert_eq!(kfp.parameters["input:lr"], Value::string("0.1"));
        assert_eq!(
            kfp.inputs,
            vec![InputArtifact {
                name: "data".into(),
                uri: "minio://mlpipeline/artifacts/wf-1/prep/data.tgz".into()
            }]
        );
        assert_eq!(kfp.outputs, None);
        assert_eq!(kfp.node_id.as_deref(), Some("wf-1-train-node"));
        assert!(kfp.warnings.is_empty(), "{:?}", kfp.warnings);
        assert_eq!(kfp.state(false), ExecutionState::New);
        assert_eq!(kfp.state(true), ExecutionState::Canceled);
    }

    #[test]
    fn without_a_component_spec_the_template_name_is_the_identity() {
        let mut s = step();
        s.component_spec = None;
        let kfp = classify(&s.pod(Some("u"))).expect("recorded");
        assert_eq!(kfp.component_name, "train");
        assert_eq!(kfp.component_version, "train");
    }

    #[test]
    fn skip_rules_should_match_kfp() {
        let pod = step().pod(Some("u"));
        let mut not_argo = pod.clone();
        not_argo
            .metadata
            .labels
            .as_mut()
            .map(|l| l.remove(WORKFLOW_LABEL));
        assert_eq!(classify(&not_argo), Err(Skip::NotArgo));
        assert_eq!(
            classify(&with_labels(pod.clone(), &[(WRITTEN_LABEL, "true")])),
            Err(Skip::AlreadyWritten)
        );
        assert_eq!(
            classify(&with_labels(
                pod.clone(),
                &[(SDK_TYPE_LABEL, "tfx-template")]
            )),
            Err(Skip::Tfx)
        );
        let mut tfx_main = pod.clone();
        if let Some(spec) = tfx_main.spec.as_mut() {
            spec.containers[1].command = Some(vec![
                "python".into(),
                "/tfx-src/tfx/orchestration/kubeflow/container_entrypoint.py".into(),
            ]);
        }
        assert_eq!(classify(&tfx_main), Err(Skip::Tfx));
        let mut v2 = pod.clone();
        v2.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(V2_ANNOTATION.into(), "true".into());
        assert_eq!(classify(&v2), Err(Skip::V2));
        assert_eq!(classify(&step().pod(None)), Err(Skip::Incomplete));
    }

    #[test]
    fn a_cache_hit_should_be_recorded_as_cached_despite_the_webhook_labels() {
        let mut s = step();
        s.cached = true;
        let kfp = classify(&s.pod(Some("u"))).expect("recorded, not skipped");
        assert!(kfp.cached);
        assert_eq!(kfp.state(false), ExecutionState::Cached);
    }

    #[test]
    fn phases_should_map_to_execution_states() {
        let mut kfp = classify(&step().pod(Some("u"))).expect("recorded");
        for (phase, state) in [
            ("Pending", ExecutionState::New),
            ("Running", ExecutionState::Running),
            ("Succeeded", ExecutionState::Complete),
            ("Failed", ExecutionState::Failed),
        ] {
            kfp.phase = phase.into();
            assert_eq!(kfp.state(false), state, "{phase}");
        }
        kfp.phase = "Failed".into();
        assert_eq!(
            kfp.state(true),
            ExecutionState::Failed,
            "finished before deletion"
        );
    }

    #[test]
    fn bad_annotations_should_warn_naming_the_field_and_keep_the_rest() {
        let mut s = step();
        s.component_spec = Some("{not json".into());
        s.parameters = Some("[1]".into());
        let mut pod = s.pod(Some("u"));
        let ann = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
        ann.insert(
            OUTPUTS_ANNOTATION.into(),
            r#"{"artifacts":[{"name":"train-model","ftp":{"host":"x"}},{"name":"train-ok","s3":{"key":"k"}}]}"#.into(),
        );
        let kfp = classify(&pod).expect("recorded with what can be read");
        let fields: Vec<&str> = kfp.warnings.iter().map(|w| w.field.as_str()).collect();
        assert!(fields.contains(&COMPONENT_SPEC_ANNOTATION), "{fields:?}");
        assert!(fields.contains(&PARAMETERS_ANNOTATION), "{fields:?}");
        assert!(
            fields.contains(&"outputs.artifacts[train-model]"),
            "{fields:?}"
        );
        assert_eq!(kfp.component_name, "train", "falls back to the template");
        let outputs = kfp.outputs.expect("the readable output is kept");
        assert_eq!(outputs.len(), 1);
        assert_eq!(outputs[0].name, "ok");
        assert_eq!(
            outputs[0].uri, "minio://mlpipeline/k",
            "bucket from archiveLocation"
        );
        assert_eq!(outputs[0].type_name, NO_TYPE);
    }

    #[test]
    fn invalid_argo_template_should_warn_and_use_an_empty_template() {
        let mut pod = step().pod(Some("u"));
        if let Some(spec) = pod.spec.as_mut() {
            for c in &mut spec.containers {
                c.env = Some(vec![k8s_openapi::api::core::v1::EnvVar {
                    name: ARGO_TEMPLATE_ENV.into(),
                    value: Some("{oops".into()),
                    ..Default::default()
                }]);
            }
        }
        let kfp = classify(&pod).expect("recorded");
        assert_eq!(kfp.warnings[0].field, ARGO_TEMPLATE_ENV);
        assert_eq!(kfp.template, Template::default());
        assert!(kfp.inputs.is_empty());
    }

    #[test]
    fn output_parameters_should_become_output_custom_properties() {
        let mut kfp = classify(&step().pod(Some("u"))).expect("recorded");
        let doc = serde_json::json!({
            "artifacts": [],
            "parameters": [
                {"name": "train-accuracy", "value": "0.93", "valueFrom": {"path": "/tmp/outputs/accuracy/data"}},
                {"name": "train-not-yet", "valueFrom": {"path": "/tmp/x"}},
            ],
        });
        kfp.parse_outputs(&doc);
        assert_eq!(
            kfp.output_parameters,
            BTreeMap::from([("output:accuracy".to_owned(), Value::string("0.93"))])
        );
    }

    #[test]
    fn outputs_on_the_pod_should_be_typed_from_the_component_spec() {
        let mut s = step();
        s.outputs_on_pod = Some(vec![("model".into(), "artifacts/m.tgz".into())]);
        let kfp = classify(&s.pod(Some("u"))).expect("recorded");
        let outputs = kfp.outputs.expect("annotation present");
        assert_eq!(outputs[0].name, "model");
        assert_eq!(outputs[0].type_name, "Model");
        assert_eq!(outputs[0].uri, "minio://mlpipeline/artifacts/m.tgz");
        assert!(
            outputs[0]
                .argo_artifact
                .starts_with(r#"{"name": "train-model", "path": "#)
        );
    }
}
