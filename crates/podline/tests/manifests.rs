//! Every manifest under `deploy/` parses into k8s-openapi types with no field left over (so a
//! typo such as `runAsNonroot` fails here, not in someone's cluster), every kustomization
//! references files that exist, and the RBAC and the recorder's Deployment meet the least-privilege
//! and hardening bar. If `kubectl` is installed, each kustomization is also rendered and checked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Namespace, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// Every `.yaml`/`.yml` file under `dir`, sorted.
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(yaml_files(&path));
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        ) {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn is_kustomization(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()) == Some("kustomization.yaml")
}

/// A kustomize patch (`*.patch.yaml`): a partial object, checked through the rendered output.
fn is_patch(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".patch.yaml"))
}

/// The YAML documents of a stream, as JSON values (empty documents dropped).
fn documents(text: &str, origin: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text)
        .unwrap_or_else(|err| panic!("{origin}: not valid YAML: {err}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// The first place where `back` (after a typed round trip) differs from `orig`, if any.
fn first_difference(orig: &Value, back: &Value, path: &str) -> Option<String> {
    match (orig, back) {
        (Value::Object(o), Value::Object(b)) => {
            for (key, value) in o {
                let here = format!("{path}.{key}");
                match b.get(key) {
                    None => {
                        return Some(format!(
                            "{here}: not a field of this kind (typo?) or dropped"
                        ));
                    }
                    Some(other) => {
                        if let Some(diff) = first_difference(value, other, &here) {
                            return Some(diff);
                        }
                    }
                }
            }
            b.keys()
                .find(|k| !o.contains_key(*k))
                .map(|k| format!("{path}.{k}: appeared in the round trip"))
        }
        (Value::Array(o), Value::Array(b)) if o.len() == b.len() => o
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (o, b))| first_difference(o, b, &format!("{path}[{i}]"))),
        _ if orig == back => None,
        _ => Some(format!("{path}: {orig} became {back} (wrong type?)")),
    }
}

/// Deserializes `doc` as `T` and checks that serializing it back gives the same document.
fn strict<T: DeserializeOwned + Serialize>(doc: &Value, origin: &str) -> Result<T, String> {
    let typed: T = serde_json::from_value(doc.clone()).map_err(|err| format!("{origin}: {err}"))?;
    let back = serde_json::to_value(&typed).map_err(|err| format!("{origin}: {err}"))?;
    match first_difference(doc, &back, "") {
        None => Ok(typed),
        Some(diff) => Err(format!("{origin}: {diff}")),
    }
}

/// A manifest parsed into its k8s-openapi type.
#[derive(Debug)]
#[allow(dead_code)] // some kinds are only parsed (that is the check), not inspected
enum Manifest {
    Namespace(Box<Namespace>),
    ServiceAccount(Box<ServiceAccount>),
    ClusterRole(Box<ClusterRole>),
    ClusterRoleBinding(Box<ClusterRoleBinding>),
    Role(Box<Role>),
    RoleBinding(Box<RoleBinding>),
    Deployment(Box<Deployment>),
    Service(Box<Service>),
    PodDisruptionBudget(Box<PodDisruptionBudget>),
    ConfigMap(Box<ConfigMap>),
    Secret(Box<Secret>),
}

impl Manifest {
    fn kind(&self) -> &'static str {
        match self {
            Manifest::Namespace(_) => "Namespace",
            Manifest::ServiceAccount(_) => "ServiceAccount",
            Manifest::ClusterRole(_) => "ClusterRole",
            Manifest::ClusterRoleBinding(_) => "ClusterRoleBinding",
            Manifest::Role(_) => "Role",
            Manifest::RoleBinding(_) => "RoleBinding",
            Manifest::Deployment(_) => "Deployment",
            Manifest::Service(_) => "Service",
            Manifest::PodDisruptionBudget(_) => "PodDisruptionBudget",
            Manifest::ConfigMap(_) => "ConfigMap",
            Manifest::Secret(_) => "Secret",
        }
    }
}

