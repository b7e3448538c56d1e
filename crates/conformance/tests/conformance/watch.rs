//! Watch: resumes the server can no longer serve, bookmark objects, slow watchers.

use base64::Engine as _;
use podline_conformance::{Target, pod};
use serde_json::{Value, json};

fn events(body: &str) -> Vec<Value> {
    body.lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a watch event ({e}): {line}"))
        })
        .collect()
}

/// A watch from a resourceVersion older than the server's history (here 1: before the server's
/// watch cache began) answers HTTP 200 with one `ERROR` event carrying a 410 Expired Status,
/// `too old resource version: 1 (<oldest>)`, then the stream ends: no replay.
#[tokio::test]
async fn a_watch_from_a_too_old_resource_version_is_an_immediate_410_expired_event() {
    let t = Target::new().await;
    let r = t
        .get(&format!(
            "{}?watch=true&resourceVersion=1&timeoutSeconds=5",
            t.core_path("pods")
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let events = events(&r.text());
    assert_eq!(events.len(), 1, "one ERROR event, then the end: {events:?}");
    assert_eq!(events[0]["type"], "ERROR");
    let status = &events[0]["object"];
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["code"], 410);
    assert_eq!(status["reason"], "Expired");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("too old resource version: 1 (") && message.ends_with(')'),
        "{message}"
    );
}

/// The bookmark that ends the initial events of a `sendInitialEvents=true` watch is the kind's
/// empty object (a Pod: `spec: {containers: null}, status: {}`) with only resourceVersion, a
/// null creationTimestamp and the annotations `k8s.io/initial-events-end: "true"` and
/// `kubernetes.io/initial-events-list-blueprint` (an empty PodList, base64).
#[tokio::test]
async fn the_initial_events_end_bookmark_is_an_empty_pod_with_the_list_blueprint() {
    let t = Target::new().await;
    assert!(t.create_pod(&pod("bm")).await.status.is_success());
    let r = t
        .get(&format!(
            "{}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=3",
            t.core_path("pods")
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let events = events(&r.text());
    assert_eq!(events[0]["type"], "ADDED", "{events:?}");
    let bookmark = events
        .iter()
        .find(|e| e["type"] == "BOOKMARK")
        .unwrap_or_else(|| panic!("no bookmark: {events:?}"));
    let object = &bookmark["object"];
    assert_eq!(object["kind"], "Pod");
    assert_eq!(object["apiVersion"], "v1");
    assert_eq!(object["spec"], json!({"containers": null}));
    assert_eq!(object["status"], json!({}));
    let metadata = object["metadata"].as_object().expect("metadata");
    let mut keys: Vec<&str> = metadata.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["annotations", "creationTimestamp", "resourceVersion"]
    );
    assert_eq!(metadata["creationTimestamp"], Value::Null);
    let annotations = &metadata["annotations"];
    assert_eq!(annotations["k8s.io/initial-events-end"], "true");
    let blueprint = base64::engine::general_purpose::STANDARD
        .decode(
            annotations["kubernetes.io/initial-events-list-blueprint"]
                .as_str()
                .expect("a blueprint annotation"),
        )
        .expect("base64");
    let list: Value = serde_json::from_slice(&blueprint).expect("JSON");
    assert_eq!(list["kind"], "PodList");
    assert_eq!(list["apiVersion"], "v1");
}

/// A watch asked for as a Table (`kubectl get -w`) answers one Table of one row per event, and
/// only the first event's Table carries the column definitions: kube-apiserver sets the table
/// options' NoHeaders once it has encoded one event, so later ones have
/// `columnDefinitions: null` and kubectl keeps the header it printed.
#[tokio::test]
async fn a_table_watch_sends_column_definitions_with_its_first_event_only() {
    let t = Target::new().await;
    for name in ["tw-1", "tw-2", "tw-3"] {
        assert!(t.create_pod(&pod(name)).await.status.is_success());
    }
    let r = t
        .request(
            http::Method::GET,
            &format!("{}?watch=true&timeoutSeconds=2", t.core_path("pods")),
            None,
            Some(crate::reads::TABLE),
            Vec::new(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let events = events(&r.text());
    assert!(events.len() >= 3, "one ADDED per pod: {events:?}");
    for (i, event) in events.iter().enumerate() {
        let table = &event["object"];
        assert_eq!(table["kind"], "Table", "{event}");
        assert_eq!(table["rows"].as_array().map(Vec::len), Some(1), "{event}");
        let columns = &table["columnDefinitions"];
        if i == 0 {
            assert_eq!(columns[0]["name"], "Name", "{event}");
        } else {
            assert!(columns.is_null(), "event {i} repeats the columns: {event}");
        }
    }
}
