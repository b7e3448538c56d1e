//! Secrets, ConfigMaps and ServiceAccounts: create, read, list, watch, update, apply,
//! immutability and validation, as kube-apiserver 1.32 serves them.
//!
//! Upstream: pkg/apis/core/validation/validation.go (`ValidateSecret`, `ValidateSecretUpdate`,
//! `ValidateConfigMap`, `ValidateConfigMapUpdate`, `IsConfigMapKey` in apimachinery's
//! pkg/util/validation), pkg/apis/core/v1/conversion.go (`stringData` merged into `data`),
//! pkg/apis/core/v1/defaults.go (`SetDefaults_Secret`), pkg/registry/core/secret/strategy.go
//! (field selector `type`), pkg/printers/internalversion/printers.go (table columns), and
//! pkg/controller/serviceaccount/serviceaccounts_controller.go (a `default` account per
//! namespace).

use http::Method;
use podline_conformance::{Target, assert_status};
use serde_json::{Value, json};

fn events(body: &str) -> Vec<Value> {
    body.lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a watch event ({e}): {line}"))
        })
        .collect()
}

fn secret(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name},
        // "cw==" is base64 of "s".
        "data": {"kept": "cw==", "over": "cw=="},
        "stringData": {"over": "written", "plain": "text"}
    })
}

/// A Secret's `stringData` is merged into `data` on create (its values win), is never
/// returned, `type` defaults to `Opaque`, and a GET, a LIST and a `type` field selector serve
/// it back as stored.
#[tokio::test]
async fn a_secrets_string_data_is_merged_into_data_and_never_returned() {
    let t = Target::new().await;
    let path = t.core_path("secrets");
    let r = t.send_json(Method::POST, &path, &secret("merged")).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    assert_eq!(created["type"], "Opaque", "{created}");
    assert!(created.get("stringData").is_none(), "{created}");
    assert_eq!(
        created["data"],
        json!({"kept": "cw==", "over": "d3JpdHRlbg==", "plain": "dGV4dA=="}),
        "{created}"
    );
    let got = t.get(&format!("{path}/merged")).await.json();
    assert_eq!(got["data"], created["data"]);
    assert!(got.get("stringData").is_none(), "{got}");
    let list = t.get(&format!("{path}?fieldSelector=type%3DOpaque")).await;
    assert_eq!(list.status, 200, "{}", list.text());
    let list = list.json();
    assert_eq!(list["kind"], "SecretList");
    let names: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert!(names.contains(&"merged"), "{list}");
    let none = t
        .get(&format!("{path}?fieldSelector=type%3Dkubernetes.io%2Ftls"))
        .await
        .json();
    assert_eq!(none["items"], json!([]), "{none}");
}