fn parse(doc: &Value, origin: &str) -> Result<Manifest, String> {
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    let kind = doc["kind"].as_str().unwrap_or_default();
    let parsed = match (api_version, kind) {
        ("v1", "Namespace") => Manifest::Namespace(strict(doc, origin)?),
        ("v1", "ServiceAccount") => Manifest::ServiceAccount(strict(doc, origin)?),
        ("v1", "Service") => Manifest::Service(strict(doc, origin)?),
        ("v1", "ConfigMap") => Manifest::ConfigMap(strict(doc, origin)?),
        ("v1", "Secret") => Manifest::Secret(strict(doc, origin)?),
        ("apps/v1", "Deployment") => Manifest::Deployment(strict(doc, origin)?),
        ("policy/v1", "PodDisruptionBudget") => Manifest::PodDisruptionBudget(strict(doc, origin)?),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
            Manifest::ClusterRole(strict(doc, origin)?)
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            Manifest::ClusterRoleBinding(strict(doc, origin)?)
        }
        ("rbac.authorization.k8s.io/v1", "Role") => Manifest::Role(strict(doc, origin)?),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
            Manifest::RoleBinding(strict(doc, origin)?)
        }
        _ => {
            return Err(format!(
                "{origin}: unexpected apiVersion/kind {api_version:?}/{kind:?} (add it to this test)"
            ));
        }
    };
    Ok(parsed)
}

/// Every manifest file under deploy/ (not the kustomizations), parsed: (file, manifests).
fn raw_manifests() -> Vec<(PathBuf, Vec<Manifest>)> {
    yaml_files(&deploy_dir())
        .into_iter()
        .filter(|p| !is_kustomization(p) && !is_patch(p))
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let origin = path.display().to_string();
            let manifests = documents(&text, &origin)
                .iter()
                .enumerate()
                .map(|(i, doc)| parse(doc, &format!("{origin} (document {i})")))
                .collect::<Result<Vec<_>, _>>()
                .unwrap_or_else(|err| panic!("{err}"));
            (path, manifests)
        })
        .collect()
}

/// The kustomization fields podline uses; anything else is a typo.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Kustomization {
    api_version: String,
    kind: String,
    #[serde(default)]
    namespace: Option<String>,
    resources: Vec<String>,
    #[serde(default)]
    images: Vec<KustomizeImage>,
    #[serde(default)]
    patches: Vec<KustomizePatch>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct KustomizePatch {
    path: String,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)] // read through Debug and the deny_unknown_fields check
struct KustomizeImage {
    name: String,
    #[serde(default)]
    new_name: Option<String>,
    #[serde(default)]
    new_tag: Option<String>,
}

fn kustomization_dirs() -> Vec<PathBuf> {
    yaml_files(&deploy_dir())
        .into_iter()
        .filter(|p| is_kustomization(p))
        .map(|p| p.parent().unwrap().to_path_buf())
        .collect()
}

#[test]
fn every_manifest_parses_into_k8s_openapi_types() {
    let all = raw_manifests();
    let count: usize = all.iter().map(|(_, m)| m.len()).sum();
    assert!(
        count >= 10,
        "expected the recorder's manifests, found {count}"
    );
    let kinds: BTreeSet<&str> = all
        .iter()
        .flat_map(|(_, m)| m.iter().map(Manifest::kind))
        .collect();
    for needed in [
        "Deployment",
        "ServiceAccount",
        "ClusterRole",
        "Role",
        "Service",
    ] {
        assert!(
            kinds.contains(needed),
            "no {needed} under deploy/: {kinds:?}"
        );
    }
}

