//! Issue 17, launcher half: no pod outlives a `kill -9` of `podline run`. Each run holds a
//! liveness Lease that owns its pods; the reaper (`podline gc`) deletes the Lease of a run that
//! stopped renewing it, and the sim's garbage collector (kube-controller-manager's job) and the
//! reaper delete its pods. A `--reattach` restart inside the grace period takes its pod back.
#![allow(clippy::unwrap_used)]

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use podline_testkit::{client, kubeconfig_file, start_sim, test_config, wait_until};
use tokio::process::Command;
use tokio::time::Instant;

/// The test's liveness: a 2 s Lease renewed every 500 ms, reaped 1 s after it expires.
const LEASE: &[&str] = &["--lease-duration", "2s", "--lease-renew-every", "500ms"];
const GRACE: &str = "1s";

/// `podline SUBCOMMAND --kubeconfig FILE` through the test kit's one builder.
fn podline(subcommand: &str, kubeconfig: &std::path::Path) -> Command {
    podline_testkit::bin::podline(env!("CARGO_BIN_EXE_podline"), subcommand, kubeconfig)
}

/// One `podline gc` run (until every Lease was seen renewed or expired); returns its summary.
async fn gc(kubeconfig: &std::path::Path) -> String {
    let out = podline("gc", kubeconfig)
        .args(["--grace", GRACE])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "gc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn running(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// The done-when test: 50 pods running, the launcher SIGKILLed; a gc started right after the
/// kill reaps only once it has seen the Lease unchanged for its duration + grace, and every pod
/// is gone within that + one reaper pass (plus the pods' own graceful deletion).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_a_count_run_should_leave_no_pod_once_the_reaper_passed() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kc = kubeconfig.path();
    let kube = client(&sim).await;
    let pods: Api<Pod> = Api::namespaced(kube.clone(), "default");
    let leases: Api<Lease> = Api::namespaced(kube, "default");
    let mut child = podline("run", kc)
        .args(["--image", "busybox", "--count", "50", "--parallel", "50"])
        .args(LEASE)
        .args(["--annotation", "sim.podline.io/duration=300s"])
        .args(["--", "sleep", "300"])
        .spawn()
        .unwrap();
    let all_running = wait_until(Duration::from_secs(30), || async {
        pods.list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.len() == 50 && l.items.iter().all(running))
    })
    .await;
    assert!(all_running, "the 50 pods never all ran");
    // Every pod is labelled with, and owned by, the run's Lease.
    let lease_list = leases.list(&ListParams::default()).await.unwrap();
    assert_eq!(lease_list.items.len(), 1, "one Lease per run and namespace");
    let lease = &lease_list.items[0];
    let name = lease.metadata.name.clone().unwrap();
    for pod in pods.list(&ListParams::default()).await.unwrap().items {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("podline.io/launcher"), Some(&name));
        let owners = pod.metadata.owner_references.clone().unwrap_or_default();
        assert!(
            owners.iter().any(|o| o.kind == "Lease"
                && o.api_version == "coordination.k8s.io/v1"
                && o.name == name
                && Some(&o.uid) == lease.metadata.uid.as_ref()
                && o.block_owner_deletion == Some(false)
                && o.controller == Some(false)),
            "{owners:?}"
        );
    }

    child.start_kill().unwrap(); // SIGKILL: no clean-up runs
    child.wait().await.unwrap();
    let killed = Instant::now();

    // gc judges by observation: it reaps the Lease only once it has itself seen it unchanged
    // for the Lease's duration + grace (2 s + 1 s), so one run started now takes that long.
    let gc_started = Instant::now();
    let swept = gc(kc).await;
    let gc_took = gc_started.elapsed();
    assert!(swept.contains("1 expired"), "{swept}");
    assert!(
        gc_took >= Duration::from_secs(3),
        "reaped after watching for only {gc_took:?}: {swept}"
    );

    // Lease 2 s + grace 1 s; then gc's passes (every 333 ms here) and the pods' deletion.
    let bound = Duration::from_secs(2 + 1) + Duration::from_secs(5);
    let gone = wait_until(Duration::from_secs(20), || async {
        pods.list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.is_empty())
    })
    .await;
    let took = killed.elapsed();
    assert!(gone, "pods outlived the killed run");
    assert!(took <= bound, "took {took:?}, over the bound {bound:?}");
    assert!(
        leases
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "the Lease outlived the reap"
    );
    assert!(sim.ground_truth().iter().all(|p| p.deleted_at.is_some()));
}

