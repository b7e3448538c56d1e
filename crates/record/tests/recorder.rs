//! The recorder against the sim, with faults injected through the sim's fault plan, into SQLite (a
//! temporary file) and PostgreSQL (a fresh database per test, so parallel tests never collide).
//! Each fault test runs 1000 pods through their lifecycle while the fault repeats, then checks
//! that the store equals the sim's ground truth (testkit's audit). The tests that depend on the
//! store run once per backend: `sqlite::<name>` and `postgres::<name>`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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
use podline_store::{PodFilter, PodKey, Store, StoreWrite};
use podline_testkit::db::{Backend, TestDb};
use podline_testkit::{Sim, audit, start_sim, test_config, wait_until};
use tokio::task::JoinHandle;

const NS: &str = "default";

/// A sim whose watches get frequent bookmarks (so a busy-but-quiet watch is never mistaken for a
/// dead one with a 1 s client timeout).
async fn sim() -> Sim {
    start_sim(test_config().bookmark_interval(Duration::from_millis(300))).await
}

/// Runs each named `async fn(Backend)` as two tests: `sqlite::<name>` and `postgres::<name>`.
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::Sqlite).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::Postgres).await;
                }
            )*
        }
    };
}

on_both_stores!(
    records_1000_pods_exactly_while_watches_stall_past_the_client_timeout,
    records_1000_pods_exactly_while_the_server_ends_watches_at_its_timeout,
    records_1000_pods_exactly_while_connections_reset_mid_chunk,
    records_1000_pods_exactly_while_lists_fail_with_5xx,
    records_1000_pods_exactly_with_410_after_compaction_during_outages,
    records_1000_pods_exactly_across_api_restarts,
    records_1000_pods_exactly_when_lists_stall,
    a_restarted_recorder_resumes_without_listing_and_without_duplicates,
    pods_deleted_while_not_watching_are_marked_vanished_after_the_relist,
    a_hostile_termination_message_is_recorded_exactly_and_the_failure_kept,
);

