//! The hand-written client and wire messages, checked against the real MLMD.

use std::process::Command;

use podline_mlmd::MlmdClient;
use podline_mlmd::proto::*;

use crate::require_mlmd;
use crate::support::{MlmdServer, helper};

#[test]
fn proto_file_should_match_the_real_mlmd_field_numbers() {
    require_mlmd!();
    let proto = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/mlmd_subset.proto");
    let out = Command::new("python3")
        .arg(helper("proto_check.py"))
        .arg(proto)
        .output()
        .expect("run proto_check.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(", 0 mismatches"), "{stdout}");
}

#[tokio::test]
async fn client_should_round_trip_types_contexts_and_an_atomic_execution() {
    require_mlmd!();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MlmdServer::start(&dir.path().join("mlmd.db"), 0);
    let client = MlmdClient::new(&server.config()).expect("client");

    let ctx_type = ContextType {
        name: Some("KfpRun".into()),
        properties: [("run_id".to_owned(), PropertyType::String as i32)].into(),
        ..Default::default()
    };
    let put = |t: ContextType| PutContextTypeRequest {
        context_type: Some(t),
        can_add_fields: Some(true),
        can_omit_fields: Some(true),
    };
    let ctx_type_id = client
        .put_context_type(put(ctx_type.clone()))
        .await
        .expect("put context type")
        .type_id
        .expect("type id");
    // Upsert with the same schema is idempotent: same id.
    let again = client.put_context_type(put(ctx_type)).await.expect("again");
    assert_eq!(again.type_id, Some(ctx_type_id));

    let context = Context {
        type_id: Some(ctx_type_id),
        name: Some("wf-1".into()),
        external_id: Some("ns/wf-1".into()),
        properties: [("run_id".to_owned(), Value::string("wf-1"))].into(),
        ..Default::default()
    };
    let ids = client
        .put_contexts(PutContextsRequest {
            contexts: vec![context.clone()],
        })
        .await
        .expect("put context")
        .context_ids;
    assert_eq!(ids.len(), 1);
    let dup = client
        .put_contexts(PutContextsRequest {
            contexts: vec![context],
        })
        .await
        .expect_err("same name twice");
    assert!(dup.is_already_exists(), "{dup}");
    assert!(!dup.is_retryable());

    let found = client
        .get_context_by_type_and_name(GetContextByTypeAndNameRequest {
            type_name: Some("KfpRun".into()),
            context_name: Some("wf-1".into()),
            type_version: None,
        })
        .await
        .expect("get")
        .context
        .expect("found");
    assert_eq!(found.id, Some(ids[0]));
    assert_eq!(found.external_id.as_deref(), Some("ns/wf-1"));
    assert_eq!(found.properties["run_id"].as_str(), Some("wf-1"));
    let missing = client
        .get_context_by_type_and_name(GetContextByTypeAndNameRequest {
            type_name: Some("KfpRun".into()),
            context_name: Some("nope".into()),
            type_version: None,
        })
        .await
        .expect("get missing");
    assert!(missing.context.is_none());

    let exec_type_id = client
        .put_execution_type(PutExecutionTypeRequest {
            execution_type: Some(ExecutionType {
                name: Some("components.step".into()),
                ..Default::default()
            }),
            can_add_fields: Some(true),
            can_omit_fields: Some(true),
        })
        .await
        .expect("exec type")
        .type_id;
    let art_type_id = client
        .put_artifact_type(PutArtifactTypeRequest {
            artifact_type: Some(ArtifactType {
                name: Some("NoType".into()),
                ..Default::default()
            }),
            can_add_fields: Some(true),
            can_omit_fields: Some(true),
        })
        .await
        .expect("artifact type")
        .type_id;

    let response = client
        .put_execution(PutExecutionRequest {
            execution: Some(Execution {
                type_id: exec_type_id,
                external_id: Some("ns/uid-1".into()),
                last_known_state: Some(ExecutionState::Complete as i32),
                custom_properties: [("kfp_pod_name".to_owned(), Value::string("pod-1"))].into(),
                ..Default::default()
            }),
            artifact_event_pairs: vec![ArtifactAndEvent {
                artifact: Some(Artifact {
                    type_id: art_type_id,
                    uri: Some("minio://bucket/key".into()),
                    external_id: Some("ns/uid-1/out".into()),
                    ..Default::default()
                }),
                event: Some(Event {
                    r#type: Some(EventType::Output as i32),
                    path: Some(EventPath::key("out")),
                    ..Default::default()
                }),
            }],
            contexts: vec![found.clone()],
            options: Some(PutExecutionOptions {
                reuse_context_if_already_exist: Some(true),
                reuse_artifact_if_already_exist_by_external_id: Some(true),
            }),
        })
        .await
        .expect("put execution");
    let exec_id = response.execution_id.expect("execution id");
    assert_eq!(response.artifact_ids.len(), 1);

    let executions = client
        .get_executions_by_context(GetExecutionsByContextRequest {
            context_id: found.id,
        })
        .await
        .expect("by context")
        .executions;
    assert_eq!(executions.len(), 1, "PutExecution associated the context");
    assert_eq!(executions[0].id, Some(exec_id));
    assert_eq!(
        executions[0].last_known_state,
        Some(ExecutionState::Complete as i32)
    );
    assert_eq!(
        executions[0].custom_properties["kfp_pod_name"].as_str(),
        Some("pod-1")
    );
    let events = client
        .get_events_by_execution_ids(GetEventsByExecutionIdsRequest {
            execution_ids: vec![exec_id],
        })
        .await
        .expect("events")
        .events;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].r#type, Some(EventType::Output as i32));
    assert_eq!(
        events[0].path.as_ref().and_then(|p| p.first_key()),
        Some("out")
    );
    let by_uri = client
        .get_artifacts_by_uri(GetArtifactsByUriRequest {
            uris: vec!["minio://bucket/key".into()],
        })
        .await
        .expect("by uri")
        .artifacts;
    assert_eq!(by_uri.len(), 1);
    let by_ext = client
        .get_executions_by_external_ids(GetExecutionsByExternalIdsRequest {
            external_ids: vec!["ns/uid-1".into()],
        })
        .await
        .expect("by external id")
        .executions;
    assert_eq!(by_ext.len(), 1);
    assert_eq!(by_ext[0].id, Some(exec_id));
    let artifacts = client
        .get_artifacts_by_context(GetArtifactsByContextRequest {
            context_id: found.id,
        })
        .await
        .expect("artifacts by context")
        .artifacts;
    assert_eq!(artifacts.len(), 1, "PutExecution attributed the artifact");
}
