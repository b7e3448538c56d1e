//! Per-stream faults (`reset_stream`, `commit_then_reset_stream`): over HTTP/2 they reset the one
//! request's stream and leave the connection and its other streams alone; over HTTP/1.1 they
//! break the request's connection, as the whole-connection faults do.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use podline_sim::{FaultAction, FaultRule, FaultVerb, Sim, SimConfig};
use podline_testkit::{start_sim, wait_until};
use serde_json::json;

use super::raw_h2::{DATA, GOAWAY, HEADERS, INTERNAL_ERROR, RST_STREAM, RawH2};

const WITHIN: Duration = Duration::from_secs(10);
const PODS: &str = "/api/v1/namespaces/default/pods";

fn pod(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], "restartPolicy": "Never"}
    })
}

async fn plain_sim() -> Sim {
    start_sim(SimConfig::default().tls(false).kubelet_enabled(false)).await
}

fn reset_stream() -> FaultAction {
    FaultAction::ResetStream {
        after_bytes: None,
        after_events: None,
    }
}

/// Reads until the watch on `stream` sends an event naming `name`; the connection must not
/// go away meanwhile.
async fn watch_sees(h2: &mut RawH2, stream: u32, name: &str) {
    let needle = format!("\"name\":\"{name}\"");
    let (_, seen) = h2
        .until(WITHIN, |f| {
            f.kind == GOAWAY
                || (f.stream == stream
                    && f.kind == DATA
                    && String::from_utf8_lossy(&f.payload).contains(&needle))
        })
        .await;
    assert!(
        !seen
            .iter()
            .any(|f| f.kind == RST_STREAM && f.stream == stream),
        "the watch was reset: {seen:?}"
    );
}

#[tokio::test]
async fn reset_stream_should_reset_one_http2_stream_while_a_watch_on_the_connection_goes_on() {
    let sim = plain_sim().await;
    sim.faults().push(
        FaultRule::new(reset_stream())
            .verb(FaultVerb::Get)
            .resource("pods")
            .name("victim"),
    );
    let mut h2 = RawH2::connect(&sim).await;
    h2.get(1, &format!("{PODS}?watch=true")).await;
    h2.post(3, PODS, &pod("before")).await;
    watch_sees(&mut h2, 1, "before").await;

    h2.get(5, &format!("{PODS}/victim")).await;
    let (reset, _) = h2
        .until(WITHIN, |f| {
            f.stream == 5 && (f.kind == RST_STREAM || f.ends_stream()) || f.kind == GOAWAY
        })
        .await;
    assert_eq!(reset.kind, RST_STREAM, "{reset:?}");
    assert_eq!(reset.error_code(), INTERNAL_ERROR);

    // The watch and the connection are untouched: a later event arrives on the same stream,
    // and new streams are served.
    h2.post(7, PODS, &pod("after")).await;
    watch_sees(&mut h2, 1, "after").await;
    h2.get(9, &format!("{PODS}/after")).await;
    let body = h2.response_body(9, WITHIN).await;
    assert!(body.contains("\"name\":\"after\""), "{body}");
    assert_eq!(sim.accepted_connections(), 1);
}

