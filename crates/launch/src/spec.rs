//! The task description ([`TaskSpec`]) and how it becomes a Pod.
//!
//! A pod is built from an optional template (`--pod-template`, YAML or JSON) with the flags laid
//! over it: flags always win. podline then adds what makes a launch safe to retry and find again:
//!
//! - a unique name: the base name plus `-` and 8 random `[a-z0-9]` characters (unless
//!   `exact_name`), so two runs of the same task never clash;
//! - the label [`LAUNCH_ID_LABEL`], chosen before the first POST: when a create's response is
//!   lost and the retry answers `AlreadyExists`, this label tells our pod from someone else's;
//! - [`TASK_ID_LABEL`] (for `--reattach`) and [`RUN_LABEL`] (to group the pods of one
//!   `--count`/`-f` invocation);
//! - `restartPolicy: Never`: a task runs once, its exit code is the result.
//!
//! Env values are secrets as far as podline is concerned: nothing here logs them, and
//! [`TaskSpec`]'s `Debug` prints env names only.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, EnvFromSource, EnvVar, Pod, PodSpec, ResourceRequirements, SecretEnvSource,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use rand::Rng;

use crate::error::SpecError;

/// Label carrying the launch id: a random id chosen before the first create attempt. It is what
/// makes create idempotent: an `AlreadyExists` answer is ours exactly when the existing pod
/// carries our launch id.
pub const LAUNCH_ID_LABEL: &str = "podline.io/launch-id";
/// Label carrying the user's task id; `--reattach` finds a running pod of the same task by it.
pub const TASK_ID_LABEL: &str = "podline.io/task-id";
/// Label grouping the pods of one invocation (`--count` / `-f`), for `kubectl get -l`.
pub const RUN_LABEL: &str = "podline.io/run";
/// Name of the main container when neither the template nor the flags name one.
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
    /// Parses the Kubernetes spelling (case-insensitive), naming the flag on error.
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

/// Everything a user says about one task. Built by the CLI from flags, or by library users
/// directly; turned into a Pod by [`TaskSpec::build_pod`].
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
    /// Environment variables (`--env K=V`), applied in order; later ones win.
    pub env: Vec<(String, String)>,
    /// Secrets whose keys become environment variables (`--env-from-secret NAME`).
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
    /// Base pod from `--pod-template`.
    #[serde(skip)]
    pub template: Option<Pod>,
    /// Task id for `--reattach` (becomes the [`TASK_ID_LABEL`] label).
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

