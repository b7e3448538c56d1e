//! Issue 17, recorder half: no lost final state, however long the recorder was down. Pods of
//! `podline run --finalizer` carry podline.io/record; `podline record --finalize` removes it only
//! after their final state is committed, so a pod deleted while no recorder runs waits in
//! Terminating until one does. `podline gc --finalizers` is the valve for uninstalling. Each
//! test drives the binaries against the sim, whose watch history is made short.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use podline_client::finalizer::{RECORD_FINALIZER, has_finalizer};
use podline_mlmd::kfp::KFP_FINALIZER;
use podline_testkit::{Sim, audit, client, kubeconfig_file, start_sim, test_config, wait_until};
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// The sim's watch history in these tests: a recorder down for longer must re-list.
const HISTORY: Duration = Duration::from_secs(3);
/// Pods of the test.
const PODS: usize = 300;

fn podline(kubeconfig: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_podline"));
    // The client's KUBECONFIG: every subcommand here reads it (flags follow the subcommand).
    cmd.env("KUBECONFIG", kubeconfig)
        .env_remove("PODLINE_DB")
        .env_remove("PODLINE_FINALIZE")
        .env_remove("PODLINE_FINALIZER")
        .env("PODLINE_CREATE_BACKOFF_BASE", "10ms")
        .env("PODLINE_CREATE_BACKOFF_CAP", "200ms")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    cmd
}

fn recorder(kubeconfig: &Path, db: &Path, finalize: bool) -> Child {
    let mut cmd = podline(kubeconfig);
    cmd.arg("record")
        .arg("--db")
        .arg(db)
        .args(["--listen", "127.0.0.1:0"])
        .args([
            "--watch-server-timeout",
            "10s",
            "--watch-client-timeout",
            "3s",
        ]);
    if finalize {
        cmd.arg("--finalize");
    }
    cmd.spawn().unwrap()
}

/// A tasks file of `n` scripted tasks (0.3 to 1.2 s each; every 7th exits 3).
fn tasks_file(dir: &Path, n: usize) -> std::path::PathBuf {
    let tasks: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({
                "name": format!("t{i}"),
                "image": "busybox",
                "command": ["true"],
                "annotations": {
                    "sim.podline.io/duration": format!("{}ms", 300 + (i % 10) * 100),
                    "sim.podline.io/exit-code": if i % 7 == 3 { "3" } else { "0" },
                },
            })
        })
        .collect();
    let path = dir.join("tasks.json");
    std::fs::write(&path, serde_json::to_vec(&tasks).unwrap()).unwrap();
    path
}

fn sim_config() -> podline_testkit::SimConfig {
    test_config()
        .history_window(HISTORY)
        .bookmark_interval(Duration::from_millis(300))
}

async fn all_pods(sim: &Sim) -> Vec<Pod> {
    let pods: Api<Pod> = Api::all(client(sim).await);
    pods.list(&ListParams::default()).await.unwrap().items
}

/// Kills the recorder once it has recorded `seen` pods, while the run goes on; returns when.
async fn kill_after_recording(child: &mut Child, db: &Path, seen: u64) -> Instant {
    let recorded = wait_until(Duration::from_secs(30), || async {
        match podline_store::open_read_only(db.to_str().unwrap()).await {
            Ok(store) => store.counts().await.is_ok_and(|c| c.pods >= seen),
            Err(_) => false,
        }
    })
    .await;
    assert!(recorded, "the recorder never recorded {seen} pods");
    child.start_kill().unwrap(); // SIGKILL: no flush, no removal, nothing
    child.wait().await.unwrap();
    Instant::now()
}