/// A `--reattach` restart inside the grace period re-points the pod at its own Lease: the
/// reaper then reaps the dead launcher's Lease but not the pod, and the task finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reattach_inside_the_grace_period_should_keep_its_pod_and_finish() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kc = kubeconfig.path();
    let kube = client(&sim).await;
    let pods: Api<Pod> = Api::namespaced(kube.clone(), "default");
    let leases: Api<Lease> = Api::namespaced(kube, "default");
    let task = |extra: &[&str]| {
        let mut cmd = podline("run", kc);
        cmd.args(["--image", "busybox", "--task-id", "nightly"])
            .args(LEASE)
            .args(extra)
            .args(["--annotation", "sim.podline.io/duration=10s"])
            .args(["--", "sleep", "10"]);
        cmd
    };
    let mut first = task(&[]).spawn().unwrap();
    let ran = wait_until(Duration::from_secs(20), || async {
        pods.list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.len() == 1 && l.items.iter().all(running))
    })
    .await;
    assert!(ran, "the pod never ran");
    let old_lease = leases.list(&ListParams::default()).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    first.start_kill().unwrap();
    first.wait().await.unwrap();

    let second = task(&["--reattach", "-o", "json"]).spawn().unwrap();
    // Reap until the dead launcher's Lease is gone (2 s + 1 s after the kill); the pod stays.
    let old_reaped = wait_until(Duration::from_secs(15), || async {
        gc(kc).await;
        leases.get_opt(&old_lease).await.is_ok_and(|l| l.is_none())
    })
    .await;
    assert!(old_reaped, "the dead launcher's Lease was never reaped");
    let pod = &pods.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(pod.len(), 1, "the reattached pod was reaped");
    assert!(pod[0].metadata.deletion_timestamp.is_none());
    let out = tokio::time::timeout(Duration::from_secs(30), second.wait_with_output())
        .await
        .expect("the reattached run did not finish")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("\"reattached\": true"), "{stdout}");
    // The clean exit deleted the pod and the new Lease: nothing left.
    let empty = wait_until(Duration::from_secs(10), || async {
        pods.list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.is_empty())
            && leases
                .list(&ListParams::default())
                .await
                .is_ok_and(|l| l.items.is_empty())
    })
    .await;
    assert!(empty, "a pod or a Lease outlived the clean exit");
}

/// `--timeout` is also the server's backstop: the pod carries activeDeadlineSeconds = timeout +
/// 30 s, so it stops even with no podline and no reaper left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_should_set_active_deadline_seconds_with_a_margin() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let pods: Api<Pod> = Api::namespaced(client(&sim).await, "default");
    let mut child = podline("run", kubeconfig.path())
        .args(["--image", "busybox", "--timeout", "60s"])
        .args(["--annotation", "sim.podline.io/duration=60s"])
        .args(["--", "sleep", "60"])
        .spawn()
        .unwrap();
    let mut deadline = None;
    let seen = wait_until(Duration::from_secs(20), || {
        let pods = pods.clone();
        async move {
            pods.list(&ListParams::default())
                .await
                .ok()
                .and_then(|l| l.items.into_iter().next())
                .is_some()
        }
    })
    .await;
    assert!(seen, "no pod was created");
    if let Some(pod) = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .first()
    {
        deadline = pod.spec.as_ref().and_then(|s| s.active_deadline_seconds);
    }
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    assert_eq!(deadline, Some(90));
}