/// The checker itself catches what it is for: a misspelt field, a wrong type, an unknown kind.
#[test]
fn a_typo_in_a_manifest_is_caught() {
    let typo = r#"
apiVersion: v1
kind: ServiceAccount
metadata:
  name: x
automountServiceAccountTokn: false
"#;
    let doc = &documents(typo, "typo")[0];
    let err = parse(doc, "typo").unwrap_err();
    assert!(err.contains("automountServiceAccountTokn"), "{err}");

    let wrong_type =
        "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: \"eighty\"}]}\n";
    assert!(parse(&documents(wrong_type, "t")[0], "t").is_err());

    let unknown = "apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: x}\n";
    let err = parse(&documents(unknown, "u")[0], "u").unwrap_err();
    assert!(err.contains("Deploymnet"), "{err}");
}

#[test]
fn kustomizations_reference_existing_files_and_no_manifest_is_orphaned() {
    let dirs = kustomization_dirs();
    assert!(dirs.iter().any(|d| d.ends_with("base")), "{dirs:?}");
    let mut referenced = BTreeSet::new();
    for dir in &dirs {
        let path = dir.join("kustomization.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let k: Kustomization =
            serde_saphyr::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        assert_eq!(k.api_version, "kustomize.config.k8s.io/v1beta1");
        assert_eq!(k.kind, "Kustomization");
        if let Some(ns) = &k.namespace {
            assert_eq!(ns, "podline", "{}", path.display());
        }
        for image in &k.images {
            assert_eq!(image.name, "podline", "{}: {image:?}", path.display());
        }
        for resource in &k.resources {
            let target = dir.join(resource);
            assert!(
                target.exists(),
                "{}: resource {resource} does not exist",
                path.display()
            );
            let is_kustomize_dir = target.join("kustomization.yaml").exists();
            if !is_kustomize_dir {
                referenced.insert(target.canonicalize().unwrap());
            }
        }
    }
    let mut patches = BTreeSet::new();
    for dir in &dirs {
        let text = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
        let k: Kustomization = serde_saphyr::from_str(&text).unwrap();
        for patch in &k.patches {
            let target = dir.join(&patch.path);
            assert!(
                target.exists(),
                "{}: patch {} does not exist",
                dir.display(),
                patch.path
            );
            patches.insert(target.canonicalize().unwrap());
        }
    }
    for file in yaml_files(&deploy_dir())
        .into_iter()
        .filter(|p| is_patch(p))
    {
        assert!(
            patches.contains(&file.canonicalize().unwrap()),
            "{} is a patch no kustomization applies",
            file.display()
        );
    }
    for (file, _) in raw_manifests() {
        assert!(
            referenced.contains(&file.canonicalize().unwrap()),
            "{} is in no kustomization (orphaned or misspelt reference)",
            file.display()
        );
    }
}

/// What a role may grant: (apiGroup, resource) -> verbs. Pods `patch` and reading Argo's
/// WorkflowTaskResults only in the KFP overlay.
fn allowed_verbs(
    in_kfp_overlay: bool,
) -> BTreeMap<(&'static str, &'static str), Vec<&'static str>> {
    let mut pods = vec!["get", "list", "watch"];
    let mut task_results = vec![];
    if in_kfp_overlay {
        pods.push("patch");
        task_results.push("get");
    }
    BTreeMap::from([
        (("", "pods"), pods),
        (("argoproj.io", "workflowtaskresults"), task_results),
        (("", "events"), vec!["list", "watch"]),
        (
            ("coordination.k8s.io", "leases"),
            vec!["get", "create", "update", "list", "watch"],
        ),
    ])
}

