//! The worker's half of a deferred launch: the task's pod exists and is ours ([`start`]).

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use podline_client::retry::RetryPolicy;
use podline_launch::create::{create_idempotent, default_create_policy};
use podline_launch::{LAUNCH_ID_LABEL, TaskSpec};
use serde::Serialize;

use crate::error::DeferError;

/// What to start: a whole pod (its name used as is) and the task it belongs to.
#[derive(Debug, Clone)]
pub struct StartRequest {
    /// The pod to create; its `metadata.name` is kept (the caller chose a unique one).
    pub pod: Pod,
    /// The namespace when the pod names none.
    pub namespace: String,
    /// The task's id (the `TASK_ID_LABEL` value): a new try of the same task finds its pod by it.
    pub task_id: Option<String>,
    /// Take over the task's live pod instead of creating one, if there is exactly one.
    pub reattach: bool,
    /// The create's retry policy (409/429/5xx, lost responses).
    pub create: RetryPolicy,
}

impl StartRequest {
    /// A request with the launcher's default create policy.
    pub fn new(pod: Pod, namespace: &str) -> Self {
        Self {
            pod,
            namespace: namespace.to_owned(),
            task_id: None,
            reattach: false,
            create: default_create_policy(),
        }
    }
}

/// A pod that exists and is the task's: what the waiting half needs to find and judge it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Started {
    /// The pod's name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its launch id label: a pod of that name with another launch id is not this task's.
    pub launch_id: String,
    /// Its uid.
    pub uid: Option<String>,
    /// The container the task is judged on (the template's first, unless it names another).
    pub main_container: String,
    /// Create calls made (1 = no retry; 0 when reattached).
    pub attempts: u32,
    /// The create's response was lost and the pod was found by its launch id.
    pub adopted: bool,
    /// The task's live pod was taken over, none created.
    pub reattached: bool,
}

/// Creates the pod of `request` with the launcher's guarantees, or reattaches to the task's
/// live pod (`reattach` and a task id).
pub async fn start(client: kube::Client, request: StartRequest) -> Result<Started, DeferError> {
    let spec = TaskSpec {
        template: Some(request.pod.clone()),
        exact_name: true,
        task_id: request.task_id.clone(),
        ..TaskSpec::default()
    };
    let built = spec.build_pod(&request.namespace)?;
    let api: Api<Pod> = Api::namespaced(client, &built.namespace);
    if let (true, Some(task_id)) = (request.reattach, &request.task_id)
        && let Some(pod) =
            podline_launch::find_live_task_pod(&api, task_id, &request.create).await?
    {
        let launch_id = label(&pod, LAUNCH_ID_LABEL).unwrap_or_default();
        tracing::info!(pod = ?pod.metadata.name, "reattached to the task's live pod");
        return Ok(Started {
            name: pod.metadata.name.clone().unwrap_or_default(),
            namespace: built.namespace,
            launch_id,
            uid: pod.metadata.uid.clone(),
            main_container: built.main_container,
            attempts: 0,
            adopted: false,
            reattached: true,
        });
    }
    let created = create_idempotent(&api, &built, &request.create).await?;
    Ok(Started {
        name: built.name,
        namespace: built.namespace,
        launch_id: built.launch_id,
        uid: created.pod.metadata.uid,
        main_container: built.main_container,
        attempts: created.attempts,
        adopted: created.adopted,
        reattached: false,
    })
}

/// A label's value.
pub(crate) fn label(pod: &Pod, key: &str) -> Option<String> {
    pod.metadata.labels.as_ref()?.get(key).cloned()
}

/// Decodes a pod given as JSON; an error says where and what kind, never the text (a pod holds
/// env values).
pub fn pod_from_json(text: &str) -> Result<Pod, DeferError> {
    serde_json::from_str(text).map_err(|err| {
        let kind = match err.classify() {
            serde_json::error::Category::Io => "I/O error",
            serde_json::error::Category::Syntax => "not JSON",
            serde_json::error::Category::Data => "a field of the wrong type or shape",
            serde_json::error::Category::Eof => "cut short",
        };
        DeferError::Pod(format!(
            "line {} column {}: {kind}",
            err.line(),
            err.column()
        ))
    })
}

/// Deletes pod `name` if it carries `launch_id` (the clean-up of a deferred task: a pod of that
/// name from another launch is never touched); returns whether a delete was made.
pub async fn delete_if_ours(
    api: &Api<Pod>,
    name: &str,
    launch_id: &str,
    grace: Option<std::time::Duration>,
) -> Result<bool, DeferError> {
    let calls = RetryPolicy::default().with_deadline(Some(std::time::Duration::from_secs(30)));
    let found = podline_client::retry::retry(&calls, "get pod", || api.get_opt(name))
        .await
        .map_err(|source| DeferError::Api {
            action: "reading the pod to delete",
            source,
        })?;
    let ours = found
        .as_ref()
        .and_then(|pod| label(pod, LAUNCH_ID_LABEL))
        .is_some_and(|id| id == launch_id);
    if !ours {
        return Ok(false);
    }
    Ok(podline_launch::cleanup::delete_pod(api, name, grace, &calls).await)
}