/// The done-when test: the recorder is killed while 300 pods run; they finish and are deleted
/// while it is down for longer than the watch history; after the restart the store holds all
/// 300 final states (phase, exit codes; the audit against the sim's ground truth), none
/// vanished, every finalizer removed, no pod left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorder_down_past_the_watch_history_loses_no_final_state_with_finalizers() {
    let started = Instant::now();
    let sim = start_sim(sim_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kc = kubeconfig.path();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("podline.db");
    let tasks = tasks_file(dir.path(), PODS);

    let mut rec = recorder(kc, &db, true);
    let mut run = podline(kc)
        .args(["run", "--parallel", "50", "--finalizer", "-f"])
        .arg(&tasks)
        .spawn()
        .unwrap();
    let killed = kill_after_recording(&mut rec, &db, 50).await;

    // The launcher never waits for a pod held in Terminating: it finishes with the tasks' code
    // (1: some tasks exited 3).
    let status = tokio::time::timeout(Duration::from_secs(40), run.wait())
        .await
        .expect("the launcher hung on pods waiting in Terminating")
        .unwrap();
    assert_eq!(status.code(), Some(1));
    let held = all_pods(&sim).await;
    // A busy machine may let the recorder record and release the first pods to finish before it
    // is killed: each of those went only after its final state was committed. Every other pod
    // waits in Terminating for the recorder.
    let at_kill = podline_store::open_read_only(db.to_str().unwrap())
        .await
        .unwrap()
        .counts()
        .await
        .unwrap();
    let final_at_kill: u64 = ["Succeeded", "Failed"]
        .iter()
        .filter_map(|phase| at_kill.phases.get(*phase))
        .sum();
    let gone = (PODS - held.len()) as u64;
    assert!(
        gone <= final_at_kill,
        "{gone} pods went before the recorder committed their final state: {at_kill:?}"
    );
    assert!(
        held.len() >= PODS / 2,
        "the outage holds too few pods to test anything: {}",
        held.len()
    );
    assert!(
        held.iter().all(|p| p.metadata.deletion_timestamp.is_some()
            && has_finalizer(&p.metadata, RECORD_FINALIZER))
    );

    // Down for longer than the watch history: the restart must re-list (no time to await but
    // the history's own).
    if let Some(left) = (HISTORY + Duration::from_secs(1)).checked_sub(killed.elapsed()) {
        tokio::time::sleep(left).await;
    }
    sim.reset_counts();
    let mut rec = recorder(kc, &db, true);
    let released = wait_until(Duration::from_secs(30), || async {
        all_pods(&sim).await.is_empty()
    })
    .await;
    assert!(released, "pods left: {}", all_pods(&sim).await.len());
    let store = podline_store::open_read_only(db.to_str().unwrap())
        .await
        .unwrap();
    let converged = wait_until(Duration::from_secs(15), || async {
        audit::compare(store.as_ref(), &sim.ground_truth())
            .await
            .is_ok_and(|r| r.is_ok() && r.vanished.is_empty())
            && store.counts().await.is_ok_and(|c| c.deleted == PODS as u64)
    })
    .await;
    let report = audit::compare(store.as_ref(), &sim.ground_truth())
        .await
        .unwrap();
    assert!(converged, "{report}; vanished: {:?}", report.vanished);
    assert_eq!(report.expected, PODS);
    let counts = store.counts().await.unwrap();
    assert_eq!(
        (counts.pods, counts.vanished),
        (PODS as u64, 0),
        "{counts:?}"
    );
    assert!(
        sim.counts().get("list", "pods") >= 2,
        "the restart did not re-list (the history outlived the outage?)"
    );
    rec.start_kill().unwrap();
    rec.wait().await.unwrap();
    eprintln!("300-pod finalizer test took {:?}", started.elapsed());
}

/// `--finalize` off: the same outage behaves as without this feature: no patch request at all,
/// pods are deleted at once, and the pods the recorder saw alive vanish (final state unknown).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_finalizers_the_same_outage_vanishes_pods_and_sends_no_patch() {
    let sim = start_sim(sim_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kc = kubeconfig.path();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("podline.db");
    let tasks = tasks_file(dir.path(), 100);

    let mut rec = recorder(kc, &db, false);
    let mut run = podline(kc)
        .args(["run", "--parallel", "50", "-f"])
        .arg(&tasks)
        .spawn()
        .unwrap();
    let killed = kill_after_recording(&mut rec, &db, 50).await;
    let status = tokio::time::timeout(Duration::from_secs(40), run.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(1));
    assert!(
        wait_until(Duration::from_secs(10), || async {
            all_pods(&sim).await.is_empty()
        })
        .await,
        "without finalizers nothing holds a deleted pod"
    );
    if let Some(left) = (HISTORY + Duration::from_secs(1)).checked_sub(killed.elapsed()) {
        tokio::time::sleep(left).await;
    }
    let mut rec = recorder(kc, &db, false);
    let store = podline_store::open_read_only(db.to_str().unwrap())
        .await
        .unwrap();
    let reconciled = wait_until(Duration::from_secs(15), || async {
        store
            .counts()
            .await
            .is_ok_and(|c| c.vanished > 0 && c.live == 0)
    })
    .await;
    assert!(reconciled, "{:?}", store.counts().await.unwrap());
    assert_eq!(
        sim.counts().get("patch", "pods"),
        0,
        "no patch without --finalize"
    );
    rec.start_kill().unwrap();
    rec.wait().await.unwrap();
}

