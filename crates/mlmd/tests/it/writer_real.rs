//! The KFP writer against the real MLMD, queried back like the KFP UI.

use podline_mlmd::MlmdClient;
use podline_mlmd::kfp::fixture::{Step, component_spec};
use podline_mlmd::kfp::{KfpPod, KfpWriter, classify};
use podline_mlmd::proto::ExecutionState;
use serde_json::{Value as Json, json};

use crate::require_mlmd;
use crate::support::{MlmdServer, python_json};

/// A KFP-shaped run: prep (outputs on the pod), train (input from prep,
/// outputs from a WorkflowTaskResult document), eval (a cache hit), flaky
/// (fails, no outputs).
pub fn run_steps(namespace: &str, workflow: &str) -> Vec<(Step, Option<Json>, &'static str)> {
    let mut prep = Step::new(namespace, workflow, "prep");
    prep.component_spec = Some(component_spec("Prep", &[("data", "Dataset")]));
    prep.output_parameters = vec![("rows".into(), "1000".into())];
    prep.outputs_on_pod = Some(vec![("data".into(), prep.key("data"))]);
    let mut train = Step::new(namespace, workflow, "train");
    train.component_spec = Some(component_spec("Train", &[("model", "Model")]));
    train.parameters = Some(r#"{"lr": "0.1", "epochs": 3}"#.into());
    train.inputs = vec![("data".into(), prep.key("data"))];
    train.output_parameters = vec![("accuracy".into(), "0.93".into())];
    let wtr = train.outputs_json(&[("model".into(), train.key("model"))]);
    let mut eval = Step::new(namespace, workflow, "eval");
    eval.cached = true;
    eval.outputs_on_pod = Some(vec![(
        "report".into(),
        "artifacts/cached/report.tgz".into(),
    )]);
    let flaky = Step::new(namespace, workflow, "flaky");
    vec![
        (prep, None, "Succeeded"),
        (train, Some(wtr), "Succeeded"),
        (eval, None, "Succeeded"),
        (flaky, None, "Failed"),
    ]
}

fn kfp(step: &Step, uid: &str, phase: &str, wtr: Option<&Json>) -> KfpPod {
    let mut pod = classify(&step.pod(Some(uid))).expect("recorded");
    pod.phase = phase.into();
    if let (None, true, Some(doc)) = (&pod.outputs, pod.state(false) != ExecutionState::New, wtr) {
        let outputs = pod.parse_outputs(doc);
        pod.outputs = Some(outputs);
    }
    pod
}

async fn record_run(
    writer: &KfpWriter,
    steps: &[(Step, Option<Json>, &'static str)],
    phases: &[bool],
) {
    for &finished in phases {
        for (i, (step, wtr, end)) in steps.iter().enumerate() {
            let phase = if finished { *end } else { "Pending" };
            let pod = kfp(
                step,
                &format!("uid-{}-{i}", step.workflow),
                phase,
                wtr.as_ref(),
            );
            writer.record(&pod, false).await.expect("record");
        }
    }
}

/// Assert what the KFP UI sees for the run recorded by [`run_steps`].
pub fn assert_run_as_the_ui_sees_it(port: u16, workflow: &str) -> Json {
    let q = python_json("kfp_query.py", &[port.to_string(), workflow.to_owned()]);
    let ctx = &q["context"];
    assert_eq!(ctx["name"], workflow, "{q}");
    assert_eq!(ctx["properties"]["run_id"], workflow);
    let execs = q["executions"].as_array().expect("executions");
    assert_eq!(execs.len(), 4, "{q:#}");
    let by_pod = |pod: &str| {
        execs
            .iter()
            .find(|e| e["custom_properties"]["kfp_pod_name"] == format!("{workflow}-{pod}"))
            .unwrap_or_else(|| panic!("no execution for {pod}: {q:#}"))
    };
    let prep = by_pod("prep");
    let train = by_pod("train");
    let eval = by_pod("eval");
    let flaky = by_pod("flaky");
    assert_eq!(prep["state"], "COMPLETE");
    assert_eq!(train["state"], "COMPLETE");
    assert_eq!(eval["state"], "CACHED");
    assert_eq!(flaky["state"], "FAILED");
    assert!(
        prep["type"]
            .as_str()
            .expect("type")
            .starts_with("components.Prep@sha256=")
    );
    assert_eq!(
        flaky["type"], "components.flaky",
        "template name without a component spec"
    );
    assert_eq!(
        train["properties"],
        json!({"pipeline_name": workflow, "run_id": workflow, "component_id": "Train"})
    );
    assert_eq!(train["custom_properties"]["input:lr"], "0.1");
    assert_eq!(train["custom_properties"]["input:epochs"], 3);
    // Output parameters (KFP's writer dropped them), from the pod annotation
    // and from the WorkflowTaskResult.
    assert_eq!(prep["custom_properties"]["output:rows"], "1000", "{prep:#}");
    assert_eq!(
        train["custom_properties"]["output:accuracy"], "0.93",
        "{train:#}"
    );
    // Lineage: train's INPUT is prep's OUTPUT artifact.
    let prep_out = &prep["events"][0];
    assert_eq!(prep_out["type"], "OUTPUT");
    assert_eq!(prep_out["key"], "data");
    let train_events = train["events"].as_array().expect("events");
    assert_eq!(train_events.len(), 2, "{train:#}");
    assert_eq!(train_events[0]["type"], "INPUT");
    assert_eq!(train_events[0]["key"], "data");
    assert_eq!(train_events[0]["artifact_id"], prep_out["artifact_id"]);
    assert_eq!(train_events[1]["type"], "OUTPUT");
    assert_eq!(train_events[1]["key"], "model");
    assert_eq!(flaky["events"], json!([]));
    let artifacts = q["artifacts"].as_array().expect("artifacts");
    let uris: Vec<&str> = artifacts
        .iter()
        .map(|a| a["uri"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(artifacts.len(), 3, "{uris:?}");
    let model = artifacts
        .iter()
        .find(|a| a["custom_properties"]["name"] == "model")
        .expect("model artifact");
    assert_eq!(model["type"], "Model");
    assert_eq!(
        model["uri"],
        format!("minio://mlpipeline/artifacts/{workflow}/{workflow}-train/model.tgz")
    );
    assert_eq!(model["custom_properties"]["pipeline_name"], workflow);
    assert!(
        model["custom_properties"]["argo_artifact"]
            .as_str()
            .expect("argo")
            .contains("\"key\": ")
    );
    q
}

#[tokio::test]
async fn a_kfp_run_should_read_back_like_the_kfp_ui_and_rerecording_duplicates_nothing() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let steps = run_steps("team-a", "wf-ui");
    let writer = KfpWriter::new(MlmdClient::new(&server.config()).expect("client"), 100, 100);
    record_run(&writer, &steps, &[false, true]).await;
    let first = assert_run_as_the_ui_sees_it(server.port, "wf-ui");
    let counts = first["counts"].clone();
    assert_eq!(counts["executions"], 4);
    assert_eq!(counts["contexts"], 1);

    // Same writer (memo), then a fresh writer (a restart: memo lost), in
    // every order of phases: nothing new.
    record_run(&writer, &steps, &[false, true]).await;
    let fresh = KfpWriter::new(MlmdClient::new(&server.config()).expect("client"), 100, 100);
    record_run(&fresh, &steps, &[true, false, true]).await;
    let again = assert_run_as_the_ui_sees_it(server.port, "wf-ui");
    assert_eq!(again["counts"], counts);
    assert_eq!(again["executions"], first["executions"]);
}

#[tokio::test]
async fn the_same_workflow_name_in_two_namespaces_should_get_two_contexts() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let writer = KfpWriter::new(MlmdClient::new(&server.config()).expect("client"), 100, 100);
    let a = writer.run_context("team-a", "wf").await.expect("a");
    let b = writer.run_context("team-b", "wf").await.expect("b");
    assert_ne!(a.id, b.id);
    assert_eq!(
        a.name.as_deref(),
        Some("wf"),
        "the first keeps the UI's name"
    );
    assert_eq!(b.name.as_deref(), Some("team-b.wf"));
    // A restarted writer resolves both the same way.
    let fresh = KfpWriter::new(MlmdClient::new(&server.config()).expect("client"), 100, 100);
    assert_eq!(fresh.run_context("team-b", "wf").await.expect("b").id, b.id);
    assert_eq!(fresh.run_context("team-a", "wf").await.expect("a").id, a.id);
}

#[tokio::test]
async fn a_pod_deleted_before_finishing_should_be_canceled() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let writer = KfpWriter::new(MlmdClient::new(&server.config()).expect("client"), 100, 100);
    let step = Step::new("ns", "wf-cancel", "long");
    let mut pod = classify(&step.pod(Some("uid-c"))).expect("recorded");
    pod.phase = "Running".into();
    let running = writer.record(&pod, false).await.expect("running");
    assert_eq!(running.state, ExecutionState::Running);
    assert_eq!(running.outputs, None);
    let canceled = writer.record(&pod, true).await.expect("deleted");
    assert_eq!(canceled.state, ExecutionState::Canceled);
    assert_eq!(canceled.execution_id, running.execution_id);
    assert_eq!(canceled.outputs, Some(vec![]));
    let q = python_json(
        "kfp_query.py",
        &[server.port.to_string(), "wf-cancel".into()],
    );
    assert_eq!(q["executions"][0]["state"], "CANCELED");
}

#[tokio::test]
async fn a_pod_should_cost_one_mlmd_write_per_phase_and_no_redundant_reads() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let client = MlmdClient::new(&server.config()).expect("client");
    let writer = KfpWriter::new(client.clone(), 100, 100);
    let mut step = Step::new("ns", "wf-calls", "s0");
    step.component_spec = Some(component_spec("Step", &[("out", "Dataset")]));
    step.outputs_on_pod = Some(vec![("out".into(), step.key("out"))]);
    // Warm the type and context caches.
    let warm = kfp(&step, "uid-warm", "Succeeded", None);
    writer.record(&warm, false).await.expect("warm");

    // Seen running, then finished: one PutExecution each.
    let before = client.calls();
    let mut pod = kfp(&step, "uid-1", "Running", None);
    writer.record(&pod, false).await.expect("running");
    pod.phase = "Succeeded".into();
    writer.record(&pod, false).await.expect("finished");
    assert_eq!(client.calls() - before, 2, "PutExecution twice, no lookups");

    // First seen finished (a relist): execution, outputs and state in one call.
    let before = client.calls();
    let done = kfp(&step, "uid-2", "Succeeded", None);
    let recorded = writer.record(&done, false).await.expect("finished at once");
    assert_eq!(client.calls() - before, 1, "one PutExecution");
    assert_eq!(recorded.state, ExecutionState::Complete);
    assert_eq!(recorded.outputs.as_ref().map(Vec::len), Some(1));

    // A downstream step of a step this writer recorded: its input is linked
    // from the memo, still one call.
    let mut downstream = Step::new("ns", "wf-calls", "s1");
    downstream.component_spec = step.component_spec.clone();
    downstream.inputs = vec![("in".into(), step.key("out"))];
    let before = client.calls();
    let linked = writer
        .record(&kfp(&downstream, "uid-3", "Succeeded", None), false)
        .await
        .expect("downstream");
    assert_eq!(client.calls() - before, 1, "no GetArtifactsByURI");
    assert_eq!(linked.inputs.len(), 1);
    assert_eq!(
        Some(linked.inputs[0].id),
        recorded.outputs.as_ref().map(|o| o[0].id)
    );

    // Seen again by a restarted writer: found through AlreadyExists, not duplicated.
    let fresh_client = MlmdClient::new(&server.config()).expect("client");
    let fresh = KfpWriter::new(fresh_client.clone(), 100, 100);
    let again = fresh.record(&done, false).await.expect("again");
    assert_eq!(again.execution_id, recorded.execution_id);
    assert_eq!(again.outputs, recorded.outputs);
}

#[tokio::test]
async fn a_step_recorded_before_its_upstream_should_get_its_input_linked_later() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let writer = KfpWriter::new(MlmdClient::new(&server.config()).expect("client"), 100, 100);
    let steps = run_steps("ns", "wf-order");
    let (prep, _, _) = &steps[0];
    let (train, wtr, _) = &steps[1];
    // A relist hands both finished pods to different workers; train first.
    let train_pod = kfp(train, "uid-train", "Succeeded", wtr.as_ref());
    let early = writer.record(&train_pod, false).await.expect("train");
    assert_eq!(
        early.unlinked_inputs.len(),
        1,
        "prep's output is not recorded yet"
    );
    writer
        .record(&kfp(prep, "uid-prep", "Succeeded", None), false)
        .await
        .expect("prep");
    let again = writer.record(&train_pod, false).await.expect("train again");
    assert!(again.unlinked_inputs.is_empty());
    assert_eq!(again.inputs.len(), 1);
    // A restarted writer finds the link instead of adding another.
    let fresh = KfpWriter::new(MlmdClient::new(&server.config()).expect("client"), 100, 100);
    let restarted = fresh.record(&train_pod, false).await.expect("restarted");
    assert_eq!(restarted.inputs, again.inputs);
    assert_train_has_its_input_and_output(&server, "wf-order");
}

