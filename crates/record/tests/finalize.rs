//! `--finalize` against the sim: the recorder holds the pods it records with its finalizer and
//! removes it only after the pod's final state is committed; faults come through the sim's fault
//! plan and a store that fails on purpose.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use podline_client::backoff::FullJitter;
use podline_client::connect::{ConfigSource, ConnectOptions, connect_with_kubeconfig};
use podline_client::finalizer::{RECORD_FINALIZER, has_finalizer};
use podline_client::timeouts::WatchTimeouts;
use podline_record::{
    CancellationToken, FinalizeConfig, LabelSelector, Metrics, RecordError, Recorder,
    RecorderConfig,
};
use podline_sim::{FaultAction, FaultRule, FaultVerb};
use podline_store::{PodFilter, PodKey, Store, StoreError, StoreOp, StoreWrite};
use podline_testkit::db::{Backend, TestDb};
use podline_testkit::{Sim, start_sim, test_config, wait_until};
use tokio::task::JoinHandle;

const NS: &str = "default";

async fn sim() -> Sim {
    start_sim(test_config().bookmark_interval(Duration::from_millis(300))).await
}

struct Running {
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), RecordError>>,
    metrics: Arc<Metrics>,
}

impl Running {
    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap().unwrap();
    }
}

fn finalize_config() -> FinalizeConfig {
    FinalizeConfig {
        backoff: FullJitter::try_new(Duration::from_millis(20), Duration::from_millis(200), 2.0)
            .unwrap(),
        ..FinalizeConfig::default()
    }
}

async fn start_recorder(
    sim: &Sim,
    store: Arc<dyn StoreWrite>,
    adjust: impl FnOnce(&mut RecorderConfig),
) -> Running {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    let timeouts = WatchTimeouts::try_new(Duration::from_secs(5), Duration::from_secs(2)).unwrap();
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
    config.store_backoff =
        FullJitter::try_new(Duration::from_millis(20), Duration::from_millis(100), 2.0).unwrap();
    config.flush_timeout = Duration::from_secs(2);
    config.finalize = Some(finalize_config());
    adjust(&mut config);
    let recorder = Recorder::new(connected.client, store, config);
    let metrics = recorder.metrics();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(recorder.run(shutdown.clone()));
    Running {
        shutdown,
        task,
        metrics,
    }
}

fn pod(name: &str, duration: &str, labels: serde_json::Value) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "sim.podline.io/duration": duration,
                "sim.podline.io/exit-code": "3",
            }
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
    }))
    .unwrap()
}

async fn pods(sim: &Sim) -> Api<Pod> {
    Api::namespaced(podline_testkit::client(sim).await, NS)
}

async fn carries(pods: &Api<Pod>, name: &str) -> Option<bool> {
    let pod = pods.get_opt(name).await.unwrap()?;
    Some(has_finalizer(&pod.metadata, RECORD_FINALIZER))
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

fn sample(metrics: &Metrics, name: &str) -> u64 {
    let text = metrics.render();
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

fn removed(metrics: &Metrics, reason: &str) -> u64 {
    sample(
        metrics,
        &format!("podline_record_finalizers_removed_total{{reason=\"{reason}\"}}"),
    )
}

/// A store whose writes fail (retryably, as a hung database) while `paused`, and, while
/// `refuse_deletions`, every batch holding a deletion; counts the failed attempts.
struct GatedStore {
    inner: Arc<dyn Store>,
    paused: AtomicBool,
    refuse_deletions: AtomicBool,
    failed: AtomicU64,
}

impl GatedStore {
    fn new(inner: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            paused: AtomicBool::new(false),
            refuse_deletions: AtomicBool::new(false),
            failed: AtomicU64::new(0),
        })
    }

    fn refuses(&self, batch: &podline_store::Batch) -> bool {
        self.paused.load(Ordering::SeqCst)
            || (self.refuse_deletions.load(Ordering::SeqCst)
                && batch
                    .ops
                    .iter()
                    .any(|op| matches!(op, StoreOp::Deleted { .. })))
    }
}

type Fut<'a, T> = futures::future::BoxFuture<'a, Result<T, StoreError>>;

