//! The watch and the client against the real sim over real sockets, with faults injected through
//! the sim's fault plan. Short real timeouts (server 2 s, client 1 s): paused time cannot drive
//! real sockets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use kube::config::Kubeconfig;
use podline_client::backoff::FullJitter;
use podline_client::connect::{ConfigSource, ConnectOptions, connect_with_kubeconfig};
use podline_client::timeouts::WatchTimeouts;
use podline_client::watch::{Event, Phase, Reason, WatchConfig, WatchError, watch};
use podline_sim::{FaultAction, FaultRule, FaultVerb, Sim, SimConfig};
use podline_testkit::start_sim;
use tokio::time::Instant;

const SERVER: Duration = Duration::from_secs(2);
const CLIENT: Duration = Duration::from_secs(1);
/// Scheduling slack on a loaded 2-core machine.
const SLACK: Duration = Duration::from_millis(1500);

type Watch = Pin<Box<dyn Stream<Item = Result<Event<Pod>, WatchError>> + Send>>;

fn sim_config() -> SimConfig {
    SimConfig::default()
        .tls(false)
        .kubelet_enabled(false)
        .bookmark_interval(Duration::from_millis(400))
}

async fn pods(sim: &Sim) -> Api<Pod> {
    let kubeconfig = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    let opts = ConnectOptions {
        client_timeout: CLIENT,
        ..Default::default()
    };
    let connected = connect_with_kubeconfig(kubeconfig, ConfigSource::InCluster, &opts)
        .await
        .unwrap();
    Api::namespaced(connected.client, &connected.namespace)
}

fn watch_config() -> WatchConfig {
    WatchConfig::default()
        .timeouts(WatchTimeouts::try_new(SERVER, CLIENT).unwrap())
        .backoff(
            FullJitter::try_new(Duration::from_millis(50), Duration::from_millis(500), 2.0)
                .unwrap(),
        )
}

fn start_watch(api: &Api<Pod>, config: WatchConfig) -> Watch {
    Box::pin(watch(api.clone(), config))
}

async fn create(api: &Api<Pod>, name: &str) {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &pod).await.unwrap();
}

/// Reads items until `done` says stop (or 20 s pass: a failure); returns everything read.
async fn read_until(
    w: &mut Watch,
    mut done: impl FnMut(&Result<Event<Pod>, WatchError>) -> bool,
) -> Vec<Result<Event<Pod>, WatchError>> {
    let mut seen = vec![];
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let item = tokio::time::timeout_at(deadline, w.next())
            .await
            .unwrap_or_else(|_| panic!("condition not met in 20 s; saw {:?}", summary(&seen)))
            .expect("the watch ended");
        let stop = done(&item);
        seen.push(item);
        if stop {
            return seen;
        }
    }
}

fn summary(items: &[Result<Event<Pod>, WatchError>]) -> Vec<String> {
    items
        .iter()
        .map(|i| match i {
            Ok(Event::Apply(p)) => format!("apply {}", p.metadata.name.as_deref().unwrap_or("")),
            Ok(Event::InitApply(p)) => {
                format!("init-apply {}", p.metadata.name.as_deref().unwrap_or(""))
            }
            Ok(Event::Delete(p)) => format!("delete {}", p.metadata.name.as_deref().unwrap_or("")),
            Ok(Event::Connected { reason, .. }) => format!("connected {reason}"),
            Ok(Event::Bookmark(_)) => "bookmark".into(),
            Ok(e) => format!("{e:?}"),
            Err(e) => format!("err {}", e.reason()),
        })
        .collect()
}

fn applied(items: &[Result<Event<Pod>, WatchError>]) -> BTreeSet<String> {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(Event::Apply(p)) | Ok(Event::InitApply(p)) => p.metadata.name.clone(),
            _ => None,
        })
        .collect()
}

fn is_connected(i: &Result<Event<Pod>, WatchError>) -> bool {
    matches!(i, Ok(Event::Connected { .. }))
}