/// An immutable Secret refuses a change of `data` (through `stringData` too) and of
/// `immutable` with 422 and `field is immutable when `immutable` is set`; its metadata may
/// still change.
#[tokio::test]
async fn an_immutable_secret_refuses_data_changes() {
    let t = Target::new().await;
    let path = t.core_path("secrets");
    let mut body = secret("frozen");
    body["immutable"] = json!(true);
    let r = t.send_json(Method::POST, &path, &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let merge = |patch: Value| {
        let path = format!("{path}/frozen");
        let t = &t;
        async move {
            t.request(
                Method::PATCH,
                &path,
                Some("application/merge-patch+json"),
                Some("application/json"),
                patch.to_string().into_bytes(),
            )
            .await
        }
    };
    let r = merge(json!({"stringData": {"kept": "changed"}})).await;
    let message = assert_status(&r, 422, "Invalid");
    assert_eq!(
        message,
        "Secret \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    let r = merge(json!({"immutable": false})).await;
    let message = assert_status(&r, 422, "Invalid");
    assert_eq!(
        message,
        "Secret \"frozen\" is invalid: immutable: Forbidden: field is immutable when `immutable` is set"
    );
    let r = merge(json!({"metadata": {"labels": {"a": "b"}}})).await;
    assert_eq!(r.status, 200, "{}", r.text());
}

/// The `kubernetes.io/*` types require their keys (tls: `tls.crt` and `tls.key`; basic-auth:
/// a username or a password; dockerconfigjson: `.dockerconfigjson`), keys must be config keys,
/// the values may total at most 1 MiB, and `type` cannot change.
#[tokio::test]
async fn secrets_are_validated_as_kube_apiserver_validates_them() {
    let t = Target::new().await;
    let path = t.core_path("secrets");
    let create = |body: Value| {
        let t = &t;
        let path = path.clone();
        async move { t.send_json(Method::POST, &path, &body).await }
    };
    let r = create(
        json!({"metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
        "data": {"tls.crt": "Yw=="}}),
    )
    .await;
    let message = assert_status(&r, 422, "Invalid");
    assert_eq!(
        message,
        "Secret \"tls\" is invalid: data[tls.key]: Required value"
    );
    let r = create(json!({"metadata": {"name": "auth"}, "type": "kubernetes.io/basic-auth"})).await;
    let message = assert_status(&r, 422, "Invalid");
    assert_eq!(
        message,
        "Secret \"auth\" is invalid: [data[username]: Required value, data[password]: Required value]"
    );
    let r =
        create(json!({"metadata": {"name": "docker"}, "type": "kubernetes.io/dockerconfigjson"}))
            .await;
    let message = assert_status(&r, 422, "Invalid");
    assert_eq!(
        message,
        "Secret \"docker\" is invalid: data[.dockerconfigjson]: Required value"
    );
    let r = create(json!({"metadata": {"name": "key"}, "stringData": {"a/b": "x"}})).await;
    let message = assert_status(&r, 422, "Invalid");
    assert_eq!(
        message,
        "Secret \"key\" is invalid: data[a/b]: Invalid value: \"a/b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
    );
    let big = "x".repeat(1024 * 1024 + 1);
    let r = create(json!({"metadata": {"name": "big"}, "stringData": {"big": big}})).await;
    let message = assert_status(&r, 422, "Invalid");
    assert!(
        message.starts_with("Secret \"big\" is invalid: data: Too long:")
            && message.contains("1048576 bytes"),
        "{message}"
    );
    let r = create(json!({"metadata": {"name": "typed"}})).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let mut typed = r.json();
    typed["type"] = json!("kubernetes.io/basic-auth");
    typed["stringData"] = json!({"username": "u"});
    let r = t
        .send_json(Method::PUT, &format!("{path}/typed"), &typed)
        .await;
    let message = assert_status(&r, 422, "Invalid");
    assert_eq!(
        message,
        "Secret \"typed\" is invalid: type: Invalid value: \"kubernetes.io/basic-auth\": field is immutable"
    );
}

/// A watch of secrets sees their changes with `data` and without `stringData`.
#[tokio::test]
async fn a_watch_of_secrets_sees_changes_without_string_data() {
    let t = Target::new().await;
    let path = t.core_path("secrets");
    let r = t.send_json(Method::POST, &path, &secret("watched")).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let rv = r.json()["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();
    let r = t
        .request(
            Method::PATCH,
            &format!("{path}/watched"),
            Some("application/merge-patch+json"),
            Some("application/json"),
            json!({"stringData": {"more": "v"}})
                .to_string()
                .into_bytes(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let body = t
        .get(&format!(
            "{path}?watch=true&resourceVersion={rv}&timeoutSeconds=1"
        ))
        .await
        .text();
    let events = events(&body);
    assert_eq!(events.len(), 1, "{body}");
    assert_eq!(events[0]["type"], "MODIFIED");
    let object = &events[0]["object"];
    assert_eq!(object["kind"], "Secret");
    assert_eq!(object["data"]["more"], "dg==", "{object}");
    assert!(object.get("stringData").is_none(), "{object}");
}

/// ConfigMaps: created with `data` and `binaryData`, a key in both is refused, an immutable
/// one refuses changes of `data`, and a server-side apply creates and updates one.
#[tokio::test]
async fn config_maps_are_created_validated_frozen_and_applied() {
    let t = Target::new().await;
    let path = t.core_path("configmaps");
    let r = t
        .send_json(
            Method::POST,
            &path,
            &json!({"metadata": {"name": "both"}, "data": {"k": "v"}, "binaryData": {"k": "AA=="}}),
        )
        .await;
    let message = assert_status(&r, 422, "Invalid");
    assert_eq!(
        message,
        "ConfigMap \"both\" is invalid: [data[k]: Invalid value: \"k\": duplicate of key present in binaryData, binaryData[k]: Invalid value: \"k\": duplicate of key present in data]"
    );
    let r = t
        .send_json(
            Method::POST,
            &path,
            &json!({"metadata": {"name": "settings"}, "data": {"mode": "fast"},
                "binaryData": {"blob": "AP8="}, "immutable": true}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let mut changed = r.json();
    assert_eq!(changed["binaryData"]["blob"], "AP8=");
    changed["data"]["mode"] = json!("slow");
    let r = t
        .send_json(Method::PUT, &format!("{path}/settings"), &changed)
        .await;
    let message = assert_status(&r, 422, "Invalid");
    assert_eq!(
        message,
        "ConfigMap \"settings\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    let apply = |value: &str| {
        let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "applied"}, "data": {"mode": value}});
        let t = &t;
        let path = format!("{path}/applied?fieldManager=tester");
        async move {
            t.request(
                Method::PATCH,
                &path,
                Some("application/apply-patch+yaml"),
                Some("application/json"),
                config.to_string().into_bytes(),
            )
            .await
        }
    };
    let r = apply("one").await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = apply("two").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["data"]["mode"], "two");
}

/// Every namespace gets a ServiceAccount named `default` (made by kube-controller-manager's
/// serviceaccount controller shortly after the namespace is added, so this waits for it), and
/// more can be created.
#[tokio::test]
async fn every_namespace_gets_a_default_service_account() {
    let t = Target::new().await;
    let path = t.core_path("serviceaccounts");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let r = t.get(&format!("{path}/default")).await;
        if r.status == 200 {
            let account = r.json();
            assert_eq!(account["kind"], "ServiceAccount");
            assert_eq!(account["metadata"]["namespace"], t.namespace());
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no default ServiceAccount: {}",
            r.text()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let r = t
        .send_json(Method::POST, &path, &json!({"metadata": {"name": "robot"}}))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = t
        .send_json(
            Method::POST,
            &path,
            &json!({"metadata": {"name": "Bad_Name"}}),
        )
        .await;
    assert_status(&r, 422, "Invalid");
}

/// Discovery lists the three kinds in the core group with kube-apiserver's short names, and
/// their Tables carry kubectl's columns (secrets: Name, Type, Data, Age; configmaps: Name, Data,
/// Age; serviceaccounts: Name, Secrets, Age).
#[tokio::test]
async fn discovery_and_tables_of_secrets_config_maps_and_service_accounts() {
    let t = Target::new().await;
    let core = t.get("/api/v1").await.json();
    let find = |name: &str| {
        core["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not in discovery"))
    };
    assert_eq!(find("secrets")["kind"], "Secret");
    assert_eq!(find("configmaps")["shortNames"], json!(["cm"]));
    assert_eq!(find("serviceaccounts")["shortNames"], json!(["sa"]));
    assert_eq!(find("secrets")["storageVersionHash"], "S6u1pOWzb84=");
    let r = t
        .send_json(Method::POST, &t.core_path("secrets"), &secret("shown"))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let table_of = |resource: &str| {
        let t = &t;
        let path = t.core_path(resource);
        async move {
            t.request(
                Method::GET,
                &path,
                None,
                Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
                Vec::new(),
            )
            .await
            .json()
        }
    };
    let names = |table: &Value| -> Vec<String> {
        table["columnDefinitions"]
            .as_array()
            .expect("columns")
            .iter()
            .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let secrets = table_of("secrets").await;
    assert_eq!(names(&secrets), ["Name", "Type", "Data", "Age"]);
    let row = secrets["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["cells"][0] == "shown")
        .cloned()
        .expect("the secret's row");
    assert_eq!(row["cells"][1], "Opaque");
    assert_eq!(row["cells"][2], 3);
    assert_eq!(
        names(&table_of("configmaps").await),
        ["Name", "Data", "Age"]
    );
    assert_eq!(
        names(&table_of("serviceaccounts").await),
        ["Name", "Secrets", "Age"]
    );
}

/// The system PriorityClasses exist (`system-node-critical` 2000001000,
/// `system-cluster-critical` 2000000000: pkg/registry/scheduling/rest/storage_scheduling.go),
/// a pod naming one gets its value as `spec.priority`, a pod naming an unknown class is 403
/// Forbidden with the Priority admission's message
/// (plugin/pkg/admission/priority/admission.go), and user classes above 1000000000 are refused
/// (pkg/apis/scheduling/validation/validation.go).
#[tokio::test]
async fn priority_classes_resolve_a_pods_priority_and_an_unknown_one_is_forbidden() {
    let t = Target::new().await;
    let classes = "/apis/scheduling.k8s.io/v1/priorityclasses";
    let critical = t
        .get(&format!("{classes}/system-cluster-critical"))
        .await
        .json();
    assert_eq!(critical["value"], 2_000_000_000, "{critical}");
    let node = t
        .get(&format!("{classes}/system-node-critical"))
        .await
        .json();
    assert_eq!(node["value"], 2_000_001_000, "{node}");

    let mut pod = podline_conformance::pod("critical");
    pod["spec"]["priorityClassName"] = json!("system-cluster-critical");
    let r = t.send_json(Method::POST, &t.core_path("pods"), &pod).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    assert_eq!(created["spec"]["priority"], 2_000_000_000, "{created}");
    assert_eq!(created["spec"]["preemptionPolicy"], "PreemptLowerPriority");

    let mut pod = podline_conformance::pod("unknown-class");
    pod["spec"]["priorityClassName"] = json!("no-such-class");
    let r = t.send_json(Method::POST, &t.core_path("pods"), &pod).await;
    let message = assert_status(&r, 403, "Forbidden");
    assert_eq!(
        message,
        "pods \"unknown-class\" is forbidden: no PriorityClass with name no-such-class was found"
    );

    let name = format!("podline-too-high-{}", t.namespace());
    let r = t
        .send_json(
            Method::POST,
            classes,
            &json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name}, "value": 1_000_000_001}),
        )
        .await;
    let message = assert_status(&r, 422, "Invalid");
    assert_eq!(
        message,
        format!(
            "PriorityClass.scheduling.k8s.io \"{name}\" is invalid: value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
        )
    );
}

/// kube-controller-manager's root-ca-cert-publisher
/// (pkg/controller/certificates/rootcacertpublisher/publisher.go) puts a ConfigMap
/// `kube-root-ca.crt` with the cluster's CA bundle under `ca.crt` into every namespace, and
/// makes it again when it is deleted.
#[tokio::test]
async fn every_namespace_gets_the_kube_root_ca_config_map() {
    let t = Target::new().await;
    let path = format!("{}/kube-root-ca.crt", t.core_path("configmaps"));
    let mut published = Value::Null;
    for _ in 0..100 {
        let r = t.get(&path).await;
        if r.status == 200 {
            published = r.json();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let ca = published["data"]["ca.crt"].as_str().unwrap_or_default();
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{published}");
    let r = t
        .request(Method::DELETE, &path, None, None, Vec::new())
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    for _ in 0..100 {
        let r = t.get(&path).await;
        if r.status == 200 {
            assert_eq!(r.json()["data"]["ca.crt"], ca);
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("kube-root-ca.crt was not made again");
}

/// The projected volume the ServiceAccount admission adds (`TokenVolumeSource` in
/// plugin/pkg/admission/serviceaccount/admission.go): a token for 3607 s
/// (`WarnOnlyBoundTokenExpirationSeconds`), the `kube-root-ca.crt` ConfigMap's `ca.crt` and
/// the namespace, mode 420.
fn token_volume_source() -> Value {
    json!({
        "defaultMode": 420,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
        ]
    })
}

/// The names of a created pod's volumes that the ServiceAccount admission added.
fn token_volumes(pod: &Value) -> Vec<Value> {
    pod["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| {
            v["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("kube-api-access-"))
        })
        .cloned()
        .collect()
}

/// The ServiceAccount admission (plugin/pkg/admission/serviceaccount/admission.go, kube 1.32):
/// a pod whose account does not exist is 403 `error looking up service account NS/SA:
/// serviceaccount "SA" not found` (`getServiceAccount` answers
/// `errors.NewNotFound(api.Resource("serviceaccount"), name)`; `admission.NewForbidden` names
/// the pod, by its `generateName` before a name is generated: apiserver's
/// pkg/admission/errors.go `extractResourceName`). A pod naming none gets `default`, and
/// `serviceAccount` (deprecated) says the same (pkg/apis/core/v1/conversion.go).
#[tokio::test]
async fn a_pod_whose_service_account_does_not_exist_is_forbidden() {
    let t = Target::new().await;
    let pods = t.core_path("pods");
    let mut pod = podline_conformance::pod("no-account");
    pod["spec"]["serviceAccountName"] = json!("nobody");
    let r = t.send_json(Method::POST, &pods, &pod).await;
    let message = assert_status(&r, 403, "Forbidden");
    let ns = t.namespace();
    assert_eq!(
        message,
        format!(
            "pods \"no-account\" is forbidden: error looking up service account {ns}/nobody: serviceaccount \"nobody\" not found"
        )
    );
    let status = r.json();
    assert_eq!(status["details"]["name"], "no-account", "{status}");
    assert_eq!(status["details"]["kind"], "pods", "{status}");

    let mut pod = podline_conformance::pod("");
    pod["metadata"] = json!({"generateName": "gen-"});
    pod["spec"]["serviceAccount"] = json!("ghost");
    let r = t.send_json(Method::POST, &pods, &pod).await;
    let message = assert_status(&r, 403, "Forbidden");
    assert_eq!(
        message,
        format!(
            "pods \"gen-\" is forbidden: error looking up service account {ns}/ghost: serviceaccount \"ghost\" not found"
        )
    );

    let r = t
        .send_json(
            Method::POST,
            &t.core_path("serviceaccounts"),
            &json!({"metadata": {"name": "robot"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let mut pod = podline_conformance::pod("robot-pod");
    pod["spec"]["serviceAccountName"] = json!("robot");
    let r = t.send_json(Method::POST, &pods, &pod).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    assert_eq!(created["spec"]["serviceAccountName"], "robot");
    assert_eq!(created["spec"]["serviceAccount"], "robot");

    let r = t
        .send_json(Method::POST, &pods, &podline_conformance::pod("plain"))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    assert_eq!(created["spec"]["serviceAccountName"], "default");
    assert_eq!(created["spec"]["serviceAccount"], "default");
}

/// The ServiceAccount admission mounts the account's token (`mountServiceAccountToken` in
/// plugin/pkg/admission/serviceaccount/admission.go): one projected volume named
/// `kube-api-access-` and five characters of the name generator's alphabet
/// (apiserver's pkg/storage/names), appended to the pod's volumes, and a read-only mount of it
/// at `/var/run/secrets/kubernetes.io/serviceaccount` appended to every init container and
/// container, except one that already mounts something at that path.
#[tokio::test]
async fn the_service_account_admission_mounts_the_token_volume() {
    let t = Target::new().await;
    let mut pod = podline_conformance::pod("mounted");
    pod["spec"]["initContainers"] = json!([{"name": "init", "image": "busybox:1.36",
        "command": ["true"]}]);
    pod["spec"]["containers"] = json!([
        {"name": "main", "image": "busybox:1.36", "command": ["true"],
         "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]},
        {"name": "own", "image": "busybox:1.36", "command": ["true"],
         "volumeMounts": [{"name": "scratch",
             "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}
    ]);
    pod["spec"]["volumes"] = json!([{"name": "scratch", "emptyDir": {}}]);
    let r = t.send_json(Method::POST, &t.core_path("pods"), &pod).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    let volumes = created["spec"]["volumes"].as_array().expect("volumes");
    assert_eq!(volumes.len(), 2, "{created}");
    assert_eq!(volumes[0]["name"], "scratch");
    let name = volumes[1]["name"].as_str().expect("name");
    let suffix = name.strip_prefix("kube-api-access-").expect("prefix");
    assert_eq!(suffix.len(), 5, "{name}");
    assert!(
        suffix
            .chars()
            .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
        "{name}"
    );
    assert_eq!(volumes[1]["projected"], token_volume_source(), "{created}");
    let mount = json!({"name": name, "readOnly": true,
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"});
    assert_eq!(
        created["spec"]["initContainers"][0]["volumeMounts"],
        json!([mount])
    );
    assert_eq!(
        created["spec"]["containers"][0]["volumeMounts"],
        json!([{"name": "scratch", "mountPath": "/scratch"}, mount])
    );
    assert_eq!(
        created["spec"]["containers"][1]["volumeMounts"],
        json!([{"name": "scratch", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}])
    );
}

/// `automountServiceAccountToken: false` on the pod, or else on its ServiceAccount, keeps the
/// token volume out; the pod's own setting wins over the account's (`shouldAutomount` in
/// plugin/pkg/admission/serviceaccount/admission.go). A pod without `imagePullSecrets` gets its
/// account's.
#[tokio::test]
async fn automount_false_on_the_pod_or_its_account_keeps_the_token_out() {
    let t = Target::new().await;
    let pods = t.core_path("pods");
    let mut pod = podline_conformance::pod("pod-says-no");
    pod["spec"]["automountServiceAccountToken"] = json!(false);
    let r = t.send_json(Method::POST, &pods, &pod).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    assert!(token_volumes(&created).is_empty(), "{created}");
    assert!(
        created["spec"]["containers"][0]["volumeMounts"].is_null(),
        "{created}"
    );

    let r = t
        .send_json(
            Method::POST,
            &t.core_path("serviceaccounts"),
            &json!({"metadata": {"name": "quiet"}, "automountServiceAccountToken": false,
                "imagePullSecrets": [{"name": "registry"}]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let mut pod = podline_conformance::pod("account-says-no");
    pod["spec"]["serviceAccountName"] = json!("quiet");
    let r = t.send_json(Method::POST, &pods, &pod).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    assert!(token_volumes(&created).is_empty(), "{created}");
    assert_eq!(
        created["spec"]["imagePullSecrets"],
        json!([{"name": "registry"}])
    );

    let mut pod = podline_conformance::pod("pod-says-yes");
    pod["spec"]["serviceAccountName"] = json!("quiet");
    pod["spec"]["automountServiceAccountToken"] = json!(true);
    pod["spec"]["imagePullSecrets"] = json!([{"name": "mine"}]);
    let r = t.send_json(Method::POST, &pods, &pod).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    assert_eq!(token_volumes(&created).len(), 1, "{created}");
    assert_eq!(
        created["spec"]["imagePullSecrets"],
        json!([{"name": "mine"}])
    );
}
