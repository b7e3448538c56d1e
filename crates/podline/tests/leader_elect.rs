//! `podline record --leader-elect` as real processes against the sim: the first replica takes
//! the Lease, a second one stands by, and on SIGTERM the leader exits cleanly and releases the
//! Lease so the standby takes over at its next poll instead of after the lease duration; and a
//! leader killed with `kill -9` three times over a run into PostgreSQL, with one leader at a time,
//! takeovers within the lease duration and a store equal to the ground truth.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use podline_testkit::db::{Backend, TestDb};
use podline_testkit::{audit, client, kubeconfig_file, start_sim, test_config, wait_until};

fn recorder(kubeconfig: &std::path::Path, db: &std::path::Path, identity: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_podline"))
        .arg("record")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["-A", "--listen", "127.0.0.1:0", "--db"])
        .arg(db)
        .env_remove("KUBECONFIG")
        .env("PODLINE_LEADER_ELECT", "true")
        .env("POD_NAME", identity)
        .env("POD_NAMESPACE", "default")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn a_standby_recorder_takes_over_when_the_leader_is_stopped() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("podline.db");
    let leases: Api<Lease> = Api::namespaced(client(&sim).await, "default");
    let holder = || async {
        leases
            .get_opt("podline-recorder")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity)
            .unwrap_or_default()
    };

    let mut a = recorder(kubeconfig.path(), &db, "rec-a");
    assert!(
        wait_until(Duration::from_secs(20), || async {
            holder().await == "rec-a"
        })
        .await,
        "rec-a never took the lease (holder {:?})",
        holder().await
    );
    let mut b = recorder(kubeconfig.path(), &db, "rec-b");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        holder().await,
        "rec-a",
        "the standby must not take a live lease"
    );
    assert!(b.try_wait().unwrap().is_none(), "the standby keeps running");

    sigterm(&a);
    let stopped = tokio::time::Instant::now();
    let exited = wait_until(Duration::from_secs(15), || {
        let done = a.try_wait().unwrap().is_some();
        async move { done }
    })
    .await;
    assert!(exited, "the leader did not stop on SIGTERM");
    assert!(a.wait().unwrap().success(), "a graceful stop exits 0");
    assert!(
        wait_until(Duration::from_secs(10), || async {
            holder().await == "rec-b"
        })
        .await,
        "rec-b did not take over (holder {:?})",
        holder().await
    );
    let took = stopped.elapsed();
    // Default timings: a 15 s lease, polled every 2-2.4 s. A released lease goes at the next poll.
    assert!(took < Duration::from_secs(10), "takeover took {took:?}");
    eprintln!("standby took over {took:?} after SIGTERM to the leader");
    b.kill().unwrap();
    b.wait().unwrap();
}

/// Election timing for the kill test: a 2 s Lease, renewed every 200 ms, given up after 1 s.
const LEASE: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_millis(200);

/// A `--leader-elect` recorder writing into PostgreSQL, with fast election timing.
fn pg_recorder(kubeconfig: &std::path::Path, db_url: &str, identity: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_podline"))
        .arg("record")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["-A", "--listen", "127.0.0.1:0", "--db", db_url])
        .args([
            "--watch-client-timeout",
            "1s",
            "--watch-server-timeout",
            "60",
        ])
        .args(["--leader-elect-lease-duration", "2s"])
        .args(["--leader-elect-renew-deadline", "1s"])
        .args(["--leader-elect-retry-period", "200ms"])
        .env_remove("KUBECONFIG")
        .env_remove("PODLINE_DB")
        .env("PODLINE_LEADER_ELECT", "true")
        .env("POD_NAME", identity)
        .env("POD_NAMESPACE", "default")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn lifecycle_pod(i: usize) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": format!("le-{i}"),
            "labels": {"podline.io/run": "leader-kill"},
            "annotations": {
                "sim.podline.io/duration": format!("{}ms", 100 + (i % 5) * 100),
                "sim.podline.io/exit-code": if i % 6 == 1 { "1" } else { "0" },
            }
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
    }))
    .unwrap()
}

