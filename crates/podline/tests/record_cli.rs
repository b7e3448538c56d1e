//! `podline record` as a process: startup validation, fatal errors, SIGTERM, and `kill -9` at
//! random points during a 1000-pod run (the store must still equal the sim's ground truth).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use podline_sim::{FaultAction, FaultRule, FaultVerb};
use podline_testkit::{Sim, audit, kubeconfig_file, start_sim, test_config, wait_until};

const BIN: &str = env!("CARGO_BIN_EXE_podline");

fn record_cmd(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("record")
        .args(args)
        .env_remove("PODLINE_WATCH_CLIENT_TIMEOUT")
        .env_remove("PODLINE_WATCH_SERVER_TIMEOUT")
        .env_remove("PODLINE_DB")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn run_with_env(env: &[(&str, &str)]) -> Output {
    let mut cmd = record_cmd(&["--listen", "127.0.0.1:0"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn bad_timeout_values_stop_startup_naming_the_variable_value_and_expectation() {
    let out = run_with_env(&[("PODLINE_WATCH_CLIENT_TIMEOUT", "abc")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains(r#"PODLINE_WATCH_CLIENT_TIMEOUT="abc" is not a duration"#)
            && stderr.contains("expected"),
        "{stderr}"
    );

    let out = run_with_env(&[("PODLINE_WATCH_SERVER_TIMEOUT", "0")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains("PODLINE_WATCH_SERVER_TIMEOUT") && stderr.contains("greater than zero"),
        "{stderr}"
    );
}

#[test]
fn a_client_timeout_not_shorter_than_the_server_timeout_stops_startup() {
    let out = run_with_env(&[
        ("PODLINE_WATCH_CLIENT_TIMEOUT", "30m"),
        ("PODLINE_WATCH_SERVER_TIMEOUT", "1800"),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains("PODLINE_WATCH_CLIENT_TIMEOUT")
            && stderr.contains("must be shorter than PODLINE_WATCH_SERVER_TIMEOUT"),
        "{stderr}"
    );
    // The same rule for flags, named as flags.
    let out = record_cmd(&[
        "--watch-client-timeout",
        "90",
        "--watch-server-timeout",
        "60",
    ])
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("--watch-client-timeout"), "{stderr}");
}

fn spawn_recorder(kubeconfig: &std::path::Path, db: &std::path::Path) -> Child {
    record_cmd(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--watch-client-timeout",
        "1s",
        "--watch-server-timeout",
        "60",
    ])
    .env_remove("KUBECONFIG")
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap()
}

async fn wait_exit(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if tokio::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_watch_exits_non_zero_with_a_clear_message() {
    let sim = start_sim(test_config()).await;
    sim.faults().push(
        FaultRule::new(FaultAction::status(403))
            .verb(FaultVerb::List)
            .resource("pods"),
    );
    sim.faults().push(
        FaultRule::new(FaultAction::status(403))
            .verb(FaultVerb::Watch)
            .resource("pods"),
    );
    let kubeconfig = kubeconfig_file(&sim);
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_recorder(kubeconfig.path(), &dir.path().join("p.db"));
    let status = wait_exit(&mut child, Duration::from_secs(15))
        .await
        .expect("a 403 must end the recorder");
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("cannot watch pods") && stderr.to_lowercase().contains("forbidden"),
        "{stderr}"
    );
}

fn pod(i: usize) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": format!("k-{i}"),
            "labels": {"podline.io/run": "kill9"},
            "annotations": {
                "sim.podline.io/duration": format!("{}ms", 200 + (i % 10) * 100),
                "sim.podline.io/exit-code": if i % 9 == 4 { "2" } else { "0" },
            }
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
    }))
    .unwrap()
}

fn finished(sim: &Sim, n: usize) -> bool {
    let truth = sim.ground_truth();
    truth.len() >= n
        && truth.iter().all(|h| {
            h.transitions
                .iter()
                .any(|(p, _)| p == "Succeeded" || p == "Failed")
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_points_twenty_times_loses_and_duplicates_nothing() {
    const N: usize = 1000;
    let sim = start_sim(test_config().bookmark_interval(Duration::from_millis(300))).await;
    let kubeconfig = kubeconfig_file(&sim);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("podline.db");

    // Pods are created over the whole run, in the background.
    let creator = tokio::spawn({
        let sim = sim.clone();
        async move {
            let api: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
            let start = tokio::time::Instant::now();
            futures::stream::iter(0..N)
                .for_each_concurrent(8, |i| {
                    let api = api.clone();
                    async move {
                        // Spread over ~6 s (an absolute schedule, whatever the concurrency).
                        tokio::time::sleep_until(start + Duration::from_millis((i as u64) * 6))
                            .await;
                        while let Err(err) = api.create(&PostParams::default(), &pod(i)).await {
                            if matches!(&err, kube::Error::Api(s) if s.code == 409) {
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                })
                .await;
        }
    });

    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..20 {
        let mut child = spawn_recorder(kubeconfig.path(), &db);
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let alive = Duration::from_millis(150 + seed % 450);
        tokio::time::sleep(alive).await;
        child.kill().unwrap(); // SIGKILL: no flush, no goodbye
        child.wait().unwrap();
    }
    creator.await.unwrap();
    assert!(wait_until(Duration::from_secs(30), || async { finished(&sim, N) }).await);

    // A last recorder catches up, then stops on SIGTERM with exit 0.
    let mut child = spawn_recorder(kubeconfig.path(), &db);
    let store = podline_store::open(db.to_str().unwrap()).await.unwrap();
    let converged = wait_until(Duration::from_secs(30), || async {
        audit::compare(store.as_ref(), &sim.ground_truth())
            .await
            .is_ok_and(|r| r.is_ok())
    })
    .await;
    let report = audit::compare(store.as_ref(), &sim.ground_truth())
        .await
        .unwrap();
    assert!(converged, "{report}");
    assert_eq!(report.expected, N);

    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let status = wait_exit(&mut child, Duration::from_secs(15))
        .await
        .expect("SIGTERM must stop the recorder");
    assert!(status.success(), "exit after SIGTERM: {status:?}");
}

/// A pod object the recorder can't decode (the sim's `malform` fault garbles its status in every
/// watch event): the daemon logs a warning naming the pod, skips it, and records the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_the_recorder_cannot_decode_is_logged_by_name_and_the_daemon_keeps_going() {
    let sim = start_sim(test_config().bookmark_interval(Duration::from_millis(300))).await;
    sim.faults().push(
        FaultRule::new(FaultAction::Malform {
            name: "bad-*".into(),
        })
        .verb(FaultVerb::Watch)
        .resource("pods"),
    );
    let kubeconfig = kubeconfig_file(&sim);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let mut child = spawn_recorder(kubeconfig.path(), &db);
    // Create the pods once the recorder watches, so they reach it through the (garbled) watch.
    assert!(
        wait_until(Duration::from_secs(20), || async {
            sim.counts().get("watch", "pods") > 0
        })
        .await,
        "the recorder never started watching"
    );
    let api: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let named = |name: String| {
        let mut pod = pod(0);
        pod.metadata.name = Some(name);
        pod
    };
    for i in 0..10 {
        if i == 5 {
            api.create(&PostParams::default(), &named("bad-0".into()))
                .await
                .unwrap();
        }
        api.create(&PostParams::default(), &named(format!("good-{i}")))
            .await
            .unwrap();
    }
    let good_truth = || {
        let mut truth = sim.ground_truth();
        truth.retain(|h| h.name.starts_with("good-"));
        truth
    };
    assert!(wait_until(Duration::from_secs(20), || async { finished(&sim, 11) }).await);
    let store = podline_store::open(db.to_str().unwrap()).await.unwrap();
    let converged = wait_until(Duration::from_secs(20), || async {
        audit::compare(store.as_ref(), &good_truth())
            .await
            .is_ok_and(|r| r.is_ok())
    })
    .await;
    let report = audit::compare(store.as_ref(), &good_truth()).await.unwrap();
    assert!(converged, "the good pods were not all recorded: {report}");
    assert_eq!(report.expected, 10, "{report}");
    assert!(
        store
            .pod(&podline_store::PodKey::parse("bad-0", "default"))
            .await
            .unwrap()
            .is_none(),
        "the undecodable pod must be skipped, not half-recorded"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "one bad pod must not end the daemon"
    );

    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let status = wait_exit(&mut child, Duration::from_secs(15))
        .await
        .expect("SIGTERM must stop the recorder");
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "exit after SIGTERM: {status:?}\n{stderr}");
    let warning = stderr
        .lines()
        .find(|line| line.contains("cannot record this pod object"))
        .unwrap_or_else(|| panic!("no warning about the bad pod:\n{stderr}"));
    assert!(
        warning.contains("WARN")
            && warning.contains("bad-0")
            && warning.contains("pod status does not decode")
            && warning.contains("expected"),
        "the warning must name the pod and what is wrong: {warning}"
    );
}