#[tokio::test]
async fn commit_then_reset_stream_should_store_the_pod_and_reset_only_its_stream() {
    let sim = plain_sim().await;
    sim.faults().push(
        FaultRule::new(FaultAction::CommitThenResetStream)
            .verb(FaultVerb::Create)
            .resource("pods")
            .times(1),
    );
    let mut h2 = RawH2::connect(&sim).await;
    h2.get(1, &format!("{PODS}?watch=true")).await;
    // Let the watch start before the write, so its ADDED event is on stream 1.
    h2.until(WITHIN, |f| f.stream == 1 && f.kind == HEADERS)
        .await;

    h2.post(3, PODS, &pod("lost")).await;
    let (reset, before) = h2
        .until(WITHIN, |f| f.stream == 3 && f.kind == RST_STREAM)
        .await;
    assert_eq!(reset.error_code(), INTERNAL_ERROR);
    assert!(
        !before.iter().any(|f| f.stream == 3 && f.kind == HEADERS),
        "a lost response sends no header: {before:?}"
    );
    assert!(
        sim.ground_truth().iter().any(|p| p.name == "lost"),
        "the write was committed"
    );
    // The committed pod reaches the watch on the same connection; the rule fired once, so a
    // retry of the create is an ordinary AlreadyExists.
    let announced = before.iter().any(|f| {
        f.stream == 1 && f.kind == DATA && String::from_utf8_lossy(&f.payload).contains("lost")
    });
    if !announced {
        watch_sees(&mut h2, 1, "lost").await;
    }
    h2.post(5, PODS, &pod("lost")).await;
    let body = h2.response_body(5, WITHIN).await;
    assert!(body.contains("AlreadyExists"), "{body}");
    assert_eq!(sim.accepted_connections(), 1);
    assert_eq!(sim.ground_truth().len(), 1);
}

/// HTTP/1.1 carries one request at a time, so the per-stream faults break its connection.
#[tokio::test]
async fn over_http1_commit_then_reset_stream_should_drop_the_connection_after_the_write() {
    let sim = plain_sim().await;
    sim.faults().push(
        FaultRule::new(FaultAction::CommitThenResetStream)
            .verb(FaultVerb::Create)
            .resource("pods"),
    );
    let tcp = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let request = http::Request::post(format!("{}{PODS}", sim.url()))
        .header("authorization", format!("Bearer {}", sim.token()))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(
            serde_json::to_vec(&pod("lost")).unwrap(),
        )))
        .unwrap();
    let answer = send.send_request(request).await;
    assert!(answer.is_err(), "no answer was expected: {answer:?}");
    assert!(sim.ground_truth().iter().any(|p| p.name == "lost"));
    assert!(wait_until(WITHIN, || async { sim.connections() == 0 }).await);
}

/// kube-rs over HTTP/2 (TLS, ALPN): a LIST whose stream is reset fails with a transport error,
/// the watch multiplexed on the same connection keeps delivering, and the next LIST works on that
/// same connection.
#[tokio::test]
async fn a_kube_client_should_see_one_failed_request_and_keep_its_watch_and_connection() {
    let sim = start_sim(SimConfig::default().kubelet_enabled(false)).await;
    let client = podline_testkit::podline_client(&sim).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let created = |name: &str| serde_json::from_value::<Pod>(pod(name)).unwrap();
    pods.create(&PostParams::default(), &created("first"))
        .await
        .unwrap();
    let version = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watch = pods
        .watch(&WatchParams::default(), &version)
        .await
        .unwrap()
        .boxed();

    sim.faults().push(
        FaultRule::new(reset_stream())
            .verb(FaultVerb::List)
            .resource("pods")
            .times(1),
    );
    let err = pods
        .list(&ListParams::default())
        .await
        .expect_err("the LIST's stream was reset");
    assert!(
        matches!(err, kube::Error::HyperError(_) | kube::Error::Service(_)),
        "a transport error, which podline retries: {err:?}"
    );

    pods.create(&PostParams::default(), &created("second"))
        .await
        .unwrap();
    let event = tokio::time::timeout(WITHIN, watch.next())
        .await
        .expect("the watch goes on")
        .expect("the watch did not end")
        .expect("a watch event");
    match event {
        WatchEvent::Added(p) => assert_eq!(p.metadata.name.as_deref(), Some("second")),
        other => panic!("expected ADDED second, got {other:?}"),
    }
    assert_eq!(
        pods.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
    assert_eq!(
        sim.accepted_connections(),
        1,
        "one HTTP/2 connection throughout"
    );
    assert_eq!(sim.requests_by_version().0, 0, "no HTTP/1.1");
}
