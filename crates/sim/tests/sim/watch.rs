//! Watch semantics: resume, initial state, timeout, 410 Expired, bookmarks, selector
//! transitions, all namespaces, and kube-runtime's watcher.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use podline_sim::SimConfig;
use serde_json::json;

use super::common::{config, create_pods, pod, pod_json, sim_without_kubelet};

type Events = futures::stream::BoxStream<'static, kube::Result<WatchEvent<Pod>>>;

async fn next(events: &mut Events) -> WatchEvent<Pod> {
    tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .expect("an event within 5 s")
        .expect("no stream error")
        .expect("the stream is still open")
}

fn name(event: &WatchEvent<Pod>) -> String {
    match event {
        WatchEvent::Added(p) | WatchEvent::Modified(p) | WatchEvent::Deleted(p) => {
            p.metadata.name.clone().unwrap_or_default()
        }
        other => panic!("not an object event: {other:?}"),
    }
}

#[tokio::test]
async fn a_watch_resumes_after_the_given_resource_version() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let first = pods
        .create(&PostParams::default(), &pod("w1"))
        .await
        .expect("create");
    create_pods(&pods, &["w2", "w3"]).await;
    let rv = first.metadata.resource_version.expect("rv");
    let mut events: Events = pods
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    assert!(
        matches!(next(&mut events).await, WatchEvent::Added(ref p) if p.metadata.name.as_deref() == Some("w2"))
    );
    assert!(
        matches!(next(&mut events).await, WatchEvent::Added(ref p) if p.metadata.name.as_deref() == Some("w3"))
    );
    pods.delete("w1", &Default::default())
        .await
        .expect("delete");
    // Like kube-apiserver, deleting an unbound pod first records its deletionTimestamp.
    let mut deleted = next(&mut events).await;
    if let WatchEvent::Modified(p) = &deleted {
        assert!(p.metadata.deletion_timestamp.is_some(), "{p:?}");
        deleted = next(&mut events).await;
    }
    assert!(matches!(deleted, WatchEvent::Deleted(_)), "{deleted:?}");
    assert_eq!(name(&deleted), "w1");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_watch_from_zero_starts_with_the_current_state_then_goes_live() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    create_pods(&pods, &["s1", "s2"]).await;
    let mut events: Events = pods
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    let mut seen = vec![
        name(&next(&mut events).await),
        name(&next(&mut events).await),
    ];
    seen.sort();
    assert_eq!(seen, ["s1", "s2"]);
    create_pods(&pods, &["s3"]).await;
    assert_eq!(name(&next(&mut events).await), "s3");
    sim.shutdown().await;
}

#[tokio::test]
async fn timeout_seconds_ends_the_stream_cleanly() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let started = std::time::Instant::now();
    let mut events: Events = pods
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .expect("watch")
        .boxed();
    let end = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .expect("ends");
    assert!(
        matches!(end, Ok(None)),
        "a clean end, not an error: {end:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(900));
    sim.shutdown().await;
}

