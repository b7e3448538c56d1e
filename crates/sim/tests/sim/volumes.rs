//! The kubelet's references on a running sim: a pod with a secret volume, an `envFrom`
//! ConfigMap and an emptyDir shared with a sidecar runs as local processes (`--exec`), each in
//! its own mount namespace over the same volume directories; a missing Secret keeps the pod in
//! ContainerCreating (FailedMount) or its container in CreateContainerConfigError; a missing or
//! unbound claim keeps it Pending with the scheduler's message, and a claim of the default class
//! is bound at once and mounted.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event, PersistentVolumeClaim, Pod, Secret};
use kube::Api;
use kube::api::{ListParams, PostParams};
use podline_sim::{KubeletConfig, Sim, SimConfig};

use super::kubectl_kit::{kubectl, ok};

async fn exec_sim() -> Sim {
    podline_testkit::start_sim(SimConfig::default().kubelet(KubeletConfig::default().exec(true)))
        .await
}

async fn create<K>(api: &Api<K>, value: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(value).expect("object");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("created");
}

async fn secret_and_config(client: &kube::Client) {
    create(
        &Api::<Secret>::namespaced(client.clone(), "default"),
        serde_json::json!({
            "metadata": {"name": "app-creds"},
            "stringData": {"password": "s3cret"},
        }),
    )
    .await;
    create(
        &Api::<ConfigMap>::namespaced(client.clone(), "default"),
        serde_json::json!({
            "metadata": {"name": "app-settings"},
            "data": {"MODE": "fast", "REGION": "eu"},
        }),
    )
    .await;
}

/// The "Done when" pod: `main` reads the secret file and its env (from the ConfigMap and a
/// secretKeyRef), writes them into the shared emptyDir, then sleeps; `sidecar` only sleeps.
fn pod(name: &str, dir: &std::path::Path) -> serde_json::Value {
    let at = |p: &str| dir.join(p).to_str().expect("utf-8").to_owned();
    serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "volumes": [
                {"name": "creds", "secret": {"secretName": "app-creds"}},
                {"name": "shared", "emptyDir": {}},
            ],
            "containers": [
                {
                    "name": "main", "image": "busybox",
                    "command": ["sh", "-c", format!(
                        "{{ cat {creds}/password; echo; echo \"$MODE $REGION $PASSWORD $POD\"; }} > {shared}/out.txt; sleep 60",
                        creds = at("creds"), shared = at("shared"))],
                    "envFrom": [{"configMapRef": {"name": "app-settings"}}],
                    "env": [
                        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "app-creds", "key": "password"}}},
                        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    ],
                    "volumeMounts": [
                        {"name": "creds", "mountPath": at("creds")},
                        {"name": "shared", "mountPath": at("shared")},
                    ],
                },
                {
                    "name": "sidecar", "image": "busybox",
                    "command": ["sleep", "60"],
                    "volumeMounts": [{"name": "shared", "mountPath": at("data")}],
                },
            ],
        },
    })
}

async fn waiting_reason(pods: &Api<Pod>, name: &str, container: &str) -> Option<(String, String)> {
    let pod = pods.get(name).await.ok()?;
    let status = pod.status?;
    let cs = status
        .container_statuses?
        .into_iter()
        .find(|c| c.name == container)?;
    let waiting = cs.state?.waiting?;
    Some((waiting.reason?, waiting.message.unwrap_or_default()))
}

