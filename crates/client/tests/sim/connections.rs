//! One connection per process: concurrent first requests of one client share the HTTP/2
//! connection the first of them opens (`client::flight`), over TLS with ALPN, after the server
//! dropped every connection, and while new connections hang; over HTTP/1.1 each concurrent
//! request still gets a connection of its own. The sim counts the TCP connections it accepted.

use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use kube::config::Kubeconfig;
use podline_client::backoff::FullJitter;
use podline_client::connect::{
    ConfigSource, ConnectOptions, client_from_config, connect_with_kubeconfig,
};
use podline_client::ping::Http2Ping;
use podline_client::retry::{Reason, RetryPolicy, classify, retry};
use podline_sim::{Sim, SimConfig};
use podline_testkit::start_sim;
use tokio::time::Instant;

/// Scheduling slack on a loaded 2-core machine.
const SLACK: Duration = Duration::from_millis(1500);

fn sim_config() -> SimConfig {
    SimConfig::default().kubelet_enabled(false)
}

/// A client built by `client_from_config` (no request of its own before the test's).
async fn client(sim: &Sim) -> Api<Pod> {
    Api::namespaced(podline_testkit::podline_client(sim).await, "default")
}

/// A client built by `connect_with_kubeconfig`.
async fn connected(sim: &Sim) -> Api<Pod> {
    let kubeconfig = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    let connected = connect_with_kubeconfig(
        kubeconfig,
        ConfigSource::InCluster,
        &ConnectOptions::default(),
    )
    .await
    .unwrap();
    Api::namespaced(connected.client, "default")
}

/// A client built by `client_from_config` whose connect timeout is `connect` (the PING timeout,
/// the connect timeout's default) and whose dial budget is `client_timeout`.
async fn client_with(sim: &Sim, client_timeout: Duration, connect: Duration) -> Api<Pod> {
    let ping = Http2Ping::try_new(Duration::from_millis(200), connect, client_timeout).unwrap();
    let config = podline_testkit::kube_config(sim).await;
    let client = client_from_config(config, client_timeout, ping).unwrap();
    Api::namespaced(client, "default")
}

/// `n` LISTs at once; each one's result and how long it took.
async fn lists_at_once(
    api: &Api<Pod>,
    n: usize,
) -> Vec<(Result<kube::core::ObjectList<Pod>, kube::Error>, Duration)> {
    join_all((0..n).map(|_| async {
        let started = Instant::now();
        let result = api.list(&ListParams::default()).await;
        (result, started.elapsed())
    }))
    .await
}

fn assert_all_ok(results: &[(Result<kube::core::ObjectList<Pod>, kube::Error>, Duration)]) {
    let failed: Vec<_> = results
        .iter()
        .filter_map(|(r, _)| r.as_ref().err().map(ToString::to_string))
        .collect();
    assert!(failed.is_empty(), "{} failed: {failed:?}", failed.len());
}

/// (a) 8 and 50 concurrent first requests of a new client: one TLS connection, all over HTTP/2.
#[tokio::test]
async fn concurrent_first_requests_should_share_one_http2_connection() {
    for n in [8, 50] {
        let sim = start_sim(sim_config()).await;
        let api = client(&sim).await;
        assert_all_ok(&lists_at_once(&api, n).await);
        let accepted = sim.accepted_connections();
        eprintln!("{n} concurrent first requests over HTTP/2: {accepted} TLS connections");
        assert_eq!(accepted, 1, "{n} concurrent first requests");
        let (http1, http2) = sim.requests_by_version();
        assert_eq!((http1, http2), (0, n as u64), "all over HTTP/2");
        assert_eq!(sim.connections(), 1, "the one connection is still open");
    }
}

/// Connecting makes no request of its own (the first connection is opened by the first real
/// request, which the others wait for), and the burst after it still shares one connection.
#[tokio::test]
async fn connect_should_open_no_connection_and_the_first_burst_should_share_one() {
    let sim = start_sim(sim_config()).await;
    let api = connected(&sim).await;
    assert_eq!(sim.accepted_connections(), 0, "connect made a request");
    assert_all_ok(&lists_at_once(&api, 8).await);
    assert_eq!(sim.accepted_connections(), 1);
}

/// (b) A server without HTTP/2 (ALPN offers only http/1.1, or plain HTTP): concurrent requests
/// all succeed, each on a connection of its own (HTTP/1.1 cannot multiplex).
#[tokio::test]
async fn over_http1_concurrent_first_requests_should_each_get_a_connection() {
    for (label, config) in [
        ("TLS, http/1.1 only", sim_config().http1_only(true)),
        ("plain HTTP", sim_config().tls(false)),
    ] {
        let sim = start_sim(config).await;
        let api = client(&sim).await;
        let results = lists_at_once(&api, 8).await;
        assert_all_ok(&results);
        let accepted = sim.accepted_connections();
        eprintln!("8 concurrent first requests, {label}: {accepted} connections");
        let (http1, http2) = sim.requests_by_version();
        assert_eq!((http1, http2), (8, 0), "{label}: all over HTTP/1.1");
        assert!(
            accepted >= 2,
            "{label}: requests were serialized on one connection ({accepted})"
        );
        let slowest = results.iter().map(|(_, took)| *took).max().unwrap();
        assert!(slowest <= SLACK, "{label}: slowest {slowest:?}");
    }
}

