//! HTTP/2 with PING health checks (issue 7), against the sim over TLS with its `freeze` fault: a
//! connection that stops reading and writing without closing, like a frozen proxy.
//!
//! The detection tests run with podline's **default** settings (client timeout 60 s, PING every
//! 5 s, 10 s to answer), so they prove the default bound of 15 s; each takes about 15 s.
//! Paused tokio time cannot drive them: with real sockets an idle paused runtime jumps its clock
//! to the next timer (the PING timeout) before the sim's answer can arrive.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::config::Kubeconfig;
use podline_client::backoff::FullJitter;
use podline_client::connect::{ConfigSource, ConnectOptions, connect_with_kubeconfig};
use podline_client::ping::Http2Ping;
use podline_client::timeouts::WatchTimeouts;
use podline_client::watch::{Event, Phase, Reason, WatchConfig, WatchError, watch};
use podline_sim::{FaultAction, FaultRule, FaultVerb, Sim, SimConfig};
use podline_testkit::{start_sim, wait_until};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{create, summary};

type Item = Result<Event<Pod>, WatchError>;

/// Scheduling slack on a loaded 2-core machine (on top of the PING bound).
const SLACK: Duration = Duration::from_secs(3);

/// A TLS sim (so ALPN offers h2) without kubelet and without periodic bookmarks: watches are
/// quiet unless the test changes something.
async fn quiet_sim(http1_only: bool) -> Sim {
    start_sim(
        SimConfig::default()
            .kubelet_enabled(false)
            .bookmark_interval(Duration::from_secs(3600))
            .http1_only(http1_only),
    )
    .await
}

async fn client_with(sim: &Sim, client_timeout: Duration, ping: Http2Ping) -> kube::Client {
    let kubeconfig = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    let opts = ConnectOptions {
        client_timeout,
        http2_ping: ping,
        ..Default::default()
    };
    connect_with_kubeconfig(kubeconfig, ConfigSource::InCluster, &opts)
        .await
        .unwrap()
        .client
}

async fn default_client(sim: &Sim) -> kube::Client {
    client_with(
        sim,
        ConnectOptions::default().client_timeout,
        Http2Ping::default(),
    )
    .await
}

fn small_backoff() -> FullJitter {
    FullJitter::try_new(Duration::from_millis(50), Duration::from_millis(500), 2.0).unwrap()
}

/// Runs a watch in a task, sending each item with the instant it arrived.
fn spawn_watch(api: Api<Pod>, config: WatchConfig) -> mpsc::UnboundedReceiver<(Instant, Item)> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut w = std::pin::pin!(watch(api, config));
        while let Some(item) = w.next().await {
            if tx.send((Instant::now(), item)).is_err() {
                return;
            }
        }
    });
    rx
}

/// Receives until `done` (at most `within`); returns the instant of the matching item and
/// everything received.
async fn recv_until(
    rx: &mut mpsc::UnboundedReceiver<(Instant, Item)>,
    within: Duration,
    mut done: impl FnMut(&Item) -> bool,
) -> (Instant, Vec<Item>) {
    let deadline = Instant::now() + within;
    let mut seen = vec![];
    loop {
        let (at, item) = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("not within {within:?}; saw {:?}", summary(&seen)))
            .expect("the watch ended");
        let stop = done(&item);
        seen.push(item);
        if stop {
            return (at, seen);
        }
    }
}

async fn wait_frozen(sim: &Sim) -> Instant {
    assert!(
        wait_until(Duration::from_secs(10), || async {
            sim.frozen_connections() == 1
        })
        .await,
        "the fault never froze a connection"
    );
    Instant::now()
}

fn resumed(item: &Item) -> bool {
    matches!(item, Ok(Event::Connected { reason, .. }) if *reason != Reason::Initial)
}

/// Done when 1: a quiet watch whose connection freezes is noticed within the PING bound (15 s at
/// defaults) and resumes from its resourceVersion without a LIST; a pod created during the
/// freeze arrives after the resume.
#[tokio::test]
async fn a_frozen_quiet_watch_should_be_noticed_within_the_ping_bound_and_resume_without_a_list() {
    let sim = quiet_sim(false).await;
    let client = default_client(&sim).await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    create(&api, "before").await;
    sim.faults().push(
        FaultRule::new(FaultAction::Freeze {
            after_ms: Some(1000),
        })
        .verb(FaultVerb::Watch)
        .times(1),
    );
    let mut rx = spawn_watch(api, WatchConfig::default().backoff(small_backoff()));
    let (_, seen) = recv_until(&mut rx, Duration::from_secs(10), |i| {
        matches!(i, Ok(Event::Connected { .. }))
    })
    .await;
    let Some(Ok(Event::Connected {
        resource_version: listed_rv,
        ..
    })) = seen.last()
    else {
        unreachable!()
    };
    let listed_rv = listed_rv.clone();
    let frozen_at = wait_frozen(&sim).await;
    // Another client (another connection) changes something while the watch is frozen.
    let other: Api<Pod> = Api::namespaced(default_client(&sim).await, "default");
    create(&other, "during-freeze").await;
    let (resumed_at, seen) =
        recv_until(&mut rx, Http2Ping::default().detection() + SLACK, resumed).await;
    let noticed = resumed_at - frozen_at;
    eprintln!(
        "frozen quiet watch: resumed {noticed:?} after the freeze; {:?}",
        summary(&seen)
    );
    assert!(
        noticed <= Http2Ping::default().detection() + SLACK,
        "noticed after {noticed:?}"
    );
    let Some(Ok(Event::Connected {
        resource_version, ..
    })) = seen.last()
    else {
        unreachable!()
    };
    assert_eq!(
        *resource_version, listed_rv,
        "resumed from the last resourceVersion"
    );
    let (_, after) = recv_until(
        &mut rx,
        Duration::from_secs(10),
        |i| matches!(i, Ok(Event::Apply(p)) if p.metadata.name.as_deref() == Some("during-freeze")),
    )
    .await;
    assert!(
        !after.iter().any(|i| matches!(i, Ok(Event::Init))),
        "no re-list: {:?}",
        summary(&after)
    );
    assert_eq!(sim.counts().get("list", "pods"), 1, "one LIST, the first");
}

