//! Real kubectl against the sim's Secrets, ConfigMaps and ServiceAccounts: `kubectl create
//! secret generic`, `kubectl create configmap --from-literal` (both sent as protobuf by kubectl),
//! and `kubectl get sa` (the `default` account every namespace gets), each printed with
//! kubectl's server-side table columns. And a secret's value, followed through a create, a
//! read, refused writes and a delete, never reaches the sim's logs or its audit stream.

use std::time::Duration;

use super::kubectl_kit::{failed, kubectl, ok};
use podline_sim::{Sim, SimConfig};

async fn https_sim() -> Sim {
    podline_testkit::start_sim(SimConfig::default().kubelet_enabled(false)).await
}

/// The words of a table's lines, without the AGE column's value (it changes).
fn words(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[tokio::test]
async fn kubectl_create_secret_generic_stores_it_and_get_prints_type_and_data_count() {
    let sim = https_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let path = kc.path();
    ok(&kubectl(
        path,
        &[
            "create",
            "secret",
            "generic",
            "db",
            "--from-literal=user=admin",
            "--from-literal=password=hunter2",
        ],
    )
    .await);
    let json = ok(&kubectl(path, &["get", "secret", "db", "-o", "json"]).await);
    let secret: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(secret["type"], "Opaque");
    assert_eq!(secret["data"]["user"], "YWRtaW4=", "base64 of admin");
    assert_eq!(secret["data"]["password"], "aHVudGVyMg==");
    let table = ok(&kubectl(path, &["get", "secrets"]).await);
    let rows = words(&table);
    assert_eq!(rows[0], ["NAME", "TYPE", "DATA", "AGE"], "{table}");
    assert_eq!(rows[1][..3], ["db", "Opaque", "2"], "{table}");
    // A typed secret missing its keys is refused as kube-apiserver refuses it.
    let tls = kubectl(
        path,
        &[
            "create",
            "secret",
            "generic",
            "half-tls",
            "--type=kubernetes.io/tls",
            "--from-literal=tls.crt=c",
        ],
    )
    .await;
    let stderr = failed(&tls);
    assert!(stderr.contains("data[tls.key]: Required value"), "{stderr}");
    sim.shutdown().await;
}

#[tokio::test]
async fn kubectl_create_configmap_from_literal_stores_it_and_get_prints_the_data_count() {
    let sim = https_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let path = kc.path();
    ok(&kubectl(
        path,
        &[
            "create",
            "configmap",
            "settings",
            "--from-literal=mode=fast",
            "--from-literal=level=3",
        ],
    )
    .await);
    let json = ok(&kubectl(path, &["get", "configmap", "settings", "-o", "json"]).await);
    let config: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(
        config["data"],
        serde_json::json!({"mode": "fast", "level": "3"})
    );
    let table = ok(&kubectl(path, &["get", "cm"]).await);
    let rows = words(&table);
    assert_eq!(rows[0], ["NAME", "DATA", "AGE"], "{table}");
    // Each namespace also has kube-root-ca.crt (the root-ca-cert-publisher's), as on a cluster.
    assert!(
        rows.iter().any(|r| r[..2] == ["kube-root-ca.crt", "1"]),
        "{table}"
    );
    let row = rows
        .iter()
        .find(|r| r[0] == "settings")
        .expect("settings row");
    assert_eq!(row[..2], ["settings", "2"], "{table}");
    // Immutable: kubectl edits are refused with kube's message.
    ok(&kubectl(
        path,
        &[
            "patch",
            "configmap",
            "settings",
            "--type=merge",
            "-p",
            r#"{"immutable":true}"#,
        ],
    )
    .await);
    let refused = kubectl(
        path,
        &[
            "patch",
            "configmap",
            "settings",
            "--type=merge",
            "-p",
            r#"{"data":{"mode":"slow"}}"#,
        ],
    )
    .await;
    let stderr = failed(&refused);
    assert!(
        stderr.contains("data: Forbidden: field is immutable when `immutable` is set"),
        "{stderr}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn kubectl_get_sa_lists_the_default_account_of_each_namespace() {
    let sim = https_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let path = kc.path();
    let table = ok(&kubectl(path, &["get", "sa"]).await);
    let rows = words(&table);
    assert_eq!(rows[0], ["NAME", "SECRETS", "AGE"], "{table}");
    assert_eq!(rows[1][..2], ["default", "0"], "{table}");
    let all = ok(&kubectl(path, &["get", "serviceaccounts", "-A", "-o", "name"]).await);
    assert_eq!(all.lines().count(), 4, "one per initial namespace: {all}");
    ok(&kubectl(path, &["create", "namespace", "team-a"]).await);
    // The controller makes it as the namespace is added, as kube-controller-manager does.
    let mut found = String::new();
    for _ in 0..100 {
        found = ok(&kubectl(path, &["get", "sa", "-n", "team-a", "-o", "name"]).await);
        if !found.trim().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(found.trim(), "serviceaccount/default");
    ok(&kubectl(path, &["create", "serviceaccount", "robot", "-n", "team-a"]).await);
    let names = ok(&kubectl(path, &["get", "sa", "-n", "team-a", "-o", "name"]).await);
    assert_eq!(
        names.lines().collect::<Vec<_>>(),
        ["serviceaccount/default", "serviceaccount/robot"]
    );
    sim.shutdown().await;
}

/// Everything logged through `tracing` at any level, as text (a subscriber of this test's own:
/// the shared test logger keeps warnings only).
#[derive(Clone, Default)]
struct Capture(std::sync::Arc<std::sync::Mutex<String>>);

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write;
        let _ = write!(self.0, "{}={value:?} ", field.name());
    }
}

impl Capture {
    fn text(&self) -> String {
        self.0.lock().expect("capture").clone()
    }
    fn add(&self, record: impl FnOnce(&mut Fields<'_>)) {
        let mut text = self.0.lock().expect("capture");
        record(&mut Fields(&mut text));
        text.push('\n');
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        self.add(|f| span.record(f));
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        self.add(|f| values.record(f));
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        self.add(|f| {
            f.0.push_str(event.metadata().target());
            f.0.push(' ');
            event.record(f);
        });
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// A secret's value never reaches the sim's logs (any level) or its audit stream: not on
/// create, read, a refused update of an immutable secret, a refused invalid create, or delete.
#[tokio::test]
async fn kubectl_secret_values_never_reach_the_sims_logs_or_audit() {
    let logs = Capture::default();
    // nextest runs each test in its own process, so this test's subscriber is the process's.
    tracing::subscriber::set_global_default(logs.clone()).expect("the first subscriber");
    let sim = https_sim().await;
    let mut audit = sim.audit();
    let kc = podline_testkit::kubeconfig_file(&sim);
    let path = kc.path();
    const MARKER: &str = "Zebra-Marker-7f3a9c";
    ok(&kubectl(
        path,
        &[
            "create",
            "secret",
            "generic",
            "marked",
            &format!("--from-literal=token={MARKER}"),
        ],
    )
    .await);
    let got = ok(&kubectl(path, &["get", "secret", "marked", "-o", "yaml"]).await);
    assert!(got.contains("token:"), "{got}");
    ok(&kubectl(
        path,
        &[
            "patch",
            "secret",
            "marked",
            "--type=merge",
            "-p",
            r#"{"immutable":true}"#,
        ],
    )
    .await);
    let refused = kubectl(
        path,
        &[
            "patch",
            "secret",
            "marked",
            "--type=merge",
            "-p",
            &format!(r#"{{"stringData":{{"token":"{MARKER}-2"}}}}"#),
        ],
    )
    .await;
    let stderr = failed(&refused);
    assert!(!stderr.contains(MARKER), "{stderr}");
    let bad = kubectl(
        path,
        &[
            "create",
            "secret",
            "generic",
            "bad-docker",
            "--type=kubernetes.io/dockerconfigjson",
            &format!("--from-literal=.dockerconfigjson={MARKER}"),
        ],
    )
    .await;
    let stderr = failed(&bad);
    assert!(stderr.contains("<secret contents redacted>"), "{stderr}");
    assert!(!stderr.contains(MARKER), "{stderr}");
    ok(&kubectl(path, &["delete", "secret", "marked"]).await);
    sim.shutdown().await;
    let mut entries = 0;
    while let Ok(entry) = audit.try_recv() {
        entries += 1;
        assert!(!format!("{entry:?}").contains(MARKER), "{entry:?}");
    }
    assert!(entries >= 5, "the audit stream saw the requests: {entries}");
    let logs = logs.text();
    assert!(!logs.is_empty(), "the sim logged at trace level");
    assert!(!logs.contains(MARKER), "a secret value was logged: {logs}");
}

/// `kubectl get priorityclasses` lists the two system classes with kubectl's columns, and
/// `kubectl run` with an unknown class is refused with the Priority admission's 403.
#[tokio::test]
async fn kubectl_get_pc_lists_the_system_classes_and_an_unknown_class_is_forbidden() {
    let sim = https_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let path = kc.path();
    let table = ok(&kubectl(path, &["get", "pc"]).await);
    let rows = words(&table);
    assert_eq!(
        rows[0],
        ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"],
        "{table}"
    );
    assert_eq!(
        rows[1][..3],
        ["system-cluster-critical", "2000000000", "false"]
    );
    assert_eq!(
        rows[2][..3],
        ["system-node-critical", "2000001000", "false"]
    );
    let refused = kubectl(
        path,
        &[
            "run",
            "p",
            "--image=busybox",
            "--restart=Never",
            r#"--overrides={"spec":{"priorityClassName":"nope"}}"#,
        ],
    )
    .await;
    let stderr = failed(&refused);
    assert!(
        stderr.contains("no PriorityClass with name nope was found"),
        "{stderr}"
    );
    sim.shutdown().await;
}

/// `kubectl create -f` of a claim with no class: the default class `standard` is filled in
/// and the claim is bound at once; `kubectl get pvc` and `kubectl get sc` print kubectl's
/// columns (the default class named `standard (default)`).
#[tokio::test]
async fn kubectl_creates_a_claim_that_binds_and_gets_claims_and_classes() {
    let sim = https_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let path = kc.path();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("pvc.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 2Gi\n",
    )
    .expect("write");
    ok(&kubectl(path, &["create", "-f", file.to_str().expect("utf-8")]).await);
    ok(&kubectl(
        path,
        &[
            "wait",
            "--for=jsonpath={.status.phase}=Bound",
            "pvc/data",
            "--timeout=20s",
        ],
    )
    .await);
    let table = ok(&kubectl(path, &["get", "pvc"]).await);
    let rows = words(&table);
    assert_eq!(
        rows[0],
        [
            "NAME",
            "STATUS",
            "VOLUME",
            "CAPACITY",
            "ACCESS",
            "MODES",
            "STORAGECLASS",
            "VOLUMEATTRIBUTESCLASS",
            "AGE"
        ],
        "{table}"
    );
    assert_eq!(rows[1][..2], ["data", "Bound"], "{table}");
    assert!(rows[1][2].starts_with("pvc-"), "{table}");
    assert_eq!(
        rows[1][3..7],
        ["2Gi", "RWO", "standard", "<unset>"],
        "{table}"
    );
    let table = ok(&kubectl(path, &["get", "sc"]).await);
    let rows = words(&table);
    assert_eq!(
        rows[0],
        [
            "NAME",
            "PROVISIONER",
            "RECLAIMPOLICY",
            "VOLUMEBINDINGMODE",
            "ALLOWVOLUMEEXPANSION",
            "AGE"
        ],
        "{table}"
    );
    assert_eq!(
        rows[1][..6],
        [
            "standard",
            "(default)",
            "rancher.io/local-path",
            "Delete",
            "Immediate",
            "false"
        ],
        "{table}"
    );
    // The spec is immutable (unbound or not, the access modes cannot change).
    let err = failed(
        &kubectl(
            path,
            &[
                "patch",
                "pvc",
                "data",
                "--type=merge",
                "-p",
                r#"{"spec":{"accessModes":["ReadWriteMany"]}}"#,
            ],
        )
        .await,
    );
    assert!(
        err.contains("spec: Forbidden: spec is immutable after creation except resources.requests"),
        "{err}"
    );
    sim.shutdown().await;
}