#[tokio::test]
async fn a_sidecar_reads_back_what_main_wrote_from_its_secret_and_env() {
    if !podline_sim_core::kubelet::sandbox::can_mount() {
        eprintln!("skipped: mount namespaces need root (docs/sim.md, exec mode)");
        return;
    }
    let sim = exec_sim().await;
    let client = podline_testkit::client(&sim).await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    secret_and_config(&client).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    create(&pods, pod("refs", dir.path())).await;
    let seen = std::sync::Mutex::new(String::new());
    let read = podline_testkit::wait_until(Duration::from_secs(20), || {
        let kc = kc.path().to_owned();
        let data = dir.path().join("data/out.txt");
        let seen = &seen;
        async move {
            let out = kubectl(
                &kc,
                &[
                    "exec",
                    "refs",
                    "-c",
                    "sidecar",
                    "--",
                    "cat",
                    data.to_str().unwrap(),
                ],
            )
            .await;
            *seen.lock().unwrap() = format!("{out:?}");
            String::from_utf8_lossy(&out.stdout) == "s3cret\nfast eu s3cret refs\n"
        }
    })
    .await;
    let seen = seen.into_inner().unwrap();
    assert!(read, "the sidecar did not read main's file: {seen}");
    // The volumes exist only in the pod's mount namespaces: the host sees empty mount points.
    assert!(!dir.path().join("data/out.txt").exists());
    assert!(!dir.path().join("creds/password").exists());
    // `kubectl cp` (tar through exec) copies the file out of the sidecar's view.
    let out_dir = tempfile::tempdir().expect("tempdir");
    let dest = out_dir.path().join("copied.txt");
    ok(&kubectl(
        kc.path(),
        &[
            "cp",
            "-c",
            "sidecar",
            &format!("refs:{}", dir.path().join("data/out.txt").display()),
            dest.to_str().expect("utf-8 path"),
        ],
    )
    .await);
    assert_eq!(
        std::fs::read_to_string(&dest).expect("copied"),
        "s3cret\nfast eu s3cret refs\n"
    );
    // An exec into main sees its secret volume, read-only.
    let out = kubectl(
        kc.path(),
        &[
            "exec",
            "refs",
            "-c",
            "main",
            "--",
            "sh",
            "-c",
            &format!(
                "echo x > {}/new 2>/dev/null || echo read-only",
                dir.path().join("creds").display()
            ),
        ],
    )
    .await;
    assert_eq!(ok(&out), "read-only\n");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_missing_secret_volume_is_a_failed_mount_and_a_missing_key_ref_a_config_error() {
    let sim = exec_sim().await;
    let client = podline_testkit::client(&sim).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let dir = tempfile::tempdir().expect("tempdir");
    // No Secret, no ConfigMap: the secret volume cannot be set up.
    create(&pods, pod("no-secret", dir.path())).await;
    let failed_mount = podline_testkit::wait_until(Duration::from_secs(10), || async {
        events.list(&ListParams::default()).await.is_ok_and(|l| {
            l.items.iter().any(|e| {
                e.reason.as_deref() == Some("FailedMount")
                    && e.message.as_deref()
                        == Some("MountVolume.SetUp failed for volume \"creds\" : secret \"app-creds\" not found")
            })
        })
    })
    .await;
    assert!(failed_mount, "no FailedMount event");
    assert_eq!(
        waiting_reason(&pods, "no-secret", "main")
            .await
            .map(|w| w.0)
            .as_deref(),
        Some("ContainerCreating")
    );
    // Without the volume, the env's secretKeyRef is what fails: CreateContainerConfigError.
    let mut env_only = pod("env-only", dir.path());
    env_only["spec"]["volumes"] = serde_json::json!([{"name": "shared", "emptyDir": {}}]);
    env_only["spec"]["containers"][0]["volumeMounts"] = serde_json::json!([{"name": "shared", "mountPath": dir.path().join("shared").to_str().unwrap()}]);
    env_only["spec"]["containers"][0]["envFrom"][0]["configMapRef"]["optional"] =
        serde_json::json!(true);
    create(&pods, env_only).await;
    let config_error = podline_testkit::wait_until(Duration::from_secs(10), || async {
        waiting_reason(&pods, "env-only", "main").await
            == Some((
                "CreateContainerConfigError".to_owned(),
                "secret \"app-creds\" not found".to_owned(),
            ))
    })
    .await;
    assert!(
        config_error,
        "{:?}",
        waiting_reason(&pods, "env-only", "main").await
    );
    // Once the Secret exists, both start.
    secret_and_config(&client).await;
    let running = podline_testkit::wait_until(Duration::from_secs(20), || async {
        let phase = |name: &'static str| {
            let pods = pods.clone();
            async move { pods.get(name).await.ok()?.status?.phase }
        };
        phase("no-secret").await.as_deref() == Some("Running")
            && phase("env-only").await.as_deref() == Some("Running")
    })
    .await;
    assert!(running, "the pods did not start once the Secret existed");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_claim_is_bound_at_once_and_a_missing_one_keeps_the_pod_pending() {
    let sim = podline_testkit::start_sim(SimConfig::default()).await;
    let client = podline_testkit::client(&sim).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    create(
        &pods,
        serde_json::json!({
            "metadata": {"name": "with-claim"},
            "spec": {
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                "containers": [{"name": "main", "image": "busybox",
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            },
        }),
    )
    .await;
    let message = "0/1 nodes are available: persistentvolumeclaim \"data\" not found. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.";
    let pending = podline_testkit::wait_until(Duration::from_secs(10), || async {
        pods.get("with-claim")
            .await
            .ok()
            .and_then(|p| p.status?.conditions)
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.type_ == "PodScheduled"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("Unschedulable")
                        && c.message.as_deref() == Some(message)
                })
            })
    })
    .await;
    assert!(
        pending,
        "{:?}",
        pods.get("with-claim").await.ok().and_then(|p| p.status)
    );
    create(
        &claims,
        serde_json::json!({
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }),
    )
    .await;
    let running = podline_testkit::wait_until(Duration::from_secs(10), || async {
        pods.get("with-claim")
            .await
            .ok()
            .and_then(|p| p.status?.phase)
            .as_deref()
            == Some("Running")
    })
    .await;
    assert!(running, "the pod did not start once its claim was bound");
    let claim = claims.get("data").await.expect("claim");
    assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
    let spec = claim.spec.expect("spec");
    assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));
    assert_eq!(
        spec.volume_name,
        Some(format!("pvc-{}", claim.metadata.uid.expect("uid")))
    );
    sim.shutdown().await;
}