impl StoreWrite for GatedStore {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn migrate(&self) -> Fut<'_, podline_store::MigrationReport> {
        self.inner.migrate()
    }
    fn apply<'a>(&'a self, batch: &'a podline_store::Batch) -> Fut<'a, podline_store::ApplyReport> {
        if self.refuses(batch) {
            self.failed.fetch_add(1, Ordering::SeqCst);
            return Box::pin(async {
                Err(StoreError::Timeout {
                    op: "apply",
                    after: Duration::from_millis(1),
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

async fn record_of(store: &dyn Store, name: &str) -> Option<podline_store::PodRecord> {
    store
        .pod(&PodKey::Name {
            namespace: NS.to_owned(),
            name: name.to_owned(),
        })
        .await
        .unwrap()
}

/// The core rule: while the store cannot commit, a finished and deleted pod keeps the finalizer
/// (it waits in Terminating); once the store commits its final state, the finalizer goes, the
/// pod is deleted, and the store holds its exit code and the deletion with its final state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_is_released_only_after_its_final_state_is_committed() {
    let sim = sim().await;
    let db = TestDb::fresh(Backend::Sqlite).await.unwrap();
    let store = GatedStore::new(db.store.clone());
    let rec = start_recorder(&sim, store.clone(), |_| {}).await;
    let pods = pods(&sim).await;
    pods.create(
        &PostParams::default(),
        &pod("held", "300ms", serde_json::json!({})),
    )
    .await
    .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || async {
            carries(&pods, "held").await == Some(true)
        })
        .await,
        "the recorder never added its finalizer"
    );

    store.paused.store(true, Ordering::SeqCst);
    assert!(
        wait_until(Duration::from_secs(10), || async {
            pods.get("held")
                .await
                .is_ok_and(|p| phase(&p) == Some("Failed"))
        })
        .await
    );
    pods.delete("held", &DeleteParams::default()).await.unwrap();
    // The recorder tries (and fails) to commit the deletion a few times: the pod stays.
    let before = store.failed.load(Ordering::SeqCst);
    assert!(
        wait_until(Duration::from_secs(10), || async {
            store.failed.load(Ordering::SeqCst) >= before + 5
        })
        .await
    );
    let held = pods.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(
        has_finalizer(&held.metadata, RECORD_FINALIZER),
        "released before the commit"
    );
    assert_eq!(removed(&rec.metrics, "terminal"), 0);

    store.paused.store(false, Ordering::SeqCst);
    assert!(
        wait_until(Duration::from_secs(10), || async {
            pods.get_opt("held").await.unwrap().is_none()
        })
        .await,
        "never released after the commit"
    );
    assert!(
        wait_until(Duration::from_secs(5), || async {
            record_of(db.store.as_ref(), "held")
                .await
                .is_some_and(|r| r.deleted_at.is_some())
        })
        .await
    );
    let record = record_of(db.store.as_ref(), "held").await.unwrap();
    assert_eq!(record.phase.as_deref(), Some("Failed"));
    assert_eq!(record.containers[0].exit_code, Some(3));
    assert!(record.final_state_observed);
    assert_eq!(removed(&rec.metrics, "terminal"), 1);
    assert_eq!(
        sample(&rec.metrics, "podline_record_finalizers_added_total"),
        1
    );
    rec.stop().await;
}

/// The recorder commits a pod's final state and releases it, but dies before its DELETED event
/// is committed, and the watch history moves on: the relist lacks the pod. Its deletion was
/// recorded with its final state, so it must not be counted vanished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_pod_whose_deleted_event_was_missed_is_deleted_not_vanished() {
    let sim = sim().await;
    let db = TestDb::fresh(Backend::Sqlite).await.unwrap();
    let store = GatedStore::new(db.store.clone());
    store.refuse_deletions.store(true, Ordering::SeqCst);
    let rec = start_recorder(&sim, store.clone(), |_| {}).await;
    let pods = pods(&sim).await;
    pods.create(
        &PostParams::default(),
        &pod("missed", "200ms", serde_json::json!({})),
    )
    .await
    .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || async {
            pods.get("missed").await.is_ok_and(|p| {
                phase(&p) == Some("Failed") && has_finalizer(&p.metadata, RECORD_FINALIZER)
            })
        })
        .await
    );
    pods.delete("missed", &DeleteParams::default())
        .await
        .unwrap();
    // Released after the commit of its final state; its DELETED event is never committed.
    assert!(
        wait_until(Duration::from_secs(10), || async {
            pods.get_opt("missed").await.unwrap().is_none()
        })
        .await
    );
    assert!(
        wait_until(Duration::from_secs(5), || async {
            store.failed.load(Ordering::SeqCst) >= 2
        })
        .await
    );
    rec.stop().await;
    let record = record_of(db.store.as_ref(), "missed").await.unwrap();
    assert!(record.deletion_requested_at.is_some() && record.deleted_at.is_none());

    sim.compact(); // the stored resume point is now too old: 410, relist
    let rec = start_recorder(&sim, db.store.clone(), |_| {}).await;
    assert!(
        wait_until(Duration::from_secs(10), || async {
            record_of(db.store.as_ref(), "missed")
                .await
                .is_some_and(|r| r.deleted_at.is_some())
        })
        .await
    );
    assert!(sample(&rec.metrics, "podline_record_watch_relists_total") >= 1);
    let record = record_of(db.store.as_ref(), "missed").await.unwrap();
    assert!(record.final_state_observed, "counted vanished: {record:?}");
    assert_eq!(db.store.counts().await.unwrap().vanished, 0);
    rec.stop().await;
}

