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

/// One exit-code policy: every subcommand's `--help` ends with its exit codes, and bad usage is 2
/// everywhere (clap's own code), never sysexits' 64.
#[test]
fn every_subcommand_help_should_document_its_exit_codes() {
    for sub in [
        "demo", "run", "sim", "record", "runs", "pods", "show", "ui", "gc",
    ] {
        let out = Command::new(BIN).args([sub, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{sub}: {help}");
        let codes = help
            .split("Exit codes")
            .nth(1)
            .unwrap_or_else(|| panic!("{sub} --help lists no exit codes:\n{help}"));
        assert!(
            codes.contains("\n  2 "),
            "{sub}: exit 2 undocumented:\n{codes}"
        );
        assert!(!codes.contains("\n  64 "), "{sub}: {codes}");
    }
}

#[test]
fn bad_timeout_values_stop_startup_naming_the_variable_value_and_expectation() {
    let out = run_with_env(&[("PODLINE_WATCH_CLIENT_TIMEOUT", "abc")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(r#"PODLINE_WATCH_CLIENT_TIMEOUT="abc" is not a duration"#)
            && stderr.contains("expected"),
        "{stderr}"
    );

    let out = run_with_env(&[("PODLINE_WATCH_SERVER_TIMEOUT", "0")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
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
    assert_eq!(out.status.code(), Some(2), "{stderr}");
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
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--watch-client-timeout"), "{stderr}");
}

fn spawn_recorder(kubeconfig: &std::path::Path, db: &std::path::Path) -> Child {
    spawn_recorder_cmd(kubeconfig, db)
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The command of [`spawn_recorder`] (1 s client timeout), to spawn differently.
fn spawn_recorder_cmd(kubeconfig: &std::path::Path, db: &std::path::Path) -> Command {
    let mut cmd = record_cmd(&[
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
    ]);
    cmd.stdout(Stdio::null());
    cmd
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

/// A 403 is a runtime error (exit 1), told apart from a usage error such as a bad flag (exit 2).
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
    assert_eq!(status.code(), Some(1), "{stderr}");
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
            field: podline_sim::fault::MalformField::Status,
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

/// GET `/metrics` from a recorder listening on `port`: the value of the sample `name` (with its
/// labels), 0 when absent or unreachable.
async fn metric(port: u16, name: &str) -> u64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return 0;
    };
    let request = "GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    if s.write_all(request.as_bytes()).await.is_err() {
        return 0;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out).await;
    out.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// Issue 27: pods whose `deletionTimestamp` no client decodes (the sim serves "not-a-time" for
/// `bad-*` in every LIST, GET and watch event). kube-rs read such a watch line as a Status with
/// code 0 and the recorder exited ("watch stream returned 0"), and a restart resumed into the
/// same event. Now: one in the first LIST and one in a watch event are each logged by name
/// (never the value), counted on `/metrics`, and skipped; the good pods are all recorded; the
/// recorder keeps running, and a restart over the same store (resuming from its stored
/// resourceVersion) keeps running and recording too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_no_client_can_decode_is_skipped_and_counted_and_the_recorder_survives_restarts() {
    const SKIPPED: &str = "podline_record_watch_skipped_total{kind=\"object\"}";
    let sim = start_sim(test_config().bookmark_interval(Duration::from_millis(300))).await;
    sim.faults().push(
        FaultRule::new(FaultAction::Malform {
            name: "bad-*".into(),
            field: podline_sim::fault::MalformField::DeletionTimestamp,
        })
        .resource("pods"),
    );
    let kubeconfig = kubeconfig_file(&sim);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let api: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let create = |name: &str| {
        let mut pod = pod(0);
        pod.metadata.name = Some(name.to_owned());
        let api = api.clone();
        async move { api.create(&PostParams::default(), &pod).await.unwrap() }
    };
    // In the recorder's first LIST.
    create("bad-0").await;
    create("good-a").await;
    let port = closed_port();
    let listen = format!("127.0.0.1:{port}");
    let recorder = || {
        let mut cmd = record_cmd(&[
            "--kubeconfig",
            kubeconfig.path().to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
            "--listen",
            &listen,
            "--watch-client-timeout",
            "1s",
            "--watch-server-timeout",
            "60",
        ]);
        cmd.env_remove("KUBECONFIG").stdout(Stdio::null());
        spawn_with_lines(&mut cmd)
    };
    let (mut child, mut lines) = recorder();
    let listed = await_line(&mut lines, Duration::from_secs(20), |l| {
        l.contains("skipped") && l.contains("bad-0")
    })
    .await
    .unwrap_or_else(|seen| panic!("no warning about the listed bad pod:\n{seen}"));
    // In watch events (ADDED, then each status change).
    for i in 0..5 {
        create(&format!("good-{i}")).await;
    }
    create("bad-1").await;
    for i in 5..10 {
        create(&format!("good-{i}")).await;
    }
    let watched = await_line(&mut lines, Duration::from_secs(20), |l| {
        l.contains("skipped") && l.contains("bad-1")
    })
    .await
    .unwrap_or_else(|seen| panic!("no warning about the watched bad pod:\n{seen}"));
    for line in [&listed, &watched] {
        let line = strip_ansi(line);
        assert!(
            line.contains("WARN")
                && line.contains("metadata.deletionTimestamp")
                && !line.contains("not-a-time"),
            "the warning names the pod and the field, never the value: {line}"
        );
    }
    let good = |n: usize| {
        let sim = sim.clone();
        move || {
            let mut truth = sim.ground_truth();
            truth.retain(|h| h.name.starts_with("good-"));
            assert_eq!(truth.len(), n);
            truth
        }
    };
    assert!(wait_until(Duration::from_secs(30), || async { finished(&sim, 13) }).await);
    let store = podline_store::open(db.to_str().unwrap()).await.unwrap();
    let converged = |truth: Vec<_>| {
        let store = store.clone();
        async move {
            wait_until(Duration::from_secs(20), || async {
                audit::compare(store.as_ref(), &truth)
                    .await
                    .is_ok_and(|r| r.is_ok())
            })
            .await
        }
    };
    assert!(
        converged(good(11)()).await,
        "the good pods were not all recorded"
    );
    assert!(metric(port, SKIPPED).await >= 2, "skips are counted");
    assert!(
        child.try_wait().unwrap().is_none(),
        "undecodable pods must not end the recorder"
    );

    // A crash, then a restart that resumes from the stored resourceVersion.
    child.kill().unwrap();
    child.wait().unwrap();
    let (mut child, _lines) = recorder();
    create("bad-2").await;
    create("good-10").await;
    assert!(wait_until(Duration::from_secs(30), || async { finished(&sim, 15) }).await);
    assert!(
        converged(good(12)()).await,
        "the restarted recorder records"
    );
    assert!(
        wait_until(Duration::from_secs(10), || async {
            metric(port, SKIPPED).await >= 1
        })
        .await,
        "the restarted recorder counts its skips"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "the restarted recorder must keep running"
    );
    for name in ["bad-0", "bad-1", "bad-2"] {
        assert!(
            store
                .pod(&podline_store::PodKey::parse(name, "default"))
                .await
                .unwrap()
                .is_none(),
            "{name} must be skipped, not half-recorded"
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Issue 27: a recorded pod that stops decoding (the sim's malform fault from now on), then a
/// re-list (a 410 on the next watch): the re-list completes, skipping the pod, and its
/// reconcile does not mark that pod vanished, as it was listed, only unreadable. Its deletion,
/// whose DELETED event does not decode either, is recorded with its final state unknown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_pod_that_does_not_decode_is_not_vanished_by_a_relist() {
    const INIT_DONE: &str = "podline_record_watch_events_total{type=\"init_done\"}";
    let sim = start_sim(test_config().bookmark_interval(Duration::from_millis(300))).await;
    let kubeconfig = kubeconfig_file(&sim);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let api: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let mut long = pod(0);
    long.metadata.name = Some("flip-0".into());
    long.metadata
        .annotations
        .get_or_insert_default()
        .insert("sim.podline.io/duration".into(), "120s".into());
    api.create(&PostParams::default(), &long).await.unwrap();
    let port = closed_port();
    let listen = format!("127.0.0.1:{port}");
    // Server timeout 2 s: the watch is re-opened every 2 s, so the 410 below comes soon.
    let mut cmd = record_cmd(&[
        "--kubeconfig",
        kubeconfig.path().to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--listen",
        &listen,
        "--watch-client-timeout",
        "1s",
        "--watch-server-timeout",
        "2",
    ]);
    cmd.env_remove("KUBECONFIG").stdout(Stdio::null());
    let (mut child, mut _lines) = spawn_with_lines(&mut cmd);
    let store = podline_store::open(db.to_str().unwrap()).await.unwrap();
    let key = podline_store::PodKey::parse("flip-0", "default");
    let recorded = wait_until(Duration::from_secs(20), || async {
        store.pod(&key).await.ok().flatten().is_some()
    })
    .await;
    assert!(recorded, "flip-0 was never recorded");
    assert!(
        wait_until(Duration::from_secs(10), || async {
            metric(port, INIT_DONE).await >= 1
        })
        .await
    );

    // The 410 first: a request gets the first matching rule's action.
    sim.faults().push(
        FaultRule::new(FaultAction::status(410))
            .verb(FaultVerb::Watch)
            .resource("pods")
            .times(1),
    );
    sim.faults().push(
        FaultRule::new(FaultAction::Malform {
            name: "flip-*".into(),
            field: podline_sim::fault::MalformField::DeletionTimestamp,
        })
        .resource("pods"),
    );
    let relisted = wait_until(Duration::from_secs(20), || async {
        metric(port, INIT_DONE).await >= 2
    })
    .await;
    if !relisted {
        child.kill().unwrap();
        let mut seen = String::new();
        while let Ok(Some(line)) = tokio::time::timeout(Duration::from_secs(1), _lines.recv()).await
        {
            seen.push_str(&line);
            seen.push('\n');
        }
        panic!("the re-list with an undecodable pod never completed:\n{seen}");
    }
    // Past the batch that would carry a vanished mark: the writer lingers 10 ms.
    let skipped = "podline_record_watch_skipped_total{kind=\"object\"}";
    assert!(metric(port, skipped).await >= 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pod = store
        .pod(&key)
        .await
        .unwrap()
        .expect("flip-0 stays recorded");
    assert!(
        pod.deleted_at.is_none(),
        "a listed pod that does not decode is not vanished: {pod:?}"
    );

    // Its DELETED event does not decode either: recorded deleted, final state unknown.
    api.delete(
        "flip-0",
        &kube::api::DeleteParams::default().grace_period(0),
    )
    .await
    .unwrap();
    let deleted = wait_until(Duration::from_secs(20), || async {
        store
            .pod(&key)
            .await
            .ok()
            .flatten()
            .is_some_and(|p| p.deleted_at.is_some())
    })
    .await;
    assert!(deleted, "the skipped DELETED event was not recorded");
    let pod = store.pod(&key).await.unwrap().unwrap();
    assert!(!pod.final_state_observed, "{pod:?}");
    assert!(child.try_wait().unwrap().is_none());
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Issue 27: `record --finalize` with a pod no client decodes: its start-up sweep lists pod
/// metadata, and kube logged the whole undecodable page at WARN (every pod's annotations); no
/// line may carry an object's values. The recorder still records the other pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_log_line_dumps_an_undecodable_page_of_pods() {
    let sim = start_sim(test_config().bookmark_interval(Duration::from_millis(300))).await;
    sim.faults().push(
        FaultRule::new(FaultAction::Malform {
            name: "bad-*".into(),
            field: podline_sim::fault::MalformField::DeletionTimestamp,
        })
        .resource("pods"),
    );
    let kubeconfig = kubeconfig_file(&sim);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let api: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    for name in ["bad-0", "good-0"] {
        let mut p = pod(0);
        p.metadata.name = Some(name.into());
        p.metadata
            .annotations
            .get_or_insert_default()
            .insert("note".into(), "hunter2".into());
        api.create(&PostParams::default(), &p).await.unwrap();
    }
    let mut cmd = spawn_recorder_cmd(kubeconfig.path(), &db);
    cmd.env_remove("KUBECONFIG").arg("--finalize");
    let (mut child, mut lines) = spawn_with_lines(&mut cmd);
    let store = podline_store::open(db.to_str().unwrap()).await.unwrap();
    let key = podline_store::PodKey::parse("good-0", "default");
    let recorded = wait_until(Duration::from_secs(20), || async {
        store.pod(&key).await.ok().flatten().is_some()
    })
    .await;
    child.kill().unwrap();
    child.wait().unwrap();
    let mut seen = String::new();
    while let Ok(Some(line)) = tokio::time::timeout(Duration::from_secs(1), lines.recv()).await {
        seen.push_str(&line);
        seen.push('\n');
    }
    assert!(recorded, "good-0 was not recorded:\n{seen}");
    assert!(
        seen.contains("bad-0"),
        "the skip is logged by name:\n{seen}"
    );
    assert!(
        !seen.contains("hunter2") && !seen.contains("not-a-time"),
        "a log line carries an object's values:\n{seen}"
    );
}

/// A kubeconfig naming `server`, without credentials.
fn kubeconfig_for(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster: {{ server: \"{server}\" }}\ncontexts:\n- name: c\n  context: {{ cluster: c, user: u }}\nusers:\n- name: u\n  user: {{}}\n"
    )
}

/// `line` without the terminal colour codes tracing writes around field names.
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... letter
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A port nothing listens on (bound, then closed).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Every flag of `podline record` is checked before it connects or opens the store: a bad value
/// exits 2 at once (the usage code of every subcommand) with a message naming the flag and
/// what is expected, the `--db` file is never
/// created and the API server (a listener the test owns) never sees a connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_record_flag_stops_startup_before_any_connection_or_database() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let server = format!("http://{}", listener.local_addr().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_for(&server)).unwrap();
    let long_name = "a".repeat(64);
    let elect = ["--leader-elect", "--leader-identity", "r0"];
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            [&elect[..], &["--leader-elect-lease-duration", "abc"]].concat(),
            vec!["--leader-elect-lease-duration", "\"abc\"", "expected"],
        ),
        (
            [
                &elect[..],
                &[
                    "--leader-elect-lease-duration",
                    "3s",
                    "--leader-elect-renew-deadline",
                    "5s",
                ],
            ]
            .concat(),
            vec!["--leader-elect", "renew deadline"],
        ),
        (
            vec!["--leader-elect"],
            vec!["--leader-identity", "POD_NAME"],
        ),
        (
            [&elect[..], &["--lease-name", "Recorder_1"]].concat(),
            vec!["--lease-name", "Recorder_1", "expected"],
        ),
        (
            [&elect[..], &["--lease-namespace", "team_a"]].concat(),
            vec!["--lease-namespace", "team_a", "expected"],
        ),
        (
            vec!["--run-label", "bad key!"],
            vec![
                "--run-label",
                "\"bad key!\"",
                "expected a Kubernetes label key",
            ],
        ),
        (
            vec!["--run-label", "Example.com/run"],
            vec!["--run-label", "prefix is not a DNS subdomain", "expected"],
        ),
        (
            vec!["--run-label", "team/"],
            vec!["--run-label", "1 to 63 characters", "expected"],
        ),
        (
            vec!["--run-label", &long_name],
            vec!["--run-label", "1 to 63 characters"],
        ),
        (
            vec!["--run-label=-run"],
            vec!["--run-label", "letter or digit", "expected"],
        ),
        (
            vec!["--db", "mysql://h/db"],
            vec!["--db", "unsupported scheme"],
        ),
        (
            vec!["-n", "Team_A"],
            vec!["--namespace", "Team_A", "expected"],
        ),
        (
            vec!["--http2-ping-interval", "soon"],
            vec!["soon", "expected"],
        ),
    ];
    for (n, (flags, expected)) in cases.iter().enumerate() {
        let db = dir.path().join(format!("case-{n}.db"));
        let mut args = vec![
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ];
        if !flags.contains(&"--db") {
            args.extend(["--db", db.to_str().unwrap()]);
        }
        args.extend_from_slice(flags);
        let mut child = record_cmd(&args)
            .env_remove("KUBECONFIG")
            .env_remove("POD_NAME")
            .env_remove("HOSTNAME")
            .env_remove("PODLINE_LEASE_DURATION")
            .env_remove("PODLINE_LEASE_NAME")
            .env_remove("POD_NAMESPACE")
            .spawn()
            .unwrap();
        let status = wait_exit(&mut child, Duration::from_secs(10)).await;
        if status.is_none() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        let mut stderr = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        let status = status.unwrap_or_else(|| panic!("{flags:?} did not stop startup:\n{stderr}"));
        assert_eq!(status.code(), Some(2), "{flags:?}:\n{stderr}");
        for text in expected {
            assert!(
                stderr.contains(text),
                "{flags:?}: no {text:?} in:\n{stderr}"
            );
        }
        assert!(
            !db.exists(),
            "{flags:?}: the store was created before the flags were checked"
        );
        assert!(
            matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "{flags:?}: podline connected to the API server before the flags were checked"
        );
    }
}

/// Spawns `cmd` and returns the child and its stderr lines as they come.
fn spawn_with_lines(cmd: &mut Command) -> (Child, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Waits (at most `within`) for a stderr line matching `found`; returns it, or everything read.
async fn await_line(
    lines: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    within: Duration,
    found: impl Fn(&str) -> bool,
) -> Result<String, String> {
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, lines.recv()).await {
            Ok(Some(line)) if found(&line) => return Ok(line),
            Ok(Some(line)) => {
                seen.push_str(&line);
                seen.push('\n');
            }
            Ok(None) | Err(_) => return Err(seen),
        }
    }
}

/// The recorder against an API server that is down from the start: it is not ready, and it says
/// why at once, naming the server and the error (then at most every 10 s, with a count).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorder_whose_api_server_is_down_warns_at_once_naming_server_and_error() {
    let port = closed_port();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        kubeconfig_for(&format!("http://127.0.0.1:{port}")),
    )
    .unwrap();
    let db = dir.path().join("p.db");
    let (mut child, mut lines) =
        spawn_with_lines(spawn_recorder_cmd(&kubeconfig, &db).env_remove("KUBECONFIG"));
    let warning = await_line(&mut lines, Duration::from_secs(10), |line| {
        line.contains("WARN") && line.contains("cannot watch pods")
    })
    .await;
    child.kill().unwrap();
    child.wait().unwrap();
    let warning = warning.unwrap_or_else(|seen| panic!("no warning within 10 s:\n{seen}"));
    let warning = strip_ansi(&warning);
    assert!(
        warning.contains(&format!("127.0.0.1:{port}"))
            && warning.to_lowercase().contains("connection refused")
            && warning.contains("since start")
            && warning.contains("failures=1"),
        "the warning must name the server and the error: {warning}"
    );
}

/// `KUBECONFIG=` (empty) counts as unset, as for kubectl: `~/.kube/config` is used (here it
/// names a closed port, which the recorder's warning then names) instead of failing on "".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_kubeconfig_variable_counts_as_unset() {
    let port = closed_port();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".kube")).unwrap();
    std::fs::write(
        home.path().join(".kube").join("config"),
        kubeconfig_for(&format!("http://127.0.0.1:{port}")),
    )
    .unwrap();
    let db = home.path().join("p.db");
    let mut cmd = record_cmd(&[
        "--db",
        db.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--watch-client-timeout",
        "1s",
        "--watch-server-timeout",
        "60",
    ]);
    cmd.env("KUBECONFIG", "").env("HOME", home.path());
    let (mut child, mut lines) = spawn_with_lines(&mut cmd);
    let warning = await_line(&mut lines, Duration::from_secs(10), |line| {
        line.contains("cannot watch pods") || line.starts_with("error:")
    })
    .await;
    child.kill().unwrap();
    child.wait().unwrap();
    let warning = warning.unwrap_or_else(|seen| panic!("nothing within 10 s:\n{seen}"));
    assert!(
        warning.contains("cannot watch pods") && warning.contains(&format!("127.0.0.1:{port}")),
        "~/.kube/config was not used: {warning}"
    );
}

/// A TLS server whose certificate another CA signed: the recorder exits non-zero saying the
/// certificate was not trusted (not signed by that CA) and which CA it used, each cause printed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_stops_the_recorder_naming_the_certificate_problem_once() {
    let sim = start_sim(podline_testkit::SimConfig::default().kubelet_enabled(false)).await;
    let other = start_sim(podline_testkit::SimConfig::default().kubelet_enabled(false)).await;
    let ca_data = |yaml: &str| {
        yaml.lines()
            .find_map(|line| line.trim().strip_prefix("certificate-authority-data: "))
            .expect("a TLS sim's kubeconfig carries its CA")
            .to_owned()
    };
    let yaml = sim.kubeconfig_yaml();
    let wrong = yaml.replace(&ca_data(&yaml), &ca_data(&other.kubeconfig_yaml()));
    assert_ne!(wrong, yaml);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("wrong-ca.kubeconfig");
    std::fs::write(&kubeconfig, wrong).unwrap();
    let mut child = spawn_recorder(&kubeconfig, &dir.path().join("p.db"));
    let status = wait_exit(&mut child, Duration::from_secs(15))
        .await
        .expect("a rejected certificate must end the recorder");
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "{stderr}");
    let error = stderr
        .lines()
        .find(|line| line.starts_with("error:"))
        .unwrap_or_else(|| panic!("no error line:\n{stderr}"));
    assert!(
        error.contains("certificate was not trusted")
            && error.contains("not signed by")
            && error.contains("certificate-authority-data")
            && error.contains(kubeconfig.to_str().unwrap()),
        "{error}"
    );
    assert_eq!(
        error.matches("invalid peer certificate").count(),
        1,
        "{error}"
    );
}

/// `--listen` on an address in use fails before the recorder connects or creates its store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_address_in_use_fails_before_any_connection_or_database() {
    let api = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    api.set_nonblocking(true).unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        kubeconfig_for(&format!("http://{}", api.local_addr().unwrap())),
    )
    .unwrap();
    let db = dir.path().join("p.db");
    let listen = taken.local_addr().unwrap().to_string();
    let out = record_cmd(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--listen",
        &listen,
    ])
    .env_remove("KUBECONFIG")
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on --listen {listen}")),
        "{stderr}"
    );
    assert!(!db.exists(), "the store was created first");
    assert!(
        matches!(api.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "podline connected to the API server first"
    );
}
