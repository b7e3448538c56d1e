//! KFP mode end to end: Argo-style pods in the sim, the sink over
//! `podline_client::watch`, the real MLMD behind `mlmd_server.py`.
//!
//! The sim's kubelet is off: the tests move pods through their phases with
//! status patches, as Argo's pods would move, so each step is deterministic.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use podline_client::backoff::FullJitter;
use podline_mlmd::kfp::fixture::{Step, component_spec};
use podline_mlmd::kfp::keys::WRITTEN_LABEL;
use podline_mlmd::kfp::{
    KFP_FINALIZER, KfpSink, KfpWriter, Outcome, PipelineConfig, SinkConfig, run,
};
use podline_mlmd::proto::{ExecutionState, GetExecutionsByExternalIdsRequest};
use podline_mlmd::{MlmdClient, MlmdClientConfig};
use podline_testkit::{Sim, start_sim, test_config, wait_until};
use serde_json::{Value as Json, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::require_mlmd;
use crate::support::{MlmdServer, python_json};
use crate::writer_real::{assert_run_as_the_ui_sees_it, run_steps};

const NS: &str = "default";

fn sink_config() -> SinkConfig {
    SinkConfig {
        backoff: FullJitter::try_new(Duration::from_millis(20), Duration::from_millis(300), 2.0)
            .expect("valid backoff"),
        patch_attempts: 5,
        ..SinkConfig::default()
    }
}

fn spawn_sink(kube: &kube::Client, mlmd: &MlmdClientConfig) -> (Arc<KfpSink>, JoinHandle<()>) {
    spawn_sink_with(kube, mlmd, sink_config())
}

/// [`spawn_sink`] holding the pods it records with its finalizer.
fn spawn_finalizing_sink(
    kube: &kube::Client,
    mlmd: &MlmdClientConfig,
) -> (Arc<KfpSink>, JoinHandle<()>) {
    spawn_sink_with(
        kube,
        mlmd,
        SinkConfig {
            finalize: true,
            ..sink_config()
        },
    )
}

fn spawn_sink_with(
    kube: &kube::Client,
    mlmd: &MlmdClientConfig,
    config: SinkConfig,
) -> (Arc<KfpSink>, JoinHandle<()>) {
    let writer = KfpWriter::new(MlmdClient::new(mlmd).expect("client"), 1000, 1000);
    let sink = Arc::new(KfpSink::new(writer, kube.clone(), config));
    let pods: Api<Pod> = Api::namespaced(kube.clone(), NS);
    let task_sink = sink.clone();
    let task = tokio::spawn(async move {
        let config = PipelineConfig::new(Some(NS.to_owned()));
        if let Err(e) = run(task_sink, pods, config, CancellationToken::new()).await {
            panic!("fatal watch error: {e}");
        }
    });
    (sink, task)
}

/// The sim and a client on podline's own stack (as `podline record --kfp` builds it: no silent
/// retry layer), shared by the writer under test and the test's own steps.
async fn sim() -> (Sim, kube::Client) {
    let sim = start_sim(test_config().kubelet_enabled(false)).await;
    let kube = podline_testkit::podline_client(&sim).await;
    (sim, kube)
}

fn wtr_api(kube: &kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "argoproj.io".into(),
        version: "v1alpha1".into(),
        api_version: "argoproj.io/v1alpha1".into(),
        kind: "WorkflowTaskResult".into(),
        plural: "workflowtaskresults".into(),
    };
    Api::namespaced_with(kube.clone(), NS, &resource)
}

/// Create a step's pod (and its WorkflowTaskResult, as Argo's wait
/// container would before the pod ends), move it to `end`; returns its uid.
async fn run_step(kube: &kube::Client, step: &Step, wtr: Option<&Json>, end: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(kube.clone(), NS);
    let pod = pods
        .create(&PostParams::default(), &step.pod(None))
        .await
        .expect("create pod");
    let name = step.pod_name.clone();
    let status = |phase: &str| Patch::Merge(json!({"status": {"phase": phase}}));
    pods.patch_status(&name, &PatchParams::default(), &status("Running"))
        .await
        .expect("running");
    if let Some(outputs) = wtr {
        let node = format!("{}-node", step.pod_name);
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "WorkflowTaskResult",
            "metadata": {"name": node, "namespace": NS,
                         "labels": {"workflows.argoproj.io/workflow": step.workflow}},
            "outputs": outputs,
        }))
        .expect("task result");
        wtr_api(kube)
            .create(&PostParams::default(), &obj)
            .await
            .expect("create task result");
    }
    pods.patch_status(&name, &PatchParams::default(), &status(end))
        .await
        .expect("finished");
    pod.metadata.uid.expect("uid")
}