/// A writer records a consumer before its upstream artifact exists, labels the pod with the
/// execution id (as the sink's first patch does), and is killed before it can link the input.
/// The restarted writer adopts the execution by that label and must link the input now, not
/// take the inputs it can resolve today as already linked (that lost the INPUT event for good).
#[tokio::test]
async fn a_restarted_writer_should_link_an_input_its_killed_predecessor_could_not() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let writer = || KfpWriter::new(MlmdClient::new(&server.config()).expect("client"), 100, 100);
    let steps = run_steps("ns", "wf-killed");
    let (prep, _, _) = &steps[0];
    let (train, wtr, _) = &steps[1];
    let mut train_pod = kfp(train, "uid-train", "Succeeded", wtr.as_ref());
    let early = writer().record(&train_pod, false).await.expect("train");
    assert_eq!(early.unlinked_inputs.len(), 1, "prep is not recorded yet");
    // Killed here. The pod keeps the execution-id label the first patch wrote.
    train_pod.labelled_execution_id = Some(early.execution_id);
    writer()
        .record(&kfp(prep, "uid-prep", "Succeeded", None), false)
        .await
        .expect("prep");
    let restarted = writer().record(&train_pod, false).await.expect("restarted");
    assert_eq!(
        restarted.execution_id, early.execution_id,
        "adopted, not duplicated"
    );
    assert!(restarted.unlinked_inputs.is_empty(), "{restarted:?}");
    assert_train_has_its_input_and_output(&server, "wf-killed");
}

