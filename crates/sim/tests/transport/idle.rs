//! kube-apiserver's connection settings: HTTP/2 SETTINGS, and the idle timeout (Go's
//! `IdleTimeout`, 90 s by default) that closes an HTTP/2 connection without an open stream with
//! GOAWAY, and an idle HTTP/1.1 keep-alive connection. The timeouts here are short and real:
//! paused tokio time cannot drive real sockets (an idle paused runtime jumps its clock to the
//! next timer before the peer's bytes arrive).

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use podline_sim::{Sim, SimConfig};
use podline_testkit::{start_sim, wait_until};
use tokio::time::Instant;

use super::raw_h2::{
    GOAWAY, HEADERS, NO_ERROR, RawH2, SETTINGS, SETTINGS_INITIAL_WINDOW_SIZE,
    SETTINGS_MAX_CONCURRENT_STREAMS, SETTINGS_MAX_FRAME_SIZE, WINDOW_UPDATE,
};

const IDLE: Duration = Duration::from_millis(400);
const WITHIN: Duration = Duration::from_secs(10);
const PODS: &str = "/api/v1/namespaces/default/pods";

fn config() -> SimConfig {
    SimConfig::default()
        .kubelet_enabled(false)
        .bookmark_interval(Duration::from_secs(3600))
        .idle_timeout(IDLE)
}

async fn plain_sim() -> Sim {
    start_sim(config().tls(false)).await
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}
    }))
    .unwrap()
}

/// Reads frames (sending a PING every 100 ms, which must not count as activity) until GOAWAY;
/// returns it and when it came.
async fn goaway_despite_pings(h2: &mut RawH2) -> (super::raw_h2::Frame, Instant) {
    let deadline = Instant::now() + WITHIN;
    loop {
        assert!(Instant::now() < deadline, "no GOAWAY within {WITHIN:?}");
        match tokio::time::timeout(Duration::from_millis(100), h2.next_frame()).await {
            Err(_) => h2.ping().await,
            Ok(Some(frame)) if frame.kind == GOAWAY => return (frame, Instant::now()),
            Ok(Some(_)) => {}
            Ok(None) => panic!("the connection closed without GOAWAY"),
        }
    }
}

/// After GOAWAY (and the client's answer to its PING), the server closes the connection.
async fn closes(h2: &mut RawH2) -> Vec<super::raw_h2::Frame> {
    let mut after = Vec::new();
    loop {
        match tokio::time::timeout(WITHIN, h2.next_frame()).await {
            Err(_) => panic!("still open after GOAWAY; saw {after:?}"),
            Ok(None) => return after,
            Ok(Some(frame)) => after.push(frame),
        }
    }
}

#[tokio::test]
async fn the_sim_should_announce_kube_apiservers_http2_settings() {
    let sim = plain_sim().await;
    let mut h2 = RawH2::connect(&sim).await;
    let (settings, _) = h2
        .until(WITHIN, |f| f.kind == SETTINGS && f.flags == 0)
        .await;
    let settings = settings.settings();
    let value = |id| settings.iter().find(|(k, _)| *k == id).map(|(_, v)| *v);
    assert_eq!(
        value(SETTINGS_MAX_CONCURRENT_STREAMS),
        Some(250),
        "{settings:?}"
    );
    assert_eq!(value(SETTINGS_INITIAL_WINDOW_SIZE), Some(256 * 1024));
    assert_eq!(value(SETTINGS_MAX_FRAME_SIZE), Some(256 * 1024));
    let (window, _) = h2
        .until(WITHIN, |f| f.kind == WINDOW_UPDATE && f.stream == 0)
        .await;
    assert_eq!(
        window.window_increment(),
        256 * 1024 * 250 - 65_535,
        "the connection window holds 250 streams' buffers"
    );
}

#[tokio::test]
async fn an_idle_http2_connection_should_get_goaway_after_the_idle_timeout_pings_or_not() {
    let sim = plain_sim().await;
    let mut h2 = RawH2::connect(&sim).await;
    h2.get(1, PODS).await;
    h2.response_body(1, WITHIN).await;
    let idle_since = Instant::now();

    let (goaway, at) = goaway_despite_pings(&mut h2).await;
    assert_eq!(goaway.error_code(), NO_ERROR, "a graceful GOAWAY");
    let waited = at - idle_since;
    assert!(
        waited >= IDLE - Duration::from_millis(50),
        "GOAWAY after {waited:?}, before the idle timeout"
    );
    let after = closes(&mut h2).await;
    let last = after.iter().rfind(|f| f.kind == GOAWAY).unwrap_or(&goaway);
    assert_eq!(last.last_stream_id(), 1, "stream 1 was processed");
    assert!(wait_until(WITHIN, || async { sim.connections() == 0 }).await);
}

