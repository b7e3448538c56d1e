//! The task description ([`TaskSpec`]) and how it becomes a Pod.
//!
//! A pod is built from an optional template (a Pod manifest, YAML or JSON) with the task's own
//! fields laid over it: they always win. podline then adds what makes a launch safe to retry and
//! find again:
//!
//! - a unique name: the base name plus `-` and 8 random `[a-z0-9]` characters (unless
//!   `exact_name`), so two runs of the same task never clash;
//! - the label [`LAUNCH_ID_LABEL`], chosen before the first POST: when a create's response is
//!   lost and the retry answers `AlreadyExists`, this label tells our pod from someone else's;
//! - [`TASK_ID_LABEL`] (to find a task's running pod again and reattach to it) and
//!   [`RUN_LABEL`] (to group the pods of one invocation that runs many tasks);
//! - `restartPolicy: Never`: a task runs once, its exit code is the result.
//!
//! Env values are secrets as far as podline is concerned: nothing here logs them, and
//! [`TaskSpec`]'s `Debug` prints env names only.
//!
//! One job per module: this one holds the types ([`TaskSpec`], [`BuiltPod`], [`PullPolicy`])
//! and the labels; `pod` builds the pod ([`TaskSpec::build_pod`], names, launch ids);
//! `validate` checks names, labels and quantities as the API server will; `parse` reads
//! `KEY=VALUE` values, resource lists and pod templates; `file` reads and checks a tasks file
//! ([`parse_tasks`]).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use crate::error::SpecError;

mod file;
mod parse;
mod pod;
mod validate;

pub use file::parse_tasks;
pub use parse::{load_template, parse_key_value, parse_resources, parse_template};
pub use pod::{new_launch_id, unique_name};
pub use validate::{is_quantity, validate_label_key, validate_label_value, validate_pod_name};

/// Label carrying the launch id: a random id chosen before the first create attempt. It is what
/// makes create idempotent: an `AlreadyExists` answer is ours exactly when the existing pod
/// carries our launch id.
pub const LAUNCH_ID_LABEL: &str = "podline.io/launch-id";
/// Label carrying the user's task id; a reattaching run finds a running pod of the same task by
/// it.
pub const TASK_ID_LABEL: &str = "podline.io/task-id";
/// Label grouping the pods of one invocation that runs many tasks, for `kubectl get -l`.
pub const RUN_LABEL: &str = "podline.io/run";
/// Name of the main container when neither the template nor the task names one.
pub const DEFAULT_CONTAINER: &str = "task";
/// Length of the random name suffix (as Airflow's KubernetesPodOperator does).
pub const SUFFIX_LEN: usize = 8;
/// Maximum pod name length podline generates (a DNS-1123 label, so the name also works as a
/// hostname and label value).
pub const MAX_GENERATED_NAME: usize = 63;

/// The largest `activeDeadlineSeconds` the API server accepts (it validates 1..=2^31-1).
pub const MAX_ACTIVE_DEADLINE: Duration = Duration::from_secs(2_147_483_647);

/// Image pull policy of the main container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PullPolicy {
    /// Always pull.
    Always,
    /// Pull when missing on the node.
    IfNotPresent,
    /// Never pull.
    Never,
}

