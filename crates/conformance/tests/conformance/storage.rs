//! PersistentVolumeClaims and StorageClasses as kube-apiserver 1.32 serves them, the scheduler's
//! answer to a pod whose claim is missing, and the kubelet's answer to a pod whose Secret is
//! missing.
//!
//! Upstream: pkg/apis/core/v1/defaults.go (`SetDefaults_PersistentVolumeClaim`,
//! `SetDefaults_PersistentVolumeClaimSpec`), pkg/apis/core/validation/validation.go
//! (`ValidatePersistentVolumeClaimSpec`, `ValidatePersistentVolumeClaimUpdate`),
//! pkg/apis/storage/v1/defaults.go and pkg/apis/storage/validation/validation.go
//! (`ValidateStorageClass`), plugin/pkg/admission/storage/storageclass/setdefault (the
//! DefaultStorageClass admission), pkg/printers/internalversion/printers.go (columns),
//! pkg/scheduler/framework/plugins/volumebinding/volume_binding.go (PreFilter) with
//! pkg/scheduler/framework/types.go (`FitError`), pkg/kubelet/kubelet_pods.go
//! (`makeEnvironmentVariables`), pkg/kubelet/kuberuntime/kuberuntime_container.go
//! (`CreateContainerConfigError`) and pkg/volume/secret/secret.go (`SetUpAt`).

use std::time::Duration;

use http::Method;
use podline_conformance::{Target, assert_status, pod};
use serde_json::{Value, json};

fn claim(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    })
}

/// The name of the target's default StorageClass, if it has one.
async fn default_class(t: &Target) -> Option<String> {
    let classes = t.get("/apis/storage.k8s.io/v1/storageclasses").await.json();
    classes["items"]
        .as_array()?
        .iter()
        .find(|c| {
            c["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
        })
        .and_then(|c| c["metadata"]["name"].as_str())
        .map(str::to_owned)
}

/// A claim is created Pending with `volumeMode: Filesystem` and the `kubernetes.io/pvc-protection`
/// finalizer (plugin/pkg/admission/storageobjectinuseprotection); one that names no class gets
/// the default class (DefaultStorageClass admission), if the cluster has one.
#[tokio::test]
async fn a_claim_is_defaulted_and_gets_the_default_class() {
    let t = Target::new().await;
    let r = t
        .send_json(
            Method::POST,
            &t.core_path("persistentvolumeclaims"),
            &claim("data"),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    assert_eq!(created["spec"]["volumeMode"], "Filesystem", "{created}");
    assert_eq!(created["status"]["phase"], "Pending", "{created}");
    // The StorageObjectInUseProtection admission's finalizer.
    assert_eq!(
        created["metadata"]["finalizers"],
        json!(["kubernetes.io/pvc-protection"]),
        "{created}"
    );
    match default_class(&t).await {
        Some(class) => assert_eq!(created["spec"]["storageClassName"], class, "{created}"),
        None => assert!(
            created["spec"].get("storageClassName").is_none(),
            "{created}"
        ),
    }
}

/// `ValidatePersistentVolumeClaimSpec`: no access mode and no storage request are 422 with
/// field causes `spec.accessModes` (`Required value: at least 1 access mode is required`) and
/// `spec.resources[storage]` (`Required value`).
#[tokio::test]
async fn a_claim_without_access_modes_or_storage_is_invalid() {
    let t = Target::new().await;
    let body = json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "bad"},
        "spec": {"resources": {}},
    });
    let r = t
        .send_json(Method::POST, &t.core_path("persistentvolumeclaims"), &body)
        .await;
    let message = assert_status(&r, 422, "Invalid");
    assert!(
        message.contains("spec.accessModes: Required value: at least 1 access mode is required"),
        "{message}"
    );
    assert!(
        message.contains("spec.resources[storage]: Required value"),
        "{message}"
    );
}

