//! Building the pod of a task: template first, the task's fields over it, then podline's unique
//! name, launch-id, task-id and run labels, and `restartPolicy: Never`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, EnvFromSource, EnvVar, PodSpec, ResourceRequirements, SecretEnvSource,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use rand::RngExt;

use super::built::BuiltPod;
use super::labels::{
    DEFAULT_CONTAINER, LAUNCH_ID_LABEL, MAX_ACTIVE_DEADLINE, MAX_GENERATED_NAME, RUN_LABEL,
    SUFFIX_LEN, TASK_ID_LABEL,
};
use super::task::TaskSpec;
use super::validate::{is_quantity, validate_label_key, validate_label_value, validate_pod_name};
use crate::error::SpecError;

impl TaskSpec {
    /// Builds the pod: template first, the task's fields over it, then podline's name, labels
    /// and `restartPolicy: Never`. Validates everything the server would reject for reasons the
    /// user can fix here (names, labels, quantities, missing image); errors name a field by its
    /// tasks-file spelling (`labels`, `nodeSelector`, `taskId`...).
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
            validate_label_key("labels", k)?;
            validate_label_value("labels", v)?;
            labels.insert(k.clone(), v.clone());
        }
        labels.insert(LAUNCH_ID_LABEL.to_owned(), launch_id.clone());
        if let Some(task_id) = &self.task_id {
            validate_label_value("taskId", task_id)?;
            labels.insert(TASK_ID_LABEL.to_owned(), task_id.clone());
        }
        if let Some(run) = &self.run {
            validate_label_value("run", run)?;
            labels.insert(RUN_LABEL.to_owned(), run.clone());
        }
        if !self.annotations.is_empty() {
            let annotations = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
            for (k, v) in &self.annotations {
                validate_label_key("annotations", k)?;
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
                validate_label_key("nodeSelector", k)?;
                validate_label_value("nodeSelector", v)?;
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
            merge_quantities("requests", &self.requests, &mut resources.requests)?;
            merge_quantities("limits", &self.limits, &mut resources.limits)?;
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::spec::task::tests::spec;
    use crate::spec::*;

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
        assert!(
            err.contains("pod name") && err.contains("Bad_Name"),
            "{err}"
        );
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
        s.requests = parse_resources("requests", "cpu=500m,memory=1Gi").unwrap();
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
        assert!(err.to_string().contains("no image"));
    }

    #[test]
    fn image_base_name_should_strip_registry_tag_and_digest() {
        assert_eq!(image_base_name("reg:5000/team/tool:1.2"), "tool");
        assert_eq!(image_base_name("busybox@sha256:abc"), "busybox");
    }
}