fn lists(sim: &Sim) -> u64 {
    sim.counts().get("list", "pods")
}

/// Issue 4 "done when" 3: an idle watch that reconnects 10 times makes no LIST after the first.
#[tokio::test]
async fn idle_watch_should_reconnect_ten_times_without_listing() {
    let sim = start_sim(sim_config()).await;
    let api = pods(&sim).await;
    let quick = WatchTimeouts::try_new(Duration::from_secs(1), Duration::from_millis(800)).unwrap();
    let mut w = start_watch(&api, watch_config().timeouts(quick));
    read_until(&mut w, is_connected).await;
    let mut reconnects = 0;
    let items = read_until(&mut w, |i| {
        if let Ok(Event::Connected { reason, .. }) = i {
            assert!(
                matches!(*reason, Reason::ServerTimeout | Reason::ClientTimeout),
                "{reason}"
            );
            reconnects += 1;
        }
        reconnects == 10
    })
    .await;
    assert!(
        items.iter().all(|i| !matches!(i, Ok(Event::Init))),
        "{:?}",
        summary(&items)
    );
    assert_eq!(lists(&sim), 1);
    assert!(sim.counts().get("watch", "pods") >= 11);
}

/// A stalled stream is noticed within the client timeout, and the pod created during the stall
/// arrives after the resume, with no LIST.
#[tokio::test]
async fn stall_should_be_detected_within_the_client_timeout_and_resume() {
    let sim = start_sim(sim_config()).await;
    let api = pods(&sim).await;
    let mut w = start_watch(&api, watch_config());
    read_until(&mut w, is_connected).await;
    sim.faults().push(
        FaultRule::new(FaultAction::Stall { after_events: 0 })
            .verb(FaultVerb::Watch)
            .resource("pods")
            .times(1),
    );
    // End the current watch quickly so the next one is the stalled one.
    let items = read_until(&mut w, is_connected).await;
    let _ = items;
    let stalled_at = Instant::now();
    create(&api, "during-stall").await;
    let items = read_until(
        &mut w,
        |i| matches!(i, Ok(Event::Apply(p)) if p.metadata.name.as_deref() == Some("during-stall")),
    )
    .await;
    let detected = items.iter().any(|i| {
        matches!(
            i,
            Err(WatchError::ClientTimeout {
                phase: Phase::Stream,
                ..
            })
        )
    });
    assert!(detected, "{:?}", summary(&items));
    let recovered = stalled_at.elapsed();
    eprintln!(
        "stall: detected and the gap's pod delivered {recovered:?} after the stalled watch opened (client timeout {CLIENT:?})"
    );
    assert!(recovered <= CLIENT + SLACK, "took {recovered:?}");
    assert_eq!(lists(&sim), 1);
}

