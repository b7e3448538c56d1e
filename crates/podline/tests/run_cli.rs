//! `podline run` as a user runs it: the real binary against the sim.
#![allow(clippy::unwrap_used)]

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use podline_testkit::{client, kubeconfig_file, start_sim, test_config, wait_until};
use tokio::process::Command;

fn podline(kubeconfig: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_podline"));
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .env_remove("KUBECONFIG")
        .env("PODLINE_CREATE_BACKOFF_BASE", "10ms")
        .env("PODLINE_CREATE_BACKOFF_CAP", "200ms")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Done-when 6: SIGTERM during a run deletes the pod and exits 143.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_run_should_delete_the_pod_and_exit_143() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let pods: Api<Pod> = Api::namespaced(client(&sim).await, "default");
    let child = podline(kubeconfig.path())
        .args([
            "run",
            "--image",
            "busybox",
            "--annotation",
            "sim.podline.io/duration=60s",
        ])
        .args(["--", "sleep", "60"])
        .spawn()
        .unwrap();
    let running = wait_until(Duration::from_secs(20), || async {
        pods.list(&ListParams::default()).await.is_ok_and(|l| {
            l.items
                .iter()
                .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        })
    })
    .await;
    assert!(running, "the pod never ran");
    let pid = child.id().unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("podline did not exit after SIGTERM")
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(143),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let empty = wait_until(Duration::from_secs(10), || async {
        pods.list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.is_empty())
    })
    .await;
    assert!(empty, "the pod outlived the killed run");
    assert!(sim.ground_truth().iter().all(|p| p.deleted_at.is_some()));
}

/// Done-when 8 at the binary level: exit code and stdout are the container's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_code_and_stdout_should_be_the_containers() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    for code in ["0", "1", "137"] {
        let out = podline(kubeconfig.path())
            .args(["run", "--image", "busybox"])
            .args(["--annotation", &format!("sim.podline.io/exit-code={code}")])
            .args(["--annotation", "sim.podline.io/logs=hello\nworld"])
            .args(["--", "sh", "-c", "echo hello"])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(code.parse().unwrap()),
            "stderr: {stderr}"
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\nworld\n");
        if code != "0" {
            assert!(stderr.contains(&format!("exit code {code}")), "{stderr}");
        }
    }
}

/// `-o json` prints the result document (and nothing else) on stdout.
#[tokio::test]
async fn json_output_should_be_the_result_document() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let out = podline(kubeconfig.path())
        .args([
            "-o",
            "json",
            "run",
            "--image",
            "busybox",
            "--name",
            "report-me",
        ])
        .args(["--annotation", "sim.podline.io/exit-code=4"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["pod"].as_str().unwrap().starts_with("report-me-"));
    assert_eq!(doc["phase"], "Failed");
    assert_eq!(doc["containers"][0]["exitCode"], 4);
    assert_eq!(doc["deleted"], true);
}

/// Bad flags and env values exit 2 with a message naming them; nothing is created.
#[tokio::test]
async fn bad_flags_should_exit_2_and_name_the_flag() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let out = podline(kubeconfig.path())
        .args(["run", "--image", "busybox", "--requests", "cpu=lots"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--requests"));
    let out = podline(kubeconfig.path())
        .env("PODLINE_STARTUP_TIMEOUT", "soon")
        .args(["run", "--image", "busybox"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("startup-timeout") || stderr.contains("STARTUP"),
        "{stderr}"
    );
    assert!(sim.ground_truth().is_empty());
}

/// `--count` runs many and prints the summary table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_should_run_many_and_print_a_summary() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let out = podline(kubeconfig.path())
        .args([
            "run",
            "--image",
            "busybox",
            "--count",
            "20",
            "--parallel",
            "5",
        ])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("SUCCEEDED") && stdout.contains("P99"),
        "{stdout}"
    );
    assert_eq!(sim.ground_truth().len(), 20);
}

/// A user behind a corporate proxy: like kubectl, podline sends its requests through
/// `HTTPS_PROXY` (`HTTP_PROXY` for an http:// server) unless `NO_PROXY` names the cluster. Here the proxy refuses every connection, so
/// a run only succeeds when `NO_PROXY` exempts the sim, and fails (with the proxy named) when not.
#[tokio::test]
async fn the_environments_proxy_should_be_used_unless_no_proxy_names_the_cluster() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = format!("http://{}", closed.local_addr().unwrap());
    drop(closed); // nothing listens there any more: the "proxy" refuses connections
    let run = |no_proxy: Option<&str>| {
        let mut cmd = podline(kubeconfig.path());
        // The test sim serves plain HTTP or HTTPS: name the proxy for both.
        cmd.env("HTTPS_PROXY", &proxy)
            .env("HTTP_PROXY", &proxy)
            .env_remove("https_proxy")
            .env_remove("http_proxy")
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .env("PODLINE_CREATE_DEADLINE", "2s")
            .args(["run", "--image", "busybox", "--", "true"]);
        if let Some(no_proxy) = no_proxy {
            cmd.env("NO_PROXY", no_proxy);
        }
        cmd.output()
    };
    let direct = run(Some("localhost,127.0.0.1")).await.unwrap();
    assert_eq!(
        direct.status.code(),
        Some(0),
        "NO_PROXY names the sim: {}",
        String::from_utf8_lossy(&direct.stderr)
    );
    let proxied = run(None).await.unwrap();
    let stderr = String::from_utf8_lossy(&proxied.stderr);
    assert_ne!(
        proxied.status.code(),
        Some(0),
        "went around the proxy: {stderr}"
    );
    assert_eq!(
        sim.ground_truth().len(),
        1,
        "only the direct run created a pod"
    );
}
