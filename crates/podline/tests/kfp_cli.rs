//! `podline record --kfp` as a real process against the sim and the real MLMD (the Python test
//! server over `ml-metadata`): pods are recorded and marked, `/healthz`, `/readyz` and `/metrics`
//! answer, the Lease is held with `--leader-elect`, the watch timeouts (flags and KFP's variables)
//! are honoured, SIGTERM exits 0, and with `--finalize` pods finished and deleted while the
//! writer was down keep their final state.
//!
//! Skips loudly without python3/ml-metadata, fails instead with `PODLINE_REQUIRE_MLMD=1` (CI).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use podline_mlmd::kfp::KFP_FINALIZER;
use podline_mlmd::kfp::fixture::{Step, component_spec};
use podline_mlmd::kfp::keys::WRITTEN_LABEL;
use podline_mlmd::proto::{ExecutionState, GetExecutionsByExternalIdsRequest};
use podline_mlmd::test_server::{self, MlmdTestServer};
use podline_mlmd::{MlmdClient, MlmdClientConfig};
use podline_testkit::{Sim, client, kubeconfig_file, start_sim, test_config, wait_until};
use serde_json::json;

fn mlmd_available() -> bool {
    match test_server::available() {
        Ok(()) => true,
        Err(e) if std::env::var("PODLINE_REQUIRE_MLMD").as_deref() == Ok("1") => {
            panic!("{e} (PODLINE_REQUIRE_MLMD=1)")
        }
        Err(e) => {
            eprintln!("\n!!!!!!!! SKIPPING MLMD TEST: {e} !!!!!!!!\n");
            false
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// `podline record --kfp` with `args` and `env` on top of the basics.
fn writer(
    kubeconfig: &std::path::Path,
    mlmd: &MlmdTestServer,
    listen: u16,
    args: &[&str],
    env: &[(&str, &str)],
) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_podline"));
    cmd.args(["record", "--kubeconfig"])
        .arg(kubeconfig)
        .args(["--kfp", "--mlmd-address", &mlmd.address()])
        .args(["--listen", &format!("127.0.0.1:{listen}")])
        .args(args)
        .env_remove("KUBECONFIG")
        .env("NAMESPACE_TO_WATCH", "default")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// GET `path` from the writer's health server: (status code, body).
async fn get(port: u16, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).await.ok()?;
    let code = out.get(9..12)?.parse().ok()?;
    Some((code, out))
}

fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

async fn exit_status(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let exited = wait_until(within, || {
        let done = child.try_wait().unwrap().is_some();
        async move { done }
    })
    .await;
    if exited {
        child.wait().ok()
    } else {
        let _ = child.kill();
        let _ = child.wait();
        None
    }
}

/// Create a finished KFP step (outputs on the pod) in the sim; returns the pod name.
async fn finished_step(sim: &Sim, template: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client(sim).await, "default");
    let mut step = Step::new("default", "wf-cli", template);
    step.component_spec = Some(component_spec("Step", &[("out", "Dataset")]));
    step.outputs_on_pod = Some(vec![("out".into(), step.key("out"))]);
    pods.create(&PostParams::default(), &step.pod(None))
        .await
        .unwrap();
    pods.patch_status(
        &step.pod_name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .unwrap();
    step.pod_name
}

async fn marked_written(sim: &Sim, pod: &str) -> bool {
    let pods: Api<Pod> = Api::namespaced(client(sim).await, "default");
    pods.get_opt(pod)
        .await
        .ok()
        .flatten()
        .and_then(|p| p.metadata.labels?.get(WRITTEN_LABEL).cloned())
        .as_deref()
        == Some("true")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_kfp_records_pods_serves_health_holds_the_lease_and_exits_0_on_sigterm() {
    if !mlmd_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mlmd = MlmdTestServer::start(Some(&dir.path().join("mlmd.db")), 0, &[]).unwrap();
    let sim = start_sim(test_config().kubelet_enabled(false)).await;
    let kubeconfig = kubeconfig_file(&sim);
    let listen = free_port();
    let mut child = writer(
        kubeconfig.path(),
        &mlmd,
        listen,
        &["--leader-elect"],
        &[("POD_NAME", "kfp-a"), ("POD_NAMESPACE", "default")],
    );

    let pod = finished_step(&sim, "first").await;
    assert!(
        wait_until(Duration::from_secs(30), || marked_written(&sim, &pod)).await,
        "the pod was not recorded and marked metadata_written"
    );
    let leases: Api<Lease> = Api::namespaced(client(&sim).await, "default");
    let holder = leases
        .get("podline-kfp-writer")
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(holder.as_deref(), Some("kfp-a"), "KFP mode's own Lease");

    let (code, _) = get(listen, "/healthz").await.expect("/healthz answers");
    assert_eq!(code, 200);
    assert!(
        wait_until(Duration::from_secs(10), || async {
            get(listen, "/readyz").await.map(|(c, _)| c) == Some(200)
        })
        .await,
        "/readyz: {:?}",
        get(listen, "/readyz").await
    );
    let (_, metrics) = get(listen, "/metrics").await.expect("/metrics answers");
    assert!(
        metrics.contains("podline_record_kfp_pods_recorded_total"),
        "{metrics}"
    );
    assert!(
        metrics.contains("podline_record_watch_events_total{type=\"init_apply\"}"),
        "{metrics}"
    );
    assert!(!metrics.contains("podline_record_kfp_pods_recorded_total 0\n"));

    sigterm(&child);
    let status = exit_status(&mut child, Duration::from_secs(20)).await;
    assert!(
        status.is_some_and(|s| s.success()),
        "SIGTERM must exit 0, got {status:?}"
    );
}

async fn reconnects(listen: u16) -> u64 {
    let Some((_, metrics)) = get(listen, "/metrics").await else {
        return 0;
    };
    metrics
        .lines()
        .filter(|l| l.starts_with("podline_record_watch_reconnects_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_kfp_honours_watch_timeout_flags_and_kfp_variables() {
    if !mlmd_available() {
        return;
    }
    let mlmd = MlmdTestServer::start(None, 0, &[]).unwrap();
    let sim = start_sim(test_config().kubelet_enabled(false)).await;
    let kubeconfig = kubeconfig_file(&sim);
    // With KFP's defaults (1800 s / 60 s) no watch ends within the wait below; with 2 s / 1 s,
    // given as flags or as KFP's variables, several do.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);
    let cases: [Case; 2] = [
        (
            &[
                "--watch-server-timeout",
                "2",
                "--watch-client-timeout",
                "1s",
            ],
            &[],
        ),
        (
            &[],
            &[
                ("K8S_WATCH_SERVER_SIDE_TIMEOUT", "2"),
                ("K8S_WATCH_CLIENT_SIDE_TIMEOUT", "1"),
            ],
        ),
    ];
    for (args, env) in cases {
        let listen = free_port();
        let mut child = writer(kubeconfig.path(), &mlmd, listen, args, env);
        assert!(
            wait_until(Duration::from_secs(15), || async {
                reconnects(listen).await >= 2
            })
            .await,
            "{args:?} {env:?}: the watch did not end on the short timeouts ({} reconnects)",
            reconnects(listen).await
        );
        sigterm(&child);
        assert!(
            exit_status(&mut child, Duration::from_secs(20))
                .await
                .is_some_and(|s| s.success())
        );
    }
    // A bad value stops startup, naming the flag.
    let out = Command::new(env!("CARGO_BIN_EXE_podline"))
        .args(["record", "--kubeconfig"])
        .arg(kubeconfig.path())
        .args(["--kfp", "--watch-client-timeout", "soon"])
        .args(["--mlmd-address", &mlmd.address()])
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--watch-client-timeout=\"soon\""),
        "{stderr}"
    );
}

/// A counter's value in a `/metrics` text (0 when absent).
fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

async fn metric(listen: u16, name: &str) -> u64 {
    match get(listen, "/metrics").await {
        Some((_, metrics)) => counter(&metrics, name),
        None => 0,
    }
}

/// Create a KFP step (outputs on the pod) and move it to Running; returns (pod name, uid).
async fn running_step(sim: &Sim, workflow: &str, template: &str) -> (String, String) {
    let pods: Api<Pod> = Api::namespaced(client(sim).await, "default");
    let mut step = Step::new("default", workflow, template);
    step.component_spec = Some(component_spec("Step", &[("out", "Dataset")]));
    step.outputs_on_pod = Some(vec![("out".into(), step.key("out"))]);
    let created = pods
        .create(&PostParams::default(), &step.pod(None))
        .await
        .unwrap();
    pods.patch_status(
        &step.pod_name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    (step.pod_name, created.metadata.uid.unwrap())
}

/// The state of the execution of the pod `uid` in MLMD, if it has one.
async fn execution_state(mlmd: &MlmdTestServer, uid: &str) -> Option<ExecutionState> {
    let client = MlmdClient::new(&MlmdClientConfig::new("127.0.0.1", mlmd.port)).ok()?;
    let found = client
        .get_executions_by_external_ids(GetExecutionsByExternalIdsRequest {
            external_ids: vec![format!("podline/kfp/default/{uid}")],
        })
        .await
        .ok()?;
    let state = found.executions.into_iter().next()?.last_known_state?;
    ExecutionState::try_from(state).ok()
}

async fn held(sim: &Sim, pod: &str) -> bool {
    let pods: Api<Pod> = Api::namespaced(client(sim).await, "default");
    pods.get_opt(pod)
        .await
        .ok()
        .flatten()
        .and_then(|p| p.metadata.finalizers)
        .is_some_and(|f| f.iter().any(|f| f == KFP_FINALIZER))
}

/// `record --kfp --finalize`: the writer is SIGKILLed and stays down longer than the sim's
/// watch history while its pods finish and are deleted; they wait in Terminating, and the
/// restarted writer commits every final state to MLMD, takes the finalizers off, and no pod is
/// left. The counters are on /metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_kfp_finalize_keeps_final_states_of_pods_deleted_while_it_is_down() {
    if !mlmd_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mlmd = MlmdTestServer::start(Some(&dir.path().join("mlmd.db")), 0, &[]).unwrap();
    let history = Duration::from_secs(2);
    let sim = start_sim(test_config().kubelet_enabled(false).history_window(history)).await;
    let kubeconfig = kubeconfig_file(&sim);
    let listen = free_port();
    let mut child = writer(kubeconfig.path(), &mlmd, listen, &["--finalize"], &[]);
    let mut steps = Vec::new();
    for i in 0..5 {
        steps.push(running_step(&sim, "wf-held", &format!("s{i}")).await);
    }
    for (pod, uid) in &steps {
        assert!(
            wait_until(Duration::from_secs(30), || async {
                execution_state(&mlmd, uid).await == Some(ExecutionState::Running)
                    && held(&sim, pod).await
            })
            .await,
            "{pod} not recorded RUNNING and held"
        );
    }
    assert_eq!(
        metric(listen, "podline_record_kfp_finalizers_added_total").await,
        5
    );
    child.kill().unwrap(); // SIGKILL: nothing flushed, nothing released
    child.wait().unwrap();

    let pods: Api<Pod> = Api::namespaced(client(&sim).await, "default");
    for (i, (pod, _)) in steps.iter().enumerate() {
        let phase = if i < 3 { "Succeeded" } else { "Failed" };
        pods.patch_status(
            pod,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase}})),
        )
        .await
        .unwrap();
        pods.delete(pod, &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
    }
    let left = pods.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(left.len(), 5, "the finalizer keeps every deleted pod");
    tokio::time::sleep(history + Duration::from_secs(1)).await; // the outage itself, not a sync

    let listen = free_port();
    let mut child = writer(kubeconfig.path(), &mlmd, listen, &["--finalize"], &[]);
    let gone = wait_until(Duration::from_secs(30), || async {
        pods.list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.is_empty())
    })
    .await;
    assert!(gone, "pods left after the restart");
    for (i, (pod, uid)) in steps.iter().enumerate() {
        let expected = if i < 3 {
            ExecutionState::Complete
        } else {
            ExecutionState::Failed
        };
        assert_eq!(execution_state(&mlmd, uid).await, Some(expected), "{pod}");
    }
    assert!(
        wait_until(Duration::from_secs(10), || async {
            metric(listen, "podline_record_kfp_finalizers_removed_total").await == 5
        })
        .await,
        "removals on /metrics: {}",
        metric(listen, "podline_record_kfp_finalizers_removed_total").await
    );
    assert_eq!(
        metric(listen, "podline_record_kfp_vanished_canceled_total").await,
        0
    );
    sigterm(&child);
    assert!(
        exit_status(&mut child, Duration::from_secs(20))
            .await
            .is_some_and(|s| s.success())
    );
}

