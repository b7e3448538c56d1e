//! KFP-shaped Argo pods (labels, annotations and `ARGO_TEMPLATE` env as
//! Argo and the KFP v1 SDK write them), for tests, the demo and benchmarks.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value as Json, json};

use super::keys::*;

/// The MinIO location KFP's default artifact repository uses.
pub const MINIO_ENDPOINT: &str = "minio-service.kubeflow:9000";
/// The default KFP bucket.
pub const BUCKET: &str = "mlpipeline";

/// One step of a KFP v1 run.
#[derive(Clone, Debug, Default)]
pub struct Step {
    /// Namespace.
    pub namespace: String,
    /// Workflow name.
    pub workflow: String,
    /// Pod name.
    pub pod_name: String,
    /// Argo template name.
    pub template: String,
    /// Component spec annotation text (None: no annotation).
    pub component_spec: Option<String>,
    /// Parameter arguments annotation text.
    pub parameters: Option<String>,
    /// Input artifacts: (input name, S3 key).
    pub inputs: Vec<(String, String)>,
    /// Outputs annotation (Argo's legacy path): (output name, S3 key).
    pub outputs_on_pod: Option<Vec<(String, String)>>,
    /// Output parameters in the outputs document: (output name, value).
    pub output_parameters: Vec<(String, String)>,
    /// A cache hit.
    pub cached: bool,
    /// Extra annotations (e.g. the sim's `sim.podline.io/exit-code`).
    pub annotations: Vec<(String, String)>,
}

impl Step {
    /// A step named `template` in `workflow`; pod name `<workflow>-<template>`.
    pub fn new(namespace: &str, workflow: &str, template: &str) -> Step {
        Step {
            namespace: namespace.into(),
            workflow: workflow.into(),
            pod_name: format!("{workflow}-{template}"),
            template: template.into(),
            ..Default::default()
        }
    }

    /// An S3 key under the run for an output of this step.
    pub fn key(&self, output: &str) -> String {
        format!("artifacts/{}/{}/{output}.tgz", self.workflow, self.pod_name)
    }

    /// The Argo outputs document for `(name, key)` pairs (annotation or
    /// WorkflowTaskResult `outputs`).
    pub fn outputs_json(&self, outputs: &[(String, String)]) -> Json {
        json!({
            "artifacts": outputs.iter().map(|(name, key)| json!({
                "name": format!("{}-{name}", self.template),
                "path": format!("/tmp/outputs/{name}/data"),
                "s3": {"endpoint": MINIO_ENDPOINT, "bucket": BUCKET, "key": key},
            })).collect::<Vec<_>>(),
            "parameters": self.output_parameters.iter().map(|(name, value)| json!({
                "name": format!("{}-{name}", self.template),
                "value": value,
                "valueFrom": {"path": format!("/tmp/outputs/{name}/data")},
            })).collect::<Vec<_>>(),
        })
    }

    /// The Argo template JSON (`ARGO_TEMPLATE`).
    pub fn template_json(&self) -> Json {
        json!({
            "name": self.template,
            "inputs": {"artifacts": self.inputs.iter().map(|(name, key)| json!({
                "name": format!("{}-{name}", self.template),
                "path": format!("/tmp/inputs/{name}/data"),
                "s3": {"endpoint": MINIO_ENDPOINT, "bucket": BUCKET, "key": key},
            })).collect::<Vec<_>>()},
            "archiveLocation": {"s3": {"endpoint": MINIO_ENDPOINT, "bucket": BUCKET}},
        })
    }

    /// The pod object (not yet created: no uid unless `uid` is given).
    pub fn pod(&self, uid: Option<&str>) -> Pod {
        let mut labels = json!({
            WORKFLOW_LABEL: self.workflow,
            "pipelines.kubeflow.org/pipeline-sdk-type": "kfp",
        });
        let mut annotations = json!({
            NODE_ID_ANNOTATION: format!("{}-node", self.pod_name),
        });
        if let Some(spec) = &self.component_spec {
            annotations[COMPONENT_SPEC_ANNOTATION] = json!(spec);
        }
        if let Some(p) = &self.parameters {
            annotations[PARAMETERS_ANNOTATION] = json!(p);
        }
        if let Some(outs) = &self.outputs_on_pod {
            annotations[OUTPUTS_ANNOTATION] = json!(self.outputs_json(outs).to_string());
        }
        if self.cached {
            labels[REUSED_FROM_CACHE_LABEL] = json!("true");
            labels[WRITTEN_LABEL] = json!("true");
            labels[EXECUTION_ID_LABEL] = json!("999999");
        }
        for (k, v) in &self.annotations {
            annotations[k] = json!(v);
        }
        let template = self.template_json().to_string();
        let mut pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.pod_name,
                "namespace": self.namespace,
                "labels": labels,
                "annotations": annotations,
            },
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {"name": "wait", "image": "argoproj/argoexec:v3.5",
                     "env": [{"name": ARGO_TEMPLATE_ENV, "value": template}]},
                    {"name": "main", "image": "python:3.11",
                     "command": ["sh", "-c", "echo step"],
                     "env": [{"name": ARGO_TEMPLATE_ENV, "value": template}]},
                ],
            },
        });
        if let Some(uid) = uid {
            pod["metadata"]["uid"] = json!(uid);
        }
        // The JSON above is a valid Pod by construction.
        serde_json::from_value(pod).unwrap_or_default()
    }
}

/// A component spec annotation as the v1 SDK writes it.
pub fn component_spec(name: &str, outputs: &[(&str, &str)]) -> String {
    json!({
        "name": name,
        "inputs": [],
        "outputs": outputs.iter().map(|(n, t)| json!({"name": n, "type": t})).collect::<Vec<_>>(),
        "implementation": {"container": {"image": "python:3.11"}},
    })
    .to_string()
}
