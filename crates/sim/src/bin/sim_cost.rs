//! Focused workloads of the sim for instruction counting (issue 32): pod creates, a LIST of every
//! pod and the watch fan-out, each through the whole in-process router (auth, classification,
//! faults layer, handler, store) but without sockets, on one thread, so that
//! `valgrind --tool=callgrind` counts the same instructions whatever else the machine runs.
//!
//! ```sh
//! cargo build --release -p podline-sim --features cost-bench --bin podline-sim-cost
//! valgrind --tool=callgrind --callgrind-out-file=cg.out target/release/podline-sim-cost
//! callgrind_annotate --inclusive=yes cg.out | grep phase_
//! ```
//!
//! Each phase is a function of its own (`phase_create`, `phase_list`, `phase_status`,
//! `phase_watch_create`, `phase_watch_deliver`): its inclusive count is the phase's cost. The run
//! ends with the heap the pods take, while the watch history holds them and once they are idle. Sizes: `podline-sim-cost CREATES
//! WATCHERS EVENTS` (default 2000 100 500).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt as _;
use podline_sim::{Sim, SimConfig};
use tokio::runtime::Runtime;
use tower::ServiceExt as _;

/// The system allocator, counting the bytes allocated and not yet freed: the heap figure of the
/// idle phase, exact and repeatable (unlike a resident set size).
struct Counting;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is added.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(new_size, Ordering::Relaxed);
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's arguments.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A scripted pod as the benchmark's clients send it (`crates/podline/benches/podline`'s
/// `scripted_pod`, serialized by k8s-openapi).
fn pod_body(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"annotations":{{"sim.podline.io/duration":"1s"}},"labels":{{"app":"bench"}},"name":"{name}"}},"spec":{{"containers":[{{"command":["true"],"image":"busybox:1.36","name":"main"}}],"restartPolicy":"Never"}}}}"#
    )
}

fn request(token: &str, method: Method, path: &str, body: String) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("a valid request")
}

async fn create_pods(router: &Router, token: &str, namespace: &str, prefix: &str, count: usize) {
    let path = format!("/api/v1/namespaces/{namespace}/pods");
    for i in 0..count {
        let req = request(
            token,
            Method::POST,
            &path,
            pod_body(&format!("{prefix}-{i}")),
        );
        let response = router.clone().oneshot(req).await.expect("infallible");
        assert_eq!(response.status(), StatusCode::CREATED);
        let _ = response.into_body().collect().await.expect("body");
    }
}

#[inline(never)]
fn phase_create(rt: &Runtime, router: &Router, token: &str, count: usize) {
    rt.block_on(create_pods(router, token, "default", "create", count));
}

/// Status writes as the kubelet makes them (a Running pod's four conditions, unset probe
/// times): the store's encoding of a pod with conditions.
#[inline(never)]
fn phase_status(sim: &Sim, count: usize) {
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let cluster = sim.cluster();
    for i in 0..count {
        let name = format!("create-{i}");
        let uid = cluster
            .get_pod("default", &name)
            .and_then(|p| p.metadata.uid.clone())
            .expect("created");
        let now = Time(jiff::Timestamp::now());
        cluster.mutate_pod("default", &name, &uid, |pod| {
            let conditions = [
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            ]
            .into_iter()
            .map(|type_| PodCondition {
                type_: type_.into(),
                status: "True".into(),
                last_transition_time: Some(now.clone()),
                ..PodCondition::default()
            })
            .collect();
            pod.status = Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(conditions),
                ..pod.status.clone().unwrap_or_default()
            });
        });
    }
}

#[inline(never)]
fn phase_list(rt: &Runtime, router: &Router, token: &str, times: usize) -> usize {
    rt.block_on(async {
        let mut bytes = 0;
        for _ in 0..times {
            let req = request(
                token,
                Method::GET,
                "/api/v1/namespaces/default/pods",
                String::new(),
            );
            let response = router.clone().oneshot(req).await.expect("infallible");
            assert_eq!(response.status(), StatusCode::OK);
            bytes += response
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes()
                .len();
        }
        bytes
    })
}

#[inline(never)]
fn phase_watch_create(rt: &Runtime, router: &Router, token: &str, events: usize) {
    rt.block_on(create_pods(router, token, "bench-watch", "watch", events));
}

#[inline(never)]
fn phase_watch_deliver(rt: &Runtime, bodies: Vec<Body>, events: usize) -> usize {
    rt.block_on(async {
        let mut delivered = 0;
        for mut body in bodies {
            let mut lines = 0;
            while lines < events {
                let frame = body.frame().await.expect("a frame").expect("a watch frame");
                if let Ok(data) = frame.into_data() {
                    lines += data.iter().filter(|b| **b == b'\n').count();
                }
            }
            delivered += lines;
        }
        delivered
    })
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("sizes are numbers"))
        .collect();
    let creates = args.first().copied().unwrap_or(2000);
    let watchers = args.get(1).copied().unwrap_or(100);
    let events = args.get(2).copied().unwrap_or(500);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let sim = rt
        .block_on(Sim::start(
            SimConfig::default().tls(false).kubelet_enabled(false),
        ))
        .expect("the sim starts");
    let router = sim.router();
    let token = sim.token().to_owned();

    phase_create(&rt, &router, &token, creates);
    let listed = phase_list(&rt, &router, &token, 5);
    phase_status(&sim, creates);

    let bodies: Vec<Body> = rt.block_on(async {
        let req = request(
            &token,
            Method::POST,
            "/api/v1/namespaces",
            r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bench-watch"}}"#.into(),
        );
        let response = router.clone().oneshot(req).await.expect("infallible");
        assert_eq!(response.status(), StatusCode::CREATED);
        let mut bodies = Vec::new();
        for _ in 0..watchers {
            let req = request(
                &token,
                Method::GET,
                "/api/v1/namespaces/bench-watch/pods?watch=1&timeoutSeconds=600",
                String::new(),
            );
            let response = router.clone().oneshot(req).await.expect("infallible");
            assert_eq!(response.status(), StatusCode::OK);
            bodies.push(response.into_body());
        }
        bodies
    });
    phase_watch_create(&rt, &router, &token, events);
    let delivered = phase_watch_deliver(&rt, bodies, events);
    println!(
        "created {creates}, listed {listed} bytes in 5 LISTs, delivered {delivered} events to {watchers} watchers"
    );
    // Memory: the heap the pods take while the history holds them, and once it let go of them
    // (a compaction, then the history pruner's pass) and they are idle.
    let held = LIVE_BYTES.load(Ordering::Relaxed);
    sim.compact();
    sim.cluster().prune_history();
    let idle = LIVE_BYTES.load(Ordering::Relaxed);
    println!(
        "heap: {:.1} MiB with the history, {:.1} MiB once {} pods are idle",
        held as f64 / 1048576.0,
        idle as f64 / 1048576.0,
        creates + events
    );
    rt.block_on(sim.shutdown());
}