/// The workflow's train execution, as the KFP UI reads it back, has exactly an INPUT (prep's
/// data) and an OUTPUT (its model) event.
fn assert_train_has_its_input_and_output(server: &MlmdServer, workflow: &str) {
    let q = python_json("kfp_query.py", &[server.port.to_string(), workflow.into()]);
    let pod_name = format!("{workflow}-train");
    let train_exec = q["executions"]
        .as_array()
        .expect("executions")
        .iter()
        .find(|e| e["custom_properties"]["kfp_pod_name"] == pod_name.as_str())
        .expect("train")
        .clone();
    let kinds: Vec<&str> = train_exec["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert_eq!(kinds, ["INPUT", "OUTPUT"], "{train_exec:#}");
}

/// Eight workers needing one workflow's context at once used to make eight `PutContexts` (seven
/// answered AlreadyExists, each then looked up): now the first resolves it, the others wait.
#[tokio::test]
async fn concurrent_callers_should_resolve_a_context_once() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let client = MlmdClient::new(&server.config()).expect("client");
    let writer = KfpWriter::new(client.clone(), 100, 100);
    // Warm the context type, so that only the context itself is resolved below.
    writer.run_context("ns", "warm").await.expect("warm");
    let (puts, lookups) = (
        client.calls_to("PutContexts"),
        client.calls_to("GetContextByTypeAndName"),
    );
    let all = futures::future::join_all((0..8).map(|_| writer.run_context("ns", "wf"))).await;
    let ids: Vec<Option<i64>> = all.into_iter().map(|c| c.expect("context").id).collect();
    assert!(
        ids[0].is_some() && ids.iter().all(|id| *id == ids[0]),
        "{ids:?}"
    );
    assert_eq!(client.calls_to("PutContexts") - puts, 1, "one creation");
    assert_eq!(
        client.calls_to("GetContextByTypeAndName") - lookups,
        0,
        "created, so never looked up"
    );

    // A restarted writer (memo lost): one create answered AlreadyExists, one lookup, for all eight.
    let fresh_client = MlmdClient::new(&server.config()).expect("client");
    let fresh = KfpWriter::new(fresh_client.clone(), 100, 100);
    fresh.run_context("ns", "warm").await.expect("warm");
    let (puts, lookups) = (
        fresh_client.calls_to("PutContexts"),
        fresh_client.calls_to("GetContextByTypeAndName"),
    );
    let again = futures::future::join_all((0..8).map(|_| fresh.run_context("ns", "wf"))).await;
    for c in again {
        assert_eq!(c.expect("context").id, ids[0]);
    }
    assert_eq!(fresh_client.calls_to("PutContexts") - puts, 1);
    assert_eq!(
        fresh_client.calls_to("GetContextByTypeAndName") - lookups,
        1
    );
}
