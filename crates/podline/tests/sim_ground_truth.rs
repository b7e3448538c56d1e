//! `podline sim --ground-truth-out FILE` as a process: the ledger `GET /_sim/ground-truth`
//! serves is written to FILE at start, every `--ground-truth-interval`, and on SIGTERM, each time
//! replacing the file whole, so a tool tested against the sim can be audited after it stopped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use podline_testkit::wait_until;
use serde_json::Value;

const WITHIN: Duration = Duration::from_secs(20);

/// A `podline sim` child writing its kubeconfig and ledger into `dir`.
struct SimProcess {
    child: Child,
    kubeconfig: PathBuf,
    ledger: PathBuf,
}

impl SimProcess {
    async fn start(dir: &Path, interval: &str) -> Self {
        let kubeconfig = dir.join("sim.kubeconfig");
        let ledger = dir.join("truth.json");
        let child = Command::new(env!("CARGO_BIN_EXE_podline"))
            .args(["sim", "--plain-http", "--listen", "127.0.0.1:0"])
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .arg("--ground-truth-out")
            .arg(&ledger)
            .args(["--ground-truth-interval", interval])
            .env_remove("PODLINE_SIM_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let process = Self {
            child,
            kubeconfig,
            ledger,
        };
        assert!(
            wait_until(WITHIN, || async {
                process.kubeconfig.exists() && process.ledger.exists()
            })
            .await,
            "the sim wrote neither its kubeconfig nor its first ledger"
        );
        process
    }

    async fn client(&self) -> kube::Client {
        let yaml = std::fs::read_to_string(&self.kubeconfig).unwrap();
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    fn ledger(&self) -> Value {
        serde_json::from_slice(&std::fs::read(&self.ledger).unwrap()).expect("whole JSON")
    }

    fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    async fn exit_status(&mut self) -> std::process::ExitStatus {
        let exited = wait_until(WITHIN, || {
            let done = self.child.try_wait().unwrap().is_some();
            async move { done }
        })
        .await;
        assert!(exited, "podline sim did not exit");
        self.child.wait().unwrap()
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pod(name: &str, exit_code: &str) -> Pod {
    let annotations = BTreeMap::from([
        ("sim.podline.io/duration".to_owned(), "10ms".to_owned()),
        ("sim.podline.io/exit-code".to_owned(), exit_code.to_owned()),
    ]);
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], "restartPolicy": "Never"}
    }))
    .unwrap()
}

fn names(ledger: &Value) -> Vec<String> {
    let mut names: Vec<String> = ledger["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

fn entry<'a>(ledger: &'a Value, name: &str) -> &'a Value {
    ledger["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not in the ledger: {ledger}"))
}

async fn finished(pods: &Api<Pod>, name: &str) -> bool {
    pods.get(name)
        .await
        .ok()
        .and_then(|p| p.status?.phase)
        .is_some_and(|phase| phase == "Succeeded" || phase == "Failed")
}

/// With a period far longer than the test, only the start and the SIGTERM write the file: the
/// copy written on shutdown holds everything, equal to what the endpoint served.
#[tokio::test]
async fn sigterm_should_leave_the_whole_ledger_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = SimProcess::start(dir.path(), "1h").await;
    assert_eq!(
        sim.ledger(),
        serde_json::json!({"pods": []}),
        "written at start"
    );

    let client = sim.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (name, code) in [("ok", "0"), ("failing", "3"), ("deleted", "0")] {
        pods.create(&PostParams::default(), &pod(name, code))
            .await
            .unwrap();
    }
    for name in ["ok", "failing", "deleted"] {
        assert!(
            wait_until(WITHIN, || finished(&pods, name)).await,
            "{name} did not finish"
        );
    }
    pods.delete("deleted", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        wait_until(WITHIN, || async {
            pods.get_opt("deleted").await.is_ok_and(|p| p.is_none())
        })
        .await
    );
    let served: Value = serde_json::from_str(
        &client
            .request_text(
                http::Request::get("/_sim/ground-truth")
                    .body(vec![])
                    .unwrap(),
            )
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        sim.ledger(),
        serde_json::json!({"pods": []}),
        "not rewritten yet"
    );

    sim.sigterm();
    let status = sim.exit_status().await;
    assert!(status.success(), "{status:?}");
    let written = sim.ledger();
    assert_eq!(written, served, "the file is the endpoint's ledger");
    assert_eq!(names(&written), ["deleted", "failing", "ok"]);
    assert_eq!(entry(&written, "failing")["exitCodes"]["main"], 3);
    assert!(entry(&written, "deleted")["deletedAt"].is_string());
    assert!(entry(&written, "ok")["deletedAt"].is_null());
    let phases: Vec<&str> = entry(&written, "ok")["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases.last(), Some(&"Succeeded"), "{phases:?}");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

/// While the sim runs, the file follows the ledger at the interval, and it is always whole JSON
/// (replaced, never rewritten in place), even when the sim is killed without a goodbye.
#[tokio::test]
async fn the_file_should_follow_the_ledger_while_the_sim_runs() {
    let dir = tempfile::tempdir().unwrap();
    let sim = SimProcess::start(dir.path(), "200ms").await;
    let pods: Api<Pod> = Api::namespaced(sim.client().await, "default");
    for i in 0..5 {
        pods.create(&PostParams::default(), &pod(&format!("p{i}"), "0"))
            .await
            .unwrap();
    }
    assert!(
        wait_until(WITHIN, || async {
            // Read as a reader would, while the sim keeps replacing the file.
            let ledger = sim.ledger();
            names(&ledger).len() == 5
                && ledger["pods"].as_array().unwrap().iter().all(|p| {
                    p["transitions"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|t| t["phase"] == "Succeeded")
                })
        })
        .await,
        "the file never showed the five finished pods: {}",
        sim.ledger()
    );
    drop(sim); // SIGKILL
}

/// A file that can't be written stops the sim at start with exit 2, naming the file.
#[test]
fn an_unwritable_ground_truth_file_should_stop_the_sim_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("missing").join("truth.json");
    let out = Command::new(env!("CARGO_BIN_EXE_podline"))
        .args(["sim", "--plain-http", "--listen", "127.0.0.1:0"])
        .arg("--kubeconfig-out")
        .arg(dir.path().join("sim.kubeconfig"))
        .arg("--ground-truth-out")
        .arg(&ledger)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--ground-truth-out") && stderr.contains(&*ledger.to_string_lossy()),
        "{stderr}"
    );
}