/// The ServiceAccount admission's token volume is set up in exec mode as a kubelet sets it up:
/// a process of the pod (here `kubectl exec`) reads, at
/// `/var/run/secrets/kubernetes.io/serviceaccount`, a token, the cluster's CA bundle and its
/// namespace.
#[tokio::test]
async fn an_exec_pod_reads_its_service_account_token_ca_and_namespace() {
    if !podline_sim_core::kubelet::sandbox::can_mount() {
        eprintln!("skipped: mount namespaces need root (docs/sim.md, exec mode)");
        return;
    }
    let sim = exec_sim().await;
    let client = podline_testkit::client(&sim).await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    create(
        &pods,
        serde_json::json!({
            "metadata": {"name": "token-reader"},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "busybox", "command": ["sleep", "60"]}]},
        }),
    )
    .await;
    let dir = "/var/run/secrets/kubernetes.io/serviceaccount";
    let script = format!(
        "cat {dir}/namespace; echo; test -s {dir}/token && echo token; head -1 {dir}/ca.crt"
    );
    let seen = std::sync::Mutex::new(String::new());
    let read = podline_testkit::wait_until(Duration::from_secs(20), || {
        let kc = kc.path().to_owned();
        let (seen, script) = (&seen, &script);
        async move {
            let out = kubectl(&kc, &["exec", "token-reader", "--", "sh", "-c", script]).await;
            *seen.lock().unwrap() = format!("{out:?}");
            String::from_utf8_lossy(&out.stdout) == "default\ntoken\n-----BEGIN CERTIFICATE-----\n"
        }
    })
    .await;
    assert!(
        read,
        "the pod did not read its token volume: {}",
        seen.into_inner().unwrap()
    );
    sim.shutdown().await;
}