/// Issue 6, item 3: two recorders against the sim writing into PostgreSQL; the leader is killed
/// (`kill -9`: no release) three times while pods run, and a fresh standby is started after each
/// takeover (as Kubernetes restarts the pod). The Lease is watched throughout: its holder only
/// ever changes away from a replica that was killed (one leader at a time), each takeover comes
/// within the lease duration (plus the delivery of the Lease watch), and the store equals the
/// ground truth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_three_times_hands_over_in_time_and_loses_nothing() {
    const PODS: usize = 400;
    let Some(db) = TestDb::fresh(Backend::Postgres).await else {
        return;
    };
    let sim = start_sim(test_config().bookmark_interval(Duration::from_millis(300))).await;
    let kubeconfig = kubeconfig_file(&sim);
    let leases: Api<Lease> = Api::namespaced(client(&sim).await, "default");

    // Every holder the Lease ever had, in order, sampled every 10 ms.
    let holders = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop_sampling = tokio_util::sync::CancellationToken::new();
    let sampler = tokio::spawn({
        let (leases, holders, stop) = (leases.clone(), holders.clone(), stop_sampling.clone());
        async move {
            while !stop.is_cancelled() {
                let holder = leases
                    .get_opt("podline-recorder")
                    .await
                    .ok()
                    .flatten()
                    .and_then(|l| l.spec?.holder_identity)
                    .unwrap_or_default();
                {
                    let mut seen = holders.lock().unwrap();
                    if !holder.is_empty() && seen.last() != Some(&holder) {
                        seen.push(holder);
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    });
    let current = || holders.lock().unwrap().last().cloned().unwrap_or_default();

    let creator = tokio::spawn({
        let sim = sim.clone();
        async move {
            let api: Api<Pod> = Api::default_namespaced(client(&sim).await);
            let start = tokio::time::Instant::now();
            futures::stream::iter(0..PODS)
                .for_each_concurrent(8, |i| {
                    let api = api.clone();
                    async move {
                        // Spread over ~12 s, through all three kills.
                        tokio::time::sleep_until(start + Duration::from_millis(i as u64 * 30))
                            .await;
                        while let Err(err) =
                            api.create(&PostParams::default(), &lifecycle_pod(i)).await
                        {
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

    let mut replicas: Vec<(String, Child)> = (0..2)
        .map(|i| {
            let name = format!("rec-{i}");
            let child = pg_recorder(kubeconfig.path(), &db.url, &name);
            (name, child)
        })
        .collect();
    assert!(
        wait_until(Duration::from_secs(20), || {
            let holder = current();
            async move { holder.starts_with("rec-") }
        })
        .await,
        "nobody took the lease"
    );

    let mut killed: Vec<String> = Vec::new();
    let mut takeovers = Vec::new();
    for round in 0..3 {
        tokio::time::sleep(Duration::from_millis(1500)).await; // the leader records a while
        let leader = current();
        let index = replicas
            .iter()
            .position(|(name, _)| *name == leader)
            .unwrap_or_else(|| panic!("the holder {leader:?} is not a live replica"));
        let (_, mut child) = replicas.remove(index);
        child.kill().unwrap(); // SIGKILL: the Lease is not released
        let killed_at = tokio::time::Instant::now();
        child.wait().unwrap();
        killed.push(leader.clone());
        let took_over = wait_until(Duration::from_secs(10), || {
            let holder = current();
            let leader = leader.clone();
            async move { holder.starts_with("rec-") && holder != leader }
        })
        .await;
        let took = killed_at.elapsed();
        assert!(took_over, "round {round}: nobody took over from {leader}");
        takeovers.push(took);
        // The standby that took over is the one still alive; start a new standby.
        let name = format!("rec-{}", round + 2);
        replicas.push((name.clone(), pg_recorder(kubeconfig.path(), &db.url, &name)));
    }
    creator.await.unwrap();
    assert!(
        wait_until(Duration::from_secs(30), || async { finished(&sim, PODS) }).await,
        "the sim did not finish the pods"
    );
    let converged = wait_until(Duration::from_secs(30), || async {
        audit::compare(db.store.as_ref(), &sim.ground_truth())
            .await
            .is_ok_and(|r| r.is_ok())
    })
    .await;
    let report = audit::compare(db.store.as_ref(), &sim.ground_truth())
        .await
        .unwrap();
    assert!(converged, "{report}");
    assert_eq!(report.expected, PODS, "{report}");

    stop_sampling.cancel();
    sampler.await.unwrap();
    let history = holders.lock().unwrap().clone();
    // One leader at a time: the Lease left a holder only after that holder was killed.
    assert_eq!(history.len(), 4, "holders over time: {history:?}");
    assert_eq!(&history[..3], &killed[..], "holders over time: {history:?}");
    // Takeover: the standby sees the dead leader's last renewal (made before the kill) on its
    // Lease watch and takes the Lease a lease duration after it: within the lease duration of the
    // kill, plus the time to deliver the watch event, read, write and sample the holder (10 ms)
    // on a loaded 2-core machine.
    let bound = LEASE + Duration::from_millis(250);
    eprintln!("takeovers after kill -9 of the leader: {takeovers:?} (bound {bound:?})");
    for took in &takeovers {
        assert!(*took <= bound, "takeover took {took:?}, bound {bound:?}");
        assert!(
            *took >= LEASE - RETRY.mul_f64(1.2),
            "took over {took:?} after the kill: before the lease could have expired"
        );
    }
    for (_, mut child) in replicas {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

fn finished(sim: &podline_testkit::Sim, n: usize) -> bool {
    let truth = sim.ground_truth();
    truth.len() >= n
        && truth.iter().all(|h| {
            h.transitions
                .iter()
                .any(|(p, _)| p == "Succeeded" || p == "Failed")
        })
}