/// Resets mid-chunk and early ends lose no event and never re-list.
#[tokio::test]
async fn resets_and_early_ends_should_lose_nothing_and_never_relist() {
    let watch_rule = |action| {
        FaultRule::new(action)
            .verb(FaultVerb::Watch)
            .resource("pods")
    };
    let rules = vec![
        watch_rule(FaultAction::Reset {
            after_bytes: None,
            after_events: Some(2),
        })
        .times(3),
        watch_rule(FaultAction::Reset {
            after_bytes: Some(300),
            after_events: None,
        })
        .times(2),
        watch_rule(FaultAction::EndEarly { after_events: 3 }).times(3),
    ];
    let sim = start_sim(sim_config().faults(podline_sim::FaultPlan { rules })).await;
    let api = pods(&sim).await;
    let mut w = start_watch(&api, watch_config());
    read_until(&mut w, is_connected).await;
    let names: BTreeSet<String> = (0..30).map(|i| format!("p{i:02}")).collect();
    let creator = {
        let api = api.clone();
        let names = names.clone();
        tokio::spawn(async move {
            for name in names {
                create(&api, &name).await;
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
        })
    };
    let mut seen = BTreeSet::new();
    let items = read_until(&mut w, |i| {
        if let Ok(Event::Apply(p)) = i {
            seen.insert(p.metadata.name.clone().unwrap());
        }
        seen == names
    })
    .await;
    creator.await.unwrap();
    let resets = items
        .iter()
        .filter(|i| {
            matches!(
                i,
                Ok(Event::Connected {
                    reason: Reason::Reset,
                    ..
                })
            )
        })
        .count();
    assert!(resets >= 1, "{:?}", summary(&items));
    assert_eq!(lists(&sim), 1, "{:?}", summary(&items));
}

/// 410 after a compaction during an outage: the stalled watch is dropped, the outage (503s)
/// passes, the resume from the old resourceVersion answers 410, and the watch re-lists; the pod
/// created in the gap arrives through the re-list.
#[tokio::test]
async fn gone_after_compaction_during_an_outage_should_relist() {
    let stall_first_watch = FaultRule::new(FaultAction::Stall { after_events: 0 })
        .verb(FaultVerb::Watch)
        .resource("pods")
        .times(1);
    let sim = start_sim(sim_config().faults(podline_sim::FaultPlan {
        rules: vec![stall_first_watch],
    }))
    .await;
    let api = pods(&sim).await;
    let mut w = start_watch(&api, watch_config());
    read_until(&mut w, is_connected).await;
    sim.faults().push(
        FaultRule::new(FaultAction::status(503))
            .verb(FaultVerb::Watch)
            .times(2),
    );
    create(&api, "in-the-gap").await;
    sim.compact();
    let items = read_until(&mut w, |i| matches!(i, Ok(Event::InitDone))).await;
    assert!(
        items
            .iter()
            .any(|i| matches!(i, Err(e) if e.reason() == Reason::Http5xx)),
        "{:?}",
        summary(&items)
    );
    assert!(
        items.iter().any(|i| matches!(i, Err(e) if e.is_gone())),
        "{:?}",
        summary(&items)
    );
    assert!(items.iter().any(|i| matches!(i, Ok(Event::Init))));
    assert!(
        applied(&items).contains("in-the-gap"),
        "{:?}",
        summary(&items)
    );
    assert_eq!(lists(&sim), 2);
}

/// The API server restarts (connections dropped, refused for a while): the watch comes back and
/// sees pods created afterwards.
#[tokio::test]
async fn api_restart_should_recover() {
    let sim = start_sim(sim_config()).await;
    let api = pods(&sim).await;
    let mut w = start_watch(&api, watch_config());
    read_until(&mut w, is_connected).await;
    let (_, items) = tokio::join!(
        sim.restart(Duration::from_millis(1500)),
        read_until(&mut w, |i| {
            matches!(i, Err(e) if e.reason() == Reason::Refused)
        })
    );
    assert!(items.iter().all(|i| !matches!(i, Err(e) if e.is_fatal())));
    read_until(&mut w, is_connected).await;
    create(&api, "after-restart").await;
    let items = read_until(
        &mut w,
        |i| matches!(i, Ok(Event::Apply(p)) if p.metadata.name.as_deref() == Some("after-restart")),
    )
    .await;
    assert!(items.iter().all(|i| !matches!(i, Err(e) if e.is_fatal())));
}

/// A stalled initial LIST times out at the client timeout and is retried.
#[tokio::test]
async fn list_stall_should_time_out_and_retry() {
    let sim = start_sim(sim_config()).await;
    let api = pods(&sim).await;
    create(&api, "existing").await;
    sim.faults().push(
        FaultRule::new(FaultAction::Stall { after_events: 0 })
            .verb(FaultVerb::List)
            .resource("pods")
            .times(1),
    );
    sim.faults().push(
        FaultRule::new(FaultAction::status(500))
            .verb(FaultVerb::List)
            .resource("pods")
            .times(1),
    );
    let started = Instant::now();
    let mut w = start_watch(&api, watch_config());
    let items = read_until(&mut w, |i| matches!(i, Ok(Event::InitDone))).await;
    assert!(
        items.iter().any(|i| matches!(
            i,
            Err(WatchError::ClientTimeout {
                phase: Phase::List,
                ..
            })
        )),
        "{:?}",
        summary(&items)
    );
    assert!(
        items
            .iter()
            .any(|i| matches!(i, Err(e) if e.reason() == Reason::Http5xx))
    );
    assert!(applied(&items).contains("existing"));
    assert!(started.elapsed() <= CLIENT + SLACK + Duration::from_secs(1));
}

/// 403 on the watch is fatal: yielded with is_fatal() and the stream ends.
#[tokio::test]
async fn forbidden_watch_should_be_fatal() {
    let sim = start_sim(sim_config()).await;
    let api = pods(&sim).await;
    sim.faults()
        .push(FaultRule::new(FaultAction::status(403)).verb(FaultVerb::Watch));
    let mut w = start_watch(&api, watch_config());
    let items = read_until(&mut w, |i| i.is_err()).await;
    let Some(Err(err)) = items.last() else {
        unreachable!()
    };
    assert!(err.is_fatal(), "{err}");
    assert_eq!(err.reason(), Reason::Forbidden);
    assert!(w.next().await.is_none());
}

/// After a process restart, resume_from continues from the stored resourceVersion without a
/// LIST, and sees what happened in between.
#[tokio::test]
async fn resume_from_should_continue_without_listing() {
    let sim = start_sim(sim_config()).await;
    let api = pods(&sim).await;
    let mut w = start_watch(&api, watch_config());
    let items = read_until(&mut w, is_connected).await;
    let Some(Ok(Event::Connected {
        resource_version, ..
    })) = items.last()
    else {
        unreachable!()
    };
    let stored = resource_version.clone();
    drop(w);
    create(&api, "while-down").await;
    let lists_before = lists(&sim);
    let mut w = start_watch(&api, watch_config().resume_from(Some(stored)));
    let items = read_until(
        &mut w,
        |i| matches!(i, Ok(Event::Apply(p)) if p.metadata.name.as_deref() == Some("while-down")),
    )
    .await;
    assert!(
        items.iter().all(|i| !matches!(i, Ok(Event::Init))),
        "{:?}",
        summary(&items)
    );
    assert_eq!(lists(&sim), lists_before);
}

/// Over TLS, connect verifies the sim's certificate with the CA from the kubeconfig.
#[tokio::test]
async fn connect_should_verify_tls_with_the_kubeconfig_ca() {
    let sim = start_sim(SimConfig::default().kubelet_enabled(false)).await;
    assert!(sim.url().starts_with("https://"));
    let api = pods(&sim).await;
    api.list(&Default::default()).await.unwrap();
    // Without the CA, verification fails (never silently accepted).
    let yaml = sim.kubeconfig_yaml();
    let mut kubeconfig = Kubeconfig::from_yaml(&yaml).unwrap();
    for cluster in &mut kubeconfig.clusters {
        if let Some(c) = cluster.cluster.as_mut() {
            c.certificate_authority_data = None;
            c.certificate_authority = None;
        }
    }
    let connected = connect_with_kubeconfig(
        kubeconfig,
        ConfigSource::InCluster,
        &ConnectOptions::default(),
    )
    .await
    .unwrap();
    let api: Api<Pod> = Api::namespaced(connected.client, "default");
    let err = api.list(&Default::default()).await.unwrap_err();
    // A rejected certificate is not worth retrying: fatal, with its own label.
    assert_eq!(
        podline_client::retry::classify(&err),
        podline_client::retry::Disposition::Fatal {
            reason: Reason::Tls
        },
        "{err:?}"
    );
}

/// kube's own RetryLayer is off: a 429 reaches us after one request (our retry policy decides),
/// with its Retry-After.
#[tokio::test]
async fn connect_should_leave_retries_to_us() {
    let sim = start_sim(sim_config()).await;
    let api = pods(&sim).await;
    create(&api, "target").await;
    sim.faults().push(
        FaultRule::new(FaultAction::status(429))
            .verb(FaultVerb::Get)
            .resource("pods")
            .times(1),
    );
    let before = sim.counts().get("get", "pods");
    let err = api.get("target").await.unwrap_err();
    assert_eq!(
        sim.counts().get("get", "pods"),
        before + 1,
        "kube retried on its own"
    );
    assert_eq!(
        podline_client::retry::classify(&err),
        podline_client::retry::Disposition::Retry {
            reason: Reason::TooManyRequests,
            retry_after: Some(Duration::from_secs(1))
        }
    );
}

/// A unary call on a connection that goes silent fails within the read timeout derived from the
/// client timeout, classified as a timeout (so our retry policy retries it).
#[tokio::test]
async fn connect_should_bound_unary_calls_by_the_client_timeout() {
    let sim = start_sim(sim_config()).await;
    let api = pods(&sim).await;
    create(&api, "target").await;
    sim.faults().push(
        FaultRule::new(FaultAction::Stall { after_events: 0 })
            .verb(FaultVerb::Get)
            .resource("pods")
            .times(1),
    );
    let started = Instant::now();
    let err = api.get("target").await.unwrap_err();
    let took = started.elapsed();
    eprintln!("stalled GET failed after {took:?} (client timeout {CLIENT:?})");
    // Read timeout = client timeout + 5 s margin (see connect's docs).
    assert!(
        took <= CLIENT + Duration::from_secs(5) + SLACK,
        "took {took:?}"
    );
    assert_eq!(
        podline_client::retry::classify(&err).reason(),
        Reason::Timeout,
        "{err:?}"
    );
}

#[path = "sim/errors.rs"]
mod errors;

#[path = "sim/http2.rs"]
mod http2;

#[path = "sim/proxy.rs"]
mod proxy;

#[path = "sim/connections.rs"]
mod connections;

/// Issue 27: `list::Pages` lists page by page, following `continue`, with each item decoded on
/// its own: an object the sim garbles (its `malform` fault: a `deletionTimestamp` no client
/// decodes) is skipped and named, the rest are returned, in objects and in metadata alike.
/// `Api::list` fails the whole page on it (checked first, so the fault is known to bite).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_should_skip_an_undecodable_item_and_follow_continue() {
    use podline_client::list::Pages;
    use podline_client::retry::RetryPolicy;

    let sim = start_sim(sim_config()).await;
    let api = pods(&sim).await;
    let names = ["a", "bad-b", "c", "d", "e"];
    for name in names {
        create(&api, name).await;
    }
    sim.faults().push(
        FaultRule::new(FaultAction::Malform {
            name: "bad-*".into(),
            field: podline_sim::fault::MalformField::DeletionTimestamp,
        })
        .verb(FaultVerb::List),
    );
    let params = kube::api::ListParams::default().limit(2);
    assert!(api.list(&params).await.is_err(), "the fault does not bite");
    let policy = RetryPolicy::default().with_max_attempts(1);

    let mut pages = Pages::objects(&api, params.clone());
    let mut seen = Vec::new();
    let mut skipped = Vec::new();
    let mut count = 0;
    while let Some(page) = pages.next(&policy, "list pods").await {
        let page = page.unwrap();
        count += 1;
        seen.extend(page.items.into_iter().map(|p| p.metadata.name.unwrap()));
        skipped.extend(page.skipped);
    }
    assert_eq!(count, 3, "five pods in pages of two");
    assert_eq!(seen, ["a", "c", "d", "e"]);
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].object_name(), "default/bad-b");
    assert!(
        skipped[0].error.starts_with("metadata.deletionTimestamp")
            && !skipped[0].error.contains("not-a-time"),
        "{}",
        skipped[0].error
    );

    let listed = Pages::metadata(&api, params)
        .all(&policy, "list pod metadata")
        .await
        .unwrap();
    let seen: Vec<String> = listed
        .items
        .into_iter()
        .map(|p| p.metadata.name.unwrap())
        .collect();
    assert_eq!(seen, ["a", "c", "d", "e"]);
    assert_eq!(listed.skipped.len(), 1);
}