/// The same guarantee from the recorder: `podline record --reap` reaps a SIGKILLed run's pods
/// continuously, timing the Lease on its own clock from the last change it saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_reap_should_delete_the_pods_of_a_killed_run() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kc = kubeconfig.path();
    let pods: Api<Pod> = Api::namespaced(client(&sim).await, "default");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("podline.db");
    let _recorder = podline("record", kc)
        .args(["--listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .args(["--reap", "--reap-grace", GRACE, "--reap-every", "500ms"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = podline("run", kc)
        .args(["--image", "busybox", "--count", "5", "--parallel", "5"])
        .args(LEASE)
        .args(["--annotation", "sim.podline.io/duration=300s"])
        .args(["--", "sleep", "300"])
        .spawn()
        .unwrap();
    let all_running = wait_until(Duration::from_secs(30), || async {
        pods.list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.len() == 5 && l.items.iter().all(running))
    })
    .await;
    assert!(all_running, "the 5 pods never ran");
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let killed = Instant::now();
    let gone = wait_until(Duration::from_secs(20), || async {
        pods.list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.is_empty())
    })
    .await;
    assert!(
        gone,
        "pods outlived the killed run with record --reap running"
    );
    // Lease 2 s + grace 1 s + one 500 ms pass, plus the pods' deletion.
    let took = killed.elapsed();
    assert!(took <= Duration::from_secs(8), "took {took:?}");
    assert!(
        took >= Duration::from_secs(2),
        "reaped before the Lease expired: {took:?}"
    );
}

/// Kept pods are never collected: a `--on-finish keep` pod outlives a SIGKILL and the reaper
/// (no ownerReference, and the keep annotation), and a `delete-succeeded` pod kept after a
/// failure outlives the clean exit's Lease delete (it is detached from the Lease first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_pods_should_survive_the_reaper_and_the_lease_delete() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kc = kubeconfig.path();
    let kube = client(&sim).await;
    let pods: Api<Pod> = Api::namespaced(kube.clone(), "default");
    let leases: Api<Lease> = Api::namespaced(kube, "default");

    // A failing task with delete-succeeded: a clean exit, its pod kept, its Lease deleted.
    let out = podline("run", kc)
        .args(["--image", "busybox", "--name", "failed"])
        .args(["--on-finish", "delete-succeeded"])
        .args(LEASE)
        .args(["--annotation", "sim.podline.io/exit-code=3"])
        .args(["--", "false"])
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A keep task, SIGKILLed while it runs.
    let mut child = podline("run", kc)
        .args([
            "--image",
            "busybox",
            "--name",
            "kept",
            "--on-finish",
            "keep",
        ])
        .args(LEASE)
        .args(["--annotation", "sim.podline.io/duration=300s"])
        .args(["--", "sleep", "300"])
        .spawn()
        .unwrap();
    let ran = wait_until(Duration::from_secs(20), || async {
        pods.list(&ListParams::default()).await.is_ok_and(|l| {
            l.items.iter().any(|p| {
                p.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("kept-"))
                    && running(p)
            })
        })
    })
    .await;
    assert!(ran, "the kept pod never ran");
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    // Neither pod is owned by a Lease; the kept one says so for the reaper.
    let listed = pods.list(&ListParams::default()).await.unwrap().items;
    let by_prefix = |prefix: &str| {
        listed
            .iter()
            .find(|p| {
                p.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(prefix))
            })
            .cloned()
            .unwrap()
    };
    for pod in [by_prefix("failed-"), by_prefix("kept-")] {
        let owners = pod.metadata.owner_references.clone().unwrap_or_default();
        assert!(owners.iter().all(|o| o.kind != "Lease"), "{owners:?}");
    }
    let kept = by_prefix("kept-");
    let annotations = kept.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get("podline.io/on-finish").map(String::as_str),
        Some("keep")
    );
    // A negative can only be observed: past the Lease's expiry, a reaper pass, and two of the
    // sim garbage collector's 1 s sweeps, both pods are still there.
    let lost = wait_until(Duration::from_secs(4), || async {
        gc(kc).await;
        pods.list(&ListParams::default()).await.is_ok_and(|l| {
            l.items.len() < 2
                || l.items
                    .iter()
                    .any(|p| p.metadata.deletion_timestamp.is_some())
        })
    })
    .await;
    assert!(!lost, "a kept pod was deleted");
    assert!(
        leases
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

/// The Lease's knobs are checked before anything is created (exit 2, naming the flags), and a
/// Lease the server refuses fails the run as a refused create does (exit 3, the server's
/// message), with no pod: an unprotected pod is not started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_lease_flags_and_a_refused_lease_should_create_no_pod() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kc = kubeconfig.path();
    let out = podline("run", kc)
        .args([
            "--image",
            "busybox",
            "--lease-renew-every",
            "6s",
            "--",
            "true",
        ])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--lease-renew-every") && stderr.contains("half"),
        "{stderr}"
    );

    let out = podline("run", kc)
        .args([
            "-n",
            "no-such-namespace",
            "--image",
            "busybox",
            "--",
            "true",
        ])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("no-such-namespace"), "{stderr}");
    assert!(sim.ground_truth().is_empty(), "a pod was created");
}