impl TaskSpec {
    /// Builds the pod: template first, flags over it, then podline's name, labels and
    /// `restartPolicy: Never`. Validates everything the server would reject for reasons the
    /// user can fix here (names, labels, quantities, missing image).
    pub fn build_pod(&self, default_namespace: &str) -> Result<BuiltPod, SpecError> {
        let mut pod = self.template.clone().unwrap_or_default();
        pod.metadata.resource_version = None;
        pod.metadata.uid = None;
        pod.metadata.creation_timestamp = None;
        pod.metadata.generate_name = None;
        pod.status = None;

        let namespace = self
            .namespace
            .clone()
            .or_else(|| pod.metadata.namespace.clone())
            .unwrap_or_else(|| default_namespace.to_owned());
        let base = self
            .name
            .clone()
            .or_else(|| pod.metadata.name.clone())
            .or_else(|| self.image.as_deref().map(image_base_name))
            .unwrap_or_else(|| "podline".to_owned());
        let name = if self.exact_name {
            validate_pod_name(&base)?;
            base
        } else {
            unique_name(&base)
        };
        let launch_id = new_launch_id();

        let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
        for (k, v) in &self.labels {
            validate_label_key("--label", k)?;
            validate_label_value("--label", v)?;
            labels.insert(k.clone(), v.clone());
        }
        labels.insert(LAUNCH_ID_LABEL.to_owned(), launch_id.clone());
        if let Some(task_id) = &self.task_id {
            validate_label_value("--task-id", task_id)?;
            labels.insert(TASK_ID_LABEL.to_owned(), task_id.clone());
        }
        if let Some(run) = &self.run {
            validate_label_value("--run", run)?;
            labels.insert(RUN_LABEL.to_owned(), run.clone());
        }
        if !self.annotations.is_empty() {
            let annotations = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
            for (k, v) in &self.annotations {
                validate_label_key("--annotation", k)?;
                annotations.insert(k.clone(), v.clone());
            }
        }
        pod.metadata.name = Some(name.clone());
        pod.metadata.namespace = Some(namespace.clone());

        let spec = pod.spec.get_or_insert_with(PodSpec::default);
        spec.restart_policy = Some("Never".to_owned());
        if let Some(sa) = &self.service_account {
            spec.service_account_name = Some(sa.clone());
        }
        if !self.node_selector.is_empty() {
            let ns = spec.node_selector.get_or_insert_with(BTreeMap::new);
            for (k, v) in &self.node_selector {
                validate_label_key("--node-selector", k)?;
                validate_label_value("--node-selector", v)?;
                ns.insert(k.clone(), v.clone());
            }
        }
        if let Some(deadline) = self.active_deadline {
            spec.active_deadline_seconds = Some(active_deadline_seconds(deadline)?);
        }
        if spec.containers.is_empty() {
            spec.containers.push(Container {
                name: DEFAULT_CONTAINER.to_owned(),
                ..Container::default()
            });
        }
        // The main container is the template's first one: its exit code is the task's.
        let main = &mut spec.containers[0];
        if let Some(image) = &self.image {
            main.image = Some(image.clone());
        }
        if main.image.as_deref().is_none_or(str::is_empty) {
            return Err(SpecError::MissingImage);
        }
        if !self.command.is_empty() {
            main.command = Some(self.command.clone());
            main.args = None;
        }
        if let Some(policy) = self.image_pull_policy {
            main.image_pull_policy = Some(policy.as_str().to_owned());
        }
        if !self.env.is_empty() {
            let env = main.env.get_or_insert_with(Vec::new);
            for (k, v) in &self.env {
                env.retain(|e| &e.name != k);
                env.push(EnvVar {
                    name: k.clone(),
                    value: Some(v.clone()),
                    value_from: None,
                });
            }
        }
        for secret in &self.env_from_secrets {
            main.env_from
                .get_or_insert_with(Vec::new)
                .push(EnvFromSource {
                    secret_ref: Some(SecretEnvSource {
                        name: secret.clone(),
                        optional: None,
                    }),
                    ..EnvFromSource::default()
                });
        }
        if !self.requests.is_empty() || !self.limits.is_empty() {
            let resources = main
                .resources
                .get_or_insert_with(ResourceRequirements::default);
            merge_quantities("--requests", &self.requests, &mut resources.requests)?;
            merge_quantities("--limits", &self.limits, &mut resources.limits)?;
        }
        let main_container = main.name.clone();

        Ok(BuiltPod {
            pod,
            name,
            namespace,
            launch_id,
            main_container,
        })
    }
}

/// `activeDeadlineSeconds` for `deadline`: whole seconds (a sub-second rest is dropped, but never
/// below 1), within the API's 1..=2147483647, else an error the user can act on (rather than a
/// value the server rejects after podline tried to create the pod).
fn active_deadline_seconds(deadline: Duration) -> Result<i64, SpecError> {
    if deadline.is_zero() || deadline > MAX_ACTIVE_DEADLINE {
        return Err(SpecError::OutOfRange {
            flag: "activeDeadlineSeconds",
            message: format!(
                "{} s is out of range: expected 1 to {} seconds",
                deadline.as_secs(),
                MAX_ACTIVE_DEADLINE.as_secs()
            ),
        });
    }
    // In range, so it fits: at most 2^31-1.
    Ok(i64::try_from(deadline.as_secs().max(1)).unwrap_or(i64::MAX))
}

fn merge_quantities(
    flag: &'static str,
    given: &BTreeMap<String, String>,
    into: &mut Option<BTreeMap<String, Quantity>>,
) -> Result<(), SpecError> {
    if given.is_empty() {
        return Ok(());
    }
    let map = into.get_or_insert_with(BTreeMap::new);
    for (k, v) in given {
        if !is_quantity(v) {
            return Err(SpecError::InvalidQuantity {
                flag,
                value: format!("{k}={v}"),
            });
        }
        map.insert(k.clone(), Quantity(v.clone()));
    }
    Ok(())
}

/// A fresh launch id: 32 lower-case hex characters (a UUIDv4), valid as a label value.
pub fn new_launch_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// `registry:5000/team/tool:1.2@sha256:...` -> `tool`: a readable default pod name.
fn image_base_name(image: &str) -> String {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    let name = last.split(':').next().unwrap_or(last);
    name.to_owned()
}

