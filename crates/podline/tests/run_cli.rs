//! `podline run` as a user runs it: the real binary against the sim.
#![allow(clippy::unwrap_used)]

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use podline_sim::{FaultAction, FaultRule, FaultVerb};
use podline_testkit::{client, kubeconfig_file, start_sim, test_config, wait_until};
use tokio::process::Command;

/// `podline SUBCOMMAND --kubeconfig FILE` through the test kit's one builder.
fn podline(subcommand: &str, kubeconfig: &std::path::Path) -> Command {
    podline_testkit::bin::podline(env!("CARGO_BIN_EXE_podline"), subcommand, kubeconfig)
}

/// Done-when 6: SIGTERM during a run deletes the pod and exits 143.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_run_should_delete_the_pod_and_exit_143() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let pods: Api<Pod> = Api::namespaced(client(&sim).await, "default");
    let child = podline("run", kubeconfig.path())
        .args([
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
    // Issue 27 (found inside Airflow, which stops a task with SIGTERM): the run's liveness
    // Lease goes with it, not at the next reaper pass.
    let leases: Api<Lease> = Api::namespaced(client(&sim).await, "default");
    let names = leases
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|l| l.metadata.name)
        .filter(|n| n.starts_with("podline-launcher-"))
        .collect::<Vec<_>>();
    assert!(names.is_empty(), "Leases left by the killed run: {names:?}");
}

/// Signals `podline run --count 3` once its three pods run, and returns its exit code and
/// stderr, after checking that no pod outlived the run.
async fn signal_a_count_run(signal: &str) -> (Option<i32>, String) {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let pods: Api<Pod> = Api::namespaced(client(&sim).await, "default");
    let child = podline("run", kubeconfig.path())
        .args(["--image", "busybox", "--count", "3"])
        .args(["--annotation", "sim.podline.io/duration=60s"])
        .args(["--", "sleep", "60"])
        .spawn()
        .unwrap();
    let running = wait_until(Duration::from_secs(20), || async {
        pods.list(&ListParams::default()).await.is_ok_and(|l| {
            l.items
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count()
                == 3
        })
    })
    .await;
    assert!(running, "the pods never ran");
    let pid = child.id().unwrap();
    let killed = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("podline did not exit after the signal")
        .unwrap();
    let empty = wait_until(Duration::from_secs(10), || async {
        pods.list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.is_empty())
    })
    .await;
    assert!(empty, "pods outlived the {signal} run");
    assert_eq!(sim.ground_truth().len(), 3);
    assert!(sim.ground_truth().iter().all(|p| p.deleted_at.is_some()));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Issue 19: Ctrl-C (SIGINT) during `run --count` deletes every pod and exits 130, like a
/// shell; it used to exit 143 whatever the signal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_during_a_count_run_should_delete_the_pods_and_exit_130() {
    let (code, stderr) = signal_a_count_run("-INT").await;
    assert_eq!(code, Some(130), "stderr: {stderr}");
}

/// SIGTERM during `run --count` deletes every pod and exits 143.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_count_run_should_delete_the_pods_and_exit_143() {
    let (code, stderr) = signal_a_count_run("-TERM").await;
    assert_eq!(code, Some(143), "stderr: {stderr}");
}