/// The stored resume point of [`start_recorder`]'s watch (0: none).
async fn resume_point(store: &dyn Store, sim: &Sim) -> u64 {
    let key = RecorderConfig::new(sim.url(), Some(NS.to_owned())).watch_key();
    store
        .resume_point(&key)
        .await
        .unwrap()
        .map_or(0, |p| p.resource_version)
}

/// A bound pod whose image cannot be pulled, Pending, carrying the finalizer.
async fn pending_on_a_node(sim: &Sim, store: &dyn Store, name: &str) -> Api<Pod> {
    let pods = pods(sim).await;
    let mut stuck = pod(name, "1s", serde_json::json!({}));
    stuck.metadata.annotations.get_or_insert_default().insert(
        "sim.podline.io/image-error".to_owned(),
        "ErrImagePull".to_owned(),
    );
    pods.create(&PostParams::default(), &stuck).await.unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || async {
            carries(&pods, name).await == Some(true)
                && record_of(store, name)
                    .await
                    .is_some_and(|r| r.node.is_some() && r.phase.as_deref() == Some("Pending"))
        })
        .await,
        "the pod was never recorded bound and Pending with the finalizer"
    );
    pods
}

/// A bound pod deleted while Pending (its image cannot be pulled) is deleted at once by its
/// kubelet with grace period 0: nothing will change its state any more, so the recorder
/// releases it as soon as that state is committed, not at the safety valve (its
/// deletionTimestamp + 2 minutes). Catches metadata kept without `deletionGracePeriodSeconds`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_pod_deleted_with_grace_zero_is_released_at_once() {
    let sim = sim().await;
    let db = TestDb::fresh(Backend::Sqlite).await.unwrap();
    let rec = start_recorder(&sim, db.store.clone(), |_| {}).await;
    let pods = pending_on_a_node(&sim, db.store.as_ref(), "no-image").await;
    pods.delete("no-image", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || async {
            pods.get_opt("no-image").await.unwrap().is_none()
        })
        .await,
        "a grace-0 Pending pod waited for the valve"
    );
    // The counter is bumped once the removal's patch has returned, which may be just after
    // the pod is gone.
    assert!(
        wait_until(Duration::from_secs(5), || async {
            removed(&rec.metrics, "stopped") == 1
        })
        .await,
        "released, but not as stopped: terminal {}, overdue {}",
        removed(&rec.metrics, "terminal"),
        removed(&rec.metrics, "overdue")
    );
    assert_eq!(removed(&rec.metrics, "overdue"), 0);
    assert!(
        wait_until(Duration::from_secs(5), || async {
            record_of(db.store.as_ref(), "no-image")
                .await
                .is_some_and(|r| r.deleted_at.is_some())
        })
        .await
    );
    let record = record_of(db.store.as_ref(), "no-image").await.unwrap();
    assert!(record.final_state_observed, "{record:?}");
    assert_eq!(record.phase.as_deref(), Some("Pending"));
    rec.stop().await;
}

/// The same pod deleted while no recorder runs waits in Terminating (grace 0, still Pending).
/// The restarted recorder's start-up sweep records and releases it while its resume is still
/// on its way to a 410 (the watch request is delayed), so the relist that follows lacks the
/// pod. Its final state was committed before the release: it must be deleted with its final
/// state observed, never vanished (the store keeps no grace period to tell it by).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grace_zero_pod_released_by_the_sweep_before_the_relist_is_not_vanished() {
    let sim = sim().await;
    let db = TestDb::fresh(Backend::Sqlite).await.unwrap();
    let rec = start_recorder(&sim, db.store.clone(), |_| {}).await;
    let pods = pending_on_a_node(&sim, db.store.as_ref(), "pulled-never").await;
    rec.stop().await;
    let stopped_at = resume_point(db.store.as_ref(), &sim).await;

    pods.delete("pulled-never", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || async {
            pods.get_opt("pulled-never")
                .await
                .unwrap()
                .is_some_and(|p| {
                    p.metadata.deletion_grace_period_seconds == Some(0)
                        && has_finalizer(&p.metadata, RECORD_FINALIZER)
                })
        })
        .await,
        "the kubelet never deleted the Pending pod with grace 0"
    );
    sim.compact(); // the stored resume point is now too old: 410, relist
    sim.faults().push(
        FaultRule::new(FaultAction::Latency { ms: 2500 })
            .verb(FaultVerb::Watch)
            .resource("pods")
            .times(1),
    );
    let rec = start_recorder(&sim, db.store.clone(), |_| {}).await;
    assert!(
        wait_until(Duration::from_secs(10), || async {
            pods.get_opt("pulled-never").await.unwrap().is_none()
        })
        .await,
        "the sweep never released the pod"
    );
    assert!(
        sample(&rec.metrics, "podline_record_watch_relists_total") == 0,
        "released after the relist started: the test lost its race"
    );
    // The relist's reconcile is committed with, or before, the first resume point past it.
    assert!(
        wait_until(Duration::from_secs(10), || async {
            sample(&rec.metrics, "podline_record_watch_relists_total") >= 1
                && resume_point(db.store.as_ref(), &sim).await > stopped_at
        })
        .await,
        "the resume never relisted"
    );
    let record = record_of(db.store.as_ref(), "pulled-never").await.unwrap();
    assert!(record.final_state_observed, "counted vanished: {record:?}");
    assert!(
        wait_until(Duration::from_secs(5), || async {
            removed(&rec.metrics, "stopped") == 1
        })
        .await
    );
    assert_eq!(db.store.counts().await.unwrap().vanished, 0);
    rec.stop().await;
}