/// (c) The server drops every connection (a restart): the next concurrent requests share one
/// new connection.
#[tokio::test]
async fn after_a_restart_concurrent_requests_should_share_one_new_connection() {
    let sim = start_sim(sim_config()).await;
    let api = client(&sim).await;
    assert_all_ok(&lists_at_once(&api, 8).await);
    assert_eq!(sim.accepted_connections(), 1);
    // Every connection is reset, then connects are refused for 500 ms: the client has long seen
    // its connection die when the sim serves again.
    sim.restart(Duration::from_millis(500)).await;
    assert_eq!(sim.connections(), 0);
    assert_all_ok(&lists_at_once(&api, 50).await);
    let accepted = sim.accepted_connections();
    eprintln!(
        "50 concurrent requests after a restart: {} new connections",
        accepted - 1
    );
    assert_eq!(accepted, 2, "one new connection for the 50");
    assert_eq!(sim.connections(), 1);
}

/// (c) Requests started while the server is down (connects refused) are retried by the caller;
/// once it serves again they all share one new connection.
#[tokio::test]
async fn requests_retried_through_a_restart_should_share_one_new_connection() {
    let sim = start_sim(sim_config()).await;
    let api = client(&sim).await;
    assert_all_ok(&lists_at_once(&api, 8).await);
    let policy = RetryPolicy::new(
        FullJitter::try_new(Duration::from_millis(20), Duration::from_millis(200), 2.0).unwrap(),
    )
    .with_max_attempts(100)
    .with_deadline(Some(Duration::from_secs(20)));
    let params = ListParams::default();
    let burst = join_all((0..20).map(|_| retry(&policy, "list pods", || api.list(&params))));
    let (_, results) = tokio::join!(sim.restart(Duration::from_millis(800)), burst);
    let failed: Vec<_> = results
        .iter()
        .filter_map(|r| r.as_ref().err().map(ToString::to_string))
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    let accepted = sim.accepted_connections();
    eprintln!(
        "20 requests retried through a restart: {} new connections",
        accepted - 1
    );
    assert_eq!(accepted, 2, "one new connection once the sim was back");
}

/// (d) New connections hang (a network freeze that swallows TLS handshakes): every waiting
/// request is bounded like a dial of its own, and only one request dials meanwhile. When the
/// network comes back within the dial's budget, all of them share the one connection that
/// comes up, within about one connect timeout.
#[tokio::test]
async fn while_new_connections_hang_only_one_request_should_dial_and_all_share_its_connection() {
    const CONNECT: Duration = Duration::from_millis(500);
    const FREEZE: Duration = Duration::from_millis(1500);
    let sim = start_sim(sim_config()).await;
    let api = client_with(&sim, Duration::from_secs(6), CONNECT).await;
    sim.freeze_all_for(FREEZE);
    let frozen_at = Instant::now();
    let results = lists_at_once(&api, 8).await;
    assert_all_ok(&results);
    let slowest = results.iter().map(|(_, took)| *took).max().unwrap();
    eprintln!(
        "8 requests into a {FREEZE:?} freeze: all done {:?} after it began, slowest {slowest:?}, {} connections accepted",
        frozen_at.elapsed(),
        sim.accepted_connections()
    );
    assert!(slowest <= FREEZE + CONNECT + SLACK, "slowest {slowest:?}");
    // One dialer: an attempt per connect timeout during the freeze, then the one that came up.
    let attempts = sim.accepted_connections();
    assert!(
        attempts <= (FREEZE.as_millis() / CONNECT.as_millis()) as u64 + 2,
        "{attempts} connections: more than one request dialled"
    );
    assert_eq!(sim.connections() - sim.frozen_connections(), 1);
    let (http1, http2) = sim.requests_by_version();
    assert_eq!((http1, http2), (0, 8));
}

/// (d) When the network stays frozen past the dial's budget, every waiting request fails
/// within that budget (not the budget once per request ahead of it), as a timeout.
#[tokio::test]
async fn while_new_connections_hang_for_good_every_waiter_should_fail_within_one_dial_budget() {
    const CONNECT: Duration = Duration::from_millis(400);
    // The dial's budget is the client timeout (at most 30 s).
    const CLIENT: Duration = Duration::from_secs(2);
    let sim = start_sim(sim_config()).await;
    let api = client_with(&sim, CLIENT, CONNECT).await;
    sim.freeze_all_for(Duration::from_secs(60));
    let results = lists_at_once(&api, 8).await;
    for (result, took) in &results {
        let err = result.as_ref().expect_err("no connection could come up");
        assert_eq!(classify(err).reason(), Reason::Timeout, "{err}");
        assert!(*took <= CLIENT + SLACK, "a waiter took {took:?}");
    }
    let attempts = sim.accepted_connections();
    eprintln!("8 requests into a frozen network: {attempts} connection attempts");
    assert!(
        attempts <= (CLIENT.as_millis() / CONNECT.as_millis()) as u64 + 1,
        "{attempts} connection attempts: more than one request dialled"
    );
}