/// `podline run --finalizer` of one task: the pod carries the finalizer from its create, and the
/// launcher exits with the task's code although the deleted pod waits in Terminating.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_a_finalizer_exits_with_the_tasks_code_while_the_pod_waits() {
    let sim = start_sim(sim_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        podline(kubeconfig.path())
            .args(["run", "--image", "busybox", "--finalizer", "--name", "one"])
            .args(["--annotation", "sim.podline.io/exit-code=3"])
            .args(["--annotation", "sim.podline.io/duration=200ms"])
            .args(["--", "false"])
            .output(),
    )
    .await
    .expect("the launcher waited for the held pod")
    .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let pods = all_pods(&sim).await;
    assert_eq!(pods.len(), 1);
    assert!(pods[0].metadata.deletion_timestamp.is_some());
    assert_eq!(
        pods[0].metadata.finalizers.as_deref(),
        Some(&[RECORD_FINALIZER.to_owned()][..])
    );
}

/// The uninstall valve: `podline gc --finalizers` removes podline.io/record, every label
/// shard's podline.io/record-SHARD (issue 27) and KFP mode's podline.io/kfp-writer from every pod
/// of the namespace (a deleted one then goes), leaves other
/// finalizers and other namespaces alone, and with -A does the rest; it reports the count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_finalizers_releases_every_pod_in_scope_and_reports_the_count() {
    let sim = start_sim(test_config().kubelet_enabled(false)).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kube = client(&sim).await;
    let create = |ns: &str, name: &str, finalizers: &[&str]| {
        let api: Api<Pod> = Api::namespaced(kube.clone(), ns);
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "finalizers": finalizers },
            "spec": { "containers": [{ "name": "main", "image": "busybox" }] },
        }))
        .unwrap();
        async move { api.create(&PostParams::default(), &pod).await.unwrap() }
    };
    create("default", "a", &[RECORD_FINALIZER]).await;
    create("default", "b", &[RECORD_FINALIZER, "example.com/keep"]).await;
    create("default", "c", &[]).await;
    create("default", "e", &[KFP_FINALIZER, RECORD_FINALIZER]).await;
    create("default", "k", &["example.com/keep", KFP_FINALIZER]).await;
    create(
        "default",
        "s",
        &[
            "podline.io/record-team-a",
            "podline.io/record-b",
            RECORD_FINALIZER,
        ],
    )
    .await;
    // Looks like a shard's, but no shard could be named so: not podline's.
    create("default", "n", &["podline.io/record-Not_A_Shard"]).await;
    create("kube-system", "d", &[RECORD_FINALIZER]).await;
    let default: Api<Pod> = Api::namespaced(kube.clone(), "default");
    default.delete("a", &DeleteParams::default()).await.unwrap();
    default.delete("e", &DeleteParams::default()).await.unwrap();
    default.delete("s", &DeleteParams::default()).await.unwrap();
    assert!(default.get_opt("a").await.unwrap().is_some(), "held");
    assert!(default.get_opt("s").await.unwrap().is_some(), "held");
    assert!(default.get_opt("e").await.unwrap().is_some(), "held");

    let out = podline(kubeconfig.path())
        .args(["gc", "--finalizers"])
        .stdout(Stdio::piped())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains(
            "7 pod(s) seen, finalizers podline.io/record, podline.io/record-SHARD and podline.io/kfp-writer removed from 5, 0 failed"
        ),
        "{stdout}"
    );
    assert!(
        default.get_opt("a").await.unwrap().is_none(),
        "released and gone"
    );
    assert!(
        default.get_opt("e").await.unwrap().is_none(),
        "both finalizers removed, and gone"
    );
    assert!(
        default.get_opt("s").await.unwrap().is_none(),
        "every shard's finalizer removed, and gone"
    );
    let n = default.get("n").await.unwrap();
    assert_eq!(
        n.metadata.finalizers.unwrap(),
        ["podline.io/record-Not_A_Shard"]
    );
    let k = default.get("k").await.unwrap();
    assert_eq!(k.metadata.finalizers.unwrap(), ["example.com/keep"]);
    let b = default.get("b").await.unwrap();
    assert_eq!(b.metadata.finalizers.unwrap(), ["example.com/keep"]);
    let other: Api<Pod> = Api::namespaced(kube.clone(), "kube-system");
    assert!(has_finalizer(
        &other.get("d").await.unwrap().metadata,
        RECORD_FINALIZER
    ));

    let out = podline(kubeconfig.path())
        .args(["gc", "--finalizers", "-A", "-o", "json"])
        .stdout(Stdio::piped())
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["released"], 1, "{report}");
    assert!(!has_finalizer(
        &other.get("d").await.unwrap().metadata,
        RECORD_FINALIZER
    ));
}

