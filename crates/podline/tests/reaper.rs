//! Issue 27: the reaper never kills a live run. An API-server outage (a control-plane upgrade,
//! an etcd election: 20-40 s is routine) stops every launcher's renewals too, so neither
//! `podline record --reap` nor a `podline gc` run as the API comes back may judge a Lease on
//! the time it could not see; and no reaper may depend on the launcher's host clock agreeing
//! with its own. Outages are the sim's restart (every connection dropped, connects refused).
#![allow(clippy::unwrap_used)]

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use podline_sim::{FaultAction, FaultRule, FaultVerb};
use podline_testkit::{Sim, client, kubeconfig_file, start_sim, test_config, wait_until};
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// The test's liveness: a 2 s Lease renewed every 500 ms, reaped 1 s after it expires.
const LEASE: &[&str] = &["--lease-duration", "2s", "--lease-renew-every", "500ms"];
const GRACE: &str = "1s";
const REAP_EVERY: &str = "500ms";
/// Live runs through each outage (the case: 8 of 16 were killed).
const RUNS: usize = 16;
/// Within this of its kill a dead run's pods are gone: Lease 2 s + grace 1 s + two 500 ms
/// passes, plus the pods' deletion and this test's polling on a busy machine.
const REAP_BOUND: Duration = Duration::from_secs(8);

/// `podline SUBCOMMAND --kubeconfig FILE` through the test kit's one builder.
fn podline(subcommand: &str, kubeconfig: &std::path::Path) -> Command {
    podline_testkit::bin::podline(env!("CARGO_BIN_EXE_podline"), subcommand, kubeconfig)
}