/// The recorder committed a pod's final state but its removal never went through (every patch
/// failed) before it stopped. The restart resumes without a relist and gets no event for that
/// pod any more; the start-up sweep finds it waiting in Terminating and releases it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminating_pod_whose_removal_was_lost_is_released_by_the_next_start() {
    let sim = sim().await;
    let db = TestDb::fresh(Backend::Sqlite).await.unwrap();
    let rec = start_recorder(&sim, db.store.clone(), |_| {}).await;
    let pods = pods(&sim).await;
    pods.create(
        &PostParams::default(),
        &pod("stuck", "200ms", serde_json::json!({})),
    )
    .await
    .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || async {
            pods.get("stuck").await.is_ok_and(|p| {
                phase(&p) == Some("Failed") && has_finalizer(&p.metadata, RECORD_FINALIZER)
            })
        })
        .await
    );
    sim.faults().push(
        FaultRule::new(FaultAction::status(503))
            .verb(FaultVerb::Patch)
            .resource("pods"),
    );
    pods.delete("stuck", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || async {
            sample(
                &rec.metrics,
                "podline_record_finalizer_errors_total{operation=\"remove\",reason=\"server_error\"}",
            ) >= 2
        })
        .await
    );
    rec.stop().await;
    assert!(
        wait_until(Duration::from_secs(5), || async {
            record_of(db.store.as_ref(), "stuck")
                .await
                .is_some_and(|r| r.deletion_requested_at.is_some())
        })
        .await
    );
    assert_eq!(carries(&pods, "stuck").await, Some(true));

    sim.faults().clear();
    let rec = start_recorder(&sim, db.store.clone(), |_| {}).await;
    assert!(
        wait_until(Duration::from_secs(10), || async {
            pods.get_opt("stuck").await.unwrap().is_none()
        })
        .await,
        "the restart never released the pod"
    );
    assert_eq!(
        sample(&rec.metrics, "podline_record_watch_relists_total"),
        0,
        "resumed without a relist"
    );
    assert!(
        wait_until(Duration::from_secs(5), || async {
            record_of(db.store.as_ref(), "stuck")
                .await
                .is_some_and(|r| r.deleted_at.is_some() && r.final_state_observed)
        })
        .await
    );
    rec.stop().await;
}

/// The scope valve: at start, a recorder with a selector removes its finalizer from pods it can
/// see that the selector does not match (nobody of its scope will record them), gives it to the
/// pods it does match, and leaves pods of other namespaces alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_outside_the_selector_lose_the_finalizer_at_start() {
    let sim = start_sim(
        test_config()
            .kubelet_enabled(false)
            .bookmark_interval(Duration::from_millis(300)),
    )
    .await;
    let db = TestDb::fresh(Backend::Sqlite).await.unwrap();
    let client = podline_testkit::client(&sim).await;
    let pods = pods(&sim).await;
    let other_ns: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let with = |name: &str, app: &str| {
        let mut p = pod(name, "1s", serde_json::json!({ "app": app }));
        p.metadata.finalizers = Some(vec![RECORD_FINALIZER.to_owned()]);
        p
    };
    pods.create(&PostParams::default(), &with("mine", "train"))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &with("theirs", "web"))
        .await
        .unwrap();
    pods.create(
        &PostParams::default(),
        &pod("bare", "1s", serde_json::json!({ "app": "train" })),
    )
    .await
    .unwrap();
    other_ns
        .create(&PostParams::default(), &with("elsewhere", "web"))
        .await
        .unwrap();

    let rec = start_recorder(&sim, db.store.clone(), |c| {
        c.selector = Some(LabelSelector::parse("app=train").unwrap());
    })
    .await;
    assert!(
        wait_until(Duration::from_secs(10), || async {
            carries(&pods, "theirs").await == Some(false)
                && carries(&pods, "bare").await == Some(true)
        })
        .await,
        "the sweep did not sort the pods out"
    );
    assert_eq!(carries(&pods, "mine").await, Some(true));
    assert_eq!(carries(&other_ns, "elsewhere").await, Some(true));
    assert_eq!(removed(&rec.metrics, "out_of_scope"), 1);
    rec.stop().await;
}