/// `ValidatePersistentVolumeClaimUpdate` (pkg/apis/core/validation/validation.go, 1.32): the
/// spec of a claim cannot change after creation (other than a bound claim's requests); the
/// detail is this sentence, a newline and `cmp.Diff(old, new)` of the internal specs: go-cmp's
/// report, `  core.PersistentVolumeClaimSpec{`, `-` and `+` lines for the changed field, `  }`.
/// go-cmp randomly writes some of its spaces as U+00A0 (github.com/google/go-cmp
/// cmp/report_text.go), so only the report's shape is compared, spaces normalized.
#[tokio::test]
async fn a_claims_spec_is_immutable() {
    let t = Target::new().await;
    let path = t.core_path("persistentvolumeclaims");
    // A class no provisioner serves: the claim stays unbound whatever the cluster.
    let mut body = claim("fixed");
    body["spec"]["storageClassName"] = json!("podline-conformance-none");
    assert_eq!(t.send_json(Method::POST, &path, &body).await.status, 201);
    let patch = json!({"spec": {"accessModes": ["ReadWriteMany"]}});
    let r = t
        .request(
            Method::PATCH,
            &format!("{path}/fixed"),
            Some("application/merge-patch+json"),
            None,
            patch.to_string().into_bytes(),
        )
        .await;
    let message = assert_status(&r, 422, "Invalid").replace('\u{a0}', " ");
    let diff = message
        .strip_prefix(
            "PersistentVolumeClaim \"fixed\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n",
        )
        .unwrap_or_else(|| panic!("{message:?}"));
    let lines: Vec<&str> = diff.lines().collect();
    assert_eq!(
        lines.first(),
        Some(&"  core.PersistentVolumeClaimSpec{"),
        "{diff}"
    );
    assert_eq!(lines.last().map(|l| l.trim_end()), Some("  }"), "{diff}");
    // The changed access mode on a `-` and a `+` line (go-cmp may print the field whole or
    // diff the slice element by element).
    let changed = |sign: &str, mode: &str| {
        lines
            .iter()
            .any(|l| l.starts_with(sign) && l.contains(&format!("\"{mode}\"")))
    };
    assert!(changed("-", "ReadWriteOnce"), "{diff}");
    assert!(changed("+", "ReadWriteMany"), "{diff}");
}

/// StorageClasses: `provisioner` is required; `reclaimPolicy` defaults to `Delete` and
/// `volumeBindingMode` to `Immediate`.
#[tokio::test]
async fn a_storage_class_is_validated_and_defaulted() {
    let t = Target::new().await;
    let path = "/apis/storage.k8s.io/v1/storageclasses";
    let name = format!("{}-class", t.namespace());
    let r = t
        .send_json(
            Method::POST,
            path,
            &json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name}}),
        )
        .await;
    let message = assert_status(&r, 422, "Invalid");
    assert!(message.contains("provisioner: Required value"), "{message}");
    let r = t
        .send_json(
            Method::POST,
            path,
            &json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                    "metadata": {"name": name}, "provisioner": "example.com/none"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    assert_eq!(created["reclaimPolicy"], "Delete", "{created}");
    assert_eq!(created["volumeBindingMode"], "Immediate", "{created}");
    let r = t
        .request(
            Method::DELETE,
            &format!("{path}/{name}"),
            None,
            None,
            Vec::new(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

/// Discovery lists `persistentvolumeclaims` (short name `pvc`, with `status`) in the core
/// group and `storageclasses` (short name `sc`, cluster-scoped) in `storage.k8s.io/v1`; the
/// table of claims has kubectl's columns.
#[tokio::test]
async fn discovery_and_tables_of_claims_and_classes() {
    let t = Target::new().await;
    let core = t.get("/api/v1").await.json();
    let find = |list: &Value, name: &str| {
        list["resources"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["name"] == name).cloned())
            .unwrap_or_else(|| panic!("{name} not in {list}"))
    };
    let pvc = find(&core, "persistentvolumeclaims");
    assert_eq!(pvc["shortNames"], json!(["pvc"]));
    assert_eq!(pvc["namespaced"], true);
    find(&core, "persistentvolumeclaims/status");
    let storage = t.get("/apis/storage.k8s.io/v1").await.json();
    let sc = find(&storage, "storageclasses");
    assert_eq!(sc["shortNames"], json!(["sc"]));
    assert_eq!(sc["namespaced"], false);
    let r = t
        .request(
            Method::GET,
            &t.core_path("persistentvolumeclaims"),
            None,
            Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
            Vec::new(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let table = r.json();
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "Name",
            "Status",
            "Volume",
            "Capacity",
            "Access Modes",
            "StorageClass",
            "VolumeAttributesClass",
            "Age",
            "VolumeMode"
        ]
    );
}

/// Needs a scheduler: a pod whose claim does not exist stays Pending, `PodScheduled: False`,
/// `Unschedulable`, with the VolumeBinding plugin's PreFilter message in FitError's wording.
#[tokio::test]
async fn a_pod_whose_claim_is_missing_is_unschedulable() {
    let t = Target::new().await;
    if !t.has_nodes().await {
        eprintln!("skipped: needs a node (scheduler)");
        return;
    }
    let nodes = t.node_count().await;
    let mut body = pod("claimless");
    body["spec"]["volumes"] =
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "nope"}}]);
    assert_eq!(t.create_pod(&body).await.status, 201);
    let want = format!(
        "0/{nodes} nodes are available: persistentvolumeclaim \"nope\" not found. preemption: 0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling."
    );
    let mut last = Value::Null;
    for _ in 0..200 {
        let got = t
            .get(&format!("{}/claimless", t.core_path("pods")))
            .await
            .json();
        let scheduled = got["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "PodScheduled").cloned());
        if let Some(c) = scheduled
            && c["status"] == "False"
        {
            assert_eq!(c["reason"], "Unschedulable", "{c}");
            assert_eq!(c["message"], want, "{c}");
            return;
        }
        last = got;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never unschedulable: {last}");
}

/// Needs a kubelet: a container whose env reads a key of a Secret that does not exist waits
/// in `CreateContainerConfigError` with the API's NotFound text as its message.
#[tokio::test]
async fn a_missing_secret_in_env_is_a_create_container_config_error() {
    let t = Target::new().await;
    if !t.has_nodes().await {
        eprintln!("skipped: needs a node (kubelet)");
        return;
    }
    let mut body = pod("secretless");
    body["spec"]["containers"][0]["env"] = json!([{"name": "PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": "app-creds", "key": "password"}}}]);
    assert_eq!(t.create_pod(&body).await.status, 201);
    let mut last = Value::Null;
    for _ in 0..600 {
        let got = t
            .get(&format!("{}/secretless", t.core_path("pods")))
            .await
            .json();
        let waiting = &got["status"]["containerStatuses"][0]["state"]["waiting"];
        if waiting["reason"] == "CreateContainerConfigError" {
            assert_eq!(
                waiting["message"], "secret \"app-creds\" not found",
                "{got}"
            );
            assert_eq!(got["status"]["phase"], "Pending", "{got}");
            return;
        }
        last = got;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never CreateContainerConfigError: {last}");
}