/// Run a whole KFP-shaped workflow (see `run_steps`); returns (pod name, uid, cached).
async fn run_workflow(kube: &kube::Client, workflow: &str) -> Vec<(String, String, bool)> {
    let mut pods = Vec::new();
    for (step, wtr, end) in run_steps(NS, workflow) {
        let uid = run_step(kube, &step, wtr.as_ref(), end).await;
        pods.push((step.pod_name.clone(), uid, step.cached));
    }
    pods
}

/// The state of a pod's execution in MLMD, if it has one.
async fn state_in_mlmd(mlmd: &MlmdClient, uid: &str) -> Option<ExecutionState> {
    let found = mlmd
        .get_executions_by_external_ids(GetExecutionsByExternalIdsRequest {
            external_ids: vec![format!("podline/kfp/{NS}/{uid}")],
        })
        .await;
    found
        .ok()
        .and_then(|f| f.executions.into_iter().next())
        .and_then(|e| e.last_known_state)
        .and_then(|s| ExecutionState::try_from(s).ok())
}

/// True once every pod's execution is terminal in MLMD and every non-cached
/// pod carries `metadata_written` (the last thing the sink does).
async fn all_recorded(
    kube: &kube::Client,
    mlmd: &MlmdClient,
    pods: &[(String, String, bool)],
) -> bool {
    let api: Api<Pod> = Api::namespaced(kube.clone(), NS);
    for (name, uid, cached) in pods {
        let state = state_in_mlmd(mlmd, uid).await;
        if !matches!(
            state,
            Some(ExecutionState::Complete | ExecutionState::Failed | ExecutionState::Cached)
        ) {
            return false;
        }
        if !cached {
            let Ok(pod) = api.get(name).await else {
                return false;
            };
            let written = pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(WRITTEN_LABEL));
            if written.map(String::as_str) != Some("true") {
                return false;
            }
        }
    }
    true
}