/// Turns any string into a DNS-1123 label prefix and appends `-` + 8 random `[a-z0-9]`, like
/// Airflow does (it is also done to template names, since a fixed template name collides).
pub fn unique_name(base: &str) -> String {
    let mut clean: String = base
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    while clean.contains("--") {
        clean = clean.replace("--", "-");
    }
    clean.truncate(MAX_GENERATED_NAME - SUFFIX_LEN - 1);
    let clean = clean.trim_matches('-');
    let clean = if clean.is_empty() { "podline" } else { clean };
    format!("{clean}-{}", random_suffix())
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..SUFFIX_LEN)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// Checks a pod name is a DNS-1123 subdomain, as the API server will.
pub fn validate_pod_name(name: &str) -> Result<(), SpecError> {
    let err = |why| {
        Err(SpecError::InvalidName {
            value: name.to_owned(),
            why,
        })
    };
    if name.is_empty() {
        return err("it is empty");
    }
    if name.len() > 253 {
        return err("it is longer than 253 characters");
    }
    for part in name.split('.') {
        if part.is_empty() {
            return err("it has an empty part between dots");
        }
        if !part
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return err("it has characters other than a-z, 0-9, '-' and '.'");
        }
        if part.starts_with('-') || part.ends_with('-') {
            return err("it starts or ends with '-'");
        }
    }
    Ok(())
}

fn is_label_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'
}

/// Checks a label (or annotation) key: optional DNS prefix `/`, then a name of at most 63
/// characters, alphanumeric at both ends.
pub fn validate_label_key(flag: &'static str, key: &str) -> Result<(), SpecError> {
    let err = |why| {
        Err(SpecError::InvalidLabel {
            flag,
            what: "key",
            value: key.to_owned(),
            why,
        })
    };
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && (prefix.is_empty() || prefix.len() > 253 || validate_pod_name(prefix).is_err())
    {
        return err("its prefix is not a DNS subdomain");
    }
    if name.is_empty() || name.len() > 63 {
        return err("the name part must be 1 to 63 characters");
    }
    let bytes = name.as_bytes();
    if !bytes.iter().all(|&b| is_label_name_char(b))
        || !bytes[0].is_ascii_alphanumeric()
        || !bytes[bytes.len() - 1].is_ascii_alphanumeric()
    {
        return err("use a-z, A-Z, 0-9, '-', '_', '.', alphanumeric at both ends");
    }
    Ok(())
}

/// Checks a label value: at most 63 characters, empty or alphanumeric at both ends.
pub fn validate_label_value(flag: &'static str, value: &str) -> Result<(), SpecError> {
    let err = |why| {
        Err(SpecError::InvalidLabel {
            flag,
            what: "value",
            value: value.to_owned(),
            why,
        })
    };
    if value.len() > 63 {
        return err("it is longer than 63 characters");
    }
    let bytes = value.as_bytes();
    if !bytes.is_empty()
        && (!bytes.iter().all(|&b| is_label_name_char(b))
            || !bytes[0].is_ascii_alphanumeric()
            || !bytes[bytes.len() - 1].is_ascii_alphanumeric())
    {
        return err("use a-z, A-Z, 0-9, '-', '_', '.', alphanumeric at both ends");
    }
    Ok(())
}

/// True if `s` is a Kubernetes quantity: a decimal number with an optional binary suffix
/// (`Ki`..`Ei`), decimal suffix (`n u m k M G T P E`) or exponent (`e3`).
pub fn is_quantity(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(num_end);
    let digits = num.chars().filter(char::is_ascii_digit).count();
    if digits == 0 || num.matches('.').count() > 1 {
        return false;
    }
    match suffix {
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "n" | "u" | "m" | "k" | "M" | "G" | "T"
        | "P" | "E" => true,
        exp => {
            let Some(rest) = exp.strip_prefix(['e', 'E']) else {
                return false;
            };
            let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
            !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit())
        }
    }
}

/// Parses `KEY=VALUE` (for `--env`, `--label`, `--annotation`, `--node-selector`). The value
/// may be empty and may contain `=`.
pub fn parse_key_value(
    flag: &'static str,
    example: &'static str,
    s: &str,
) -> Result<(String, String), SpecError> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(SpecError::NotKeyValue {
            flag,
            value: s.to_owned(),
            example,
        }),
    }
}

/// Parses `cpu=500m,memory=1Gi` for `--requests` / `--limits`.
pub fn parse_resources(flag: &'static str, s: &str) -> Result<BTreeMap<String, String>, SpecError> {
    let mut out = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = parse_key_value(flag, "cpu=500m,memory=1Gi", part)?;
        if !is_quantity(&v) {
            return Err(SpecError::InvalidQuantity {
                flag,
                value: part.to_owned(),
            });
        }
        out.insert(k, v);
    }
    if out.is_empty() {
        return Err(SpecError::NotKeyValue {
            flag,
            value: s.to_owned(),
            example: "cpu=500m,memory=1Gi",
        });
    }
    Ok(out)
}