/// The pods (name, launcher label, Lease owners' uids, being deleted) in `default`.
async fn pod_owners(pods: &Api<Pod>) -> Vec<(String, String, Vec<String>, bool)> {
    pods.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| {
            let launcher = p
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("podline.io/launcher").cloned())
                .unwrap_or_default();
            let owners = p
                .metadata
                .owner_references
                .iter()
                .flatten()
                .filter(|o| o.kind == "Lease")
                .map(|o| o.uid.clone())
                .collect();
            let deleting = p.metadata.deletion_timestamp.is_some();
            (
                p.metadata.name.unwrap_or_default(),
                launcher,
                owners,
                deleting,
            )
        })
        .collect()
}

/// Issue 30: a run whose task will be retried (`--keep-for-retry`) annotates its Lease; killed
/// with SIGKILL, its pod outlives the normal bound (Lease 2 s + grace 1 s), which a run killed
/// alongside it without a keep does not, and is reaped once the reaper has also seen the Lease
/// unchanged for the keep (6 s) on top.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_for_retry_should_hold_a_killed_runs_pod_past_the_bound_then_reap_it() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kc = kubeconfig.path();
    let kube = client(&sim).await;
    let pods: Api<Pod> = Api::namespaced(kube.clone(), "default");
    let leases: Api<Lease> = Api::namespaced(kube, "default");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("podline.db");
    let _recorder = podline("record", kc)
        .args(["--listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .args(["--reap", "--reap-grace", GRACE, "--reap-every", "500ms"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let task = |id: &str, keep: &str| {
        let mut cmd = podline("run", kc);
        cmd.args(["--image", "busybox", "--name", id, "--task-id", id])
            .args(LEASE)
            .args(["--keep-for-retry", keep])
            .args(["--annotation", "sim.podline.io/duration=300s"])
            .args(["--", "sleep", "300"])
            .kill_on_drop(true);
        cmd.spawn().unwrap()
    };
    let mut held = task("retried", "6s");
    let mut prompt = task("last-try", "0s");
    let ran = wait_until(Duration::from_secs(30), || async {
        pods.list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.len() == 2 && l.items.iter().all(running))
    })
    .await;
    assert!(ran, "the pods never ran");
    let annotated: Vec<Option<String>> = leases
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|l| {
            l.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("podline.io/keep-for-retry").cloned())
        })
        .collect();
    assert_eq!(annotated.len(), 2);
    assert!(annotated.contains(&Some("6".to_owned())), "{annotated:?}");
    assert!(annotated.contains(&None), "{annotated:?}");
    held.start_kill().unwrap();
    prompt.start_kill().unwrap();
    held.wait().await.unwrap();
    prompt.wait().await.unwrap();
    let killed = Instant::now();

    let alive = |name: &'static str| {
        let pods = pods.clone();
        async move {
            pod_owners(&pods)
                .await
                .iter()
                .any(|(n, _, _, deleting)| n.starts_with(name) && !deleting)
        }
    };
    let prompt_gone = wait_until(Duration::from_secs(15), || async {
        !alive("last-try").await
    })
    .await;
    assert!(
        prompt_gone,
        "the pod of the run without a keep was not reaped"
    );
    let took = killed.elapsed();
    assert!(took <= Duration::from_secs(8), "took {took:?}");
    // The normal bound has passed: the kept pod is there, untouched.
    assert!(
        alive("retried").await,
        "the kept pod was reaped within the normal bound"
    );
    let held_gone = wait_until(Duration::from_secs(20), || async {
        !alive("retried").await
    })
    .await;
    let took = killed.elapsed();
    assert!(held_gone, "the kept pod outlived its keep-for-retry");
    // Lease 2 s + grace 1 s + keep 6 s, then a 500 ms pass and the delete.
    assert!(
        took >= Duration::from_secs(9),
        "reaped before its keep: {took:?}"
    );
    assert!(took <= Duration::from_secs(15), "took {took:?}");
}