/// Go's server closes a connection shortly after its GOAWAY once no stream is open, whether or
/// not the client answers (here it never answers the GOAWAY's PING).
#[tokio::test]
async fn an_idle_http2_connection_should_close_even_if_the_client_ignores_the_goaway() {
    let sim = plain_sim().await;
    let mut h2 = RawH2::connect(&sim).await;
    h2.get(1, PODS).await;
    h2.response_body(1, WITHIN).await;
    h2.answer_pings = false;
    let (goaway, _) = h2.until(WITHIN, |f| f.kind == GOAWAY).await;
    assert_eq!(goaway.error_code(), NO_ERROR);
    closes(&mut h2).await;
}

#[tokio::test]
async fn an_open_watch_should_keep_an_http2_connection_from_idling() {
    let sim = plain_sim().await;
    let mut h2 = RawH2::connect(&sim).await;
    h2.get(1, &format!("{PODS}?watch=true")).await;
    h2.until(WITHIN, |f| f.stream == 1 && f.kind == HEADERS)
        .await;

    // Three idle timeouts with only the watch open: no GOAWAY.
    let quiet = tokio::time::timeout(IDLE * 3, h2.until(WITHIN, |f| f.kind == GOAWAY)).await;
    assert!(quiet.is_err(), "a connection with an open watch got GOAWAY");

    // The watch ends (the client cancels it): now the connection is idle.
    h2.cancel(1).await;
    let ended = Instant::now();
    let (goaway, at) = goaway_despite_pings(&mut h2).await;
    assert_eq!(goaway.error_code(), NO_ERROR);
    assert!(at - ended >= IDLE - Duration::from_millis(50));
    closes(&mut h2).await;
}

/// podline's client (HTTP/2 over TLS) loses its idle connection to GOAWAY between requests and
/// opens a new one without an error reaching the caller.
#[tokio::test]
async fn podline_client_should_reconnect_transparently_after_an_idle_http2_close() {
    let sim = start_sim(config()).await;
    let pods: Api<Pod> = Api::namespaced(podline_testkit::podline_client(&sim).await, "default");
    for round in 1..=3 {
        pods.list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(
            wait_until(WITHIN, || async { sim.connections() == 0 }).await,
            "round {round}: the idle connection was not closed"
        );
    }
    pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(sim.accepted_connections(), 4);
    assert_eq!(sim.requests_by_version().0, 0, "all over HTTP/2");
}

/// The same over HTTP/1.1 keep-alive (the sim serving HTTP/1.1 only).
#[tokio::test]
async fn podline_client_should_reconnect_transparently_after_an_idle_http1_close() {
    let sim = start_sim(config().http1_only(true)).await;
    let pods: Api<Pod> = Api::namespaced(podline_testkit::podline_client(&sim).await, "default");
    for round in 1..=3 {
        pods.list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(
            wait_until(WITHIN, || async { sim.connections() == 0 }).await,
            "round {round}: the idle connection was not closed"
        );
    }
    pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(sim.accepted_connections(), 4);
    assert_eq!(sim.requests_by_version().1, 0, "all over HTTP/1.1");
}

/// A watch through podline's client keeps its HTTP/2 connection, which the client's other
/// requests share, past several idle timeouts.
#[tokio::test]
async fn a_watch_should_keep_podline_clients_http2_connection_open() {
    let sim = start_sim(config()).await;
    let pods: Api<Pod> = Api::namespaced(podline_testkit::podline_client(&sim).await, "default");
    let mut watch = pods
        .watch(&WatchParams::default().timeout(290), "0")
        .await
        .unwrap()
        .boxed();
    let quiet = tokio::time::timeout(IDLE * 3, watch.next()).await;
    assert!(quiet.is_err(), "the watch ended or got an event: {quiet:?}");
    pods.create(&PostParams::default(), &pod("late"))
        .await
        .unwrap();
    let event = tokio::time::timeout(WITHIN, watch.next())
        .await
        .expect("the watch goes on")
        .expect("not ended")
        .expect("an event");
    assert!(matches!(event, WatchEvent::Added(_)), "{event:?}");
    assert_eq!(sim.accepted_connections(), 1, "one connection throughout");
}