/// Issue 27: `podline run` honours SIGTERM at every stage, not only once its pods run: with
/// `rule` holding or failing the API, it sends SIGTERM once the sim has seen `requests` of
/// (`verb`, `resource`), and asserts a prompt exit 143 with no pod left behind (none created, or
/// every one deleted).
async fn sigterm_at_a_stage(rule: FaultRule, verb: &str, resource: &str, requests: u64) {
    let sim = start_sim(test_config()).await;
    sim.faults().push(rule);
    let kubeconfig = kubeconfig_file(&sim);
    let pods: Api<Pod> = Api::namespaced(client(&sim).await, "default");
    let child = podline("run", kubeconfig.path())
        .env("PODLINE_CREATE_DEADLINE", "60s")
        .args(["--image", "busybox", "--count", "3"])
        .args(["--annotation", "sim.podline.io/duration=60s"])
        .spawn()
        .unwrap();
    let reached = wait_until(Duration::from_secs(20), || async {
        sim.counts().get(verb, resource) >= requests
    })
    .await;
    assert!(reached, "the run never reached {verb} {resource}");
    let pid = child.id().unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let asked = tokio::time::Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(15), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("no exit within 15 s of SIGTERM at {verb} {resource}"))
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{verb} {resource}: {stderr}");
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{verb} {resource}: took {:?}",
        asked.elapsed()
    );
    sim.faults().clear();
    let empty = wait_until(Duration::from_secs(10), || async {
        pods.list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.is_empty())
    })
    .await;
    assert!(empty, "a pod outlived the run stopped at {verb} {resource}");
}

/// SIGTERM while the API server holds the first request (the launcher's Lease create, before
/// any pod): exit 143 at once, nothing created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_the_api_holds_the_first_request_should_exit_143() {
    sigterm_at_a_stage(
        FaultRule::new(FaultAction::Latency { ms: 40_000 }).verb(FaultVerb::Create),
        "create",
        "leases",
        1,
    )
    .await;
}

/// SIGTERM while every pod create is answered 503 and retried: exit 143 without waiting for
/// the create's retry budget, nothing created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_retried_creates_should_exit_143() {
    sigterm_at_a_stage(
        FaultRule::new(FaultAction::status(503))
            .verb(FaultVerb::Create)
            .resource("pods"),
        "create",
        "pods",
        6,
    )
    .await;
}

/// Issue 19: a pod that started and then ran past `--timeout` is deleted and the run exits 124
/// saying it timed out while running (it used to exit 4, "did not start").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_timeout_while_running_should_exit_124_and_delete_the_pod() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let pods: Api<Pod> = Api::namespaced(client(&sim).await, "default");
    let out = podline("run", kubeconfig.path())
        .args(["--image", "busybox", "--timeout", "2s"])
        .args(["--annotation", "sim.podline.io/duration=60s"])
        .args(["--", "sleep", "60"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "stderr: {stderr}");
    assert!(stderr.contains("still running"), "{stderr}");
    assert!(!stderr.contains("did not start"), "{stderr}");
    let empty = wait_until(Duration::from_secs(10), || async {
        pods.list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.is_empty())
    })
    .await;
    assert!(empty, "the pod outlived the timed-out run");
}

/// Issue 19: `--timeout` expiring while the pod is still pending (a slow image pull) exits 4,
/// says the pod did not start before the timeout, and deletes the pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_timeout_while_pending_should_exit_4_and_delete_the_pod() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let pods: Api<Pod> = Api::namespaced(client(&sim).await, "default");
    let out = podline("run", kubeconfig.path())
        .args(["--image", "busybox", "--timeout", "1s"])
        .args(["--annotation", "sim.podline.io/pull-delay=60s"])
        .args(["--", "true"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "stderr: {stderr}");
    assert!(
        stderr.contains("did not start before the run's overall timeout of 1s"),
        "{stderr}"
    );
    let empty = wait_until(Duration::from_secs(10), || async {
        pods.list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.is_empty())
    })
    .await;
    assert!(empty, "the pod outlived the timed-out run");
}

