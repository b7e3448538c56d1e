//! The recorder against the sim, with faults injected through the sim's fault plan and SQLite in a
//! temporary directory. Each fault test runs 1000 pods through their lifecycle while the fault
//! repeats, then checks that the store equals the sim's ground truth (testkit's audit).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use podline_client::backoff::FullJitter;
use podline_client::connect::{ConfigSource, ConnectOptions, connect_with_kubeconfig};
use podline_client::timeouts::WatchTimeouts;
use podline_record::{CancellationToken, Health, Metrics, RecordError, Recorder, RecorderConfig};
use podline_sim::{FaultAction, FaultRule, FaultVerb};
use podline_store::{PodFilter, PodKey, Store};
use podline_testkit::{Sim, audit, start_sim, test_config, wait_until};
use tokio::task::JoinHandle;

const NS: &str = "default";

/// A sim whose watches get frequent bookmarks (so a busy-but-quiet watch is never mistaken for a
/// dead one with a 1 s client timeout).
async fn sim() -> Sim {
    start_sim(test_config().bookmark_interval(Duration::from_millis(300))).await
}

async fn store(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    let path = dir.path().join("podline.db");
    podline_store::open(path.to_str().unwrap()).await.unwrap()
}

fn timeouts(server_s: u64, client_ms: u64) -> WatchTimeouts {
    WatchTimeouts::try_new(
        Duration::from_secs(server_s),
        Duration::from_millis(client_ms),
    )
    .unwrap()
}

struct Running {
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), RecordError>>,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
}

impl Running {
    async fn stop(self) -> Result<(), RecordError> {
        self.shutdown.cancel();
        self.task.await.unwrap()
    }
}

async fn start_recorder(sim: &Sim, store: Arc<dyn Store>, timeouts: WatchTimeouts) -> Running {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    let connected = connect_with_kubeconfig(
        kubeconfig,
        ConfigSource::InCluster,
        &ConnectOptions {
            client_timeout: timeouts.client,
            ..ConnectOptions::default()
        },
    )
    .await
    .unwrap();
    let mut config = RecorderConfig::new(sim.url(), Some(NS.to_owned()));
    config.timeouts = timeouts;
    config.watch_backoff = Some(
        FullJitter::try_new(Duration::from_millis(50), Duration::from_millis(250), 2.0).unwrap(),
    );
    config.linger = Duration::from_millis(20);
    let recorder = Recorder::new(connected.client, store, config);
    let (metrics, health) = (recorder.metrics(), recorder.health());
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(recorder.run(shutdown.clone()));
    Running {
        shutdown,
        task,
        metrics,
        health,
    }
}

fn pod(prefix: &str, i: usize) -> Pod {
    let exit = if i % 7 == 3 { "3" } else { "0" };
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": format!("{prefix}-{i}"),
            "labels": {"podline.io/run": prefix},
            "annotations": {
                "sim.podline.io/duration": format!("{}ms", 50 + (i % 5) * 50),
                "sim.podline.io/exit-code": exit,
            }
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
    }))
    .unwrap()
}

