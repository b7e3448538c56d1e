//! A store with one known run, the router over it, and a request helper.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http_body_util::BodyExt as _;
use jiff::{SignedDuration, Timestamp};
use podline_store::{
    Batch, ContainerObservation, ContainerState, PhaseTransition, PodObservation, Store, StoreOp,
    StoreRead,
};
use tower::ServiceExt as _;

/// The run every fixture store holds.
pub const RUN: &str = "round-1";

/// Pods in [`RUN`]: 7 succeed, 3 fail (exit 1, OOMKilled, an image that never pulled), like a
/// 10-pod `podline demo` round.
pub const PODS: usize = 10;

/// A SQLite store in a temp dir: written through `writer`, read by the UI read-only, as
/// `podline record` and `podline ui` do.
pub struct Fixture {
    /// Keeps the store's directory alive.
    _dir: tempfile::TempDir,
    /// A read-write handle, for writing more pods while the UI reads.
    pub writer: Arc<dyn Store>,
    /// The read-only handle the UI serves from.
    pub reader: Arc<dyn StoreRead>,
}

impl Fixture {
    /// An empty store.
    pub async fn empty() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("ui.db").to_string_lossy().into_owned();
        let writer = podline_store::open(&db).await.unwrap();
        let reader = podline_store::open_read_only(&db).await.unwrap();
        Fixture {
            _dir: dir,
            writer,
            reader,
        }
    }

    /// A store holding [`RUN`]: [`PODS`] pods, 7 succeeded and 3 failed.
    pub async fn with_run() -> Fixture {
        let fixture = Fixture::empty().await;
        let mut ops = Vec::new();
        for i in 0..7 {
            ops.push(StoreOp::Upsert(finished_pod(&format!("ok-{i}"), 0, None)));
        }
        ops.push(StoreOp::Upsert(finished_pod("exit-1", 1, Some("Error"))));
        ops.push(StoreOp::Upsert(finished_pod("oom", 137, Some("OOMKilled"))));
        let pull = image_pull_pod("pull");
        let deleted = StoreOp::Deleted {
            uid: pull.uid.clone(),
            namespace: pull.namespace.clone(),
            name: pull.name.clone(),
            resource_version: pull.resource_version + 1,
            at: Timestamp::now(),
            final_state_observed: true,
        };
        ops.push(StoreOp::Upsert(pull));
        ops.push(deleted);
        fixture.write(ops).await;
        fixture
    }

    /// Applies `ops` through the read-write handle.
    pub async fn write(&self, ops: Vec<StoreOp>) {
        self.writer.apply(&Batch::new(ops)).await.unwrap();
    }

    /// The router over the read-only handle, polling for changes every 50 ms.
    pub fn app(&self) -> Router {
        podline_ui::router(
            podline_ui::UiConfig::new(Arc::clone(&self.reader)).poll(Duration::from_millis(50)),
        )
    }
}

/// One answer, read whole.
pub struct Answer {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|err| panic!("not JSON ({err}): {}", self.body))
    }
}

/// `method path` with this `Host`, through the router in-process.
pub async fn send(app: &Router, method: &str, path: &str, host: &str) -> Answer {
    let mut request = http::Request::builder().method(method).uri(path);
    if !host.is_empty() {
        request = request.header(http::header::HOST, host);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = tokio::time::timeout(Duration::from_secs(20), response.into_body().collect())
        .await
        .expect("no whole body within 20 s")
        .unwrap()
        .to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// `GET path` with `Host: localhost`.
pub async fn get(app: &Router, path: &str) -> Answer {
    send(app, "GET", path, "localhost").await
}

/// A pod of `run` created `ago` seconds before now, with one container `task`.
fn pod(uid: &str, name: &str, run: &str, ago: i64) -> PodObservation {
    let created = Timestamp::now() - SignedDuration::from_secs(ago);
    PodObservation {
        uid: uid.to_owned(),
        namespace: "default".to_owned(),
        name: name.to_owned(),
        resource_version: 1_000,
        run: Some(run.to_owned()),
        labels: BTreeMap::from([("podline.io/run".to_owned(), run.to_owned())]),
        annotations: BTreeMap::new(),
        owner: None,
        node: Some("sim-node-1".to_owned()),
        phase: "Pending".to_owned(),
        reason: None,
        message: None,
        created_at: Some(created),
        scheduled_at: Some(created),
        started_at: None,
        finished_at: None,
        deletion_requested_at: None,
        containers: vec![ContainerObservation {
            name: "task".to_owned(),
            image: "busybox:1.36".to_owned(),
            ..ContainerObservation::default()
        }],
        transitions: vec![PhaseTransition::new("Pending", created)],
    }
}

/// A pod of [`RUN`] that ran and terminated with `exit_code` (`reason` as the kubelet gives it).
fn finished_pod(uid: &str, exit_code: i32, reason: Option<&str>) -> PodObservation {
    let mut pod = pod(uid, &format!("pod-{uid}"), RUN, 30);
    let started = pod.created_at.unwrap() + SignedDuration::from_secs(5);
    let finished = started + SignedDuration::from_secs(10);
    let phase = if exit_code == 0 {
        "Succeeded"
    } else {
        "Failed"
    };
    pod.phase = phase.to_owned();
    pod.started_at = Some(started);
    pod.finished_at = Some(finished);
    pod.containers[0].image_id = Some("busybox@sha256:1".to_owned());
    pod.containers[0].state = Some(ContainerState::Terminated);
    pod.containers[0].reason = Some(reason.unwrap_or("Completed").to_owned());
    pod.containers[0].exit_code = Some(exit_code);
    pod.containers[0].started_at = Some(started);
    pod.containers[0].finished_at = Some(finished);
    pod.transitions
        .push(PhaseTransition::new("Running", started));
    pod.transitions.push(PhaseTransition::new(phase, finished));
    pod
}

/// A pod of [`RUN`] whose image never pulled (it is deleted afterwards, as the demo does).
fn image_pull_pod(uid: &str) -> PodObservation {
    let mut pod = pod(uid, &format!("pod-{uid}"), RUN, 30);
    pod.containers[0].image = "registry.invalid/nope:1".to_owned();
    pod.containers[0].state = Some(ContainerState::Waiting);
    pod.containers[0].reason = Some("ErrImagePull".to_owned());
    pod.containers[0].message = Some("pull access denied".to_owned());
    pod
}

/// A pod of `run` that just started running.
pub fn running_pod(uid: &str, name: &str, run: &str) -> PodObservation {
    let mut pod = pod(uid, name, run, 3);
    let now = Timestamp::now();
    pod.resource_version = 2_000;
    pod.phase = "Running".to_owned();
    pod.started_at = Some(now);
    pod.containers[0].state = Some(ContainerState::Running);
    pod.containers[0].started_at = Some(now);
    pod.transitions.push(PhaseTransition::new("Running", now));
    pod
}