/// Done-when 8 at the binary level: exit code and stdout are the container's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_code_and_stdout_should_be_the_containers() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    for code in ["0", "1", "137"] {
        let out = podline("run", kubeconfig.path())
            .args(["--image", "busybox"])
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
    let out = podline("run", kubeconfig.path())
        .args(["-o", "json", "--image", "busybox", "--name", "report-me"])
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
    let out = podline("run", kubeconfig.path())
        .args(["--image", "busybox", "--requests", "cpu=lots"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--requests"));
    let out = podline("run", kubeconfig.path())
        .env("PODLINE_STARTUP_TIMEOUT", "soon")
        .args(["--image", "busybox"])
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
    let out = podline("run", kubeconfig.path())
        .args(["--image", "busybox", "--count", "20", "--parallel", "5"])
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
        let mut cmd = podline("run", kubeconfig.path());
        // The test sim serves plain HTTP or HTTPS: name the proxy for both.
        cmd.env("HTTPS_PROXY", &proxy)
            .env("HTTP_PROXY", &proxy)
            .env_remove("https_proxy")
            .env_remove("http_proxy")
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .env("PODLINE_CREATE_DEADLINE", "2s")
            .args(["--image", "busybox", "--", "true"]);
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

/// Runs `podline run --image busybox` with `flags`, `env` and `-- true`; returns (exit code,
/// stderr).
async fn run_with(
    kubeconfig: &std::path::Path,
    flags: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, String) {
    let mut cmd = podline("run", kubeconfig);
    cmd.args(["--image", "busybox"])
        .args(flags)
        .args(["--", "true"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
        .await
        .expect("podline did not exit")
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A usage error: exit 2, no panic, the message names `named` and contains `range`.
fn assert_usage(what: &str, (code, stderr): &(Option<i32>, String), named: &str, range: &str) {
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert_eq!(*code, Some(2), "{what}: {stderr}");
    assert!(
        stderr.contains(named) && stderr.contains(range),
        "{what}: wanted {named:?} and {range:?} in {stderr}"
    );
}

/// Durations near u64::MAX, as flags or environment values, are usage errors naming the flag
/// (or variable), the value and the allowed range; nothing is created, nothing panics (before
/// the bound, `Instant + d` panicked with exit 101, some of them after the pod was created).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_durations_should_be_usage_errors_and_create_nothing() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    const HUGE: &str = "18446744073709551615";
    for flag in [
        "--startup-timeout",
        "--schedule-timeout",
        "--timeout",
        "--http2-ping-interval",
        "--http2-ping-timeout",
        "--create-deadline",
        "--log-stall-timeout",
    ] {
        let out = run_with(kubeconfig.path(), &[flag, HUGE], &[]).await;
        assert_usage(flag, &out, flag, "at most 365 days");
        assert!(out.1.contains(HUGE), "{flag}: {}", out.1);
    }
    for (var, named) in [
        ("PODLINE_STARTUP_TIMEOUT", "--startup-timeout"),
        ("PODLINE_SCHEDULE_TIMEOUT", "--schedule-timeout"),
        ("PODLINE_TIMEOUT", "--timeout"),
        ("PODLINE_HTTP2_PING_INTERVAL", "PODLINE_HTTP2_PING_INTERVAL"),
        ("PODLINE_HTTP2_PING_TIMEOUT", "PODLINE_HTTP2_PING_TIMEOUT"),
    ] {
        let out = run_with(kubeconfig.path(), &[], &[(var, HUGE)]).await;
        assert_usage(var, &out, named, "at most 365 days");
        assert!(out.1.contains(HUGE), "{var}: {}", out.1);
    }
    assert!(sim.ground_truth().is_empty(), "a pod was created");
}

/// `--active-deadline` is sent as activeDeadlineSeconds: outside the API's 1..=2147483647 it is
/// a usage error before anything is created (it used to be sent as i64::MAX).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_deadline_out_of_the_apis_range_should_be_a_usage_error() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    for value in ["18446744073709551615", "2147483648", "0"] {
        let out = run_with(kubeconfig.path(), &["--active-deadline", value], &[]).await;
        assert_usage(value, &out, "--active-deadline", "1 to 2147483647");
        let out = run_with(
            kubeconfig.path(),
            &[],
            &[("PODLINE_ACTIVE_DEADLINE", value)],
        )
        .await;
        assert_usage(value, &out, "--active-deadline", "1 to 2147483647");
    }
    assert!(sim.ground_truth().is_empty(), "a pod was created");
    // The top of the range is accepted and sent as is.
    let out = run_with(kubeconfig.path(), &["--active-deadline", "2147483647"], &[]).await;
    assert_eq!(out.0, Some(0), "{}", out.1);
    let truth = sim.ground_truth();
    assert_eq!(truth.len(), 1);
}

/// Runs `podline run -f FILE` with `text` as the file.
async fn run_file(kubeconfig: &std::path::Path, text: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.yaml");
    std::fs::write(&path, text).unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        podline("run", kubeconfig)
            .args(["-f"])
            .arg(&path)
            .args(["--parallel", "1"])
            .output(),
    )
    .await
    .expect("podline did not exit")
    .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `-f`: the whole file is checked first. A bad second task fails the run (exit 2) before task 1
/// is created, and the message names task 2 and the field (it used to run tasks 1 and 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_file_with_a_bad_second_task_should_create_nothing() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let out = run_file(
        kubeconfig.path(),
        "- image: busybox\n  name: first\n- name: second\n  command: [echo, hi]\n- image: alpine\n  name: third\n",
    )
    .await;
    assert_usage("missing image", &out, "task 2 (\"second\")", "image");
    assert!(out.1.contains("image: missing"), "{}", out.1);
    // `command: [true]` is a YAML boolean, not a string: named like any other bad field, not
    // "data did not match any variant of untagged enum".
    let out = run_file(
        kubeconfig.path(),
        "- image: busybox\n- image: busybox\n  command: [true]\n",
    )
    .await;
    assert_usage("command: [true]", &out, "task 2", "command");
    assert!(
        out.1.contains("expected a string") && !out.1.contains("untagged"),
        "{}",
        out.1
    );
    assert!(sim.ground_truth().is_empty(), "a pod was created");
}