/// Issue 27: one pod whose `deletionTimestamp` no client decodes (the sim's `malform` fault
/// serves "not-a-time" for it in every LIST) must not stop the start-up sweep: `list_metadata`
/// failed the whole page on it, so no pod of the page was sorted out (the pod out of scope kept
/// the finalizer). Now the bad one is skipped, counted and logged, and the rest are swept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_does_not_decode_should_not_stop_the_start_up_sweep() {
    let sim = start_sim(
        test_config()
            .kubelet_enabled(false)
            .bookmark_interval(Duration::from_millis(300)),
    )
    .await;
    let db = TestDb::fresh(Backend::Sqlite).await.unwrap();
    let pods = pods(&sim).await;
    let with = |name: &str, app: &str| {
        let mut p = pod(name, "1s", serde_json::json!({ "app": app }));
        p.metadata.finalizers = Some(vec![RECORD_FINALIZER.to_owned()]);
        p
    };
    for (name, app) in [("bad-one", "web"), ("theirs", "web")] {
        pods.create(&PostParams::default(), &with(name, app))
            .await
            .unwrap();
    }
    pods.create(
        &PostParams::default(),
        &pod("bare", "1s", serde_json::json!({ "app": "train" })),
    )
    .await
    .unwrap();
    sim.faults().push(
        FaultRule::new(FaultAction::Malform {
            name: "bad-*".into(),
            field: podline_sim::fault::MalformField::DeletionTimestamp,
        })
        .verb(FaultVerb::List)
        .resource("pods"),
    );

    let rec = start_recorder(&sim, db.store.clone(), |c| {
        c.selector = Some(LabelSelector::parse("app=train").unwrap());
    })
    .await;
    assert!(
        wait_until(Duration::from_secs(10), || async {
            carries(&pods, "theirs").await == Some(false)
                && carries(&pods, "bare").await == Some(true)
        })
        .await,
        "one undecodable pod stopped the sweep"
    );
    // Skipped, not sorted: it keeps what it carries (a GET of it decodes; only LISTs garble it).
    assert_eq!(carries(&pods, "bad-one").await, Some(true));
    assert_eq!(removed(&rec.metrics, "out_of_scope"), 1);
    assert!(!rec.task.is_finished(), "the recorder keeps running");
    rec.stop().await;
}

/// The safety valve: a pod deleted on a node that never reports back (no kubelet runs it) keeps
/// its grace period and never reaches a final state; it is released once its deletionTimestamp
/// plus the margin passed, with what was recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_pod_that_never_finishes_is_released_after_the_margin() {
    let sim = sim().await;
    let db = TestDb::fresh(Backend::Sqlite).await.unwrap();
    let rec = start_recorder(&sim, db.store.clone(), |c| {
        if let Some(f) = c.finalize.as_mut() {
            f.margin = Duration::from_secs(3);
        }
    })
    .await;
    let pods = pods(&sim).await;
    let mut lost = pod("lost", "1s", serde_json::json!({}));
    lost.spec.as_mut().unwrap().node_name = Some("a-lost-node".to_owned());
    pods.create(&PostParams::default(), &lost).await.unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || async {
            carries(&pods, "lost").await == Some(true)
        })
        .await
    );
    let params = DeleteParams {
        grace_period_seconds: Some(1),
        ..DeleteParams::default()
    };
    pods.delete("lost", &params).await.unwrap();
    // Not before deletionTimestamp (now + 1 s, cut to the second: at least now) + margin (3 s):
    // nothing to await here but time.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        carries(&pods, "lost").await,
        Some(true),
        "released too early"
    );
    assert!(
        wait_until(Duration::from_secs(10), || async {
            removed(&rec.metrics, "overdue") == 1
        })
        .await,
        "the valve never released the pod"
    );
    assert_eq!(carries(&pods, "lost").await, Some(false));
    let record = record_of(db.store.as_ref(), "lost").await.unwrap();
    assert!(record.deletion_requested_at.is_some());
    rec.stop().await;
}