/// `RUNS` separate `podline run`s (one Lease each), each with one pod running for 300 s.
async fn start_live_runs(sim: &Sim, kubeconfig: &std::path::Path) -> Vec<Child> {
    let runs: Vec<Child> = (0..RUNS)
        .map(|i| {
            podline("run", kubeconfig)
                .args(["--image", "busybox", "--name", &format!("live-{i}")])
                .args(LEASE)
                .args(["--annotation", "sim.podline.io/duration=300s"])
                .args(["--", "sleep", "300"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let pods: Api<Pod> = Api::namespaced(client(sim).await, "default");
    let all_running = wait_until(Duration::from_secs(30), || async {
        pods.list(&ListParams::default()).await.is_ok_and(|l| {
            l.items.len() == RUNS
                && l.items
                    .iter()
                    .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        })
    })
    .await;
    assert!(all_running, "the {RUNS} runs never all ran");
    runs
}

/// After an outage the API answers reads before the launchers manage to renew (as after a
/// real restart, where a launcher renews only on its next tick). [`hold_renewals`] makes every
/// Lease renewal fail from now on; [`release_renewals_after_a_list`], called once the outage
/// is over, lets them through again 1 s after the first Lease list since (well inside the
/// Lease's 2 s + grace 1 s). Without this the order of the two is left to chance; with it, a
/// reaper that judges on time it could not see reaps every run, every time.
fn hold_renewals(sim: &Sim) {
    sim.faults().push(
        FaultRule::new(FaultAction::status(503))
            .verb(FaultVerb::Patch)
            .resource("leases"),
    );
}

/// See [`hold_renewals`].
async fn release_renewals_after_a_list(sim: &Sim) {
    sim.reset_counts();
    let listed = wait_until(Duration::from_secs(20), || async {
        sim.counts().get("list", "leases") > 0
    })
    .await;
    assert!(listed, "no reaper listed the Leases after the outage");
    tokio::time::sleep(Duration::from_secs(1)).await;
    sim.faults().clear();
}

/// An outage of `down` (the sim's restart: connections dropped, connects refused), started
/// now in the background.
fn outage(sim: &Sim, down: Duration) -> tokio::task::JoinHandle<()> {
    let sim = sim.clone();
    tokio::spawn(async move { sim.restart(down).await })
}

/// How many runs were killed: launchers that exited, pods being deleted or gone, Leases gone.
async fn killed(sim: &Sim, runs: &mut [Child]) -> usize {
    let exited = runs
        .iter_mut()
        .filter_map(|r| r.try_wait().unwrap())
        .count();
    let kube = client(sim).await;
    let pods: Api<Pod> = Api::namespaced(kube.clone(), "default");
    let leases: Api<Lease> = Api::namespaced(kube, "default");
    let (Ok(pods), Ok(leases)) = (
        pods.list(&ListParams::default()).await,
        leases.list(&ListParams::default()).await,
    ) else {
        return 0;
    };
    let live_pods = pods
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .count();
    exited
        .max(RUNS - live_pods.min(RUNS))
        .max(RUNS - leases.items.len().min(RUNS))
}

/// A negative can only be observed over time: for the Lease's duration + grace + two passes
/// and more after the API came back, no run is killed.
async fn assert_none_killed(sim: &Sim, runs: &mut [Child], after: &str) {
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        let killed = killed(sim, runs).await;
        assert_eq!(
            killed, 0,
            "{after}: {killed} of {RUNS} live runs were killed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Once the API is back and observed, the reaper still does its job: every run SIGKILLed now
/// is reaped within the bound (so the test above did not pass because nothing reaps). `gc`:
/// run `podline gc` between looks.
async fn kill_all_and_await_reaped(
    sim: &Sim,
    kubeconfig: &std::path::Path,
    runs: Vec<Child>,
    gc: bool,
) -> Duration {
    for mut run in runs {
        run.start_kill().unwrap();
        run.wait().await.unwrap();
    }
    let killed_at = Instant::now();
    let pods: Api<Pod> = Api::namespaced(client(sim).await, "default");
    loop {
        if gc {
            self::gc(kubeconfig).await;
        }
        if pods
            .list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.is_empty())
        {
            return killed_at.elapsed();
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(20),
            "the killed runs' pods were never reaped"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The first case: `record --reap` kept judging Leases while it could not list, and
/// killed 8 of 16 healthy runs after a 35 s outage. With every Lease's clock restarted after a
/// failed pass, none is killed; and runs killed after the outage are still reaped in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_reap_should_kill_no_live_run_through_an_api_outage() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kc = kubeconfig.path();
    let dir = tempfile::tempdir().unwrap();
    let _recorder = podline("record", kc)
        .args(["--listen", "127.0.0.1:0", "--db"])
        .arg(dir.path().join("podline.db"))
        .args(["--reap", "--reap-grace", GRACE, "--reap-every", REAP_EVERY])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut runs = start_live_runs(&sim, kc).await;

    hold_renewals(&sim);
    sim.restart(Duration::from_secs(30)).await;
    release_renewals_after_a_list(&sim).await;
    assert_none_killed(&sim, &mut runs, "after a 30 s outage with record --reap").await;

    let took = kill_all_and_await_reaped(&sim, kc, runs, false).await;
    assert!(took <= REAP_BOUND, "took {took:?} to reap after the outage");
}

/// One `podline gc --grace 1s` pass; returns its exit status and stdout.
async fn gc(kubeconfig: &std::path::Path) -> (Option<i32>, String) {
    let out = podline("gc", kubeconfig)
        .args(["--grace", GRACE])
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The second case: a `podline gc` run as the API came back from a 25 s outage killed
/// 8 of 8, since every `renewTime` was as old as the outage. Neither a gc started during the
/// outage (its first answer comes after errors) nor one started right after it (the launchers
/// have not renewed yet) reaps a live run; a gc after the runs were killed reaps all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_run_as_the_api_comes_back_should_kill_no_live_run() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kc = kubeconfig.path();
    let mut runs = start_live_runs(&sim, kc).await;

    let down = Duration::from_secs(25);
    let restarting = outage(&sim, down);
    // Started during the outage, 3 s before its end: its lists fail, then succeed.
    tokio::time::sleep(down - Duration::from_secs(3)).await;
    let during = tokio::spawn({
        let kc = kc.to_owned();
        async move { gc(&kc).await }
    });
    hold_renewals(&sim);
    restarting.await.unwrap();
    // Started as the API answers again, before the launchers could renew.
    let after = tokio::spawn({
        let kc = kc.to_owned();
        async move { gc(&kc).await }
    });
    release_renewals_after_a_list(&sim).await;
    let (during, after) = (during.await.unwrap(), after.await.unwrap());
    for (when, (code, out)) in [("during the outage", during), ("right after it", after)] {
        assert_eq!(code, Some(0), "gc started {when}: {out}");
        assert!(out.contains("0 expired"), "gc started {when}: {out}");
    }
    assert_none_killed(&sim, &mut runs, "after gc runs around a 25 s outage").await;

    let took = kill_all_and_await_reaped(&sim, kc, runs, true).await;
    assert!(took <= REAP_BOUND, "took {took:?} to reap after the outage");
}

/// A Lease shaped as podline's launcher makes it (name prefix, label, duration, holder,
/// `renewTime`), written here so that the test chooses its `renewTime`: a launcher whose host
/// clock is off by `skew` writes exactly this.
fn launcher_lease(name: &str, skew: jiff::SignedDuration) -> Lease {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"podline.io/launcher": name}},
        "spec": {
            "holderIdentity": "skewed-host/1",
            "leaseDurationSeconds": 2,
            "renewTime": MicroTime(jiff::Timestamp::now() + skew),
        }
    }))
    .unwrap()
}

/// A running pod labelled with the Lease `launcher`, owned by `owner` (a created Lease) if given.
async fn labelled_pod(pods: &Api<Pod>, name: &str, launcher: &str, owner: Option<&Lease>) -> Pod {
    let owners: Vec<serde_json::Value> = owner
        .map(|lease| {
            serde_json::json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "name": lease.metadata.name,
                "uid": lease.metadata.uid,
                "blockOwnerDeletion": false,
                "controller": false,
            })
        })
        .into_iter()
        .collect();
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": name,
            "labels": {"podline.io/launcher": launcher},
            "annotations": {"sim.podline.io/duration": "300s"},
            "ownerReferences": owners,
        },
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap()
}