async fn await_recorded(
    kube: &kube::Client,
    mlmd: &MlmdClientConfig,
    pods: &[(String, String, bool)],
) {
    let client = MlmdClient::new(mlmd).expect("client");
    assert!(
        wait_until(Duration::from_secs(30), || all_recorded(
            kube, &client, pods
        ))
        .await,
        "pods not all recorded within 30 s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kfp_run_in_the_sim_should_be_recorded_as_the_kfp_ui_expects() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let (_sim, kube) = sim().await;
    let (sink, task) = spawn_sink(&kube, &server.config());
    let pods = run_workflow(&kube, "wf-sim").await;
    await_recorded(&kube, &server.config(), &pods).await;
    task.abort();
    let q = assert_run_as_the_ui_sees_it(server.port, "wf-sim");

    // The markers on the pods: the ids the UI and the cache server read.
    let api: Api<Pod> = Api::namespaced(kube.clone(), NS);
    let train = api.get("wf-sim-train").await.expect("train pod");
    let labels = train.metadata.labels.expect("labels");
    let annotations = train.metadata.annotations.expect("annotations");
    let execs = q["executions"].as_array().expect("executions");
    let train_exec = execs
        .iter()
        .find(|e| e["custom_properties"]["kfp_pod_name"] == "wf-sim-train")
        .expect("train execution");
    assert_eq!(
        labels["pipelines.kubeflow.org/metadata_execution_id"],
        train_exec["id"].to_string()
    );
    assert_eq!(
        labels["pipelines.kubeflow.org/metadata_context_id"],
        q["context"]["id"].to_string()
    );
    let inputs: Json =
        serde_json::from_str(&annotations["pipelines.kubeflow.org/metadata_input_artifact_ids"])
            .expect("inputs json");
    assert_eq!(inputs[0]["name"], "data");
    let outputs: Json =
        serde_json::from_str(&annotations["pipelines.kubeflow.org/metadata_output_artifact_ids"])
            .expect("outputs json");
    assert_eq!(
        outputs[0]["name"], "model",
        "outputs from the WorkflowTaskResult"
    );
    assert_eq!(outputs[0]["type"], "Model");
    // The cache hit keeps the webhook's markers (not patched by us).
    let eval = api.get("wf-sim-eval").await.expect("eval pod");
    assert_eq!(
        eval.metadata.labels.expect("labels")["pipelines.kubeflow.org/metadata_execution_id"],
        "999999"
    );
    let stats = sink.stats();
    assert_eq!(stats.failed.get(), 0);
    // Output parameters (KFP's writer dropped them) from the pod annotation
    // and from the WorkflowTaskResult.
    let prep = execs
        .iter()
        .find(|e| e["custom_properties"]["kfp_pod_name"] == "wf-sim-prep")
        .expect("prep execution");
    assert_eq!(prep["custom_properties"]["output:rows"], "1000");
    assert_eq!(train_exec["custom_properties"]["output:accuracy"], "0.93");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_and_restarting_the_writer_20_times_should_duplicate_nothing() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let (_sim, kube) = sim().await;
    let workflows = ["wf-k1", "wf-k2", "wf-k3"];
    let driver_kube = kube.clone();
    let driver = tokio::spawn(async move {
        let mut all = Vec::new();
        for wf in workflows {
            all.extend(run_workflow(&driver_kube, wf).await);
        }
        all
    });
    let (_, mut task) = spawn_sink(&kube, &server.config());
    for _ in 0..20 {
        // A random kill point: anywhere in a watch, an MLMD call or a patch.
        let ms = rand::random_range(10..120);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        task.abort();
        let _ = task.await;
        (_, task) = spawn_sink(&kube, &server.config());
    }
    let pods = driver.await.expect("driver");
    await_recorded(&kube, &server.config(), &pods).await;
    task.abort();
    let mut counts = None;
    for wf in workflows {
        let q = assert_run_as_the_ui_sees_it(server.port, wf);
        counts = Some(q["counts"].clone());
    }
    let counts = counts.expect("counts");
    assert_eq!(counts["executions"], 12, "{counts}");
    assert_eq!(counts["distinct_execution_external_ids"], 12);
    assert_eq!(counts["contexts"], 3);
    assert_eq!(
        counts["artifacts"], 9,
        "data, model and report per run: {counts}"
    );
    assert_eq!(counts["distinct_artifact_external_ids"], 9);
    assert_eq!(counts["events"], 12, "4 per run: {counts}");
}

/// How long MLMD stays down in the outage test (the issue says 30 s; the
/// default keeps the suite fast, `PODLINE_TEST_MLMD_OUTAGE_SECS` overrides).
fn outage() -> Duration {
    let secs = std::env::var("PODLINE_TEST_MLMD_OUTAGE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    Duration::from_secs(secs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mlmd_down_at_start_and_mid_run_should_lose_nothing() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("mlmd.db");
    // Reserve a port for the MLMD that is not running yet.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port");
    let mut config = MlmdClientConfig::new("127.0.0.1", port);
    config.connect_timeout = Duration::from_secs(1);
    config.request_timeout = Duration::from_secs(5);
    let (_sim, kube) = sim().await;
    let (sink, task) = spawn_sink(&kube, &config);

    // Down at start: the run happens while MLMD is unreachable.
    let first = run_workflow(&kube, "wf-down-1").await;
    tokio::time::sleep(outage()).await; // the outage itself, not a sync
    let mut server = MlmdServer::start(&db, port);
    await_recorded(&kube, &config, &first).await;

    // Down mid-run: stop it, run more, bring it back.
    server.stop();
    let driver_kube = kube.clone();
    let driver = tokio::spawn(async move { run_workflow(&driver_kube, "wf-down-2").await });
    tokio::time::sleep(outage()).await;
    server.restart();
    let second = driver.await.expect("driver");
    await_recorded(&kube, &config, &second).await;
    task.abort();
    assert_run_as_the_ui_sees_it(server.port, "wf-down-1");
    let q = assert_run_as_the_ui_sees_it(server.port, "wf-down-2");
    assert_eq!(q["counts"]["executions"], 8);
    assert!(
        sink.stats().mlmd_retries.get() > 0,
        "the sink waited MLMD out"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_annotations_should_be_recorded_with_what_can_be_read_and_the_stream_goes_on() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let (_sim, kube) = sim().await;
    let (sink, task) = spawn_sink(&kube, &server.config());

    let mut bad = Step::new(NS, "wf-bad", "broken");
    bad.component_spec = Some("{this is not json".into());
    bad.parameters = Some("[\"not\", \"an object\"]".into());
    bad.annotations.push((
        "workflows.argoproj.io/outputs".into(),
        r#"{"artifacts":[{"name":"broken-weird","ftp":{"host":"x"}},{"name":"broken-ok","s3":{"key":"k/ok.tgz"}}]}"#.into(),
    ));
    let bad_uid = run_step(&kube, &bad, None, "Succeeded").await;
    let mut good = Step::new(NS, "wf-bad", "after");
    good.component_spec = Some(component_spec("After", &[]));
    let good_uid = run_step(&kube, &good, None, "Succeeded").await;
    let pods = vec![
        (bad.pod_name.clone(), bad_uid, false),
        (good.pod_name.clone(), good_uid, false),
    ];
    await_recorded(&kube, &server.config(), &pods).await;
    task.abort();

    let q = python_json("kfp_query.py", &[server.port.to_string(), "wf-bad".into()]);
    let execs = q["executions"].as_array().expect("executions");
    assert_eq!(execs.len(), 2, "{q:#}");
    let broken = execs
        .iter()
        .find(|e| e["custom_properties"]["kfp_pod_name"] == "wf-bad-broken")
        .expect("broken pod recorded");
    assert_eq!(
        broken["type"], "components.broken",
        "template name when the spec is unreadable"
    );
    assert_eq!(broken["state"], "COMPLETE");
    assert_eq!(
        broken["events"].as_array().map(Vec::len),
        Some(1),
        "the readable output only"
    );
    let artifacts = q["artifacts"].as_array().expect("artifacts");
    assert_eq!(artifacts.len(), 1);
    assert_eq!(artifacts[0]["uri"], "minio://mlpipeline/k/ok.tgz");
    // component_spec, arguments.parameters and the unknown artifact kind,
    // each time the pod was seen.
    assert!(sink.stats().warnings.get() >= 3);
}

/// Issue 27: a KFP pod whose `deletionTimestamp` no client decodes (the sim serves "not-a-time"
/// for it in every LIST, GET and watch event), one in the writer's first LIST and one in watch
/// events: kube-rs read such a line as a Status with code 0, which ended the writer's watch. Now
/// each is skipped and counted, the writer keeps running and records the good pods, and nothing
/// is written for the bad ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_does_not_decode_should_be_skipped_and_counted_and_the_writer_goes_on() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let (sim, kube) = sim().await;
    sim.faults().push(
        podline_sim::FaultRule::new(podline_sim::FaultAction::Malform {
            name: "*-bad*".into(),
            field: podline_sim::fault::MalformField::DeletionTimestamp,
        })
        .resource("pods"),
    );
    let listed = Step::new(NS, "wf-dec", "bad-listed");
    let listed_uid = run_step(&kube, &listed, None, "Succeeded").await;
    let (sink, task) = spawn_sink(&kube, &server.config());
    let watched = Step::new(NS, "wf-dec", "bad-watched");
    let watched_uid = run_step(&kube, &watched, None, "Succeeded").await;
    let mut good = Step::new(NS, "wf-dec", "good");
    good.component_spec = Some(component_spec("Good", &[]));
    let good_uid = run_step(&kube, &good, None, "Succeeded").await;
    await_recorded(
        &kube,
        &server.config(),
        &[(good.pod_name.clone(), good_uid, false)],
    )
    .await;
    assert!(!task.is_finished(), "the writer must keep running");
    let metrics = sink.health().metrics().render();
    let skipped = metrics
        .lines()
        .find_map(|l| l.strip_prefix("podline_record_watch_skipped_total{kind=\"object\"} "))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    // The listed pod once, the watched one in each of its events (ADDED, Running, Succeeded).
    assert!(skipped >= 2, "{metrics}");
    let mlmd = MlmdClient::new(&server.config()).expect("client");
    for uid in [listed_uid, watched_uid] {
        assert_eq!(
            state_in_mlmd(&mlmd, &uid).await,
            None,
            "nothing written for {uid}"
        );
    }
    task.abort();
}

/// Create `step`'s pod and move it to Running; returns its uid.
async fn start_step(kube: &kube::Client, step: &Step) -> String {
    let pods: Api<Pod> = Api::namespaced(kube.clone(), NS);
    let pod = pods
        .create(&PostParams::default(), &step.pod(None))
        .await
        .expect("create pod");
    pods.patch_status(
        &step.pod_name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .expect("running");
    pod.metadata.uid.expect("uid")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_deleted_while_the_writer_was_down_should_become_canceled_on_restart() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let (_sim, kube) = sim().await;
    let mlmd = MlmdClient::new(&server.config()).expect("client");
    let (_, task) = spawn_sink(&kube, &server.config());
    let gone = start_step(&kube, &Step::new(NS, "wf-gone", "doomed")).await;
    let live = start_step(&kube, &Step::new(NS, "wf-gone", "alive")).await;
    for uid in [&gone, &live] {
        assert!(
            wait_until(Duration::from_secs(20), || async {
                state_in_mlmd(&mlmd, uid).await == Some(ExecutionState::Running)
            })
            .await,
            "{uid} not recorded RUNNING"
        );
    }

    // The writer stops; the pod is deleted while nobody watches.
    task.abort();
    let _ = task.await;
    let pods: Api<Pod> = Api::namespaced(kube.clone(), NS);
    pods.delete("wf-gone-doomed", &DeleteParams::default().grace_period(0))
        .await
        .expect("delete");
    assert!(
        wait_until(Duration::from_secs(10), || async {
            pods.get_opt("wf-gone-doomed")
                .await
                .ok()
                .flatten()
                .is_none()
        })
        .await,
        "pod not gone"
    );

    // Restarted, the writer's relist no longer has it: CANCELED, as Kubeflow
    // users expect of a vanished pod. The live pod stays RUNNING.
    let (sink, task) = spawn_sink(&kube, &server.config());
    assert!(
        wait_until(Duration::from_secs(20), || async {
            state_in_mlmd(&mlmd, &gone).await == Some(ExecutionState::Canceled)
        })
        .await,
        "vanished pod's execution is {:?}, not CANCELED",
        state_in_mlmd(&mlmd, &gone).await
    );
    assert!(
        wait_until(Duration::from_secs(10), || async {
            sink.stats().canceled_vanished.get() == 1
        })
        .await
    );
    task.abort();
    assert_eq!(
        state_in_mlmd(&mlmd, &live).await,
        Some(ExecutionState::Running),
        "a pod still there must not be canceled"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_should_be_written_to_mlmd_in_parallel() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    // Every MLMD call takes 100 ms (outside the store's lock), and the
    // server records how many calls it served at once.
    let stats = dir.path().join("server-stats.json");
    let server = MlmdServer::start_with(
        &dir.path().join("mlmd.db"),
        0,
        &[
            "--delay-ms".into(),
            "100".into(),
            "--stats".into(),
            stats.display().to_string(),
        ],
    );
    let (_sim, kube) = sim().await;
    let mut uids = Vec::new();
    for i in 0..8 {
        uids.push(start_step(&kube, &Step::new(NS, "wf-par", &format!("s{i}"))).await);
    }
    let mlmd = MlmdClient::new(&server.config()).expect("client");
    let (_, task) = spawn_sink(&kube, &server.config());
    for uid in &uids {
        assert!(
            wait_until(Duration::from_secs(30), || async {
                state_in_mlmd(&mlmd, uid).await == Some(ExecutionState::Running)
            })
            .await,
            "{uid} not recorded"
        );
    }
    task.abort();
    let text = std::fs::read_to_string(&stats).expect("server stats");
    let served: Json = serde_json::from_str(&text).expect("stats JSON");
    assert!(
        served["max_concurrent"].as_u64().unwrap_or(0) >= 2,
        "pods were written one at a time: {served}"
    );
}

/// Step `i` of a chain in `workflow`: every step but the first consumes the previous one's output.
fn chain_step(workflow: &str, i: usize) -> Step {
    let mut step = Step::new(NS, workflow, &format!("s{i}"));
    step.component_spec = Some(component_spec("Step", &[("out", "Dataset")]));
    if i > 0 {
        let previous = Step::new(NS, workflow, &format!("s{}", i - 1));
        step.inputs = vec![("in".into(), previous.key("out"))];
    }
    step.outputs_on_pod = Some(vec![("out".into(), step.key("out"))]);
    step
}

/// MLMD writes that touch executions (creating, updating, linking events).
fn execution_writes(client: &MlmdClient) -> u64 {
    [
        "PutExecution",
        "PutExecutions",
        "PutEvents",
        "PutLineageSubgraph",
    ]
    .iter()
    .map(|m| client.calls_to(m))
    .sum()
}

/// The 8 workers used to race to create each workflow's context (a 1000-pod backlog made 440
/// `PutContexts`, 338 answered AlreadyExists, and 1,048 lookups for 100 contexts), and linked
/// the inputs of pods written before their upstream with a second write (`PutEvents`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_of_one_workflow_should_make_one_context_and_one_write_per_pod() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let (_sim, kube) = sim().await;
    // The backlog: 40 finished pods of one workflow, listed at start.
    let mut pods = Vec::new();
    for i in 0..40 {
        let step = chain_step("wf-backlog", i);
        let uid = run_step(&kube, &step, None, "Succeeded").await;
        pods.push((step.pod_name.clone(), uid, false));
    }
    let (sink, task) = spawn_sink(&kube, &server.config());
    await_recorded(&kube, &server.config(), &pods).await;
    task.abort();
    let client = sink.writer().client();
    assert_eq!(client.calls_to("PutContexts"), 1, "one context creation");
    assert_eq!(
        client.calls_to("GetContextByTypeAndName"),
        0,
        "no lookups of a context this process created"
    );
    assert_eq!(client.calls_to("PutExecutionType"), 1);
    assert_eq!(
        execution_writes(client),
        40,
        "one write transaction per finished pod, inputs linked in it"
    );
    // Every INPUT link is there: 39 consumers, each linked to its upstream's output.
    let q = python_json(
        "kfp_query.py",
        &[server.port.to_string(), "wf-backlog".into()],
    );
    let inputs = q["executions"]
        .as_array()
        .expect("executions")
        .iter()
        .flat_map(|e| e["events"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["type"] == "INPUT")
        .count();
    assert_eq!(inputs, 39, "{q:#}");
    assert_eq!(q["counts"]["executions"], 40);
}

/// A pod's whole life seen live (Pending, then Running, then Succeeded) used to cost three
/// write transactions (NEW, RUNNING, outputs); a Pending pod is now held until it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_seen_pending_running_and_finished_should_cost_two_writes() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let (_sim, kube) = sim().await;
    let (sink, task) = spawn_sink(&kube, &server.config());
    let api: Api<Pod> = Api::namespaced(kube.clone(), NS);
    let steps: Vec<Step> = (0..8).map(|i| chain_step("wf-live", i)).collect();
    let mut pods = Vec::new();
    for step in &steps {
        let pod = api
            .create(&PostParams::default(), &step.pod(None))
            .await
            .expect("create pod");
        pods.push((step.pod_name.clone(), pod.metadata.uid.expect("uid"), false));
    }
    // The sink has seen every pod Pending.
    let metrics = sink.health().metrics().clone();
    assert!(
        wait_until(Duration::from_secs(20), || {
            let text = metrics.render();
            let seen = watch_events(&text, "apply") + watch_events(&text, "init_apply");
            async move { seen >= 8 }
        })
        .await,
        "the Pending pods were not all seen"
    );
    let status = |phase: &str| Patch::Merge(json!({"status": {"phase": phase}}));
    let mlmd = MlmdClient::new(&server.config()).expect("client");
    for (step, (_, uid, _)) in steps.iter().zip(&pods) {
        api.patch_status(&step.pod_name, &PatchParams::default(), &status("Running"))
            .await
            .expect("running");
        assert!(
            wait_until(Duration::from_secs(20), || async {
                state_in_mlmd(&mlmd, uid).await == Some(ExecutionState::Running)
            })
            .await,
            "{} not recorded RUNNING",
            step.pod_name
        );
        api.patch_status(
            &step.pod_name,
            &PatchParams::default(),
            &status("Succeeded"),
        )
        .await
        .expect("finished");
    }
    await_recorded(&kube, &server.config(), &pods).await;
    task.abort();
    let client = sink.writer().client();
    assert_eq!(
        execution_writes(client),
        16,
        "two write transactions per pod: created RUNNING, then finished"
    );
    assert_eq!(client.calls_to("PutContexts"), 1);
}

/// The sum of the `watch_events` counters of `kind` in a metrics text.
fn watch_events(text: &str, kind: &str) -> u64 {
    text.lines()
        .filter(|l| l.contains("watch_events") && l.contains(&format!("\"{kind}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// Whether the pod `name` carries KFP mode's finalizer (false once it is gone).
async fn carries_finalizer(api: &Api<Pod>, name: &str) -> bool {
    api.get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|p| p.metadata.finalizers)
        .is_some_and(|f| f.iter().any(|f| f == KFP_FINALIZER))
}

/// Issue 17's recorder guarantee in KFP mode: the writer is down for longer than the watch
/// history while its pods finish and are deleted. Without the finalizer they vanished and the
/// restarted writer could only mark their executions CANCELED; with it they wait in Terminating
/// and every final state reaches MLMD, then the finalizers come off and the pods are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_that_finish_and_are_deleted_while_the_writer_is_down_past_the_history_should_keep_their_final_state()
 {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let history = Duration::from_secs(2);
    let sim = start_sim(test_config().kubelet_enabled(false).history_window(history)).await;
    let kube = podline_testkit::podline_client(&sim).await;
    let mlmd = MlmdClient::new(&server.config()).expect("client");
    let api: Api<Pod> = Api::namespaced(kube.clone(), NS);
    let (_, task) = spawn_finalizing_sink(&kube, &server.config());
    let mut steps = Vec::new();
    for i in 0..12 {
        let mut step = Step::new(NS, "wf-held", &format!("s{i}"));
        step.component_spec = Some(component_spec("Step", &[("out", "Dataset")]));
        step.outputs_on_pod = Some(vec![("out".into(), step.key("out"))]);
        let uid = start_step(&kube, &step).await;
        steps.push((step, uid));
    }
    for (step, uid) in &steps {
        assert!(
            wait_until(Duration::from_secs(20), || async {
                state_in_mlmd(&mlmd, uid).await == Some(ExecutionState::Running)
                    && carries_finalizer(&api, &step.pod_name).await
            })
            .await,
            "{} not recorded RUNNING and held by the finalizer",
            step.pod_name
        );
    }

    // The writer dies; meanwhile 6 pods succeed, 4 fail, 2 are deleted while running, and all
    // of them are deleted.
    task.abort();
    let _ = task.await;
    let mut expected = Vec::new();
    for (i, (step, uid)) in steps.iter().enumerate() {
        let end = match i % 6 {
            0..=2 => Some(("Succeeded", ExecutionState::Complete)),
            3 | 4 => Some(("Failed", ExecutionState::Failed)),
            _ => None,
        };
        if let Some((phase, _)) = end {
            api.patch_status(
                &step.pod_name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": phase}})),
            )
            .await
            .expect("finish");
        }
        api.delete(&step.pod_name, &DeleteParams::default().grace_period(0))
            .await
            .expect("delete");
        let state = end.map_or(ExecutionState::Canceled, |(_, state)| state);
        expected.push((step.pod_name.clone(), uid.clone(), state));
    }
    let held = api.list(&Default::default()).await.expect("list");
    assert_eq!(
        held.items.len(),
        12,
        "the finalizer keeps every deleted pod"
    );
    assert!(
        held.items
            .iter()
            .all(|p| p.metadata.deletion_timestamp.is_some())
    );
    tokio::time::sleep(history + Duration::from_secs(1)).await; // the outage itself, not a sync

    let (sink, task) = spawn_finalizing_sink(&kube, &server.config());
    let gone = wait_until(Duration::from_secs(30), || async {
        api.list(&Default::default())
            .await
            .is_ok_and(|l| l.items.is_empty())
    })
    .await;
    // The sim deletes a pod as it answers the patch that removed its last finalizer; the sink
    // counts the removal once that answer reaches it. Stop the sink only after that.
    let counted = wait_until(Duration::from_secs(10), || async {
        sink.stats().finalizers_removed.get() >= 12
    })
    .await;
    task.abort();
    assert!(
        gone,
        "pods left: {:?}",
        api.list(&Default::default()).await.map(|l| l.items.len())
    );
    assert!(
        counted,
        "removals counted: {}",
        sink.stats().finalizers_removed.get()
    );
    for (pod, uid, state) in &expected {
        assert_eq!(
            state_in_mlmd(&mlmd, uid).await,
            Some(*state),
            "{pod}'s final state in MLMD"
        );
    }
    let stats = sink.stats();
    assert_eq!(stats.finalizers_removed.get(), 12);
    assert_eq!(stats.finalizer_failures.get(), 0);
    assert_eq!(stats.canceled_vanished.get(), 0, "no pod vanished");
}

/// Without finalizing, the writer behaves as before: it adds no finalizer, and the only pod
/// patches it sends are the markers (every patch the sim served is one the sink counted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_finalize_the_writer_should_send_no_finalizer_patch() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let (sim, kube) = sim().await;
    let (sink, task) = spawn_sink(&kube, &server.config());
    let pods = run_workflow(&kube, "wf-plain").await;
    await_recorded(&kube, &server.config(), &pods).await;
    // A pod shows its marker as soon as the sim has served the patch; the sink counts it only
    // once it has read the answer back, so wait for the two counts to meet before stopping it.
    // A patch that is not a marker keeps the sim's count ahead for good.
    let agreed = wait_until(Duration::from_secs(10), || async {
        sim.counts().get("patch", "pods") == sink.stats().patches.get()
    })
    .await;
    task.abort();
    let stats = sink.stats();
    assert!(stats.patches.get() > 0, "markers were written");
    assert!(
        agreed,
        "a pod patch other than the markers: the sim served {}, the sink sent {}",
        sim.counts().get("patch", "pods"),
        stats.patches.get()
    );
    assert_eq!(stats.finalizers_added.get(), 0);
    let api: Api<Pod> = Api::namespaced(kube.clone(), NS);
    for (name, _, _) in &pods {
        assert!(!carries_finalizer(&api, name).await, "{name}");
    }

    // The same run with finalizing on: every finalizer added comes off once recorded.
    let (sink, task) = spawn_finalizing_sink(&kube, &server.config());
    let held = run_workflow(&kube, "wf-held-too").await;
    await_recorded(&kube, &server.config(), &held).await;
    let released = wait_until(Duration::from_secs(10), || async {
        let stats = sink.stats();
        stats.finalizers_removed.get() == stats.finalizers_added.get()
    })
    .await;
    task.abort();
    assert!(released, "finalizers left on recorded pods");
    for (name, _, _) in &held {
        assert!(!carries_finalizer(&api, name).await, "{name}");
    }
}

/// At start a finalizing writer releases the pods it will never record: a pod that is no Argo
/// pod (any more), one already written, a TFX one; and it holds an ordinary step it records.
/// It only ever removes its own finalizer: the SQL recorder's podline.io/record and a label
/// shard's podline.io/record-SHARD stay (issue 27: each scope owns only its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_start_a_finalizing_writer_should_release_the_pods_it_will_not_record() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let (_sim, kube) = sim().await;
    let api: Api<Pod> = Api::namespaced(kube.clone(), NS);
    let held = |mut pod: Pod| {
        pod.metadata.finalizers = Some(
            [KFP_FINALIZER, "podline.io/record", "podline.io/record-a"]
                .map(str::to_owned)
                .to_vec(),
        );
        pod
    };
    let mut plain = Step::new(NS, "wf-scope", "plain").pod(None);
    plain.metadata.name = Some("not-argo".into());
    plain
        .metadata
        .labels
        .as_mut()
        .expect("labels")
        .remove("workflows.argoproj.io/workflow");
    let mut written = Step::new(NS, "wf-scope", "written").pod(None);
    written
        .metadata
        .labels
        .as_mut()
        .expect("labels")
        .insert(WRITTEN_LABEL.into(), "true".into());
    let mut tfx = Step::new(NS, "wf-scope", "tfx").pod(None);
    tfx.metadata.labels.as_mut().expect("labels").insert(
        "pipelines.kubeflow.org/pipeline-sdk-type".into(),
        "tfx".into(),
    );
    let mut released = Vec::new();
    for pod in [plain, written, tfx] {
        let created = api
            .create(&PostParams::default(), &held(pod))
            .await
            .expect("create");
        released.push(created.metadata.name.expect("name"));
    }
    let step = Step::new(NS, "wf-scope", "recorded");
    start_step(&kube, &step).await;

    let (sink, task) = spawn_finalizing_sink(&kube, &server.config());
    let done = wait_until(Duration::from_secs(20), || async {
        for name in &released {
            if carries_finalizer(&api, name).await {
                return false;
            }
        }
        carries_finalizer(&api, &step.pod_name).await
    })
    .await;
    task.abort();
    assert!(
        done,
        "left-over finalizers not released, or the step not held"
    );
    assert_eq!(sink.stats().finalizers_removed.get(), 3);
    assert_eq!(sink.stats().finalizers_added.get(), 1);
    for name in &released {
        let pod = api.get(name).await.expect("get");
        assert_eq!(
            pod.metadata.finalizers.unwrap_or_default(),
            ["podline.io/record", "podline.io/record-a"],
            "{name}"
        );
    }
}

/// Issue 27: the start-up release lists pod metadata; one pod whose `deletionTimestamp` no
/// client decodes (the sim's `malform` fault, on LISTs) failed that whole page, so no left-over
/// finalizer was released. Now the bad pod is skipped (logged by name) and the others are
/// queued. (No MLMD needed: the listing is the writer's own.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_start_up_release_should_skip_a_pod_that_does_not_decode() {
    let (sim, kube) = sim().await;
    let api: Api<Pod> = Api::namespaced(kube.clone(), NS);
    for name in ["bad-left", "good-left"] {
        let mut pod = Step::new(NS, "wf-rel", name).pod(None);
        pod.metadata.name = Some(name.into());
        pod.metadata
            .labels
            .as_mut()
            .expect("labels")
            .remove("workflows.argoproj.io/workflow");
        pod.metadata.finalizers = Some(vec![KFP_FINALIZER.to_owned()]);
        api.create(&PostParams::default(), &pod)
            .await
            .expect("create");
    }
    sim.faults().push(
        podline_sim::FaultRule::new(podline_sim::FaultAction::Malform {
            name: "bad-*".into(),
            field: podline_sim::fault::MalformField::DeletionTimestamp,
        })
        .verb(podline_sim::FaultVerb::List)
        .resource("pods"),
    );
    let releaser = podline_mlmd::kfp::release::Releaser::default();
    let queued = podline_mlmd::kfp::release::release_out_of_scope(&kube, Some(NS), &releaser)
        .await
        .expect("one undecodable pod must not fail the listing");
    assert_eq!(queued, 1, "the decodable pod is queued, the other skipped");
}

/// The safety valve: a held pod being deleted whose kubelet never reports (bound to a node, a
/// grace period, no terminal phase) is looked at again when its grace period plus the margin
/// runs out, and then recorded as deleted (CANCELED).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_pod_whose_kubelet_never_reports_should_end_canceled_past_the_margin() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let (_sim, kube) = sim().await;
    let mlmd = MlmdClient::new(&server.config()).expect("client");
    let writer = KfpWriter::new(MlmdClient::new(&server.config()).expect("client"), 10, 10);
    let config = SinkConfig {
        finalize: true,
        overdue_margin: Duration::from_secs(60),
        ..sink_config()
    };
    let sink = KfpSink::new(writer, kube.clone(), config);
    let pod_deleted = |uid: &str, seconds_ago: i64| {
        let mut pod = Step::new(NS, "wf-valve", uid).pod(Some(uid));
        pod.spec.as_mut().expect("spec").node_name = Some("lost-node".into());
        pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        });
        pod.metadata.finalizers = Some(vec![KFP_FINALIZER.to_owned()]);
        let at = k8s_openapi::jiff::Timestamp::now()
            - k8s_openapi::jiff::SignedDuration::from_secs(seconds_ago);
        pod.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at));
        pod.metadata.deletion_grace_period_seconds = Some(30);
        pod
    };
    // Its grace period ends in 30 s: still open, look again in about 90 s.
    match sink.handle(&pod_deleted("open", -30), false).await {
        Outcome::Recorded {
            recorded,
            recheck_in: Some(after),
            ..
        } => {
            assert_eq!(recorded.state, ExecutionState::Running);
            assert!(
                after > Duration::from_secs(80) && after <= Duration::from_secs(90),
                "{after:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Its grace period ended 61 s ago: past the margin, recorded as deleted.
    match sink.handle(&pod_deleted("overdue", 61), false).await {
        Outcome::Recorded {
            recorded,
            recheck_in: None,
            ..
        } => assert_eq!(recorded.state, ExecutionState::Canceled),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        state_in_mlmd(&mlmd, "overdue").await,
        Some(ExecutionState::Canceled)
    );
}