/// Without `--finalize` the recorder sends no patch at all, and a pod it records gets no
/// finalizer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_finalize_no_patch_is_sent() {
    let sim = sim().await;
    let db = TestDb::fresh(Backend::Sqlite).await.unwrap();
    let rec = start_recorder(&sim, db.store.clone(), |c| c.finalize = None).await;
    let pods = pods(&sim).await;
    for i in 0..5 {
        pods.create(
            &PostParams::default(),
            &pod(&format!("plain-{i}"), "100ms", serde_json::json!({})),
        )
        .await
        .unwrap();
    }
    for i in 0..5 {
        let name = format!("plain-{i}");
        assert!(
            wait_until(Duration::from_secs(10), || async {
                pods.get(&name)
                    .await
                    .is_ok_and(|p| phase(&p) == Some("Failed"))
            })
            .await
        );
        pods.delete(&name, &DeleteParams::default()).await.unwrap();
    }
    assert!(
        wait_until(Duration::from_secs(10), || async {
            db.store.counts().await.unwrap().deleted == 5
        })
        .await
    );
    assert_eq!(sim.counts().get("patch", "pods"), 0);
    assert_eq!(
        sample(&rec.metrics, "podline_record_finalizers_added_total"),
        0
    );
    rec.stop().await;
}

/// The finalizer calls never hold up recording: with every pod patch hanging unanswered, 40
/// pods still reach the store through their whole lifecycle as fast as without the feature.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_finalizer_patches_never_slow_the_watch() {
    let sim = sim().await;
    sim.faults().push(
        FaultRule::new(FaultAction::Stall { after_events: 0 })
            .verb(FaultVerb::Patch)
            .resource("pods"),
    );
    let db = TestDb::fresh(Backend::Sqlite).await.unwrap();
    let rec = start_recorder(&sim, db.store.clone(), |_| {}).await;
    let pods = pods(&sim).await;
    for i in 0..40 {
        pods.create(
            &PostParams::default(),
            &pod(&format!("busy-{i}"), "100ms", serde_json::json!({})),
        )
        .await
        .unwrap();
    }
    let recorded = wait_until(Duration::from_secs(8), || async {
        db.store
            .pods(&PodFilter::default())
            .await
            .is_ok_and(|p| p.len() == 40 && p.iter().all(|r| r.phase.as_deref() == Some("Failed")))
    })
    .await;
    assert!(recorded, "the watch waited on the finalizer patches");
    assert_eq!(
        sample(&rec.metrics, "podline_record_finalizers_added_total"),
        0,
        "no patch was answered"
    );
    sim.faults().clear();
    rec.shutdown.cancel();
    let _ = rec.task.await.unwrap();
}

/// Issue 27's label shards: the recorder of `shard=NAME`, holding its pods with its own
/// finalizer (`FinalizeConfig::for_shard`), as `record --finalize -l shard=NAME --shard NAME`.
fn shard(name: &'static str) -> impl FnOnce(&mut RecorderConfig) {
    move |c| {
        c.selector = Some(LabelSelector::parse(&format!("shard={name}")).unwrap());
        c.finalize = Some(FinalizeConfig {
            backoff: finalize_config().backoff,
            ..FinalizeConfig::for_shard(name).unwrap()
        });
    }
}

/// A pod of shard `name` running for `duration` (exit code 3), with `finalizers` at its create
/// (`podline run --finalizer` gives podline.io/record).
fn shard_pod(name: &str, shard: &str, duration: &str, finalizers: &[&str]) -> Pod {
    let mut p = pod(name, duration, serde_json::json!({ "shard": shard }));
    p.metadata.finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
    p
}

/// The finalizer of shard `name`'s recorder.
fn own(name: &str) -> String {
    FinalizeConfig::for_shard(name).unwrap().finalizer
}

async fn finalizers_of(pods: &Api<Pod>, name: &str) -> Option<Vec<String>> {
    let pod = pods.get_opt(name).await.unwrap()?;
    Some(pod.metadata.finalizers.unwrap_or_default())
}

/// Every pod in `names` is gone from the API, and the store holds its final state (Failed,
/// exit code 3) and its deletion: recorded, not vanished.
async fn recorded_final_and_gone(pods: &Api<Pod>, store: &dyn Store, names: &[String]) -> bool {
    for name in names {
        if pods.get_opt(name).await.unwrap().is_some() {
            return false;
        }
        let Some(record) = record_of(store, name).await else {
            return false;
        };
        if !(record.final_state_observed
            && record.deleted_at.is_some()
            && record.phase.as_deref() == Some("Failed")
            && record.containers.first().and_then(|c| c.exit_code) == Some(3))
        {
            return false;
        }
    }
    true
}