/// Issue 27: a `--finalize` recorder of a label scope must be a named shard (its own
/// finalizer), a bad shard name and `--shard` with `--kfp` are refused, each with exit code 2
/// and what was expected, before anything is connected (the kubeconfig points nowhere).
#[tokio::test]
async fn an_unnamed_finalizing_label_shard_is_refused_before_connecting() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("nowhere.yaml");
    for (args, expected) in [
        (&["--finalize", "-l", "shard=a"][..], "needs --shard NAME"),
        (
            &["--finalize", "-l", "shard=a", "--shard", "A_1"][..],
            "--shard: invalid shard name",
        ),
        (
            &["--kfp", "--finalize", "--shard", "a"][..],
            "expected no --shard with --kfp",
        ),
    ] {
        let out = podline(&kubeconfig)
            .arg("record")
            .args(["--db"])
            .arg(dir.path().join("podline.db"))
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("PODLINE_SHARD")
            .stderr(Stdio::piped())
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    assert!(
        !dir.path().join("podline.db").exists(),
        "nothing is created"
    );
}

/// The flags are documented where users look.
#[test]
fn help_documents_the_finalizer_flags() {
    let help = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_podline"))
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let record = help(&["record", "--help"]);
    assert!(
        record.contains("--finalize") && record.contains("PODLINE_FINALIZE"),
        "{record}"
    );
    assert!(record.contains("gc --finalizers"), "{record}");
    assert!(record.contains("podline.io/kfp-writer"), "{record}");
    let run = help(&["run", "--help"]);
    assert!(
        run.contains("--finalizer") && run.contains("opt-in") || run.contains("Opt-in"),
        "{run}"
    );
    assert!(
        record.contains("--shard") && record.contains("podline.io/record-SHARD"),
        "{record}"
    );
    let gc = help(&["gc", "--help"]);
    assert!(gc.contains("--finalizers"), "{gc}");
    assert!(gc.contains("podline.io/record-SHARD"), "{gc}");
    assert!(
        gc.contains("podline.io/record") && gc.contains("podline.io/kfp-writer"),
        "{gc}"
    );
}

/// SIGTERM of `podline run --finalizer`: the pod is deleted and held in Terminating, and the
/// launcher exits 143 at once instead of waiting for it to disappear.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_of_a_run_with_a_finalizer_exits_143_without_waiting_for_the_pod() {
    let sim = start_sim(sim_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let child = podline(kubeconfig.path())
        .args(["run", "--image", "busybox", "--finalizer"])
        .args(["--annotation", "sim.podline.io/duration=300s"])
        .args(["--", "sleep", "300"])
        .spawn()
        .unwrap();
    let running = wait_until(Duration::from_secs(20), || async {
        all_pods(&sim)
            .await
            .iter()
            .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
    })
    .await;
    assert!(running);
    let pid = child.id().unwrap().to_string();
    let term = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(term.success());
    let out = tokio::time::timeout(Duration::from_secs(15), child.wait_with_output())
        .await
        .expect("the launcher waited for the held pod")
        .unwrap();
    assert_eq!(out.status.code(), Some(143));
    let pods = all_pods(&sim).await;
    assert_eq!(pods.len(), 1);
    assert!(pods[0].metadata.deletion_timestamp.is_some());
    assert!(has_finalizer(&pods[0].metadata, RECORD_FINALIZER));
}