fn check_rules(rules: &[PolicyRule], namespaced: bool, in_kfp_overlay: bool, origin: &str) {
    let allowed = allowed_verbs(in_kfp_overlay);
    for rule in rules {
        let groups = rule.api_groups.clone().unwrap_or_default();
        let resources = rule.resources.clone().unwrap_or_default();
        assert!(
            rule.non_resource_urls.is_none(),
            "{origin}: nonResourceURLs are not needed"
        );
        for field in groups.iter().chain(&resources).chain(&rule.verbs) {
            assert!(
                !field.contains('*'),
                "{origin}: wildcard {field:?} in {rule:?}"
            );
        }
        // The reaper overlay's ClusterRole (its rules are the ones that delete): list and delete
        // on Leases and pods, nothing else.
        if origin.contains("overlays/reaper")
            && !namespaced
            && rule.verbs.iter().any(|v| v == "delete")
        {
            for resource in &resources {
                assert!(
                    matches!(resource.as_str(), "leases" | "pods"),
                    "{origin}: the reaper needs only leases and pods, not {resource}"
                );
            }
            for verb in &rule.verbs {
                assert!(
                    matches!(verb.as_str(), "list" | "delete"),
                    "{origin}: the reaper needs only list and delete, not {verb}"
                );
            }
            continue;
        }
        for group in &groups {
            for resource in &resources {
                assert_ne!(resource, "secrets", "{origin}: no access to secrets");
                let verbs = allowed
                    .get(&(group.as_str(), resource.as_str()))
                    .unwrap_or_else(|| panic!("{origin}: {group}/{resource} is not needed"));
                for verb in &rule.verbs {
                    assert!(
                        verbs.contains(&verb.as_str()),
                        "{origin}: verb {verb} on {resource} is more than needed"
                    );
                }
                if resource == "leases" {
                    assert!(
                        namespaced,
                        "{origin}: leases only in the recorder's namespace (a Role, not a ClusterRole)"
                    );
                    // Only `create` can't name its object; everything else is for our Lease only.
                    let named = rule.resource_names.as_ref().is_some_and(|n| !n.is_empty());
                    assert!(
                        named || rule.verbs.iter().all(|v| v == "create"),
                        "{origin}: lease verbs {:?} must be limited by resourceNames",
                        rule.verbs
                    );
                }
            }
        }
    }
}

fn check_rbac(manifests: &[Manifest], in_kfp_overlay: bool, origin: &str) {
    for manifest in manifests {
        match manifest {
            Manifest::ClusterRole(role) => {
                assert!(role.aggregation_rule.is_none(), "{origin}");
                check_rules(
                    role.rules.as_deref().unwrap_or_default(),
                    false,
                    in_kfp_overlay,
                    origin,
                );
            }
            Manifest::Role(role) => check_rules(
                role.rules.as_deref().unwrap_or_default(),
                true,
                in_kfp_overlay,
                origin,
            ),
            _ => {}
        }
    }
}

#[test]
fn rbac_is_least_privilege() {
    for (file, manifests) in raw_manifests() {
        let in_kfp = file.components().any(|c| c.as_os_str() == "kfp");
        // The finalize overlay needs pods `patch` too (the finalizer), as KFP mode does.
        let patches_pods = in_kfp || file.components().any(|c| c.as_os_str() == "finalize");
        check_rbac(&manifests, patches_pods, &file.display().to_string());
    }
}

/// The check itself rejects what it should: a wildcard, secrets, pods patch outside KFP, a
/// cluster-wide lease grant, a lease watch not limited to our Lease.
#[test]
fn the_rbac_check_rejects_excess_privilege() {
    let rule = |group: &str, resource: &str, verb: &str| PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(vec![resource.into()]),
        verbs: vec![verb.into()],
        ..PolicyRule::default()
    };
    let bad = [
        (rule("", "pods", "*"), true),
        (rule("", "secrets", "get"), true),
        (rule("", "pods", "patch"), true),
        (rule("", "pods", "delete"), true),
        (rule("coordination.k8s.io", "leases", "get"), false),
        (rule("coordination.k8s.io", "leases", "watch"), true),
    ];
    for (bad_rule, namespaced) in bad {
        let result = std::panic::catch_unwind(|| {
            check_rules(std::slice::from_ref(&bad_rule), namespaced, false, "test")
        });
        assert!(result.is_err(), "accepted {bad_rule:?}");
    }
    check_rules(&[rule("", "pods", "patch")], false, true, "kfp");
}