/// Creates `n` pods, 16 at a time, retrying through whatever the sim is doing (restarts...).
async fn create_pods(sim: &Sim, prefix: &str, n: usize) {
    let api: Api<Pod> = Api::namespaced(podline_testkit::client(sim).await, NS);
    // Paced on an absolute clock (one pod every 4 ms): the run lasts at least 4 s whatever the
    // machine's speed, so every fault timeline (2 s server timeouts, faults after 0.7-1.5 s)
    // fires while pods are still changing.
    let start = tokio::time::Instant::now();
    futures::stream::iter(0..n)
        .for_each_concurrent(16, |i| {
            let api = api.clone();
            async move {
                tokio::time::sleep_until(start + Duration::from_millis(4 * i as u64)).await;
                let pod = pod(prefix, i);
                loop {
                    match api.create(&PostParams::default(), &pod).await {
                        Ok(_) => break,
                        Err(kube::Error::Api(s)) if s.code == 409 => break, // committed earlier
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                }
            }
        })
        .await;
}

fn finished(sim: &Sim, n: usize) -> bool {
    let truth = sim.ground_truth();
    truth.len() >= n
        && truth.iter().all(|h| {
            h.transitions
                .iter()
                .any(|(p, _)| p == "Succeeded" || p == "Failed")
        })
}

/// Waits until every pod finished and the store equals the ground truth; panics with the audit.
async fn assert_store_equals_truth(sim: &Sim, store: &Arc<dyn Store>, n: usize, within: Duration) {
    let converged = wait_until(within, || async {
        finished(sim, n)
            && audit::compare(store.as_ref(), &sim.ground_truth())
                .await
                .is_ok_and(|r| r.is_ok())
    })
    .await;
    let report = audit::compare(store.as_ref(), &sim.ground_truth())
        .await
        .unwrap();
    assert!(converged, "store never converged: {report}");
    assert_eq!(report.expected, n, "{report}");
}

/// Runs 1000 pods while `fault` repeats, checks the store against the ground truth, and returns
/// the recorder's metrics text and the sim (so each test can prove its fault actually happened).
async fn thousand_pods_under<F, Fut>(
    rules: Vec<FaultRule>,
    timeouts: WatchTimeouts,
    fault: F,
) -> (String, Sim)
where
    F: Fn(Sim) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    const N: usize = 1000;
    let sim = sim().await;
    for rule in rules {
        sim.faults().push(rule);
    }
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let rec = start_recorder(&sim, store.clone(), timeouts).await;
    let stop_faults = CancellationToken::new();
    let faults = tokio::spawn({
        let (sim, stop) = (sim.clone(), stop_faults.clone());
        async move {
            while !stop.is_cancelled() {
                fault(sim.clone()).await;
            }
        }
    });
    create_pods(&sim, "p", N).await;
    let done = wait_until(Duration::from_secs(40), || async { finished(&sim, N) }).await;
    assert!(done, "the sim did not finish the pods");
    stop_faults.cancel();
    faults.await.unwrap();
    sim.faults().clear();
    assert_store_equals_truth(&sim, &store, N, Duration::from_secs(30)).await;
    let metrics = rec.metrics.render();
    rec.stop().await.unwrap();
    (metrics, sim)
}