#[tokio::test]
async fn a_resume_from_before_a_compaction_gets_an_in_stream_410_expired() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let old = pods
        .create(&PostParams::default(), &pod("c1"))
        .await
        .expect("create");
    create_pods(&pods, &["c2"]).await;
    sim.compact();
    let rv = old.metadata.resource_version.expect("rv");
    let mut events: Events = pods
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("HTTP 200")
        .boxed();
    match next(&mut events).await {
        WatchEvent::Error(status) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
            assert!(
                status
                    .message
                    .starts_with(&format!("too old resource version: {rv} (")),
                "{}",
                status.message
            );
        }
        other => panic!("expected an ERROR event, got {other:?}"),
    }
    let end = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .expect("closes");
    assert!(matches!(end, Ok(None)), "{end:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn history_older_than_the_window_expires() {
    let sim = podline_testkit::start_sim(config().history_window(Duration::from_millis(200))).await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let old = pods
        .create(&PostParams::default(), &pod("h1"))
        .await
        .expect("create");
    create_pods(&pods, &["h2"]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    create_pods(&pods, &["h3"]).await;
    let mut events: Events = pods
        .watch(
            &WatchParams::default(),
            old.metadata.resource_version.as_deref().expect("rv"),
        )
        .await
        .expect("watch")
        .boxed();
    assert!(matches!(next(&mut events).await, WatchEvent::Error(ref s) if s.code == 410));
    sim.shutdown().await;
}

#[tokio::test]
async fn bookmarks_arrive_periodically_once_something_changed() {
    let sim =
        podline_testkit::start_sim(config().bookmark_interval(Duration::from_millis(100))).await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let first = pods
        .create(&PostParams::default(), &pod("b1"))
        .await
        .expect("create");
    let rv = first.metadata.resource_version.expect("rv");
    let mut events: Events = pods
        .watch(&WatchParams::default().timeout(30), &rv)
        .await
        .expect("watch")
        .boxed();
    create_pods(&pods, &["b2"]).await;
    assert_eq!(name(&next(&mut events).await), "b2");
    match next(&mut events).await {
        WatchEvent::Bookmark(b) => {
            let brv: u64 = b.metadata.resource_version.parse().expect("decimal rv");
            assert!(brv > rv.parse::<u64>().expect("rv"));
        }
        other => panic!("expected a BOOKMARK, got {other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn selector_watches_see_deleted_when_a_pod_stops_matching_and_added_when_it_matches_again() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let mut events: Events = pods
        .watch(&WatchParams::default().labels("app=web"), "0")
        .await
        .expect("watch")
        .boxed();
    pods.create(
        &PostParams::default(),
        &pod_json("sel", json!({"app": "web"})),
    )
    .await
    .expect("create");
    pods.create(
        &PostParams::default(),
        &pod_json("other", json!({"app": "db"})),
    )
    .await
    .expect("create");
    assert!(
        matches!(next(&mut events).await, WatchEvent::Added(ref p) if p.metadata.name.as_deref() == Some("sel"))
    );
    let pp = PatchParams::default();
    pods.patch(
        "sel",
        &pp,
        &Patch::Merge(json!({"metadata": {"labels": {"app": "db"}}})),
    )
    .await
    .expect("relabel");
    match next(&mut events).await {
        WatchEvent::Deleted(p) => {
            assert_eq!(p.metadata.name.as_deref(), Some("sel"));
            assert_eq!(
                p.labels().get("app").map(String::as_str),
                Some("web"),
                "DELETED carries the old labels"
            );
        }
        other => panic!("expected DELETED, got {other:?}"),
    }
    pods.patch(
        "sel",
        &pp,
        &Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}})),
    )
    .await
    .expect("relabel");
    assert!(
        matches!(next(&mut events).await, WatchEvent::Added(ref p) if p.metadata.name.as_deref() == Some("sel"))
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn an_all_namespaces_watch_sees_every_namespace() {
    let sim = sim_without_kubelet().await;
    let client = podline_testkit::client(&sim).await;
    let all: Api<Pod> = Api::all(client.clone());
    let mut events: Events = all
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    let in_system: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let in_default: Api<Pod> = Api::default_namespaced(client);
    create_pods(&in_system, &["sys"]).await;
    create_pods(&in_default, &["def"]).await;
    assert_eq!(name(&next(&mut events).await), "sys");
    assert_eq!(name(&next(&mut events).await), "def");
    sim.shutdown().await;
}

#[tokio::test]
async fn kube_runtime_watcher_lists_then_follows() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    create_pods(&pods, &["r1"]).await;
    let mut stream = watcher(pods.clone(), watcher::Config::default()).boxed();
    let mut initial = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(5), stream.try_next())
            .await
            .expect("event")
            .expect("ok")
        {
            Some(watcher::Event::InitApply(p)) => initial.push(p.metadata.name.unwrap_or_default()),
            Some(watcher::Event::InitDone) => break,
            Some(_) => {}
            None => panic!("watcher ended"),
        }
    }
    assert_eq!(initial, ["r1"]);
    create_pods(&pods, &["r2"]).await;
    match tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .expect("event")
        .expect("ok")
    {
        Some(watcher::Event::Apply(p)) => assert_eq!(p.metadata.name.as_deref(), Some("r2")),
        other => panic!("expected Apply, got {other:?}"),
    }
    assert_eq!(
        sim.counts().get("list", "pods"),
        1,
        "one list, then watching"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn the_default_watch_timeout_is_random_between_30_and_60_minutes() {
    // Checked indirectly: a watch without timeoutSeconds stays open past a short wait.
    let sim =
        podline_testkit::start_sim(SimConfig::default().tls(false).kubelet_enabled(false)).await;
    let (_, ending) =
        super::common::tcp_get(&sim, "/api/v1/pods?watch=true", Duration::from_millis(500)).await;
    assert_eq!(ending, super::common::Ending::Silent);
    sim.shutdown().await;
}

/// With slow-watcher closing off (`watch_buffer(0)`), a watcher that stops reading while far more
/// events are written than the live ring holds (4,096 pod events) still receives every event,
/// in order, once it reads again: it catches up from the history instead of being cut off.
#[tokio::test]
async fn a_watcher_that_falls_far_behind_catches_up_from_history_when_closing_is_off() {
    const COUNT: usize = 6_000;
    let sim = podline_testkit::start_sim(config().watch_buffer(0)).await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let mut events: Events = pods
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    // 8 KiB per pod, so the socket buffers fill long before the ring wraps and the server-side
    // watcher really stops taking events from its ring.
    let padding = "x".repeat(8 * 1024);
    for i in 0..COUNT {
        let mut pod = pod(&format!("lag-{i:05}"));
        pod.metadata.namespace = Some("default".to_owned());
        pod.metadata.uid = Some(format!("uid-lag-{i}"));
        pod.metadata
            .annotations
            .get_or_insert_default()
            .insert("padding".to_owned(), padding.clone());
        sim.cluster()
            .write_pod("default", &format!("lag-{i:05}"), |_| {
                Ok::<_, ()>((podline_sim::cluster::Write::Create(pod), ()))
            })
            .expect("write");
        // The writes are synchronous: let the connections' own tasks (HTTP/2 PINGs, flow
        // control) run now and then, as they would on a busy server. The test never reads
        // `events` meanwhile, so the watcher still falls behind.
        if i % 64 == 0 {
            tokio::task::yield_now().await;
        }
    }
    for i in 0..COUNT {
        let event = tokio::time::timeout(Duration::from_secs(5), events.try_next())
            .await
            .unwrap_or_else(|_| panic!("event {i} not within 5 s"))
            .expect("no stream error")
            .expect("the stream is still open");
        assert!(
            matches!(event, WatchEvent::Added(_)),
            "event {i}: expected ADDED, got {event:?}"
        );
        assert_eq!(name(&event), format!("lag-{i:05}"));
    }
    sim.shutdown().await;
}

/// A GET through the router whose body is not read yet (so the watcher takes no event).
async fn open_stream(sim: &podline_sim::Sim, path: &str) -> axum::response::Response {
    let req = http::Request::get(path)
        .header("authorization", format!("Bearer {}", sim.token()))
        .body(axum::body::Body::empty())
        .expect("request");
    tower::ServiceExt::oneshot(sim.router(), req)
        .await
        .expect("infallible")
}

async fn body_lines(response: axum::response::Response) -> Vec<serde_json::Value> {
    use http_body_util::BodyExt as _;
    let bytes = tokio::time::timeout(Duration::from_secs(10), response.into_body().collect())
        .await
        .expect("the body ends within 10 s")
        .expect("body")
        .to_bytes();
    String::from_utf8_lossy(&bytes)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON event per line"))
        .collect()
}

/// A watcher whose consumer falls more than `watch_buffer` events behind is closed, as
/// kube-apiserver's cacher terminates it: the body ends (no ERROR event, not a replay), and a
/// resume from the last resourceVersion the client saw loses nothing.
#[tokio::test]
async fn a_watcher_that_falls_behind_its_buffer_is_closed_and_a_resume_loses_nothing() {
    let sim = podline_testkit::start_sim(config().watch_buffer(8)).await;
    let start = sim.cluster().clock().current();
    let stream = open_stream(
        &sim,
        &format!("/api/v1/namespaces/default/pods?watch=true&resourceVersion={start}"),
    )
    .await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let names: Vec<String> = (0..20).map(|i| format!("slow-{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    create_pods(&pods, &refs).await;
    let events = body_lines(stream).await;
    assert!(
        events.len() < names.len(),
        "a consumer 20 events behind a buffer of 8 is cut off, got {} events",
        events.len()
    );
    assert!(
        events.iter().all(|e| e["type"] == "ADDED"),
        "a forced close sends no ERROR: {events:?}"
    );
    let last = events
        .last()
        .map(|e| {
            e["object"]["metadata"]["resourceVersion"]
                .as_str()
                .expect("rv")
                .to_owned()
        })
        .unwrap_or_else(|| start.to_string());
    let resumed = body_lines(
        open_stream(
            &sim,
            &format!(
                "/api/v1/namespaces/default/pods?watch=true&resourceVersion={last}&timeoutSeconds=1"
            ),
        )
        .await,
    )
    .await;
    let seen: Vec<String> = events
        .iter()
        .chain(&resumed)
        .map(|e| {
            e["object"]["metadata"]["name"]
                .as_str()
                .expect("name")
                .to_owned()
        })
        .collect();
    assert_eq!(
        seen, names,
        "the resume continues exactly where the closed watch stopped"
    );
    sim.shutdown().await;
}

/// A watch without a resourceVersion starts with an ADDED event per existing pod; a consumer
/// that reads none of them while more than `watch_buffer` changes happen is force-closed in the
/// middle of that backlog, as kube-apiserver's cacher closes an unresponsive watcher whatever it
/// is still sending (`pkg/storage/cacher/cacher.go` `dispatchEvent`): the body ends early, with
/// no ERROR event.
#[tokio::test]
async fn a_slow_reader_of_the_initial_events_is_closed_mid_backlog() {
    let sim = podline_testkit::start_sim(config().watch_buffer(8)).await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let names: Vec<String> = (0..20).map(|i| format!("old-{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    create_pods(&pods, &refs).await;
    let stream = open_stream(&sim, "/api/v1/namespaces/default/pods?watch=true").await;
    let newer: Vec<String> = (0..10).map(|i| format!("new-{i:02}")).collect();
    let refs: Vec<&str> = newer.iter().map(String::as_str).collect();
    create_pods(&pods, &refs).await;
    let events = body_lines(stream).await;
    assert!(
        events.len() < names.len(),
        "cut off before the 20 initial events were all sent, got {}",
        events.len()
    );
    assert!(
        events.iter().all(|e| e["type"] == "ADDED"),
        "a forced close sends no ERROR: {events:?}"
    );
    sim.shutdown().await;
}

/// By default (a buffer of 1000 events), a watcher a few events behind is not closed.
#[tokio::test]
async fn a_watcher_a_few_events_behind_is_not_closed_by_default() {
    let sim = sim_without_kubelet().await;
    let start = sim.cluster().clock().current();
    let stream = open_stream(
        &sim,
        &format!(
            "/api/v1/namespaces/default/pods?watch=true&resourceVersion={start}&timeoutSeconds=1"
        ),
    )
    .await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    create_pods(&pods, &["few-1", "few-2", "few-3"]).await;
    assert_eq!(body_lines(stream).await.len(), 3);
    sim.shutdown().await;
}

/// The sim's history starts when it does, like a watch cache that starts from a LIST: a resume
/// from a resourceVersion before that (here 1, the first initial namespace) is 410 Expired.
#[tokio::test]
async fn a_resume_from_before_the_sims_start_is_410_expired() {
    let sim = sim_without_kubelet().await;
    let events =
        body_lines(open_stream(&sim, "/api/v1/namespaces?watch=true&resourceVersion=1").await)
            .await;
    assert_eq!(events.len(), 1, "one ERROR event, then the end: {events:?}");
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 410);
    let message = events[0]["object"]["message"].as_str().expect("message");
    assert!(
        message.starts_with("too old resource version: 1 ("),
        "{message}"
    );
    sim.shutdown().await;
}

/// The initial-events-end bookmark of a `sendInitialEvents` watch is shaped like
/// kube-apiserver 1.32's: an empty Pod (`spec: {containers: null}, status: {}`) with only
/// resourceVersion, a null creationTimestamp and the two annotations, the blueprint being an
/// empty PodList in base64.
#[tokio::test]
async fn the_initial_events_end_bookmark_is_shaped_like_kube_apiservers() {
    use base64::Engine as _;
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    create_pods(&pods, &["bm-1"]).await;
    let events = body_lines(
        open_stream(
            &sim,
            "/api/v1/namespaces/default/pods?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1",
        )
        .await,
    )
    .await;
    let bookmark = events
        .iter()
        .find(|e| e["type"] == "BOOKMARK")
        .expect("a bookmark");
    let object = &bookmark["object"];
    assert_eq!(object["kind"], "Pod");
    assert_eq!(object["spec"], json!({"containers": null}));
    assert_eq!(object["status"], json!({}));
    assert_eq!(object["metadata"]["creationTimestamp"], json!(null));
    assert!(object["metadata"]["resourceVersion"].is_string());
    let annotations = &object["metadata"]["annotations"];
    assert_eq!(annotations["k8s.io/initial-events-end"], "true");
    let blueprint = base64::engine::general_purpose::STANDARD
        .decode(
            annotations["kubernetes.io/initial-events-list-blueprint"]
                .as_str()
                .expect("blueprint"),
        )
        .expect("base64");
    let list: serde_json::Value = serde_json::from_slice(&blueprint).expect("JSON");
    assert_eq!(list["kind"], "PodList");
    assert_eq!(list["apiVersion"], "v1");
    sim.shutdown().await;
}

/// An idle sim drops expired history by itself (a burst's history must not stay in memory until
/// the next write): the oldest resumable resourceVersion moves past the burst with no new write.
#[tokio::test]
async fn an_idle_sim_prunes_expired_history_without_new_writes() {
    let sim = podline_testkit::start_sim(config().history_window(Duration::from_millis(100))).await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    create_pods(&pods, &["idle-1", "idle-2"]).await;
    let last = pods
        .get("idle-2")
        .await
        .expect("get")
        .resource_version()
        .expect("rv")
        .parse::<u64>()
        .expect("numeric rv");
    let table = sim.cluster().pod_table();
    let pruned = podline_testkit::wait_until(Duration::from_secs(10), || async {
        table.compacted_rv() >= last
    })
    .await;
    assert!(
        pruned,
        "the history still holds rv {last} long after its window"
    );
    sim.shutdown().await;
}
