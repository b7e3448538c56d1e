//! `podline record --leader-elect` as real processes against the sim: the first replica takes
//! the Lease, a second one stands by, and on SIGTERM the leader exits cleanly and releases the
//! Lease so the standby takes over at its next poll instead of after the lease duration.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use podline_testkit::{client, kubeconfig_file, start_sim, test_config, wait_until};

fn recorder(kubeconfig: &std::path::Path, db: &std::path::Path, identity: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_podline"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["record", "-A", "--listen", "127.0.0.1:0", "--db"])
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