/// Done when 2 (first half): a freeze while the watch request waits for its response headers is
/// noticed within the same bound, and the watch starts on a new connection without a LIST.
#[tokio::test]
async fn a_freeze_while_the_watch_waits_for_headers_should_be_noticed_within_the_ping_bound() {
    let sim = quiet_sim(false).await;
    let api: Api<Pod> = Api::namespaced(default_client(&sim).await, "default");
    sim.faults().push(
        FaultRule::new(FaultAction::Freeze { after_ms: None })
            .verb(FaultVerb::Watch)
            .times(1),
    );
    let mut rx = spawn_watch(api, WatchConfig::default().backoff(small_backoff()));
    let frozen_at = wait_frozen(&sim).await;
    let (failed_at, seen) = recv_until(&mut rx, Http2Ping::default().detection() + SLACK, |i| {
        matches!(i, Err(WatchError::WatchStartFailed { .. }))
    })
    .await;
    let noticed = failed_at - frozen_at;
    eprintln!(
        "freeze before headers: noticed after {noticed:?}; {:?}",
        summary(&seen)
    );
    assert!(noticed <= Http2Ping::default().detection() + SLACK);
    recv_until(&mut rx, Duration::from_secs(10), |i| {
        matches!(i, Ok(Event::Connected { .. }))
    })
    .await;
    assert_eq!(sim.counts().get("list", "pods"), 1, "one LIST, the first");
}

/// Done when 2 (second half): a freeze during the initial LIST is noticed within the same bound;
/// the LIST is retried and the watch starts.
#[tokio::test]
async fn a_freeze_during_the_initial_list_should_be_noticed_within_the_ping_bound() {
    let sim = quiet_sim(false).await;
    let api: Api<Pod> = Api::namespaced(default_client(&sim).await, "default");
    create(&api, "listed").await;
    sim.faults().push(
        FaultRule::new(FaultAction::Freeze { after_ms: None })
            .verb(FaultVerb::List)
            .times(1),
    );
    let mut rx = spawn_watch(api, WatchConfig::default().backoff(small_backoff()));
    let frozen_at = wait_frozen(&sim).await;
    let (failed_at, seen) = recv_until(&mut rx, Http2Ping::default().detection() + SLACK, |i| {
        matches!(i, Err(WatchError::ListFailed { .. }))
    })
    .await;
    let noticed = failed_at - frozen_at;
    eprintln!(
        "freeze during LIST: noticed after {noticed:?}; {:?}",
        summary(&seen)
    );
    assert!(noticed <= Http2Ping::default().detection() + SLACK);
    let (_, seen) = recv_until(&mut rx, Duration::from_secs(10), |i| {
        matches!(i, Ok(Event::Connected { .. }))
    })
    .await;
    assert!(
        seen.iter().any(
            |i| matches!(i, Ok(Event::InitApply(p)) if p.metadata.name.as_deref() == Some("listed"))
        ),
        "{:?}",
        summary(&seen)
    );
}

