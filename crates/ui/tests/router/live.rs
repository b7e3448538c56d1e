//! Live updates: `/api/changes` answers what changed since a mark, and `/api/events` is a
//! server-sent event stream that reports a newly written pod.

use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt as _;
use podline_store::StoreOp;
use tower::ServiceExt as _;

use crate::support::{Fixture, RUN, get, running_pod};

#[tokio::test]
async fn changes_and_the_event_stream_should_report_a_newly_written_pod() {
    let fixture = Fixture::with_run().await;
    let app = fixture.app();
    let start = get(&app, "/api/changes").await.json();
    let mark = start["mark"].as_str().unwrap().to_owned();
    assert!(start["pods"].as_array().unwrap().is_empty(), "{start}");

    // Open the event stream before the write.
    let request = http::Request::get("/api/events")
        .header(http::header::HOST, "localhost")
        .body(Body::empty())
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers()["cache-control"], "no-cache");
    assert!(response.headers().contains_key("content-security-policy"));
    let mut body = response.into_body();
    let mut seen = String::new();
    read_until(&mut body, &mut seen, "event: ready").await;

    fixture
        .write(vec![StoreOp::Upsert(running_pod(
            "live-uid-1",
            "live-pod-1",
            RUN,
        ))])
        .await;

    read_until(&mut body, &mut seen, "live-uid-1").await;
    assert!(seen.contains("event: change"), "{seen}");

    let since = get(
        &app,
        &format!("/api/changes?since={}", mark.replace(':', "%3A")),
    )
    .await
    .json();
    let uids: Vec<&str> = since["pods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["uid"].as_str().unwrap())
        .collect();
    assert_eq!(uids, ["live-uid-1"]);
    let next = since["mark"].as_str().unwrap().replace(':', "%3A");
    let after = get(&app, &format!("/api/changes?since={next}"))
        .await
        .json();
    assert!(after["pods"].as_array().unwrap().is_empty(), "{after}");
}

#[tokio::test]
async fn a_reconnecting_stream_should_resume_from_last_event_id() {
    let fixture = Fixture::with_run().await;
    let app = fixture.app();
    let mark = get(&app, "/api/changes").await.json()["mark"]
        .as_str()
        .unwrap()
        .to_owned();
    // Written while the browser was disconnected, after the last id it saw.
    fixture
        .write(vec![StoreOp::Upsert(running_pod(
            "missed-uid",
            "missed-pod",
            RUN,
        ))])
        .await;
    let request = http::Request::get("/api/events")
        .header(http::header::HOST, "localhost")
        .header("last-event-id", &mark)
        .body(Body::empty())
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut seen = String::new();
    read_until(&mut body, &mut seen, "missed-uid").await;
    assert!(seen.contains("event: change"), "{seen}");
}

/// Reads the event stream into `seen` until it contains `needle` (at most 20 s).
async fn read_until(body: &mut Body, seen: &mut String, needle: &str) {
    tokio::time::timeout(Duration::from_secs(20), async {
        while !seen.contains(needle) {
            let frame = body.frame().await.unwrap().unwrap();
            if let Ok(data) = frame.into_data() {
                seen.push_str(&String::from_utf8_lossy(&data));
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {needle:?} in the stream within 20 s: {seen}"));
}