/// Without --finalize the writer sends the pod patches it always sent (the markers) and no
/// other: the sim's count of pod patches equals the writer's own count of marker patches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_kfp_without_finalize_patches_only_the_markers() {
    if !mlmd_available() {
        return;
    }
    let mlmd = MlmdTestServer::start(None, 0, &[]).unwrap();
    let sim = start_sim(test_config().kubelet_enabled(false)).await;
    let kubeconfig = kubeconfig_file(&sim);
    let listen = free_port();
    let mut child = writer(kubeconfig.path(), &mlmd, listen, &[], &[]);
    let mut names = Vec::new();
    for template in ["a", "b", "c"] {
        names.push(finished_step(&sim, template).await);
    }
    for pod in &names {
        assert!(
            wait_until(Duration::from_secs(30), || marked_written(&sim, pod)).await,
            "{pod} not recorded"
        );
    }
    let patches = metric(listen, "podline_record_kfp_pod_patches_total").await;
    assert!(patches >= 3, "{patches} marker patches");
    assert_eq!(sim.counts().get("patch", "pods"), patches);
    assert_eq!(
        metric(listen, "podline_record_kfp_finalizers_added_total").await,
        0
    );
    for pod in &names {
        assert!(!held(&sim, pod).await, "{pod}");
    }
    sigterm(&child);
    assert!(
        exit_status(&mut child, Duration::from_secs(20))
            .await
            .is_some_and(|s| s.success())
    );
}
