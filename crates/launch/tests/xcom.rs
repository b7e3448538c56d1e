//! KubernetesPodOperator's contract on the sim: the XCom value read through the pod's sidecar
//! (`pods/exec`, scripted by the sim's `sim.podline.io/exec-<container>` annotation), and the
//! task judged on its base container while a sidecar keeps running.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::Api;
use podline_launch::xcom::SIDECAR_CONTAINER;
use podline_launch::{Cancel, LaunchConfig, Launcher, NullSink, OnFinish, TaskSpec};
use podline_testkit::{Sim, client, start_sim, test_config};

/// A pod as KPO builds it with `do_xcom_push=True`: `base`, then the sidecar; the kubelet is
/// scripted by `sim.podline.io/*` annotations (`<key>.<container>` for one container).
fn kpo_task(script: &[(&str, &str)], sidecar: bool) -> TaskSpec {
    let annotations: BTreeMap<String, String> = script
        .iter()
        .map(|(k, v)| (format!("sim.podline.io/{k}"), (*v).to_owned()))
        .collect();
    let container = |name: &str| Container {
        name: name.into(),
        image: Some("alpine".into()),
        ..Default::default()
    };
    let mut containers = vec![container("base")];
    if sidecar {
        containers.push(container(SIDECAR_CONTAINER));
    } else {
        containers.push(container("proxy"));
    }
    TaskSpec {
        annotations,
        template: Some(Pod {
            spec: Some(PodSpec {
                containers,
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..TaskSpec::default()
    }
}

fn config(on_finish: OnFinish) -> LaunchConfig {
    LaunchConfig {
        schedule_timeout: Duration::from_secs(10),
        startup_timeout: Duration::from_secs(10),
        on_finish,
        ..LaunchConfig::default()
    }
}

async fn setup(on_finish: OnFinish) -> (Sim, Launcher, Api<Pod>) {
    let sim = start_sim(test_config()).await;
    // kube's own client speaks HTTP/1.1, which the WebSocket upgrade of pods/exec needs.
    let client = client(&sim).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let launcher =
        Launcher::new(client.clone(), "default", config(on_finish)).with_exec_client(client);
    (sim, launcher, pods)
}

/// The sidecar of a KPO pod never exits by itself (its loop waits for SIGINT): scripted here
/// as an hour. The value is what the sidecar's exec answers.
const SIDECAR_FOREVER: (&str, &str) = ("duration.airflow-xcom-sidecar", "1h");

/// A base container that exits 0 after writing `return.json`: the value arrives in the
/// result, the task succeeds on the base container although the sidecar is still running
/// (the sim does not run the kill), and the pod is deleted as `on_finish` says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_xcom_value_should_arrive_from_the_sidecar() {
    let (_sim, launcher, pods) = setup(OnFinish::Delete).await;
    let spec = kpo_task(
        &[
            ("duration.base", "100ms"),
            SIDECAR_FOREVER,
            ("exec-airflow-xcom-sidecar", r#"{"stdout": "[1,2,3,4]\n"}"#),
        ],
        true,
    );
    let started = Instant::now();
    let result = launcher
        .run(&spec, Arc::new(NullSink), &Cancel::new())
        .await;
    assert!(result.succeeded(), "{result:?}");
    assert_eq!(result.xcom.as_deref(), Some("[1,2,3,4]\n"));
    assert_eq!(result.xcom_error, None);
    assert!(result.deleted, "{result:?}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert!(
        pods.get_opt(&result.pod)
            .await
            .unwrap()
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
    );
}

/// The empty marker of the read script (no `return.json`) is no value, and no error.
#[tokio::test]
async fn an_empty_xcom_file_should_be_no_value() {
    let (_sim, launcher, _pods) = setup(OnFinish::Delete).await;
    let spec = kpo_task(
        &[
            ("duration.base", "50ms"),
            SIDECAR_FOREVER,
            (
                "exec-airflow-xcom-sidecar",
                r#"{"stdout": "__airflow_xcom_result_empty__\n"}"#,
            ),
        ],
        true,
    );
    let result = launcher
        .run(&spec, Arc::new(NullSink), &Cancel::new())
        .await;
    assert!(result.succeeded(), "{result:?}");
    assert_eq!(result.xcom, None);
    assert_eq!(result.xcom_error, None);
}

/// A base container that fails still has its value read (KPO reads it before judging the
/// container, and pushes it on failure); the task fails with the base container's code and a
/// `delete-succeeded` pod is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_base_container_should_still_report_its_xcom_value() {
    let (_sim, launcher, pods) = setup(OnFinish::DeleteSucceeded).await;
    let spec = kpo_task(
        &[
            ("duration.base", "50ms"),
            ("exit-code.base", "3"),
            SIDECAR_FOREVER,
            (
                "exec-airflow-xcom-sidecar",
                r#"{"stdout": "{\"partial\": true}"}"#,
            ),
        ],
        true,
    );
    let result = launcher
        .run(&spec, Arc::new(NullSink), &Cancel::new())
        .await;
    assert_eq!(result.exit_code, 3, "{result:?}");
    assert_eq!(result.container_exit_code(), Some(3));
    assert_eq!(result.xcom.as_deref(), Some("{\"partial\": true}"));
    assert!(!result.deleted);
    assert!(pods.get_opt(&result.pod).await.unwrap().is_some());
}

/// A value that is not JSON is refused, as the provider's read refuses it.
#[tokio::test]
async fn a_value_that_is_not_json_should_be_an_xcom_error() {
    let (_sim, launcher, _pods) = setup(OnFinish::Delete).await;
    let spec = kpo_task(
        &[
            ("duration.base", "50ms"),
            SIDECAR_FOREVER,
            ("exec-airflow-xcom-sidecar", r#"{"stdout": "not json"}"#),
        ],
        true,
    );
    let started = Instant::now();
    let result = launcher
        .run(&spec, Arc::new(NullSink), &Cancel::new())
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(result.xcom, None);
    let err = result.xcom_error.unwrap();
    assert!(err.contains("not JSON"), "{err}");
}

/// A sidecar that never exits (not KPO's: a proxy) does not hold the task: it ends when the
/// base container terminates, with its exit code, and the pod is deleted (on_finish).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sidecar_that_never_exits_should_not_hold_the_task() {
    let (_sim, launcher, pods) = setup(OnFinish::Delete).await;
    let spec = kpo_task(
        &[("duration.base", "100ms"), ("duration.proxy", "1h")],
        false,
    );
    let started = Instant::now();
    let result = launcher
        .run(&spec, Arc::new(NullSink), &Cancel::new())
        .await;
    assert!(result.succeeded(), "{result:?}");
    assert_eq!(result.container_exit_code(), Some(0));
    assert_eq!(result.xcom, None, "no sidecar, no read");
    assert!(result.deleted);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let left = pods.get_opt(&result.pod).await.unwrap();
    assert!(left.is_none_or(|p| p.metadata.deletion_timestamp.is_some()));
}