fn env_value<'a>(
    container: &'a Container,
    name: &str,
) -> Option<&'a k8s_openapi::api::core::v1::EnvVar> {
    container.env.as_deref()?.iter().find(|e| e.name == name)
}

fn check_deployment(deployment: &Deployment, in_kfp_overlay: bool, origin: &str) {
    let spec = deployment.spec.as_ref().unwrap();
    let template = &spec.template;
    let pod = template.spec.as_ref().unwrap();
    let pod_security = pod.security_context.clone().unwrap_or_default();
    assert_eq!(
        pod_security.run_as_non_root,
        Some(true),
        "{origin}: runAsNonRoot"
    );
    assert_ne!(pod_security.run_as_user, Some(0), "{origin}: runs as root");
    assert_ne!(pod.host_network, Some(true), "{origin}");
    assert!(
        pod.service_account_name.is_some(),
        "{origin}: own ServiceAccount"
    );
    let annotations = template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    assert_eq!(
        annotations.get("prometheus.io/scrape").map(String::as_str),
        Some("true"),
        "{origin}: prometheus.io/scrape"
    );
    let scrape_port: i32 = annotations["prometheus.io/port"].parse().unwrap();
    for container in &pod.containers {
        let sc = container.security_context.clone().unwrap_or_default();
        assert_eq!(
            sc.read_only_root_filesystem,
            Some(true),
            "{origin}: readOnlyRootFilesystem"
        );
        assert_eq!(
            sc.allow_privilege_escalation,
            Some(false),
            "{origin}: allowPrivilegeEscalation"
        );
        assert_ne!(sc.privileged, Some(true), "{origin}: privileged");
        assert_ne!(sc.run_as_non_root, Some(false), "{origin}: runAsNonRoot");
        let caps = sc.capabilities.unwrap_or_default();
        assert_eq!(
            caps.drop,
            Some(vec!["ALL".to_owned()]),
            "{origin}: drop ALL capabilities"
        );
        assert!(
            caps.add.unwrap_or_default().is_empty(),
            "{origin}: no added capabilities"
        );
        let resources = container.resources.clone().unwrap_or_default();
        let requests = resources.requests.unwrap_or_default();
        assert!(
            requests.contains_key("cpu") && requests.contains_key("memory"),
            "{origin}: requests"
        );
        assert!(
            resources.limits.unwrap_or_default().contains_key("memory"),
            "{origin}: memory limit"
        );

        let port = container
            .ports
            .as_deref()
            .unwrap_or_default()
            .iter()
            .find(|p| p.name.as_deref() == Some("metrics"))
            .unwrap_or_else(|| panic!("{origin}: a port named metrics"));
        assert_eq!(port.container_port, scrape_port, "{origin}: scrape port");
        let probe_path = |probe: &Option<k8s_openapi::api::core::v1::Probe>| {
            let get = probe.as_ref()?.http_get.as_ref()?;
            assert_eq!(
                get.port,
                k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("metrics".into()),
                "{origin}: probes on the metrics port"
            );
            get.path.clone()
        };
        assert_eq!(
            probe_path(&container.liveness_probe).as_deref(),
            Some("/healthz"),
            "{origin}"
        );
        assert_eq!(
            probe_path(&container.readiness_probe).as_deref(),
            Some("/readyz"),
            "{origin}"
        );
        let args = container.args.clone().unwrap_or_default();
        assert!(
            args.iter()
                .any(|a| a.starts_with("--listen=0.0.0.0:")
                    && a.ends_with(&format!(":{scrape_port}"))),
            "{origin}: the metrics server listens on the scrape port on all interfaces: {args:?}"
        );

        if in_kfp_overlay {
            // KFP mode writes to MLMD (KFP's own service), keeps no store.
            assert!(
                args.iter().any(|a| a == "--kfp"),
                "{origin}: the KFP overlay runs --kfp: {args:?}"
            );
            assert!(
                env_value(container, "PODLINE_DB").is_none(),
                "{origin}: KFP mode uses no store"
            );
        } else {
            assert!(
                !args.iter().any(|a| a == "--kfp"),
                "{origin}: --kfp only in the KFP overlay"
            );
            // The database URL holds a password: only ever from a Secret.
            let db = env_value(container, "PODLINE_DB")
                .unwrap_or_else(|| panic!("{origin}: PODLINE_DB"));
            assert!(
                db.value.is_none(),
                "{origin}: PODLINE_DB must come from a Secret"
            );
            assert!(
                db.value_from
                    .as_ref()
                    .and_then(|v| v.secret_key_ref.as_ref())
                    .is_some(),
                "{origin}: PODLINE_DB from a secretKeyRef"
            );
        }
        for env in container.env.as_deref().unwrap_or_default() {
            let value = env.value.as_deref().unwrap_or_default();
            assert!(
                !value.contains("://") || !value.contains('@'),
                "{origin}: credentials in {}",
                env.name
            );
        }
        if spec.replicas.unwrap_or(1) > 1 {
            assert_eq!(
                env_value(container, "PODLINE_LEADER_ELECT").and_then(|e| e.value.as_deref()),
                Some("true"),
                "{origin}: more than one replica needs leader election"
            );
            for needed in ["POD_NAME", "POD_NAMESPACE"] {
                let field = env_value(container, needed)
                    .and_then(|e| e.value_from.as_ref())
                    .and_then(|v| v.field_ref.as_ref())
                    .map(|f| f.field_path.clone());
                assert!(field.is_some(), "{origin}: {needed} from the downward API");
            }
        }
    }
}

