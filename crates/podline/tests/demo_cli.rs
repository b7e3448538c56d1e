//! `podline demo` end to end, every round of its schedule with 10 pods each: the fault rounds,
//! the round whose `podline run` child is SIGKILLed while its pods run (the reaper must delete
//! them all: 0 orphans; the time it took against the bound is the demo's figure, not this
//! test's, since a busy CI machine slips it), and the round whose recorder is down for longer than
//! the sim's watch history while its pods finish and are deleted (the finalizer must keep every
//! final state: 0 vanished). The demo's own checks (store equals the ground truth) must pass,
//! and the store it leaves says the same.
#![allow(clippy::unwrap_used)]

use std::process::Command;

const PODS: usize = 10;
const ROUNDS: usize = 7;

/// The line of the output that starts with `prefix`.
fn line<'a>(output: &'a str, prefix: &str) -> &'a str {
    output
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in:\n{output}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_should_leave_no_orphan_after_a_sigkill_and_lose_no_final_state_in_an_outage() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.db");
    let out = Command::new(env!("CARGO_BIN_EXE_podline"))
        .args(["demo", "--rounds", &ROUNDS.to_string()])
        .args(["--pods", &PODS.to_string(), "--db"])
        .arg(&db)
        .current_dir(dir.path())
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let output = format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "podline demo failed:\n{output}");

    let killed = line(&stdout, "round 6/7:");
    assert!(killed.contains("launcher SIGKILLed"), "{killed}");
    assert!(
        killed.contains(&format!("with {PODS} pods running")) && killed.contains(": 0 orphans"),
        "{killed}"
    );
    let outage = line(&stdout, "round 7/7:");
    assert!(
        outage.contains(&format!("{PODS} of {PODS} final states recorded"))
            && outage.contains(", 0 vanished"),
        "{outage}"
    );
    assert!(outage.contains("recorder down"), "{outage}");
    let orphans = line(&stdout, "orphans:");
    assert!(orphans.split_whitespace().nth(1) == Some("0"), "{orphans}");
    let vanished = line(&stdout, "vanished:");
    assert!(
        vanished.split_whitespace().nth(1) == Some("0"),
        "{vanished}"
    );
    assert!(
        line(&stdout, "store vs ground truth:").ends_with("store equals ground truth"),
        "{output}"
    );

    // What the demo left in its store says the same: every pod, each deleted with its final
    // state observed.
    let store = podline_store::open_read_only(&db.to_string_lossy())
        .await
        .unwrap();
    let counts = store.counts().await.unwrap();
    assert_eq!(counts.pods, (PODS * ROUNDS) as u64, "{counts:?}");
    assert_eq!(counts.deleted, counts.pods, "{counts:?}");
    assert_eq!(counts.vanished, 0, "{counts:?}");
}