/// Needs a kubelet: a secret volume whose Secret does not exist cannot be set up: a Warning
/// `FailedMount` event `MountVolume.SetUp failed for volume "creds" : secret "app-creds" not
/// found`, and the container stays in `ContainerCreating`.
#[tokio::test]
async fn a_missing_secret_volume_is_a_failed_mount() {
    let t = Target::new().await;
    if !t.has_nodes().await {
        eprintln!("skipped: needs a node (kubelet)");
        return;
    }
    let mut body = pod("mountless");
    body["spec"]["volumes"] = json!([{"name": "creds", "secret": {"secretName": "app-creds"}}]);
    body["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "creds", "mountPath": "/creds"}]);
    assert_eq!(t.create_pod(&body).await.status, 201);
    let want = "MountVolume.SetUp failed for volume \"creds\" : secret \"app-creds\" not found";
    for _ in 0..600 {
        let events = t
            .get(&format!(
                "{}?fieldSelector=involvedObject.name%3Dmountless",
                t.core_path("events")
            ))
            .await
            .json();
        let found = events["items"].as_array().is_some_and(|items| {
            items.iter().any(|e| {
                e["reason"] == "FailedMount" && e["type"] == "Warning" && e["message"] == want
            })
        });
        if found {
            let got = t
                .get(&format!("{}/mountless", t.core_path("pods")))
                .await
                .json();
            assert_eq!(got["status"]["phase"], "Pending", "{got}");
            assert_eq!(
                got["status"]["containerStatuses"][0]["state"]["waiting"]["reason"],
                "ContainerCreating",
                "{got}"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no FailedMount event");
}

/// A deleted claim no pod uses loses its `kubernetes.io/pvc-protection` finalizer (the
/// pvc-protection controller, pkg/controller/volume/pvcprotection) and goes.
#[tokio::test]
async fn a_deleted_claim_no_pod_uses_goes() {
    let t = Target::new().await;
    let path = t.core_path("persistentvolumeclaims");
    assert_eq!(
        t.send_json(Method::POST, &path, &claim("gone"))
            .await
            .status,
        201
    );
    let r = t
        .request(
            Method::DELETE,
            &format!("{path}/gone"),
            None,
            None,
            Vec::new(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    for _ in 0..200 {
        if t.get(&format!("{path}/gone")).await.status == 404 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the claim stayed");
}