/// Whether the pod exists and is not being deleted.
async fn alive(pods: &Api<Pod>, name: &str) -> bool {
    pods.get_opt(name)
        .await
        .unwrap()
        .is_some_and(|p| p.metadata.deletion_timestamp.is_none())
}

/// Issue 27: `gc` compared `renewTime` with its own wall clock, so a live launcher whose clock
/// is 1 h behind was reaped, and a dead one 1 h ahead kept its pods for an hour. gc now judges
/// by observation only: the live one (renewing, each time with a `renewTime` an hour old) is
/// kept, the dead one (a `renewTime` an hour in the future, never renewed) is reaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_should_judge_no_lease_by_the_launchers_clock() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kube = client(&sim).await;
    let leases: Api<Lease> = Api::namespaced(kube.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(kube, "default");
    let hour = jiff::SignedDuration::from_hours(1);
    let post = PostParams::default();
    let behind = leases
        .create(&post, &launcher_lease("podline-launcher-behind", -hour))
        .await
        .unwrap();
    let ahead = leases
        .create(&post, &launcher_lease("podline-launcher-ahead", hour))
        .await
        .unwrap();
    labelled_pod(&pods, "behind-0", "podline-launcher-behind", Some(&behind)).await;
    labelled_pod(&pods, "ahead-0", "podline-launcher-ahead", Some(&ahead)).await;
    // The live launcher 1 h behind renews every 500 ms, as podline run does.
    let renewer = tokio::spawn({
        let leases = leases.clone();
        async move {
            loop {
                let patch = serde_json::json!({
                    "spec": {"renewTime": MicroTime(jiff::Timestamp::now() - hour)}
                });
                let _ = leases
                    .patch(
                        "podline-launcher-behind",
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    });

    let (code, out) = gc(kubeconfig.path()).await;
    renewer.abort();
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("2 launcher lease(s) seen, 1 expired"), "{out}");
    assert!(
        leases
            .get_opt("podline-launcher-behind")
            .await
            .unwrap()
            .is_some(),
        "the live launcher 1 h behind was reaped: {out}"
    );
    assert!(
        alive(&pods, "behind-0").await,
        "the live launcher's pod was deleted"
    );
    assert!(
        leases
            .get_opt("podline-launcher-ahead")
            .await
            .unwrap()
            .is_none(),
        "the dead launcher 1 h ahead was kept alive: {out}"
    );
    assert!(
        !alive(&pods, "ahead-0").await,
        "the dead launcher's pod was kept"
    );
}

/// Issue 27: gc deleted any Lease labelled podline.io/launcher without a `renewTime`, and
/// every pod labelled with its name. Only Leases podline made (name prefix, label, duration,
/// holder and renewTime) are reaped, and only the pods they own: a foreign Lease (no prefix,
/// no renewTime), a hand-made one with the prefix but no renewTime, their labelled pods, and a
/// pod labelled with a dead podline Lease it is not owned by all stay; the dead podline
/// launcher beside them is reaped with its own pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_should_reap_only_leases_podline_made_and_only_the_pods_they_own() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kube = client(&sim).await;
    let leases: Api<Lease> = Api::namespaced(kube.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(kube, "default");
    let post = PostParams::default();
    let bare = |name: &str| -> Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"podline.io/launcher": name}},
            "spec": {"leaseDurationSeconds": 2}
        }))
        .unwrap()
    };
    let foreign = leases.create(&post, &bare("someone-else")).await.unwrap();
    let handmade = leases
        .create(&post, &bare("podline-launcher-handmade"))
        .await
        .unwrap();
    let dead = leases
        .create(
            &post,
            &launcher_lease("podline-launcher-dead", jiff::SignedDuration::ZERO),
        )
        .await
        .unwrap();
    labelled_pod(&pods, "foreign-0", "someone-else", Some(&foreign)).await;
    labelled_pod(&pods, "foreign-1", "someone-else", None).await;
    labelled_pod(
        &pods,
        "handmade-0",
        "podline-launcher-handmade",
        Some(&handmade),
    )
    .await;
    labelled_pod(&pods, "impostor-0", "podline-launcher-dead", None).await;
    labelled_pod(&pods, "dead-0", "podline-launcher-dead", Some(&dead)).await;

    let (code, out) = gc(kubeconfig.path()).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("1 launcher lease(s) seen, 1 expired"), "{out}");
    assert!(out.contains("left alone: 2 lease(s)"), "{out}");
    for name in ["someone-else", "podline-launcher-handmade"] {
        assert!(
            leases.get_opt(name).await.unwrap().is_some(),
            "{name} was reaped: {out}"
        );
    }
    for pod in ["foreign-0", "foreign-1", "handmade-0", "impostor-0"] {
        assert!(alive(&pods, pod).await, "{pod} was deleted: {out}");
    }
    assert!(
        leases
            .get_opt("podline-launcher-dead")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        !alive(&pods, "dead-0").await,
        "the dead launcher's pod was kept"
    );
}