/// Without HTTP/2 (a server or proxy that only offers HTTP/1.1) the same frozen quiet watch is
/// noticed by the client timeout instead, and still resumes without a LIST.
#[tokio::test]
async fn over_http1_a_frozen_watch_should_be_noticed_by_the_client_timeout() {
    let sim = quiet_sim(true).await;
    let client_timeout = Duration::from_secs(3);
    let ping = Http2Ping::try_new(
        Duration::from_millis(500),
        Duration::from_millis(1000),
        client_timeout,
    )
    .unwrap();
    let api: Api<Pod> = Api::namespaced(client_with(&sim, client_timeout, ping).await, "default");
    sim.faults().push(
        FaultRule::new(FaultAction::Freeze {
            after_ms: Some(500),
        })
        .verb(FaultVerb::Watch)
        .times(1),
    );
    let config = WatchConfig::default()
        .timeouts(WatchTimeouts::try_new(Duration::from_secs(1800), client_timeout).unwrap())
        .backoff(small_backoff());
    let mut rx = spawn_watch(api, config);
    let frozen_at = wait_frozen(&sim).await;
    let (noticed_at, seen) = recv_until(&mut rx, client_timeout + SLACK, |i| {
        matches!(
            i,
            Err(WatchError::ClientTimeout {
                phase: Phase::Stream,
                ..
            })
        )
    })
    .await;
    let noticed = noticed_at - frozen_at;
    eprintln!(
        "HTTP/1.1 frozen watch: noticed after {noticed:?}; {:?}",
        summary(&seen)
    );
    // Not by PING (1.5 s): HTTP/1.1 has none; the client timeout (3 s) caught it.
    assert!(
        noticed >= client_timeout - Duration::from_millis(1000),
        "{noticed:?}"
    );
    recv_until(&mut rx, Duration::from_secs(10), resumed).await;
    assert_eq!(sim.counts().get("list", "pods"), 1);
    let (http1, http2) = sim.requests_by_version();
    assert!(
        http1 > 0 && http2 == 0,
        "fell back to HTTP/1.1: {http1}/{http2}"
    );
}

/// Done when 4: a healthy quiet watch makes no reconnects, on one TCP connection.
///
/// Time is scaled down 20x in real time instead of paused (see the module doc): client timeout
/// 3 s (60 s / 20), PING every 250 ms with 1 s to answer, held for 30 s (10 min / 20). That is
/// ten client timeouts of silence, which over HTTP/1.1 would have meant ten reconnects (the
/// second half checks that this setup does reconnect over HTTP/1.1, so the test can fail), and
/// about 120 PING exchanges; the socket read timeout (client timeout + 5 s = 8 s) would also have
/// cut a connection whose reads stopped, so the PING answers kept it alive.
#[tokio::test]
async fn a_healthy_quiet_watch_should_make_no_reconnects_over_http2() {
    let client_timeout = Duration::from_secs(3);
    let ping = Http2Ping::try_new(
        Duration::from_millis(250),
        Duration::from_millis(1000),
        client_timeout,
    )
    .unwrap();
    let config = WatchConfig::default()
        .timeouts(WatchTimeouts::try_new(Duration::from_secs(1800), client_timeout).unwrap())
        .backoff(small_backoff());

    let sim = quiet_sim(false).await;
    let api: Api<Pod> = Api::namespaced(client_with(&sim, client_timeout, ping).await, "default");
    create(&api, "quiet").await;
    let mut rx = spawn_watch(api, config.clone());
    recv_until(&mut rx, Duration::from_secs(10), |i| {
        matches!(i, Ok(Event::Connected { .. }))
    })
    .await;
    let held = Duration::from_secs(30);
    let extra = tokio::time::timeout(held, rx.recv()).await;
    assert!(
        extra.is_err(),
        "a quiet healthy watch yielded {:?}",
        extra.map(|i| i.map(|(_, i)| summary(&[i])))
    );
    assert_eq!(sim.counts().get("watch", "pods"), 1, "one watch request");
    assert_eq!(
        sim.accepted_connections(),
        1,
        "one TCP connection for everything"
    );
    assert_eq!(sim.connections(), 1, "still open");
    let (http1, http2) = sim.requests_by_version();
    assert!(http2 >= 3 && http1 == 0, "all over HTTP/2: {http1}/{http2}");

    // Control: the same settings over HTTP/1.1 reconnect once the client timeout passes.
    let sim = quiet_sim(true).await;
    let api: Api<Pod> = Api::namespaced(client_with(&sim, client_timeout, ping).await, "default");
    let mut rx = spawn_watch(api, config);
    recv_until(&mut rx, client_timeout * 3, resumed).await;
}

/// All watches and requests of one client share one HTTP/2 connection (as client-go's do); over
/// HTTP/1.1 each open watch holds its own.
#[tokio::test]
async fn every_watch_and_request_of_a_client_should_share_one_http2_connection() {
    const WATCHES: usize = 8;
    async fn run(sim: &Sim) -> u64 {
        let client = default_client(sim).await;
        let mut streams = vec![];
        for n in 0..WATCHES {
            let api: Api<Pod> = Api::namespaced(client.clone(), "default");
            let config = WatchConfig::default().labels(&format!("watch={n}"));
            streams.push(spawn_watch(api, config));
        }
        for rx in &mut streams {
            recv_until(rx, Duration::from_secs(20), |i| {
                matches!(i, Ok(Event::Connected { .. }))
            })
            .await;
        }
        let api: Api<Pod> = Api::namespaced(client.clone(), "default");
        for n in 0..10 {
            create(&api, &format!("p{n}")).await;
        }
        sim.accepted_connections()
    }
    let sim = quiet_sim(false).await;
    let over_h2 = run(&sim).await;
    assert_eq!(
        over_h2, 1,
        "{WATCHES} watches and 18 requests over one connection"
    );
    let sim = quiet_sim(true).await;
    let over_h1 = run(&sim).await;
    assert!(
        over_h1 >= WATCHES as u64,
        "HTTP/1.1: one connection per open watch ({over_h1})"
    );
}