/// Issue 27: one pod whose `deletionTimestamp` no client decodes (the sim's `malform` fault,
/// on LISTs) failed `gc --finalizers`'s whole listing, so no pod was released. Now the others
/// are released and the bad one is named (without its values) and fails the run (exit 1): its
/// finalizers could not be read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_finalizers_releases_the_rest_when_one_pod_does_not_decode() {
    use podline_sim::{FaultAction, FaultRule, FaultVerb};

    let sim = start_sim(test_config().kubelet_enabled(false)).await;
    let kubeconfig = kubeconfig_file(&sim);
    let api: Api<Pod> = Api::namespaced(client(&sim).await, "default");
    for name in ["bad-held", "held"] {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "finalizers": [RECORD_FINALIZER] },
            "spec": { "containers": [{ "name": "main", "image": "busybox" }] },
        }))
        .unwrap();
        api.create(&PostParams::default(), &pod).await.unwrap();
    }
    sim.faults().push(
        FaultRule::new(FaultAction::Malform {
            name: "bad-*".into(),
            field: podline_sim::fault::MalformField::DeletionTimestamp,
        })
        .verb(FaultVerb::List)
        .resource("pods"),
    );
    let out = podline(kubeconfig.path())
        .args(["gc", "--finalizers", "-o", "json"])
        .stdout(Stdio::piped())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&report["pods"], &report["released"]),
        (&2.into(), &1.into()),
        "{report}"
    );
    let failed = report["failed"].as_array().expect("failed");
    assert!(
        failed.len() == 1
            && failed[0].as_str().is_some_and(|f| {
                f.contains("default/bad-held")
                    && f.contains("metadata.deletionTimestamp")
                    && !f.contains("not-a-time")
            }),
        "{report}"
    );
    assert!(!has_finalizer(
        &api.get("held").await.unwrap().metadata,
        RECORD_FINALIZER
    ));
}

/// `gc --finalizers` retries a removal the API server fails transiently (503) through the
/// client's retry loop, and gives up at once, reporting the pod and exiting 1, on one no retry
/// can fix (403).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_finalizers_retries_a_transient_failure_and_reports_a_fatal_one() {
    use podline_sim::{FaultAction, FaultRule, FaultVerb};

    let sim = start_sim(test_config().kubelet_enabled(false)).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kube = client(&sim).await;
    let api: Api<Pod> = Api::namespaced(kube.clone(), "default");
    let held = |name: &str| -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "finalizers": [RECORD_FINALIZER] },
            "spec": { "containers": [{ "name": "main", "image": "busybox" }] },
        }))
        .unwrap()
    };
    api.create(&PostParams::default(), &held("flaky"))
        .await
        .unwrap();
    sim.faults().push(
        FaultRule::new(FaultAction::status(503))
            .verb(FaultVerb::Patch)
            .resource("pods")
            .times(2),
    );
    let patches_before = sim.counts().get("patch", "pods");
    let out = podline(kubeconfig.path())
        .args(["gc", "--finalizers", "-o", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["released"], 1, "{report}");
    assert_eq!(
        sim.counts().get("patch", "pods") - patches_before,
        3,
        "two 503s, then the removal"
    );
    assert!(!has_finalizer(
        &api.get("flaky").await.unwrap().metadata,
        RECORD_FINALIZER
    ));

    api.create(&PostParams::default(), &held("locked"))
        .await
        .unwrap();
    sim.faults().push(
        FaultRule::new(FaultAction::status(403))
            .verb(FaultVerb::Patch)
            .resource("pods"),
    );
    let patches_before = sim.counts().get("patch", "pods");
    let out = podline(kubeconfig.path())
        .args(["gc", "--finalizers", "-o", "json"])
        .stdout(Stdio::piped())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["released"], 0, "{report}");
    let failed = report["failed"].as_array().expect("failed");
    assert_eq!(failed.len(), 1, "{report}");
    assert!(
        failed[0]
            .as_str()
            .is_some_and(|f| f.contains("default/locked")),
        "{report}"
    );
    assert_eq!(
        sim.counts().get("patch", "pods") - patches_before,
        1,
        "a 403 is not retried"
    );
}

/// `podline record --finalize` as label shard `shard` (`-l shard=NAME --shard NAME`), writing
/// to `db`.
fn shard_recorder(kubeconfig: &Path, db: &Path, shard: &str) -> Child {
    let mut cmd = podline(kubeconfig);
    cmd.arg("record")
        .arg("--db")
        .arg(db)
        .args(["--listen", "127.0.0.1:0", "--finalize", "-A"])
        .args(["-l", &format!("shard={shard}"), "--shard", shard])
        .args([
            "--watch-server-timeout",
            "10s",
            "--watch-client-timeout",
            "3s",
        ])
        .env_remove("PODLINE_SHARD")
        .spawn()
        .unwrap()
}