/// Issue 27: one Lease and one pod whose `deletionTimestamp` no client decodes (the sim's
/// `malform` fault, on LISTs) failed gc's Lease list on every pass (gc gave up after --wait
/// having judged nothing) and the dead launcher's pod list. Now both are skipped and named,
/// never judged, and the dead launcher beside them is reaped with its pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_should_skip_a_lease_and_a_pod_that_do_not_decode() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let kube = client(&sim).await;
    let leases: Api<Lease> = Api::namespaced(kube.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(kube, "default");
    let post = PostParams::default();
    let zero = jiff::SignedDuration::ZERO;
    let dead = leases
        .create(&post, &launcher_lease("podline-launcher-dead", zero))
        .await
        .unwrap();
    leases
        .create(&post, &launcher_lease("podline-launcher-bad", zero))
        .await
        .unwrap();
    labelled_pod(&pods, "dead-0", "podline-launcher-dead", Some(&dead)).await;
    labelled_pod(&pods, "bad-dead-1", "podline-launcher-dead", Some(&dead)).await;
    sim.faults().push(
        FaultRule::new(FaultAction::Malform {
            name: "*bad*".into(),
            field: podline_sim::fault::MalformField::DeletionTimestamp,
        })
        .verb(FaultVerb::List),
    );
    let out = podline("gc", kubeconfig.path())
        .args(["--grace", GRACE, "--wait", "20s"])
        .output()
        .await
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.contains("1 launcher lease(s) seen, 1 expired"), "{out}");
    assert!(
        out.contains("2 listed object(s) that do not decode")
            && out.contains("default/podline-launcher-bad")
            && out.contains("default/bad-dead-1"),
        "{out}"
    );
    assert!(!out.contains("not-a-time"), "no value quoted: {out}");
    assert!(
        !alive(&pods, "dead-0").await,
        "the dead launcher's pod was kept"
    );
    assert!(
        leases
            .get_opt("podline-launcher-bad")
            .await
            .unwrap()
            .is_some(),
        "a Lease gc could not read was judged: {out}"
    );
}

/// `gc --help` says what the reaper assumes (issue 27), and `record --reap` refuses a period
/// that is not shorter than the grace (every pass would be a gap: nothing would ever be reaped).
#[tokio::test]
async fn gc_help_should_say_what_the_reaper_assumes() {
    let out = Command::new(env!("CARGO_BIN_EXE_podline"))
        .args(["gc", "--help"])
        .output()
        .await
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for said in [
        "no host clock is compared",
        "A failed list restarts every Lease's clock",
        "Assumed:",
        "Only Leases podline made are reaped",
        "--wait",
    ] {
        assert!(help.contains(said), "{said:?} missing from:\n{help}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_podline"))
        .args(["record", "--db", "/nonexistent/x.db", "--reap"])
        .args(["--reap-grace", "2s", "--reap-every", "2s"])
        .env_remove("KUBECONFIG")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--reap-every"), "{stderr}");
}