impl PullPolicy {
    /// Parses the Kubernetes spelling (case-insensitive).
    pub fn parse(value: &str) -> Result<Self, SpecError> {
        match value.to_ascii_lowercase().as_str() {
            "always" => Ok(PullPolicy::Always),
            "ifnotpresent" => Ok(PullPolicy::IfNotPresent),
            "never" => Ok(PullPolicy::Never),
            _ => Err(SpecError::InvalidPullPolicy {
                value: value.to_owned(),
            }),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

/// Everything a user says about one task. Built by the binary from its flags, read from a tasks
/// file ([`parse_tasks`]), or built by library users directly; turned into a Pod by
/// [`TaskSpec::build_pod`].
#[derive(Clone, Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskSpec {
    /// Base pod name (a random suffix is added unless `exact_name`). Default: the template's
    /// name, else the image's last path segment, else `podline`.
    pub name: Option<String>,
    /// Use `name` as is (no suffix). A clash with another pod then fails the run.
    pub exact_name: bool,
    /// Namespace; `None` means the launcher's default namespace.
    pub namespace: Option<String>,
    /// Image of the main container (overrides the template's).
    pub image: Option<String>,
    /// `CMD ARGS...`: the main container's command (overrides the image entrypoint).
    pub command: Vec<String>,
    /// Environment variables (`K=V`), applied in order; later ones win.
    pub env: Vec<(String, String)>,
    /// Secrets (by name) whose keys become environment variables.
    pub env_from_secrets: Vec<String>,
    /// Extra labels.
    pub labels: BTreeMap<String, String>,
    /// Extra annotations.
    pub annotations: BTreeMap<String, String>,
    /// Service account name.
    pub service_account: Option<String>,
    /// Node selector.
    pub node_selector: BTreeMap<String, String>,
    /// Resource requests of the main container (`cpu=500m,memory=1Gi`).
    pub requests: BTreeMap<String, String>,
    /// Resource limits of the main container.
    pub limits: BTreeMap<String, String>,
    /// `activeDeadlineSeconds`: the server-side backstop that stops the pod even if podline dies.
    #[serde(with = "opt_secs")]
    pub active_deadline: Option<Duration>,
    /// Image pull policy of the main container.
    pub image_pull_policy: Option<PullPolicy>,
    /// The base pod, from a template manifest ([`load_template`]).
    #[serde(skip)]
    pub template: Option<Pod>,
    /// Task id, by which a reattaching run finds the task's pod (becomes the
    /// [`TASK_ID_LABEL`] label).
    pub task_id: Option<String>,
    /// Run group (becomes the [`RUN_LABEL`] label).
    pub run: Option<String>,
}

/// `activeDeadline` in tasks files is given in seconds.
mod opt_secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_secs))
    }
}

impl fmt::Debug for TaskSpec {
    /// Prints env *names* only: env values may be secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let env_names: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("TaskSpec")
            .field("name", &self.name)
            .field("exact_name", &self.exact_name)
            .field("namespace", &self.namespace)
            .field("image", &self.image)
            .field("command", &self.command)
            .field("env_names", &env_names)
            .field("labels", &self.labels)
            .field("task_id", &self.task_id)
            .finish_non_exhaustive()
    }
}

/// A pod ready to be created, with the identity podline gave it.
#[derive(Clone)]
pub struct BuiltPod {
    /// The pod to POST.
    pub pod: Pod,
    /// Its name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// The launch id label value (see [`LAUNCH_ID_LABEL`]).
    pub launch_id: String,
    /// Name of the main container (the one whose exit code is the task's).
    pub main_container: String,
}

impl fmt::Debug for BuiltPod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuiltPod")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("launch_id", &self.launch_id)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A minimal valid task, for the tests of every `spec` module.
    pub(super) fn spec() -> TaskSpec {
        TaskSpec {
            image: Some("busybox:1.36".into()),
            command: vec!["sh".into(), "-c".into(), "echo hi".into()],
            ..TaskSpec::default()
        }
    }

    #[test]
    fn debug_should_not_print_env_values() {
        let mut s = spec();
        s.env = vec![("PASSWORD".into(), "hunter2".into())];
        let shown = format!("{s:?}");
        assert!(shown.contains("PASSWORD"));
        assert!(!shown.contains("hunter2"));
    }

    #[test]
    fn pull_policy_should_parse_case_insensitively() {
        assert_eq!(PullPolicy::parse("always").unwrap(), PullPolicy::Always);
        assert_eq!(
            PullPolicy::parse("IfNotPresent").unwrap(),
            PullPolicy::IfNotPresent
        );
        assert!(PullPolicy::parse("sometimes").is_err());
    }
}