/// Issue 27 (High), through the binary and docs/scale-out.md's recipe: two label shards with
/// `--finalize --shard`. Shard b is SIGKILLed; its pods finish and are deleted while it is down
/// past the watch history; shard a restarts meanwhile (its sweep releases its own finalizer
/// from a pod that left its scope, and nothing of shard b's); then shard b restarts and records
/// every one of its pods with its final state: none vanished, none left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_shard_down_past_the_history_loses_nothing_while_another_restarts() {
    let sim = start_sim(sim_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kc = kubeconfig.path();
    let dir = tempfile::tempdir().unwrap();
    let (db_a, db_b) = (dir.path().join("a.db"), dir.path().join("b.db"));
    let pods: Api<Pod> = Api::namespaced(client(&sim).await, "default");
    let create = |name: &str, shard: &str, duration: &str, finalizers: &[&str]| {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": name,
                "labels": { "shard": shard },
                "finalizers": finalizers,
                "annotations": {
                    "sim.podline.io/duration": duration,
                    "sim.podline.io/exit-code": "3",
                },
            },
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
        }))
        .unwrap();
        let pods = pods.clone();
        async move { pods.create(&PostParams::default(), &pod).await.unwrap() }
    };
    let finalizers = |name: &'static str| {
        let pods = pods.clone();
        async move {
            pods.get_opt(name)
                .await
                .unwrap()
                .map(|p| p.metadata.finalizers.unwrap_or_default())
        }
    };
    let mut a = shard_recorder(kc, &db_a, "a");
    let mut b = shard_recorder(kc, &db_b, "b");
    const B_PODS: [&str; 4] = ["b0", "b1", "b2", "b3"];
    for (i, name) in B_PODS.into_iter().enumerate() {
        let launched: &[&str] = if i < 2 { &[RECORD_FINALIZER] } else { &[] };
        create(name, "b", "2s", launched).await;
    }
    let held_by_b = wait_until(Duration::from_secs(20), || async {
        for name in B_PODS {
            if !finalizers(name)
                .await
                .is_some_and(|f| f.iter().any(|f| f == "podline.io/record-b"))
            {
                return false;
            }
        }
        true
    })
    .await;
    assert!(held_by_b, "shard b never added podline.io/record-b");
    b.start_kill().unwrap(); // SIGKILL
    b.wait().await.unwrap();

    let finished = wait_until(Duration::from_secs(20), || async {
        let list = pods.list(&ListParams::default()).await.unwrap().items;
        B_PODS.iter().all(|name| {
            list.iter().any(|p| {
                p.metadata.name.as_deref() == Some(*name)
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
            })
        })
    })
    .await;
    assert!(finished, "shard b's pods never finished");
    for name in B_PODS {
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
    create("moved", "c", "1s", &["podline.io/record-a"]).await;
    sim.compact(); // both shards' resume points are now too old: 410, relist

    a.start_kill().unwrap();
    a.wait().await.unwrap();
    let mut a = shard_recorder(kc, &db_a, "a");
    let swept = wait_until(Duration::from_secs(20), || async {
        finalizers("moved").await == Some(vec![])
    })
    .await;
    assert!(
        swept,
        "shard a's sweep never released its own finalizer out of its scope"
    );
    for name in B_PODS {
        let left = finalizers(name).await;
        assert!(
            left.as_ref()
                .is_some_and(|f| f.iter().any(|f| f == "podline.io/record-b")),
            "{name} released while shard b was down: {left:?}"
        );
    }

    let mut b = shard_recorder(kc, &db_b, "b");
    let recorded = wait_until(Duration::from_secs(30), || async {
        for name in B_PODS {
            if finalizers(name).await.is_some() {
                return false;
            }
        }
        let Ok(store) = podline_store::open_read_only(db_b.to_str().unwrap()).await else {
            return false;
        };
        let Ok(records) = store.pods(&podline_store::PodFilter::default()).await else {
            return false;
        };
        B_PODS.iter().all(|name| {
            records.iter().any(|r| {
                r.name == *name
                    && r.final_state_observed
                    && r.deleted_at.is_some()
                    && r.phase.as_deref() == Some("Failed")
                    && r.containers.first().and_then(|c| c.exit_code) == Some(3)
            })
        })
    })
    .await;
    let store = podline_store::open_read_only(db_b.to_str().unwrap())
        .await
        .unwrap();
    assert!(
        recorded,
        "shard b's pods not all recorded with their final state: {:?}",
        store.pods(&podline_store::PodFilter::default()).await
    );
    assert_eq!(store.counts().await.unwrap().vanished, 0);
    for child in [&mut a, &mut b] {
        child.start_kill().unwrap();
        child.wait().await.unwrap();
    }
}