/// Issue 27 (High): two label-sharded `--finalize` recorders. Shard b stops; its pods finish
/// and are deleted while it is down, past the watch history (the sim compacts it), some of them
/// created with `podline run --finalizer`'s podline.io/record only. Shard a restarts meanwhile:
/// its start-up sweep releases only its own finalizer from pods out of its scope (a marker pod
/// whose labels moved to another shard) and never shard b's pods, whatever they carry (with one
/// shared podline.io/record it released them all, and they went unrecorded). Then shard b
/// restarts: every one of its pods is recorded with its final state and deleted, none vanished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_restarting_never_releases_the_pods_of_a_shard_that_is_down() {
    let sim = sim().await;
    let db = TestDb::fresh(Backend::Sqlite).await.unwrap();
    let pods = pods(&sim).await;
    let a = start_recorder(&sim, db.store.clone(), shard("a")).await;
    let b = start_recorder(&sim, db.store.clone(), shard("b")).await;
    let create = |p: Pod| {
        let pods = pods.clone();
        async move { pods.create(&PostParams::default(), &p).await.unwrap() }
    };
    // Shard b's pods run long enough to still run when b stops; two were launched with the
    // launcher's finalizer.
    for (name, finalizers) in [
        ("b0", &[RECORD_FINALIZER][..]),
        ("b1", &[RECORD_FINALIZER][..]),
        ("b2", &[][..]),
        ("b3", &[][..]),
    ] {
        create(shard_pod(name, "b", "1500ms", finalizers)).await;
    }
    create(shard_pod("a0", "a", "300ms", &[])).await;
    assert!(
        wait_until(Duration::from_secs(10), || async {
            let mut held = true;
            for name in ["b0", "b1", "b2", "b3"] {
                held &= finalizers_of(&pods, name)
                    .await
                    .is_some_and(|f| f.contains(&own("b")));
            }
            held && finalizers_of(&pods, "a0")
                .await
                .is_some_and(|f| f.contains(&own("a")))
        })
        .await,
        "the shards never added their finalizers"
    );
    b.stop().await;

    // While b is down: its pods finish and are deleted, two more are launched (with
    // podline.io/record only) and deleted, and a pod that shard a held moves to shard c.
    for name in ["b4", "b5"] {
        create(shard_pod(name, "b", "300ms", &[RECORD_FINALIZER])).await;
    }
    let b_pods: Vec<String> = (0..6).map(|i| format!("b{i}")).collect();
    assert!(
        wait_until(Duration::from_secs(15), || async {
            let mut done = true;
            for name in &b_pods {
                done &= pods
                    .get(name)
                    .await
                    .is_ok_and(|p| phase(&p) == Some("Failed"));
            }
            done
        })
        .await,
        "shard b's pods never finished"
    );
    for name in &b_pods {
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
    create(shard_pod("moved", "c", "300ms", &[&own("a")])).await;
    // A pod of shard a that shard b holds too (b's scope overlapped a's once): a counts it.
    create(shard_pod("shared", "a", "300ms", &[&own("b")])).await;
    sim.compact(); // b's resume point (and a's) is now too old: 410, relist

    a.stop().await;
    let a = start_recorder(&sim, db.store.clone(), shard("a")).await;
    // Shard a's sweep ran: it released its own finalizer from the pod out of its scope.
    assert!(
        wait_until(Duration::from_secs(10), || async {
            finalizers_of(&pods, "moved").await == Some(vec![])
                && sample(&a.metrics, "podline_record_finalizer_sweeps_total") == 1
                && removed(&a.metrics, "out_of_scope") >= 1
        })
        .await,
        "shard a's sweep never released its own finalizer out of its scope"
    );
    assert_eq!(removed(&a.metrics, "out_of_scope"), 1);
    assert_eq!(
        sample(
            &a.metrics,
            "podline_record_finalizer_overlapping_pods_total"
        ),
        1
    );
    assert!(
        finalizers_of(&pods, "shared")
            .await
            .is_some_and(|f| f.contains(&own("b"))),
        "shard a released shard b's finalizer from a pod of its own scope"
    );
    // ... and left every pod of shard b held, with all it carried.
    for name in &b_pods {
        let finalizers = finalizers_of(&pods, name).await;
        let finalizers =
            finalizers.unwrap_or_else(|| panic!("{name} was released while b was down"));
        assert!(
            finalizers
                .iter()
                .any(|f| f == RECORD_FINALIZER || *f == own("b")),
            "{name}: {finalizers:?}"
        );
        if ["b0", "b1", "b4", "b5"].contains(&name.as_str()) {
            assert!(
                finalizers.iter().any(|f| f == RECORD_FINALIZER),
                "{name}: {finalizers:?}"
            );
        }
    }

    let b = start_recorder(&sim, db.store.clone(), shard("b")).await;
    assert!(
        wait_until(Duration::from_secs(20), || async {
            recorded_final_and_gone(&pods, db.store.as_ref(), &b_pods).await
        })
        .await,
        "shard b's pods were not all recorded with their final state: {:?}",
        db.store.pods(&PodFilter::default()).await.unwrap()
    );
    assert_eq!(db.store.counts().await.unwrap().vanished, 0);
    assert!(removed(&b.metrics, "terminal") >= 6);
    a.stop().await;
    b.stop().await;
}

