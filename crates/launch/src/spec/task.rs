//! What a user says about one task: [`TaskSpec`] and its [`PullPolicy`].

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use crate::error::SpecError;

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

    /// The Kubernetes spelling (what the pod's `imagePullPolicy` holds).
    pub(super) fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

/// Everything a user says about one task. Built by the binary from its flags, read from a tasks
/// file ([`parse_tasks`](super::parse_tasks)), or built by library users directly; turned into a Pod by
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
    /// The base pod, from a template manifest ([`load_template`](super::load_template)).
    #[serde(skip)]
    pub template: Option<Pod>,
    /// Task id, by which a reattaching run finds the task's pod (becomes the
    /// [`TASK_ID_LABEL`](super::TASK_ID_LABEL) label).
    pub task_id: Option<String>,
    /// Run group (becomes the [`RUN_LABEL`](super::RUN_LABEL) label).
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(super) mod tests {
    use super::*;

    /// A minimal valid task, for the tests of every `spec` module.
    pub(in crate::spec) fn spec() -> TaskSpec {
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