/// When every create is refused (409 on every attempt), the message is clean, like the 4xx
/// path's (`HTTP 409 Conflict: ...`), not kube's Debug dump of the Status (`Status { ... }`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_create_retries_should_print_a_clean_message() {
    let sim = start_sim(test_config()).await;
    sim.faults().push(
        FaultRule::new(FaultAction::status(409))
            .verb(FaultVerb::Create)
            .resource("pods"),
    );
    let kubeconfig = kubeconfig_file(&sim);
    let (code, stderr) = run_with(kubeconfig.path(), &["--create-attempts", "3"], &[]).await;
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("create failed after 3 attempts") && stderr.contains("HTTP 409 Conflict"),
        "{stderr}"
    );
    for dump in ["Status {", "ListMeta", "Some(", "continue_"] {
        assert!(!stderr.contains(dump), "{dump:?} in {stderr}");
    }
    assert!(sim.ground_truth().is_empty());
}

/// Issue 27: another podline pod in the namespace whose `deletionTimestamp` no client decodes
/// (the sim serves "not-a-time" for it in every LIST, GET and watch event) must not stop
/// `run --count`, whose tasks share one watch of podline's pods in the namespace: its LIST item
/// and events are skipped and the tasks run to the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_pod_that_does_not_decode_should_not_stop_a_shared_pod_watch() {
    let sim = start_sim(test_config()).await;
    sim.faults().push(
        FaultRule::new(FaultAction::Malform {
            name: "bad-*".into(),
            field: podline_sim::fault::MalformField::DeletionTimestamp,
        })
        .resource("pods"),
    );
    let kubeconfig = kubeconfig_file(&sim);
    let pods: Api<Pod> = Api::namespaced(client(&sim).await, "default");
    let other: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "bad-other", "labels": {"podline.io/launch-id": "someone-else"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }))
    .unwrap();
    pods.create(&Default::default(), &other).await.unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        podline("run", kubeconfig.path())
            .args(["--image", "busybox", "--count", "3"])
            .output(),
    )
    .await
    .expect("the runs must not hang on an undecodable pod")
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sim.ground_truth().len(), 4);
}