#[test]
fn the_recorder_deployment_is_hardened_and_wired() {
    let mut seen = 0;
    for (file, manifests) in raw_manifests() {
        for manifest in &manifests {
            if let Manifest::Deployment(deployment) = manifest {
                check_deployment(deployment, false, &file.display().to_string());
                assert!(deployment.spec.as_ref().unwrap().replicas.unwrap_or(1) >= 2);
                seen += 1;
            }
        }
    }
    assert_eq!(seen, 1, "one recorder Deployment");
}

/// With kubectl on PATH, render every kustomization and run all the checks on the output.
#[test]
fn every_kustomization_renders_and_passes_the_checks() {
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        eprintln!(
            "kubectl not found: skipping the rendered check (the raw manifests were checked)"
        );
        return;
    }
    for dir in kustomization_dirs() {
        let origin = dir.display().to_string();
        let out = Command::new("kubectl")
            .arg("kustomize")
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kubectl kustomize {origin}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let manifests: Vec<Manifest> = documents(&text, &origin)
            .iter()
            .map(|doc| parse(doc, &origin))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|err| panic!("{err}"));
        let in_kfp = dir.ends_with("kfp");
        check_rbac(&manifests, in_kfp || dir.ends_with("finalize"), &origin);
        let mut deployments = 0;
        for manifest in &manifests {
            match manifest {
                Manifest::Deployment(d) => {
                    check_deployment(d, in_kfp, &origin);
                    let image = d
                        .spec
                        .as_ref()
                        .unwrap()
                        .template
                        .spec
                        .as_ref()
                        .unwrap()
                        .containers[0]
                        .image
                        .clone()
                        .unwrap();
                    assert!(image.contains(':'), "{origin}: image {image} has a tag");
                    deployments += 1;
                }
                Manifest::Secret(_) => {
                    panic!("{origin}: secrets are created by the operator, not shipped")
                }
                _ => {}
            }
        }
        assert_eq!(deployments, 1, "{origin}");
        if in_kfp {
            let patches = manifests.iter().any(|m| {
                matches!(m, Manifest::ClusterRole(r) if r.rules.as_deref().unwrap_or_default().iter()
                    .any(|rule| rule.verbs.iter().any(|v| v == "patch")))
            });
            assert!(patches, "{origin}: the KFP overlay grants pods patch");
        }
    }
}