/// The value of one sample line (`name{labels}`) in a metrics text, 0 if absent.
fn sample(text: &str, name: &str) -> u64 {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

fn reconnects(text: &str, reason: &str) -> u64 {
    sample(
        text,
        &format!("podline_record_watch_reconnects_total{{reason=\"{reason}\"}}"),
    )
}

fn relists(text: &str) -> u64 {
    sample(text, "podline_record_watch_relists_total")
}

async fn idle(_: Sim) {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

fn watch_rule(action: FaultAction, probability: f64) -> FaultRule {
    FaultRule::new(action)
        .verb(FaultVerb::Watch)
        .resource("pods")
        .probability(probability)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_1000_pods_exactly_while_watches_stall_past_the_client_timeout() {
    // Half of the watch requests stall after 30 events; the 2 s server timeout keeps new watch
    // requests coming so the fault repeats through the run.
    let stall = watch_rule(FaultAction::Stall { after_events: 30 }, 0.5);
    let (m, _) = thousand_pods_under(vec![stall], timeouts(2, 1000), idle).await;
    assert!(
        reconnects(&m, "client_timeout") > 0,
        "no stall happened:\n{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_1000_pods_exactly_while_the_server_ends_watches_at_its_timeout() {
    // timeoutSeconds=2: the server ends every watch after 2 s, cleanly.
    let (m, _) = thousand_pods_under(vec![], timeouts(2, 1000), idle).await;
    assert!(
        reconnects(&m, "server_timeout") > 0,
        "no server timeout:\n{m}"
    );
    assert_eq!(relists(&m), 1, "a server timeout must not relist:\n{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_1000_pods_exactly_while_connections_reset_mid_chunk() {
    let reset = watch_rule(
        FaultAction::Reset {
            after_bytes: Some(100_000),
            after_events: None,
        },
        1.0,
    );
    // Every watch request is cut mid-chunk after ~100 kB (dozens of pod events).
    let (m, _) = thousand_pods_under(vec![reset], timeouts(2, 1000), idle).await;
    assert!(reconnects(&m, "reset") > 0, "no reset happened:\n{m}");
    assert_eq!(relists(&m), 1, "a reset must not relist:\n{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_1000_pods_exactly_while_lists_fail_with_5xx() {
    // The initial LIST surely fails; later relists (forced below) fail half of the time.
    let first = FaultRule::new(FaultAction::status(503))
        .verb(FaultVerb::List)
        .resource("pods")
        .times(1);
    let list_5xx = FaultRule::new(FaultAction::status(503))
        .verb(FaultVerb::List)
        .resource("pods")
        .probability(0.5);
    // Force relists: history compacted and connections dropped, so the resume answers 410.
    let (m, sim) = thousand_pods_under(
        vec![first, list_5xx],
        timeouts(60, 1000),
        |sim: Sim| async move {
            tokio::time::sleep(Duration::from_millis(700)).await;
            sim.compact();
            sim.restart(Duration::ZERO).await;
        },
    )
    .await;
    assert!(
        sim.counts().get("list", "pods") > relists(&m),
        "no LIST failed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_1000_pods_exactly_with_410_after_compaction_during_outages() {
    let (m, _) = thousand_pods_under(vec![], timeouts(60, 1000), |sim: Sim| async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let compact = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            sim.compact();
        };
        tokio::join!(sim.restart(Duration::from_millis(300)), compact);
    })
    .await;
    assert!(relists(&m) > 1, "no 410 relist happened:\n{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_1000_pods_exactly_across_api_restarts() {
    let (m, _) = thousand_pods_under(vec![], timeouts(60, 1000), |sim: Sim| async move {
        tokio::time::sleep(Duration::from_millis(600)).await;
        sim.restart(Duration::from_millis(200)).await;
    })
    .await;
    let total: u64 = m
        .lines()
        .filter(|l| l.starts_with("podline_record_watch_reconnects_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64;
    assert!(total > 0, "no reconnect happened:\n{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_1000_pods_exactly_when_lists_stall() {
    // The initial LIST surely stalls; later relists (forced below) stall half of the time.
    let first = FaultRule::new(FaultAction::Stall { after_events: 0 })
        .verb(FaultVerb::List)
        .resource("pods")
        .times(1);
    let list_stall = FaultRule::new(FaultAction::Stall { after_events: 0 })
        .verb(FaultVerb::List)
        .resource("pods")
        .probability(0.5);
    let (m, sim) = thousand_pods_under(
        vec![first, list_stall],
        timeouts(60, 1000),
        |sim: Sim| async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            sim.compact();
            sim.restart(Duration::ZERO).await;
        },
    )
    .await;
    assert!(
        sim.counts().get("list", "pods") > relists(&m),
        "no LIST stalled:\n{m}"
    );
}

/// Sum of a counter family in the Prometheus text.
fn counter(metrics: &Metrics, name: &str) -> u64 {
    metrics
        .render()
        .lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_flow_again_within_the_client_timeout_plus_one_backoff_step_after_a_stall() {
    let sim = sim().await;
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let t = timeouts(60, 1000);
    let rec = start_recorder(&sim, store.clone(), t).await;
    create_pods(&sim, "warm", 1).await;
    assert!(
        wait_until(Duration::from_secs(10), || async {
            !store.pods(&PodFilter::default()).await.unwrap().is_empty()
        })
        .await
    );

    // The next watch stalls right away; drop the current one so the recorder opens it.
    sim.faults()
        .push(watch_rule(FaultAction::Stall { after_events: 0 }, 1.0).times(1));
    sim.restart(Duration::ZERO).await;
    let started = tokio::time::Instant::now();
    create_pods(&sim, "after-stall", 1).await;
    let key = PodKey::parse("after-stall-0", NS);
    assert!(
        wait_until(Duration::from_secs(10), || async {
            store.pod(&key).await.unwrap().is_some()
        })
        .await,
        "the pod created during the stall was never recorded"
    );
    let elapsed = started.elapsed();
    // Bound: a backoff step for the dropped connection, the client timeout for the stalled watch,
    // one more backoff step, plus the writer's linger and the commit.
    let bound = t.client + Duration::from_millis(2 * 250 + 300);
    assert!(
        elapsed <= bound,
        "recovered after {elapsed:?}, bound {bound:?}"
    );
    rec.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_watch_that_reconnects_ten_times_lists_only_once() {
    let sim = start_sim(test_config().bookmark_interval(Duration::from_secs(3600))).await;
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    // Nothing happens: every gap exceeds the 300 ms client timeout, so the watch reconnects.
    let rec = start_recorder(&sim, store.clone(), timeouts(60, 300)).await;
    let reconnected = wait_until(Duration::from_secs(20), || async {
        counter(&rec.metrics, "podline_record_watch_reconnects_total") >= 10
    })
    .await;
    assert!(reconnected, "{}", rec.metrics.render());
    assert_eq!(
        sim.counts().get("list", "pods"),
        1,
        "a routine reconnect re-listed"
    );
    assert!(sim.counts().get("watch", "pods") >= 11);
    rec.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_recorder_resumes_without_listing_and_without_duplicates() {
    let sim = sim().await;
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let rec = start_recorder(&sim, store.clone(), timeouts(60, 1000)).await;
    create_pods(&sim, "a", 50).await;
    assert_store_equals_truth(&sim, &store, 50, Duration::from_secs(20)).await;
    rec.stop().await.unwrap();

    let lists = sim.counts().get("list", "pods");
    create_pods(&sim, "b", 50).await; // while nobody watches
    let rec = start_recorder(&sim, store.clone(), timeouts(60, 1000)).await;
    assert_store_equals_truth(&sim, &store, 100, Duration::from_secs(20)).await;
    assert_eq!(
        sim.counts().get("list", "pods"),
        lists,
        "resumed by listing again"
    );
    assert!(
        rec.health.readiness().is_ready(),
        "{:?}",
        rec.health.readiness()
    );
    rec.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_deleted_while_not_watching_are_marked_vanished_after_the_relist() {
    let sim = sim().await;
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let rec = start_recorder(&sim, store.clone(), timeouts(60, 1000)).await;
    create_pods(&sim, "v", 10).await;
    assert_store_equals_truth(&sim, &store, 10, Duration::from_secs(20)).await;
    rec.stop().await.unwrap();

    let api: Api<Pod> = Api::namespaced(podline_testkit::client(&sim).await, NS);
    for i in 0..4 {
        api.delete(&format!("v-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    assert!(
        wait_until(Duration::from_secs(10), || async {
            sim.ground_truth()
                .iter()
                .filter(|h| h.deleted_at.is_some())
                .count()
                == 4
        })
        .await
    );
    sim.compact(); // the stored resume point is now too old: the restart must relist

    let rec = start_recorder(&sim, store.clone(), timeouts(60, 1000)).await;
    assert_store_equals_truth(&sim, &store, 10, Duration::from_secs(20)).await;
    let pods = store.pods(&PodFilter::default()).await.unwrap();
    let vanished: BTreeMap<&str, bool> = pods
        .iter()
        .filter(|p| p.deleted_at.is_some())
        .map(|p| (p.name.as_str(), p.final_state_observed))
        .collect();
    assert_eq!(
        vanished,
        BTreeMap::from([
            ("v-0", false),
            ("v-1", false),
            ("v-2", false),
            ("v-3", false)
        ])
    );
    rec.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_watch_stops_the_recorder_with_the_reason() {
    let sim = sim().await;
    sim.faults()
        .push(FaultRule::new(FaultAction::status(403)).verb(FaultVerb::List));
    let dir = tempfile::tempdir().unwrap();
    let rec = start_recorder(&sim, store(&dir).await, timeouts(60, 1000)).await;
    let outcome = tokio::time::timeout(Duration::from_secs(10), rec.task)
        .await
        .expect("a 403 must end the recorder")
        .unwrap();
    let err = outcome.expect_err("403 is fatal");
    assert!(matches!(err, RecordError::Watch(_)), "{err:?}");
    assert!(
        err.to_string().to_lowercase().contains("forbidden"),
        "{err}"
    );
}