/// Issue 30: a retry reattaching to a pod held for it moves the pod to its own Lease (label and
/// ownerReference), so the dead launcher's Lease, reaped when its keep ends, takes no pod with
/// it; gc reports the held Lease and stops waiting on it (its launcher is dead).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_reattaching_to_a_held_pod_should_re_own_it() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kc = kubeconfig.path();
    let kube = client(&sim).await;
    let pods: Api<Pod> = Api::namespaced(kube.clone(), "default");
    let leases: Api<Lease> = Api::namespaced(kube, "default");
    let task = |extra: &[&str]| {
        let mut cmd = podline("run", kc);
        cmd.args(["--image", "busybox", "--task-id", "nightly"])
            .args(LEASE)
            .args(["--keep-for-retry", "4s"])
            .args(extra)
            .args(["--annotation", "sim.podline.io/duration=20s"])
            .args(["--", "sleep", "20"])
            .kill_on_drop(true);
        cmd
    };
    let mut first = task(&[]).spawn().unwrap();
    let ran = wait_until(Duration::from_secs(20), || async {
        pods.list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.len() == 1 && l.items.iter().all(running))
    })
    .await;
    assert!(ran, "the pod never ran");
    let old = leases.list(&ListParams::default()).await.unwrap().items[0].clone();
    let (old_name, old_uid) = (old.metadata.name.unwrap(), old.metadata.uid.unwrap());
    let pod_uid = pods.list(&ListParams::default()).await.unwrap().items[0]
        .metadata
        .uid
        .clone();
    first.start_kill().unwrap();
    first.wait().await.unwrap();

    // gc sees the Lease dead (2 s + 1 s) and held past its --wait (its keep ends 7 s after
    // the kill): reported, not reaped, and gc is done.
    let out = podline("gc", kc)
        .args(["--grace", GRACE, "--wait", "5s", "-o", "json"])
        .output()
        .await
        .unwrap();
    let swept = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{swept}");
    let swept: serde_json::Value = serde_json::from_str(&swept).unwrap();
    assert_eq!(
        swept["held"],
        serde_json::json!([format!("default/{old_name}")])
    );
    assert_eq!(swept["reaped"], serde_json::json!([]));
    assert_eq!(swept["undecided"], serde_json::json!([]));

    let second = task(&["--reattach", "-o", "json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let re_owned = wait_until(Duration::from_secs(15), || async {
        let owners = pod_owners(&pods).await;
        owners.len() == 1 && owners[0].1 != old_name && !owners[0].2.is_empty()
    })
    .await;
    assert!(
        re_owned,
        "the reattached pod was not moved: {:?}",
        pod_owners(&pods).await
    );
    let (_, new_name, owner_uids, _) = pod_owners(&pods).await.remove(0);
    let new = leases.get(&new_name).await.unwrap();
    assert_eq!(owner_uids, vec![new.metadata.uid.clone().unwrap()]);
    assert!(!owner_uids.contains(&old_uid));
    // The old Lease's keep ends (2 + 1 + 4 s on a fresh gc's clock): reaped, without the pod.
    let old_reaped = wait_until(Duration::from_secs(20), || async {
        gc(kc).await;
        leases.get_opt(&old_name).await.is_ok_and(|l| l.is_none())
    })
    .await;
    assert!(old_reaped, "the dead launcher's Lease was never reaped");
    let now = pods.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(now.len(), 1, "the reattached pod went with the old Lease");
    assert_eq!(now[0].metadata.uid, pod_uid);
    assert!(now[0].metadata.deletion_timestamp.is_none());
    let out = tokio::time::timeout(Duration::from_secs(30), second.wait_with_output())
        .await
        .expect("the reattached run did not finish")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("\"reattached\": true"), "{stdout}");
}