/// Parses a pod template from YAML or JSON text (JSON is valid YAML, but serde_json gives
/// better messages for JSON files, so it is tried first when the text looks like JSON).
pub fn parse_template(path: &str, text: &str) -> Result<Pod, SpecError> {
    let parsed = if text.trim_start().starts_with('{') {
        serde_json::from_str::<Pod>(text).map_err(|e| e.to_string())
    } else {
        serde_saphyr::from_str::<Pod>(text).map_err(|e| e.to_string())
    };
    parsed.map_err(|message| SpecError::TemplateParse {
        path: path.to_owned(),
        message,
    })
}

/// Reads and parses a pod template file.
pub fn load_template(path: &std::path::Path) -> Result<Pod, SpecError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| SpecError::TemplateRead {
        path: shown.clone(),
        source,
    })?;
    parse_template(&shown, &text)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn spec() -> TaskSpec {
        TaskSpec {
            image: Some("busybox:1.36".into()),
            command: vec!["sh".into(), "-c".into(), "echo hi".into()],
            ..TaskSpec::default()
        }
    }

    #[test]
    fn build_pod_should_set_restart_never_launch_id_and_suffix() {
        let built = spec().build_pod("default").unwrap();
        let labels = built.pod.metadata.labels.clone().unwrap();
        assert_eq!(labels[LAUNCH_ID_LABEL], built.launch_id);
        assert_eq!(built.launch_id.len(), 32);
        let ps = built.pod.spec.unwrap();
        assert_eq!(ps.restart_policy.as_deref(), Some("Never"));
        assert!(built.name.starts_with("busybox-"), "{}", built.name);
        assert_eq!(built.name.len(), "busybox-".len() + SUFFIX_LEN);
        validate_pod_name(&built.name).unwrap();
        assert_eq!(ps.containers[0].name, DEFAULT_CONTAINER);
        assert_eq!(
            ps.containers[0].command.as_deref().unwrap(),
            ["sh", "-c", "echo hi"]
        );
        assert_eq!(built.namespace, "default");
    }

    #[test]
    fn two_builds_should_differ_in_name_and_launch_id() {
        let a = spec().build_pod("default").unwrap();
        let b = spec().build_pod("default").unwrap();
        assert_ne!(a.name, b.name);
        assert_ne!(a.launch_id, b.launch_id);
    }

    #[test]
    fn unique_name_should_sanitize_and_fit_63() {
        let n = unique_name("My_Task.Name!!");
        assert!(n.starts_with("my-task-name-"), "{n}");
        let long = unique_name(&"a".repeat(200));
        assert_eq!(long.len(), MAX_GENERATED_NAME);
        validate_pod_name(&long).unwrap();
        assert!(unique_name("---").starts_with("podline-"));
    }

    #[test]
    fn exact_name_should_be_kept_or_rejected() {
        let mut s = spec();
        s.name = Some("exact-one".into());
        s.exact_name = true;
        assert_eq!(s.build_pod("ns").unwrap().name, "exact-one");
        s.name = Some("Bad_Name".into());
        let err = s.build_pod("ns").unwrap_err().to_string();
        assert!(err.contains("--name") && err.contains("Bad_Name"), "{err}");
    }

    #[test]
    fn flags_should_override_template() {
        let template = parse_template(
            "t.yaml",
            r#"
apiVersion: v1
kind: Pod
metadata:
  name: from-template
  namespace: tmpl-ns
  labels: {team: a, keep: "yes"}
spec:
  restartPolicy: Always
  serviceAccountName: tmpl-sa
  containers:
  - name: base
    image: old:1
    env: [{name: A, value: "1"}, {name: B, value: "2"}]
  - name: sidecar
    image: side:1
"#,
        )
        .unwrap();
        let mut s = spec();
        s.template = Some(template);
        s.env = vec![("B".into(), "3".into()), ("C".into(), "4".into())];
        s.labels.insert("team".into(), "b".into());
        s.service_account = Some("flag-sa".into());
        s.requests = parse_resources("--requests", "cpu=500m,memory=1Gi").unwrap();
        s.active_deadline = Some(Duration::from_secs(600));
        s.image_pull_policy = Some(PullPolicy::IfNotPresent);
        let built = s.build_pod("default").unwrap();
        assert_eq!(built.namespace, "tmpl-ns");
        assert!(built.name.starts_with("from-template-"));
        assert_eq!(built.main_container, "base");
        let labels = built.pod.metadata.labels.clone().unwrap();
        assert_eq!(labels["team"], "b");
        assert_eq!(labels["keep"], "yes");
        let ps = built.pod.spec.unwrap();
        assert_eq!(ps.restart_policy.as_deref(), Some("Never"));
        assert_eq!(ps.service_account_name.as_deref(), Some("flag-sa"));
        assert_eq!(ps.active_deadline_seconds, Some(600));
        assert_eq!(ps.containers.len(), 2);
        let main = &ps.containers[0];
        assert_eq!(main.image.as_deref(), Some("busybox:1.36"));
        assert_eq!(main.image_pull_policy.as_deref(), Some("IfNotPresent"));
        let env: Vec<(String, String)> = main
            .env
            .clone()
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.value.unwrap()))
            .collect();
        assert_eq!(
            env,
            [("A", "1"), ("B", "3"), ("C", "4")].map(|(a, b)| (a.into(), b.into()))
        );
        let req = main.resources.clone().unwrap().requests.unwrap();
        assert_eq!(req["cpu"].0, "500m");
        assert_eq!(req["memory"].0, "1Gi");
    }

    #[test]
    fn json_template_should_parse_and_garbage_should_name_the_file() {
        let pod = parse_template(
            "t.json",
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#,
        )
        .unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("x"));
        let err = parse_template("bad.yaml", "spec: [1, 2")
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad.yaml"), "{err}");
    }

    #[test]
    fn active_deadline_should_be_within_the_apis_range() {
        let mut s = spec();
        s.active_deadline = Some(MAX_ACTIVE_DEADLINE);
        let built = s.build_pod("d").unwrap();
        assert_eq!(
            built.pod.spec.unwrap().active_deadline_seconds,
            Some(2_147_483_647)
        );
        s.active_deadline = Some(Duration::from_millis(500));
        let built = s.build_pod("d").unwrap();
        assert_eq!(built.pod.spec.unwrap().active_deadline_seconds, Some(1));
        for bad in [
            Duration::ZERO,
            MAX_ACTIVE_DEADLINE + Duration::from_secs(1),
            Duration::from_secs(u64::MAX),
        ] {
            s.active_deadline = Some(bad);
            let err = s.build_pod("d").unwrap_err().to_string();
            assert!(
                err.contains("activeDeadlineSeconds") && err.contains("1 to 2147483647"),
                "{err}"
            );
        }
    }

    #[test]
    fn missing_image_should_be_a_clear_error() {
        let s = TaskSpec::default();
        let err = s.build_pod("default").unwrap_err();
        assert!(matches!(err, SpecError::MissingImage));
        assert!(err.to_string().contains("--image"));
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
    fn key_value_parsing_should_name_the_flag() {
        assert_eq!(
            parse_key_value("--env", "--env K=V", "A=b=c").unwrap(),
            ("A".into(), "b=c".into())
        );
        assert_eq!(
            parse_key_value("--env", "--env K=V", "A=").unwrap(),
            ("A".into(), String::new())
        );
        let err = parse_key_value("--env", "--env K=V", "novalue")
            .unwrap_err()
            .to_string();
        assert!(err.contains("--env") && err.contains("novalue"), "{err}");
        assert!(parse_key_value("--label", "--label k=v", "=v").is_err());
    }

    #[test]
    fn quantities_should_follow_kubernetes_grammar() {
        for ok in [
            "1", "500m", "1.5", "1Gi", "128Mi", "2k", "1e3", ".5", "+1", "100E",
        ] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["", "m", "1GB", "1.2.3", "abc", "1e", "1 Gi", "1x"] {
            assert!(!is_quantity(bad), "{bad}");
        }
        let err = parse_resources("--limits", "cpu=lots")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--limits") && err.contains("cpu=lots"),
            "{err}"
        );
        assert!(parse_resources("--requests", "").is_err());
    }

    #[test]
    fn labels_should_be_validated() {
        validate_label_key("--label", "podline.io/task-id").unwrap();
        validate_label_key("--label", "app").unwrap();
        assert!(validate_label_key("--label", "-app").is_err());
        assert!(validate_label_key("--label", "Bad Prefix/x").is_err());
        validate_label_value("--label", "").unwrap();
        validate_label_value("--label", "v1.2_x").unwrap();
        assert!(validate_label_value("--label", &"a".repeat(64)).is_err());
        assert!(validate_label_value("--label", "a b").is_err());
        let mut s = spec();
        s.task_id = Some("not valid!".into());
        let err = s.build_pod("d").unwrap_err().to_string();
        assert!(err.contains("--task-id"), "{err}");
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

    #[test]
    fn image_base_name_should_strip_registry_tag_and_digest() {
        assert_eq!(image_base_name("reg:5000/team/tool:1.2"), "tool");
        assert_eq!(image_base_name("busybox@sha256:abc"), "busybox");
    }
}