/// Issue 27: the run's own pod does not decode: the run fails with a clear error naming what did
/// not decode (never the value), instead of hanging or a "watch stream returned 0".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_own_pod_does_not_decode_should_fail_saying_so() {
    let sim = start_sim(test_config()).await;
    sim.faults().push(
        FaultRule::new(FaultAction::Malform {
            name: "bad-*".into(),
            field: podline_sim::fault::MalformField::DeletionTimestamp,
        })
        .resource("pods"),
    );
    let kubeconfig = kubeconfig_file(&sim);
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        podline("run", kubeconfig.path())
            .args(["--image", "busybox", "--name", "bad-own", "--exact-name"])
            .args(["--annotation", "sim.podline.io/duration=30s"])
            .output(),
    )
    .await
    .expect("the run must not hang on its undecodable pod")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("bad-own")
            && stderr.contains("does not decode")
            && stderr.contains("metadata.deletionTimestamp")
            && !stderr.contains("not-a-time"),
        "{stderr}"
    );
}

/// A pod whose Secret does not exist waits in CreateContainerConfigError on the sim as on a
/// cluster, and `podline run` reports it so when its startup timeout expires (exit 4, the
/// container, the reason and the kubelet's message).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_secret_is_reported_as_create_container_config_error() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let out = podline("run", kubeconfig.path())
        .args(["--image", "busybox", "--startup-timeout", "2s"])
        .args(["--env-from-secret", "app-creds"])
        .args(["--", "true"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "stderr: {stderr}");
    assert!(
        stderr.contains("did not start within 2s after scheduling"),
        "{stderr}"
    );
    assert!(
        stderr.contains(r#"CreateContainerConfigError: secret "app-creds" not found"#),
        "{stderr}"
    );
}

/// Issue 27: podline wrote ANSI colour codes into Airflow task logs (its stderr is a pipe
/// there). The binary, not only the decision function: with stderr piped, no escape byte in
/// its log lines; under a pseudo-terminal (`script`) it colours them, unless `NO_COLOR` is set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_lines_should_be_coloured_only_on_a_terminal_without_no_color() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let run = ["--image", "busybox", "--", "true"];
    let out = podline("run", kubeconfig.path())
        .env("RUST_LOG", "debug")
        .env_remove("NO_COLOR")
        .args(run)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("DEBUG"), "no log line to look at: {stderr}");
    assert!(
        !stderr.contains('\x1b'),
        "an escape byte on a pipe: {stderr:?}"
    );

    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipping the terminal half: no `script` (util-linux)");
        return;
    }
    // `script` runs the command on a pseudo-terminal (stdout and stderr both) and copies what
    // it wrote to its own stdout.
    let on_a_terminal = |no_color: Option<&str>| {
        let command = format!(
            "{} run --kubeconfig {} {}",
            env!("CARGO_BIN_EXE_podline"),
            kubeconfig.path().display(),
            run.join(" ")
        );
        let mut cmd = Command::new("script");
        cmd.args(["-q", "-e", "-c", &command, "/dev/null"])
            .env_remove("KUBECONFIG")
            .env("RUST_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        match no_color {
            Some(value) => cmd.env("NO_COLOR", value),
            None => cmd.env_remove("NO_COLOR"),
        };
        cmd.output()
    };
    let coloured = on_a_terminal(None).await.unwrap();
    let text = String::from_utf8_lossy(&coloured.stdout);
    assert!(text.contains("DEBUG"), "{text}");
    assert!(text.contains('\x1b'), "no colour on a terminal: {text:?}");
    let plain = on_a_terminal(Some("1")).await.unwrap();
    let text = String::from_utf8_lossy(&plain.stdout);
    assert!(text.contains("DEBUG"), "{text}");
    assert!(!text.contains('\x1b'), "colour despite NO_COLOR: {text:?}");
}
