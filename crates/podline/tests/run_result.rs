//! `podline run --result-file`: the pod's name before the pod runs, the whole result at the end
//! (what the Airflow operator reads). The real binary against the sim.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

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

fn read_doc(path: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

async fn running_pods(pods: &Api<Pod>) -> Vec<String> {
    pods.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .filter_map(|p| p.metadata.name)
                .collect()
        })
        .unwrap_or_default()
}

/// The `started` document names the pod while it runs (through create retries on 409), and the
/// `finished` one holds phase, exit code, termination message and the failure report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_file_should_name_the_pod_early_and_hold_the_result_at_the_end() {
    let sim = start_sim(test_config()).await;
    sim.faults().push(
        FaultRule::new(FaultAction::status(409))
            .verb(FaultVerb::Create)
            .resource("pods")
            .times(2),
    );
    let kubeconfig = kubeconfig_file(&sim);
    let pods: Api<Pod> = Api::namespaced(client(&sim).await, "default");
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let child = podline("run", kubeconfig.path())
        .args(["--image", "busybox", "--name", "nightly"])
        .arg("--result-file")
        .arg(&result)
        .args(["--annotation", "sim.podline.io/duration=3s"])
        .args(["--annotation", "sim.podline.io/exit-code=4"])
        .args([
            "--annotation",
            "sim.podline.io/termination-message=bad rows",
        ])
        .spawn()
        .unwrap();
    let seen = wait_until(Duration::from_secs(20), || {
        let pods = pods.clone();
        async move { !running_pods(&pods).await.is_empty() }
    })
    .await;
    assert!(seen, "the pod never ran");
    let running = running_pods(&pods).await;
    let started = read_doc(&result).expect("no result document while the pod runs");
    assert_eq!(started["stage"], "started");
    assert_eq!(started["namespace"], "default");
    assert_eq!(started["reattach"], false);
    assert_eq!(running, [started["pod"].as_str().unwrap()]);
    assert!(running[0].starts_with("nightly-"), "{running:?}");

    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("podline did not finish")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    let finished = read_doc(&result).unwrap();
    assert_eq!(finished["stage"], "finished");
    assert_eq!(finished["pod"], started["pod"]);
    assert_eq!(finished["phase"], "Failed");
    assert_eq!(finished["succeeded"], false);
    assert_eq!(finished["retries"], 2);
    assert_eq!(finished["containers"][0]["exitCode"], 4);
    assert_eq!(finished["containers"][0]["message"], "bad rows");
    assert_eq!(finished["exitCode"], 4);
    let report = finished["failureReport"].as_str().unwrap();
    assert!(report.contains("exit code 4"), "{report}");
    // The temporary file was renamed over the result, not left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// With `--reattach`, the `started` document names the live pod of the task the run follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_file_should_name_the_reattached_pod() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let pods: Api<Pod> = Api::namespaced(client(&sim).await, "default");
    let mut first = podline("run", kubeconfig.path())
        .args(["--image", "busybox", "--task-id", "etl-1"])
        .args(["--annotation", "sim.podline.io/duration=4s"])
        .spawn()
        .unwrap();
    let seen = wait_until(Duration::from_secs(20), || {
        let pods = pods.clone();
        async move { !running_pods(&pods).await.is_empty() }
    })
    .await;
    assert!(seen, "the first run's pod never ran");
    // The first launcher is lost without cleaning up.
    first.kill().await.unwrap();
    let live = running_pods(&pods).await;
    assert_eq!(live.len(), 1);

    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    let second = podline("run", kubeconfig.path())
        .args(["--image", "busybox", "--task-id", "etl-1", "--reattach"])
        .arg("--result-file")
        .arg(&result)
        .spawn()
        .unwrap();
    let announced = wait_until(Duration::from_secs(10), || {
        let result = result.clone();
        async move { read_doc(&result).is_some() }
    })
    .await;
    assert!(announced, "no started document");
    let started = read_doc(&result).unwrap();
    if started["stage"] == "started" {
        assert_eq!(started["reattach"], true);
        assert_eq!(started["pod"], live[0].as_str());
    }
    let out = tokio::time::timeout(Duration::from_secs(30), second.wait_with_output())
        .await
        .expect("podline did not finish")
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let finished = read_doc(&result).unwrap();
    assert_eq!(finished["pod"], live[0].as_str());
    assert_eq!(finished["reattached"], true);
    assert_eq!(finished["succeeded"], true);
    assert!(finished.get("failureReport").is_none());
    assert_eq!(sim.ground_truth().len(), 1, "one pod for the task, not two");
}

/// `--result-file` is for one task: with `--count` it is a usage error naming both flags.
#[tokio::test]
async fn result_file_with_count_should_be_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_podline"))
        .args(["run", "--image", "busybox", "--count", "2"])
        .args(["--result-file", "/tmp/never-written.json"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--result-file") && stderr.contains("--count"),
        "{stderr}"
    );
}

/// A pod of someone else's in `default`, or one of task `task_id`, that stays up for a minute.
fn foreign_pod(name: &str, task_id: Option<&str>) -> Pod {
    let labels = task_id.map(|id| serde_json::json!({ podline_launch::TASK_ID_LABEL: id }));
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": { "sim.podline.io/duration": "60s" },
        },
        "spec": { "containers": [{ "name": "main", "image": "busybox" }] },
    }))
    .unwrap()
}

/// The launcher's messages name no flag; where `run`'s flags are the remedy (a name taken by
/// someone else's pod, an ambiguous --reattach), the binary adds them, and on every channel the
/// user reads: stderr's failure report, `-o json` and the result file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn name_clashes_should_name_the_flags_that_fix_them_on_every_channel() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let pods: Api<Pod> = Api::namespaced(client(&sim).await, "default");
    let create = kube::api::PostParams::default();
    pods.create(&create, &foreign_pod("taken", None))
        .await
        .unwrap();
    for name in ["etl-a", "etl-b"] {
        pods.create(&create, &foreign_pod(name, Some("etl")))
            .await
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 2] = [
        (
            &["--name", "taken", "--exact-name"],
            "it was left untouched. Choose another --name or drop --exact-name",
        ),
        (
            &["--task-id", "etl", "--reattach"],
            "--reattach: 2 live pods carry task id \"etl\"; refusing to guess",
        ),
    ];
    for (n, (flags, wording)) in cases.into_iter().enumerate() {
        let result = dir.path().join(format!("result-{n}.json"));
        let out = podline("run", kubeconfig.path())
            .args(["--image", "busybox"])
            .args(flags)
            .arg("--result-file")
            .arg(&result)
            .args(["--", "true"])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(5), "{flags:?}: {stderr}");
        assert!(stderr.contains(wording), "{flags:?}: stderr: {stderr}");
        let finished = read_doc(&result).unwrap();
        for field in ["error", "failureReport"] {
            let text = finished[field].as_str().unwrap_or_default();
            assert!(text.contains(wording), "{flags:?}: {field}: {finished}");
        }

        let out = podline("run", kubeconfig.path())
            .args(["--image", "busybox", "-o", "json"])
            .args(flags)
            .args(["--", "true"])
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(5), "{flags:?}");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let error = doc["error"].as_str().unwrap_or_default();
        assert!(error.contains(wording), "{flags:?}: -o json: {doc}");
    }
    // Nothing was created or touched: the three pods are the only ones.
    assert_eq!(
        pods.list(&ListParams::default()).await.unwrap().items.len(),
        3
    );
}
