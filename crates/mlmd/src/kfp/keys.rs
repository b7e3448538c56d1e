//! Label, annotation and env names of the Argo/KFP pod contract.

/// Label on every Argo pod; its value is the workflow name. The watch selector
/// is this key alone (an "exists" selector).
pub const WORKFLOW_LABEL: &str = "workflows.argoproj.io/workflow";
/// The label selector KFP's writer watches with.
pub const SELECTOR: &str = WORKFLOW_LABEL;
/// Argo's "node completed" label (`"true"`).
pub const COMPLETED_LABEL: &str = "workflows.argoproj.io/completed";
/// Argo's legacy outputs annotation (JSON `{"artifacts":[...],"parameters":[...]}`).
pub const OUTPUTS_ANNOTATION: &str = "workflows.argoproj.io/outputs";
/// Argo's node id annotation: the name of the pod's WorkflowTaskResult.
pub const NODE_ID_ANNOTATION: &str = "workflows.argoproj.io/node-id";
/// Env var (on Argo's containers) holding the template JSON.
pub const ARGO_TEMPLATE_ENV: &str = "ARGO_TEMPLATE";
/// Legacy (pre-2022) template annotation.
pub const TEMPLATE_ANNOTATION: &str = "workflows.argoproj.io/template";
/// KFP v1 SDK component spec annotation.
pub const COMPONENT_SPEC_ANNOTATION: &str = "pipelines.kubeflow.org/component_spec";
/// KFP v1 SDK parameter arguments annotation.
pub const PARAMETERS_ANNOTATION: &str = "pipelines.kubeflow.org/arguments.parameters";
/// SDK type label; contains `tfx` on TFX pods.
pub const SDK_TYPE_LABEL: &str = "pipelines.kubeflow.org/pipeline-sdk-type";
/// KFP v2 marker annotation (`"true"`).
pub const V2_ANNOTATION: &str = "pipelines.kubeflow.org/v2_component";
/// The cache webhook's cache-hit label (`"true"`).
pub const REUSED_FROM_CACHE_LABEL: &str = "pipelines.kubeflow.org/reused_from_cache";
/// Written by the writer (and the cache webhook): the execution id.
pub const EXECUTION_ID_LABEL: &str = "pipelines.kubeflow.org/metadata_execution_id";
/// Written by the writer: the run context id.
pub const CONTEXT_ID_LABEL: &str = "pipelines.kubeflow.org/metadata_context_id";
/// Written by the writer (and the cache webhook): outputs recorded, skip forever.
pub const WRITTEN_LABEL: &str = "pipelines.kubeflow.org/metadata_written";
/// Written by the writer: JSON `[{id,name,uri}]` of linked inputs.
pub const INPUT_IDS_ANNOTATION: &str = "pipelines.kubeflow.org/metadata_input_artifact_ids";
/// Written by the writer: JSON `[{id,name,uri,type}]` of outputs.
pub const OUTPUT_IDS_ANNOTATION: &str = "pipelines.kubeflow.org/metadata_output_artifact_ids";
/// The TFX entrypoint that marks a TFX pod when it is `main`'s last command word.
pub const TFX_ENTRYPOINT_SUFFIX: &str = "tfx/orchestration/kubeflow/container_entrypoint.py";
/// MLMD context type of a KFP v1 run.
pub const RUN_CONTEXT_TYPE: &str = "KfpRun";
/// Artifact type when the component declares none.
pub const NO_TYPE: &str = "NoType";