/// Issue 27: a rolling restart of both label shards in which each shard restarts while the
/// other is down (`kubectl rollout restart` of every shard's Deployment at once), while pods of
/// both run, finish and are deleted, each shard down past the watch history: nothing is lost.
/// Every pod goes only once its shard committed its final state, the store equals the sim's
/// ground truth, and no pod vanished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_of_both_shards_loses_no_final_state() {
    let sim = sim().await;
    let db = TestDb::fresh(Backend::Sqlite).await.unwrap();
    let pods = pods(&sim).await;
    let mut running = std::collections::HashMap::new();
    for name in ["a", "b"] {
        running.insert(
            name,
            start_recorder(&sim, db.store.clone(), shard(name)).await,
        );
    }
    let mut names = Vec::new();
    // Deletes every pod that finished (as a launcher does at the end of its task).
    let delete_finished = || async {
        let list = pods.list(&Default::default()).await.unwrap();
        for p in list.items {
            if p.metadata.deletion_timestamp.is_none() && phase(&p) == Some("Failed") {
                let name = p.metadata.name.unwrap();
                pods.delete(&name, &DeleteParams::default()).await.unwrap();
            }
        }
    };
    for (round, (down, restarting)) in [("b", "a"), ("a", "b")].into_iter().enumerate() {
        // Pods of both shards, half with the launcher's finalizer.
        for shard_name in ["a", "b"] {
            for i in 0..3 {
                let name = format!("r{round}-{shard_name}{i}");
                let finalizers: &[&str] = if i % 2 == 0 { &[RECORD_FINALIZER] } else { &[] };
                pods.create(
                    &PostParams::default(),
                    &shard_pod(&name, shard_name, "600ms", finalizers),
                )
                .await
                .unwrap();
                names.push(name);
            }
        }
        // Held by their shards (a pod no recorder saw yet is held by nothing but a launcher's
        // finalizer, and half have none: not what this test is about).
        let prefix = format!("r{round}-");
        assert!(
            wait_until(Duration::from_secs(10), || async {
                let list = pods.list(&Default::default()).await.unwrap();
                list.items
                    .iter()
                    .filter(|p| {
                        p.metadata
                            .name
                            .as_ref()
                            .is_some_and(|n| n.starts_with(&prefix))
                    })
                    .all(|p| {
                        let shard = &p.metadata.labels.as_ref().unwrap()["shard"];
                        has_finalizer(&p.metadata, &own(shard))
                    })
            })
            .await,
            "round {round}: the shards never added their finalizers"
        );
        running.remove(down).unwrap().stop().await;
        // While it is down, every finished pod (both shards) is deleted; the history passes.
        assert!(
            wait_until(Duration::from_secs(15), || async {
                delete_finished().await;
                let list = pods.list(&Default::default()).await.unwrap();
                list.items
                    .iter()
                    .filter(|p| {
                        p.metadata
                            .name
                            .as_ref()
                            .is_some_and(|n| n.starts_with(&prefix))
                    })
                    .all(|p| p.metadata.deletion_timestamp.is_some())
            })
            .await,
            "round {round}: the pods never finished"
        );
        sim.compact();
        // The other shard restarts meanwhile; its sweep is done once it released its own
        // finalizer from a pod that left its scope.
        let marker = format!("r{round}-left-{restarting}");
        pods.create(
            &PostParams::default(),
            &shard_pod(&marker, "c", "300ms", &[&own(restarting)]),
        )
        .await
        .unwrap();
        running.remove(restarting).unwrap().stop().await;
        let restarted = start_recorder(&sim, db.store.clone(), shard(restarting)).await;
        assert!(
            wait_until(Duration::from_secs(10), || async {
                finalizers_of(&pods, &marker).await == Some(vec![])
            })
            .await,
            "round {round}: shard {restarting}'s sweep never ran"
        );
        running.insert(restarting, restarted);
        running.insert(
            down,
            start_recorder(&sim, db.store.clone(), shard(down)).await,
        );
    }
    assert!(
        wait_until(Duration::from_secs(30), || async {
            delete_finished().await;
            recorded_final_and_gone(&pods, db.store.as_ref(), &names).await
        })
        .await,
        "pods left: {:?}; records: {:?}",
        pods.list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|p| (p.metadata.name.clone(), p.metadata.finalizers.clone()))
            .collect::<Vec<_>>(),
        db.store
            .pods(&PodFilter::default())
            .await
            .unwrap()
            .iter()
            .map(|r| (&r.name, &r.phase, r.final_state_observed, r.deleted_at))
            .collect::<Vec<_>>()
    );
    let mut report = podline_testkit::audit::compare(db.store.as_ref(), &sim.ground_truth())
        .await
        .unwrap();
    // The markers (shard c) are no shard's: nobody records them.
    report.missing.retain(|m| !m.contains("-left-"));
    assert!(
        report.is_ok() && report.vanished.is_empty(),
        "{report}; vanished: {:?}",
        report.vanished
    );
    assert_eq!(db.store.counts().await.unwrap().vanished, 0);
    for (_, recorder) in running {
        recorder.stop().await;
    }
}