/// A fresh store on `backend`, `None` when PostgreSQL tests are skipped on purpose.
async fn fresh(backend: Backend) -> Option<Arc<TestDb>> {
    TestDb::fresh(backend).await.map(Arc::new)
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

async fn start_recorder(sim: &Sim, store: Arc<dyn StoreWrite>, timeouts: WatchTimeouts) -> Running {
    start_recorder_with(sim, store, timeouts, |_| {}).await
}

/// [`start_recorder`] with the test's own adjustments to the config.
async fn start_recorder_with(
    sim: &Sim,
    store: Arc<dyn StoreWrite>,
    timeouts: WatchTimeouts,
    adjust: impl FnOnce(&mut RecorderConfig),
) -> Running {
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
    config.store_probe_interval = Duration::from_millis(200);
    adjust(&mut config);
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

/// Runs 1000 pods into a fresh store on `backend` while `fault` repeats, checks the store against
/// the ground truth, and returns the recorder's metrics text and the sim (so each test can prove
/// its fault actually happened); `None` when the backend is skipped on purpose.
async fn thousand_pods_under<F, Fut>(
    backend: Backend,
    rules: Vec<FaultRule>,
    timeouts: WatchTimeouts,
    fault: F,
) -> Option<(String, Sim)>
where
    F: Fn(Sim, Arc<TestDb>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    const N: usize = 1000;
    let db = fresh(backend).await?;
    let store = db.store.clone();
    let sim = sim().await;
    for rule in rules {
        sim.faults().push(rule);
    }
    let rec = start_recorder(&sim, store.clone(), timeouts).await;
    let stop_faults = CancellationToken::new();
    let faults = tokio::spawn({
        let (sim, db, stop) = (sim.clone(), db.clone(), stop_faults.clone());
        async move {
            while !stop.is_cancelled() {
                fault(sim.clone(), db.clone()).await;
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
    Some((metrics, sim))
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

async fn idle(_: Sim, _: Arc<TestDb>) {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

fn watch_rule(action: FaultAction, probability: f64) -> FaultRule {
    FaultRule::new(action)
        .verb(FaultVerb::Watch)
        .resource("pods")
        .probability(probability)
}

async fn records_1000_pods_exactly_while_watches_stall_past_the_client_timeout(backend: Backend) {
    // The first watch surely stalls after 30 events, then half of them do; the 2 s server
    // timeout keeps new watch requests coming so the fault repeats through the run.
    let first = watch_rule(FaultAction::Stall { after_events: 30 }, 1.0).times(1);
    let stall = watch_rule(FaultAction::Stall { after_events: 30 }, 0.5);
    let Some((m, _)) =
        thousand_pods_under(backend, vec![first, stall], timeouts(2, 1000), idle).await
    else {
        return;
    };
    assert!(
        reconnects(&m, "client_timeout") > 0,
        "no stall happened:\n{m}"
    );
}

async fn records_1000_pods_exactly_while_the_server_ends_watches_at_its_timeout(backend: Backend) {
    // timeoutSeconds=2: the server ends every watch after 2 s, cleanly.
    let Some((m, _)) = thousand_pods_under(backend, vec![], timeouts(2, 1000), idle).await else {
        return;
    };
    assert!(
        reconnects(&m, "server_timeout") > 0,
        "no server timeout:\n{m}"
    );
    assert_eq!(relists(&m), 1, "a server timeout must not relist:\n{m}");
}

async fn records_1000_pods_exactly_while_connections_reset_mid_chunk(backend: Backend) {
    let reset = watch_rule(
        FaultAction::Reset {
            after_bytes: Some(100_000),
            after_events: None,
        },
        1.0,
    );
    // Every watch request is cut mid-chunk after ~100 kB (dozens of pod events).
    let Some((m, _)) = thousand_pods_under(backend, vec![reset], timeouts(2, 1000), idle).await
    else {
        return;
    };
    assert!(reconnects(&m, "reset") > 0, "no reset happened:\n{m}");
    assert_eq!(relists(&m), 1, "a reset must not relist:\n{m}");
}

async fn records_1000_pods_exactly_while_lists_fail_with_5xx(backend: Backend) {
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
    let Some((m, sim)) = thousand_pods_under(
        backend,
        vec![first, list_5xx],
        timeouts(60, 1000),
        |sim: Sim, _db| async move {
            tokio::time::sleep(Duration::from_millis(700)).await;
            sim.compact();
            sim.restart(Duration::ZERO).await;
        },
    )
    .await
    else {
        return;
    };
    assert!(
        sim.counts().get("list", "pods") > relists(&m),
        "no LIST failed"
    );
}

async fn records_1000_pods_exactly_with_410_after_compaction_during_outages(backend: Backend) {
    let Some((m, _)) = thousand_pods_under(
        backend,
        vec![],
        timeouts(60, 1000),
        |sim: Sim, _db| async move {
            tokio::time::sleep(Duration::from_millis(700)).await;
            let compact = async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                sim.compact();
            };
            tokio::join!(sim.restart(Duration::from_millis(300)), compact);
        },
    )
    .await
    else {
        return;
    };
    assert!(relists(&m) > 1, "no 410 relist happened:\n{m}");
}

async fn records_1000_pods_exactly_across_api_restarts(backend: Backend) {
    let Some((m, _)) = thousand_pods_under(
        backend,
        vec![],
        timeouts(60, 1000),
        |sim: Sim, _db| async move {
            tokio::time::sleep(Duration::from_millis(600)).await;
            sim.restart(Duration::from_millis(200)).await;
        },
    )
    .await
    else {
        return;
    };
    let total: u64 = m
        .lines()
        .filter(|l| l.starts_with("podline_record_watch_reconnects_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64;
    assert!(total > 0, "no reconnect happened:\n{m}");
}

async fn records_1000_pods_exactly_when_lists_stall(backend: Backend) {
    // The initial LIST surely stalls; later relists (forced below) stall half of the time.
    let first = FaultRule::new(FaultAction::Stall { after_events: 0 })
        .verb(FaultVerb::List)
        .resource("pods")
        .times(1);
    let list_stall = FaultRule::new(FaultAction::Stall { after_events: 0 })
        .verb(FaultVerb::List)
        .resource("pods")
        .probability(0.5);
    let Some((m, sim)) = thousand_pods_under(
        backend,
        vec![first, list_stall],
        timeouts(60, 1000),
        |sim: Sim, _db| async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            sim.compact();
            sim.restart(Duration::ZERO).await;
        },
    )
    .await
    else {
        return;
    };
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
    let db = fresh(Backend::Sqlite).await.unwrap();
    let store = db.store.clone();
    let t = timeouts(60, 1000);
    let backoff_step = Duration::from_millis(250); // the test recorder's watch backoff cap
    let rec = start_recorder(&sim, store.clone(), t).await;
    create_pods(&sim, "warm", 1).await;
    let warm = PodKey::parse("warm-0", NS);
    assert!(
        wait_until(Duration::from_secs(10), || async {
            store
                .pod(&warm)
                .await
                .unwrap()
                .is_some_and(|p| matches!(p.phase.as_deref(), Some("Succeeded" | "Failed")))
        })
        .await,
        "the warm-up pod was never recorded as finished"
    );

    // The next watch stalls right away; drop the current one so the recorder opens it. The
    // stall starts when the sim receives that watch request.
    let watches = sim.counts().get("watch", "pods");
    sim.faults()
        .push(watch_rule(FaultAction::Stall { after_events: 0 }, 1.0).times(1));
    sim.restart(Duration::ZERO).await;
    assert!(
        wait_until(Duration::from_secs(5), || async {
            sim.counts().get("watch", "pods") > watches
        })
        .await,
        "the recorder never re-watched"
    );
    let stall_started = tokio::time::Instant::now();
    assert!(
        sim.faults().list().is_empty(),
        "the re-watch must be the stalled one"
    );
    create_pods(&sim, "after-stall", 1).await;
    let key = PodKey::parse("after-stall-0", NS);
    assert!(
        wait_until(Duration::from_secs(10), || async {
            store.pod(&key).await.unwrap().is_some()
        })
        .await,
        "the pod created during the stall was never recorded"
    );
    let elapsed = stall_started.elapsed();
    // Issue 4, item 2: from the start of the stall, the client timeout plus one backoff step.
    // The reconnect after a client timeout is immediate (no backoff: see client::watch), so the
    // backoff step's budget is what the re-watch, the delivery, the writer's 20 ms linger and
    // the commit may use.
    let bound = t.client + backoff_step;
    assert!(
        elapsed <= bound,
        "events flowed again {elapsed:?} after the stall started; bound {bound:?}"
    );
    assert_eq!(
        reconnects(&rec.metrics.render(), "client_timeout"),
        1,
        "{}",
        rec.metrics.render()
    );
    rec.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_notices_a_store_that_went_away_while_the_recorder_is_idle() {
    let Some(db) = fresh(Backend::Postgres).await else {
        return;
    };
    // No bookmarks and a long client timeout: once the list is stored nothing is written.
    let sim = start_sim(test_config().bookmark_interval(Duration::from_secs(3600))).await;
    let rec = start_recorder(&sim, db.store.clone(), timeouts(120, 60_000)).await;
    assert!(
        wait_until(Duration::from_secs(10), || async {
            rec.health.readiness().is_ready()
        })
        .await,
        "{:?}",
        rec.health.readiness()
    );
    let store_errors = || {
        sample(
            &rec.metrics.render(),
            "podline_record_store_errors_total{kind=\"retryable\"}",
        )
    };
    // Ready means watching; the list's reconcile and resume point are committed by the writer
    // just after. Only once that write is done is the recorder idle.
    assert!(
        wait_until(Duration::from_secs(10), || async {
            sample(
                &rec.metrics.render(),
                "podline_record_write_latency_seconds_count",
            ) >= 1
        })
        .await,
        "the list was never committed"
    );

    db.allow_connections(false).await; // the database is down
    assert!(
        wait_until(Duration::from_secs(5), || async {
            rec.health
                .readiness()
                .problems
                .contains(&"store not writable".to_owned())
        })
        .await,
        "an idle recorder stayed ready on a dead store: {:?}",
        rec.health.readiness()
    );
    assert_eq!(store_errors(), 0, "the probe found it, not a write");

    db.allow_connections(true).await; // and back
    assert!(
        wait_until(Duration::from_secs(5), || async {
            rec.health.readiness().is_ready()
        })
        .await,
        "{:?}",
        rec.health.readiness()
    );
    rec.stop().await.unwrap();
}

/// Issue 6, item 2: PostgreSQL connections killed and the database refusing connections for a
/// while (as during a restart), over and over, mid-run. Nothing may be lost or doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_1000_pods_exactly_while_postgres_restarts_and_its_connections_are_killed() {
    let killed = Arc::new(AtomicU64::new(0));
    let outages = Arc::new(AtomicU64::new(0));
    let Some((m, _)) = thousand_pods_under(Backend::Postgres, vec![], timeouts(60, 1000), {
        let (killed, outages) = (killed.clone(), outages.clone());
        move |_sim: Sim, db: Arc<TestDb>| {
            let (killed, outages) = (killed.clone(), outages.clone());
            async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                killed.fetch_add(db.terminate_connections().await, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(300)).await;
                db.allow_connections(false).await; // "restarting": connections refused
                outages.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(400)).await;
                db.allow_connections(true).await;
            }
        }
    })
    .await
    else {
        return;
    };
    assert!(outages.load(Ordering::Relaxed) > 0, "no outage happened");
    assert!(
        killed.load(Ordering::Relaxed) > 0,
        "no connection was ever killed"
    );
    assert!(
        sample(&m, "podline_record_store_errors_total{kind=\"retryable\"}") > 0,
        "the recorder never saw the store fail:\n{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_watch_that_reconnects_ten_times_lists_only_once() {
    let sim = start_sim(test_config().bookmark_interval(Duration::from_secs(3600))).await;
    let db = fresh(Backend::Sqlite).await.unwrap();
    let store = db.store.clone();
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

async fn a_restarted_recorder_resumes_without_listing_and_without_duplicates(backend: Backend) {
    let sim = sim().await;
    let Some(db) = fresh(backend).await else {
        return;
    };
    let store = db.store.clone();
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

async fn pods_deleted_while_not_watching_are_marked_vanished_after_the_relist(backend: Backend) {
    let sim = sim().await;
    let Some(db) = fresh(backend).await else {
        return;
    };
    let store = db.store.clone();
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
    let db = fresh(Backend::Sqlite).await.unwrap();
    let rec = start_recorder(&sim, db.store.clone(), timeouts(60, 1000)).await;
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

/// Issue 7 "done when" 3: over HTTP/2 (a TLS sim offers h2; podline's client takes it), the
/// recorder's watch connection freezes (a frozen proxy: nothing in or out, never closed) while
/// pods are created, run and are deleted for 10 s. With the default settings PING notices the
/// dead connection within 15 s, well inside the server's 75 s of watch history, so the watch
/// resumes from its resourceVersion: every pod and transition reaches the store, and every
/// deletion arrives as a deletion (no re-list, so none is inferred from a list).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_created_and_deleted_during_a_10s_freeze_all_reach_the_store_as_deletions() {
    let sim =
        start_sim(podline_sim::SimConfig::default().bookmark_interval(Duration::from_secs(3600)))
            .await;
    sim.faults().push(
        FaultRule::new(FaultAction::Freeze {
            after_ms: Some(500),
        })
        .verb(FaultVerb::Watch)
        .resource("pods")
        .times(1),
    );
    let db = fresh(Backend::Sqlite).await.unwrap();
    let store = db.store.clone();
    let rec = start_recorder(&sim, store.clone(), WatchTimeouts::default()).await;
    assert!(
        wait_until(Duration::from_secs(10), || async {
            sim.frozen_connections() == 1
        })
        .await,
        "the recorder's watch connection froze"
    );
    let frozen_at = tokio::time::Instant::now();
    // Another client, on its own connection: 2 pods a second for 10 s; each second the pods of
    // the second before are deleted (some still running, some finished).
    let api: Api<Pod> = Api::namespaced(podline_testkit::client(&sim).await, NS);
    const N: usize = 20;
    for i in 0..N {
        tokio::time::sleep_until(frozen_at + Duration::from_millis(500 * i as u64)).await;
        api.create(&PostParams::default(), &pod("f", i))
            .await
            .unwrap();
        if i >= 2 && i % 2 == 0 {
            for old in [i - 2, i - 1] {
                api.delete(&format!("f-{old}"), &DeleteParams::default())
                    .await
                    .unwrap();
            }
        }
    }
    assert!(
        frozen_at.elapsed() < Duration::from_secs(11) && sim.frozen_connections() == 1,
        "the changes happened during the freeze"
    );
    assert!(
        wait_until(Duration::from_secs(10), || async {
            sim.ground_truth()
                .iter()
                .filter(|h| h.deleted_at.is_some())
                .count()
                == N - 2
        })
        .await,
        "18 pods deleted"
    );
    assert_store_equals_truth(&sim, &store, N, Duration::from_secs(40)).await;
    let metrics = rec.metrics.render();
    assert_eq!(
        sample(
            &metrics,
            "podline_record_watch_events_total{type=\"delete\"}"
        ),
        (N - 2) as u64,
        "every deletion arrived as a DELETED event\n{metrics}"
    );
    assert_eq!(
        relists(&metrics),
        1,
        "no re-list after the first: no deletion was inferred from a list\n{metrics}"
    );
    assert_eq!(sim.counts().get("list", "pods"), 1, "one LIST, the first");
    assert!(
        sim.counts().get("watch", "pods") >= 2,
        "the watch resumed after the freeze:\n{metrics}"
    );
    rec.stop().await.unwrap();
}

/// A kube client that reaches the sim in process (through its router, no socket), so a test
/// can change the cluster while every network connection is frozen.
fn in_process_client(sim: &Sim) -> kube::Client {
    let router = sim.router();
    let auth: http::HeaderValue = format!("Bearer {}", sim.token()).parse().unwrap();
    let service = tower::service_fn(move |mut req: http::Request<kube::client::Body>| {
        req.headers_mut()
            .insert(http::header::AUTHORIZATION, auth.clone());
        tower::ServiceExt::oneshot(router.clone(), req)
    });
    kube::Client::new(service, NS)
}

/// Issue 20 item 3: the network freezes for 30 s, every connection, the recorder's and every
/// new one (the sim accepts TCP and never answers the TLS handshake). PING notices the dead
/// connection within 6 s (5 s + 1 s); each new connection that is not up within the connect
/// timeout (by default the PING timeout, 1 s) is abandoned and tried again. So the watch resumes
/// within 2 s of the network coming back, and a pod created during the freeze is recorded by
/// then. Before, the first new connection (opened at about 6 s) hung for the whole 30 s connect
/// timeout, so recovery came about 6 s after the network did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_30s_freeze_of_every_connection_the_watch_resumes_within_2s() {
    const FREEZE: Duration = Duration::from_secs(30);
    let sim =
        start_sim(podline_sim::SimConfig::default().bookmark_interval(Duration::from_secs(3600)))
            .await;
    let db = fresh(Backend::Sqlite).await.unwrap();
    let store = db.store.clone();
    let timeouts = WatchTimeouts::default();
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    let connected = connect_with_kubeconfig(
        kubeconfig,
        ConfigSource::InCluster,
        &ConnectOptions {
            client_timeout: timeouts.client,
            http2_ping: podline_client::ping::Http2Ping::try_new(
                Duration::from_secs(5),
                Duration::from_secs(1),
                timeouts.client,
            )
            .unwrap(),
            // The default: the PING timeout.
            connect_timeout: None,
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
    let recorder = Recorder::new(connected.client, store.clone(), config);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(recorder.run(shutdown.clone()));
    let recorded = |name: &'static str| {
        let store = store.clone();
        async move {
            store
                .pods(&PodFilter::default())
                .await
                .is_ok_and(|pods| pods.iter().any(|p| p.name == name))
        }
    };

    // The watch is live: a pod created now reaches the store.
    let api: Api<Pod> = Api::namespaced(in_process_client(&sim), NS);
    api.create(&PostParams::default(), &pod("before", 0))
        .await
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || recorded("before-0")).await,
        "the recorder is watching"
    );

    sim.freeze_all_for(FREEZE);
    let frozen_at = tokio::time::Instant::now();
    assert!(
        sim.frozen_connections() >= 1,
        "the recorder's connection froze"
    );
    // Well after PING closed the old connection: the recorder is dialling into the freeze.
    tokio::time::sleep(Duration::from_secs(10)).await;
    api.create(&PostParams::default(), &pod("during", 0))
        .await
        .unwrap();
    // The fault's own duration (nothing to await): the network comes back at `frozen_at + 30 s`.
    tokio::time::sleep_until(frozen_at + FREEZE).await;
    assert!(
        !recorded("during-0").await,
        "nothing could reach the recorder during the freeze"
    );
    assert!(
        wait_until(Duration::from_secs(2), || recorded("during-0")).await,
        "the pod created during the freeze was recorded within 2 s of the network coming back \
         ({:?} after the freeze began)",
        frozen_at.elapsed()
    );
    shutdown.cancel();
    task.await.unwrap().unwrap();
}

// ---- issue 16: free text and disk faults ----

/// A termination message no well-behaved container writes, as the sim's kubelet reports it:
/// NULs (PostgreSQL refuses them in TEXT, SQLite cut at them), the store's escape character and
/// its escapes, control characters, noncharacters, bidi overrides, SQL, and as long as a
/// kubelet keeps (4096 bytes: `pkg/kubelet/kuberuntime/kuberuntime_container.go`
/// `MaxContainerTerminationMessageLength`, which the sim applies too), so it is reported whole.
fn hostile_message() -> String {
    let unit = "exit\0code\0\0 ␀ ␀0 ␀␀ \\0 \t\r\n\u{1b}[31m\u{7f}\u{85}\u{feff}\u{fffe}\u{ffff} \
                \u{202e}evil\u{202c} 🧨 e\u{301} '; DROP TABLE pods; -- \"q\" ";
    let mut text = String::new();
    while text.len() + unit.len() <= 4096 {
        text.push_str(unit);
    }
    text
}

/// Issue 16: a pod whose container fails (exit 3) with a hostile termination message is
/// recorded exactly: message byte for byte, the failure and exit code, and its deletion with
/// the final state observed. Before, PostgreSQL refused the batch, the recorder dropped the pod
/// change, and the pod read `Running`, deleted, `final_state_observed = true`.
async fn a_hostile_termination_message_is_recorded_exactly_and_the_failure_kept(backend: Backend) {
    let sim = sim().await;
    let Some(db) = fresh(backend).await else {
        return;
    };
    let store = db.store.clone();
    let rec = start_recorder(&sim, store.clone(), timeouts(60, 1000)).await;
    let message = hostile_message();
    let api: Api<Pod> = Api::namespaced(podline_testkit::client(&sim).await, NS);
    let mut hostile: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "hostile",
            "labels": {"podline.io/run": "h"},
            "annotations": {
                "sim.podline.io/duration": "100ms",
                "sim.podline.io/exit-code": "3",
                "sim.podline.io/termination-message": message,
            }
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &hostile).await.unwrap();
    // A well-behaved neighbour in the same batches: nothing of it may be lost either.
    hostile.metadata.name = Some("neighbour".to_owned());
    hostile.metadata.annotations = Some(BTreeMap::from([(
        "sim.podline.io/duration".to_owned(),
        "100ms".to_owned(),
    )]));
    api.create(&PostParams::default(), &hostile).await.unwrap();
    assert_store_equals_truth(&sim, &store, 2, Duration::from_secs(20)).await;

    let stored = store
        .pod(&PodKey::Name {
            namespace: NS.to_owned(),
            name: "hostile".to_owned(),
        })
        .await
        .unwrap()
        .expect("the hostile pod is recorded");
    assert_eq!(stored.phase.as_deref(), Some("Failed"));
    let main = &stored.containers[0];
    assert_eq!(main.exit_code, Some(3));
    assert!(
        main.message.as_deref() == Some(message.as_str()),
        "the termination message must be stored exactly ({} bytes stored of {})",
        main.message.as_deref().map_or(0, str::len),
        message.len()
    );
    assert_eq!(
        stored.annotations.get("sim.podline.io/termination-message"),
        Some(&message)
    );

    api.delete("hostile", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || async {
            store
                .pod(&PodKey::Uid(stored.uid.clone()))
                .await
                .ok()
                .flatten()
                .is_some_and(|p| p.deleted_at.is_some())
        })
        .await,
        "the deletion was never recorded"
    );
    let gone = store
        .pod(&PodKey::Uid(stored.uid.clone()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(gone.phase.as_deref(), Some("Failed"), "the failure is kept");
    assert!(gone.final_state_observed);
    assert_eq!(gone.containers[0].exit_code, Some(3));
    let metrics = rec.metrics.render();
    assert_eq!(
        sample(
            &metrics,
            "podline_record_store_errors_total{kind=\"rejected\"}"
        ),
        0,
        "no pod change may be refused for its content:\n{metrics}"
    );
    rec.stop().await.unwrap();
}

/// A tmpfs of `size` on a fresh directory, unmounted on drop; `None` (loudly) where mounting is
/// not permitted.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(out) if out.status.success() => Some(Tmpfs { dir }),
            other => {
                eprintln!(
                    "\n*** cannot mount a tmpfs here ({other:?}): the real full-disk recorder \
                     test is SKIPPED, nothing was checked ***\n"
                );
                None
            }
        }
    }

    /// Fills the file system to the last byte; returns the filler to delete.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let filler = self.dir.path().join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0xa5_u8; 4096];
        while file.write_all(&chunk).is_ok() {}
        while file.write_all(&chunk[..1]).is_ok() {}
        let _ = file.sync_all();
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

fn store_not_writable(health: &Health) -> bool {
    health
        .readiness()
        .problems
        .iter()
        .any(|p| p == "store not writable")
}

/// Issue 16: the SQLite store's file system fills up (a real full disk: a 4 MiB tmpfs, filled)
/// while pods are created, run, finish and are deleted. `/readyz` goes not ready; once space
/// comes back it is ready again within one retry period, and every pod that came and went
/// meanwhile is in the store (before, the recorder stayed on its dead connections, not ready,
/// until restarted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_is_survived_and_every_pod_recorded_once_space_is_back() {
    let Some(fs) = Tmpfs::mount("4m") else { return };
    let db = fs.dir.path().join("podline.db");
    let store = podline_store::open(&db.to_string_lossy()).await.unwrap();
    let sim = sim().await;
    let retry_cap = Duration::from_millis(400);
    let rec = start_recorder_with(&sim, store.clone(), timeouts(60, 1000), |config| {
        config.store_backoff =
            FullJitter::try_new(Duration::from_millis(50), retry_cap, 2.0).unwrap();
    })
    .await;
    let listener = podline_daemon::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let stop_http = CancellationToken::new();
    let http = tokio::spawn(podline_daemon::serve(
        listener,
        rec.health.clone(),
        stop_http.clone(),
    ));
    create_pods(&sim, "a", 30).await;
    assert_store_equals_truth(&sim, &store, 30, Duration::from_secs(20)).await;
    assert!(rec.health.readiness().is_ready());
    assert!(readyz(addr).await.starts_with("HTTP/1.1 200"));

    let filler = fs.fill();
    create_pods(&sim, "b", 120).await;
    assert!(
        wait_until(Duration::from_secs(10), || async {
            store_not_writable(&rec.health)
        })
        .await,
        "a full disk must make /readyz not ready: {:?}",
        rec.health.readiness()
    );
    // Pods come and go while the disk is full.
    assert!(wait_until(Duration::from_secs(20), || async { finished(&sim, 150) }).await);
    let api: Api<Pod> = Api::namespaced(podline_testkit::client(&sim).await, NS);
    for i in 0..40 {
        api.delete(&format!("b-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(500)).await; // the writer keeps failing meanwhile
    assert!(store_not_writable(&rec.health), "still full");
    let not_ready = readyz(addr).await;
    assert!(
        not_ready.starts_with("HTTP/1.1 503") && not_ready.contains("store not writable"),
        "{not_ready}"
    );
    assert!(store.health().await.is_err(), "the disk really is full");

    std::fs::remove_file(filler).unwrap();
    let freed = tokio::time::Instant::now();
    assert!(
        wait_until(Duration::from_secs(10), || async {
            rec.health.readiness().is_ready()
        })
        .await,
        "not ready again after space came back: {:?}",
        rec.health.readiness()
    );
    // One retry period (the backoff cap) plus a write and a little scheduling slack.
    assert!(
        freed.elapsed() < retry_cap + Duration::from_secs(2),
        "ready again only after {:?}",
        freed.elapsed()
    );
    assert!(readyz(addr).await.starts_with("HTTP/1.1 200"));
    assert_store_equals_truth(&sim, &store, 150, Duration::from_secs(20)).await;
    rec.stop().await.unwrap();
    stop_http.cancel();
    http.await.unwrap().unwrap();
}

/// `GET /readyz` on the recorder's health server; the whole HTTP response.
async fn readyz(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /readyz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

/// Issue 16: the SQLite file deleted under a running recorder. The store re-creates and
/// migrates it (loudly: what the deleted file held is gone with it), and every pod created
/// afterwards is recorded in the new file, where readers find it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_database_file_is_re_created_and_recording_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("podline.db");
    let store = podline_store::open(&db.to_string_lossy()).await.unwrap();
    let sim = sim().await;
    let rec = start_recorder(&sim, store.clone(), timeouts(60, 1000)).await;
    create_pods(&sim, "a", 10).await;
    assert_store_equals_truth(&sim, &store, 10, Duration::from_secs(20)).await;

    std::fs::remove_file(&db).unwrap();
    create_pods(&sim, "b", 20).await;
    assert!(wait_until(Duration::from_secs(20), || async { finished(&sim, 30) }).await);
    let reader = || async {
        let reader = podline_store::open_read_only(&db.to_string_lossy())
            .await
            .ok()?;
        reader.pods(&PodFilter::default()).await.ok()
    };
    let later: Vec<_> = sim
        .ground_truth()
        .into_iter()
        .filter(|h| h.name.starts_with("b-"))
        .collect();
    let converged = wait_until(Duration::from_secs(20), || async {
        reader().await.is_some_and(|pods| {
            let pods: Vec<_> = pods
                .into_iter()
                .filter(|p| p.name.starts_with("b-"))
                .collect();
            audit::compare_records(&pods, &later).is_ok()
        })
    })
    .await;
    let pods = reader().await.unwrap_or_default();
    let pods: Vec<_> = pods
        .into_iter()
        .filter(|p| p.name.starts_with("b-"))
        .collect();
    assert!(
        converged,
        "pods created after the deletion are missing from the file: {}",
        audit::compare_records(&pods, &later)
    );
    assert!(
        rec.health.readiness().is_ready(),
        "{:?}",
        rec.health.readiness()
    );
    rec.stop().await.unwrap();
}

/// A store that refuses, as a data error no retry fixes, every batch with a pod change whose
/// text contains [`REFUSED_MARKER`] (as a PostgreSQL database in a non-UTF-8 encoding refuses
/// an emoji), and passes everything else to the real store.
struct RefusingStore {
    inner: Arc<dyn Store>,
}

const REFUSED_MARKER: &str = "untranslatable-🧨";

impl RefusingStore {
    fn refuses(batch: &podline_store::Batch) -> bool {
        batch.ops.iter().any(|op| match op {
            podline_store::StoreOp::Upsert(obs) => {
                let texts = obs
                    .annotations
                    .values()
                    .chain(obs.message.iter())
                    .chain(obs.containers.iter().flat_map(|c| c.message.iter()));
                texts.into_iter().any(|t| t.contains(REFUSED_MARKER))
            }
            _ => false,
        })
    }
}

type Fut<'a, T> = futures::future::BoxFuture<'a, Result<T, podline_store::StoreError>>;

impl StoreWrite for RefusingStore {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn migrate(&self) -> Fut<'_, podline_store::MigrationReport> {
        self.inner.migrate()
    }
    fn apply<'a>(&'a self, batch: &'a podline_store::Batch) -> Fut<'a, podline_store::ApplyReport> {
        if Self::refuses(batch) {
            // A data error: not retryable (the real one would be a Query error with SQLSTATE
            // 22P05, which needs a driver error to build).
            return Box::pin(async {
                Err(podline_store::StoreError::Corrupt {
                    what: "pods.message",
                    value: "character has no equivalent in encoding LATIN1".to_owned(),
                })
            });
        }
        self.inner.apply(batch)
    }
    fn resume_point<'a>(&'a self, key: &'a str) -> Fut<'a, Option<podline_store::ResumePoint>> {
        self.inner.resume_point(key)
    }
    fn live_pods<'a>(
        &'a self,
        scope: &'a podline_store::LiveScope,
    ) -> Fut<'a, Vec<podline_store::LivePod>> {
        self.inner.live_pods(scope)
    }
    fn last_recorded<'a>(&'a self, uid: &'a str) -> Fut<'a, Option<podline_store::PodRecord>> {
        self.inner.last_recorded(uid)
    }
    fn health(&self) -> Fut<'_, ()> {
        self.inner.health()
    }
}

/// Issue 16: when the store refuses a pod change for its content (a data error, not a lost
/// connection), the recorder neither retries it forever nor drops it: it stores the change
/// without its free text, so the pod still reads Failed with its exit code, then deleted with
/// its final state observed. Everything else in the same batches is stored as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_change_the_store_refuses_for_its_text_is_kept_without_the_text() {
    let sim = sim().await;
    let db = fresh(Backend::Sqlite).await.unwrap();
    let refusing: Arc<dyn StoreWrite> = Arc::new(RefusingStore {
        inner: db.store.clone(),
    });
    let rec = start_recorder(&sim, refusing, timeouts(60, 1000)).await;
    let store = db.store.clone();
    let api: Api<Pod> = Api::namespaced(podline_testkit::client(&sim).await, NS);
    let refused: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "refused",
            "labels": {"podline.io/run": "r"},
            "annotations": {
                "sim.podline.io/duration": "100ms",
                "sim.podline.io/exit-code": "3",
                "sim.podline.io/termination-message": format!("boom {REFUSED_MARKER}"),
            }
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &refused).await.unwrap();
    create_pods(&sim, "ok", 20).await;
    assert_store_equals_truth(&sim, &store, 21, Duration::from_secs(20)).await;

    api.delete("refused", &DeleteParams::default())
        .await
        .unwrap();
    let key = PodKey::Name {
        namespace: NS.to_owned(),
        name: "refused".to_owned(),
    };
    assert!(
        wait_until(Duration::from_secs(10), || async {
            store
                .pod(&key)
                .await
                .ok()
                .flatten()
                .is_some_and(|p| p.deleted_at.is_some())
        })
        .await,
        "the deletion was never recorded"
    );
    let pod = store.pod(&key).await.unwrap().unwrap();
    assert_eq!(pod.phase.as_deref(), Some("Failed"));
    assert!(pod.final_state_observed);
    assert_eq!(pod.run.as_deref(), Some("r"), "the run is kept");
    let main = &pod.containers[0];
    assert_eq!(main.exit_code, Some(3));
    assert!(
        main.message
            .as_deref()
            .is_some_and(|m| m.starts_with("[podline:")),
        "{:?}",
        main.message
    );
    assert!(pod.annotations.is_empty());
    assert!(
        sample(
            &rec.metrics.render(),
            "podline_record_store_errors_total{kind=\"rejected\"}"
        ) >= 1
    );
    rec.stop().await.unwrap();
}
