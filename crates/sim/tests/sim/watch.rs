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
    let deleted = next(&mut events).await;
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

/// A watcher that stops reading while far more events are written than the live ring holds
/// (4,096 pod events) still receives every event, in order, once it reads again: it catches up
/// from the history instead of being cut off (the history window still holds them all).
#[tokio::test]
async fn a_watcher_that_falls_far_behind_catches_up_from_history_without_a_gap() {
    const COUNT: usize = 6_000;
    let sim = sim_without_kubelet().await;
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
    }
    for i in 0..COUNT {
        let event = next(&mut events).await;
        assert!(
            matches!(event, WatchEvent::Added(_)),
            "event {i}: expected ADDED, got {event:?}"
        );
        assert_eq!(name(&event), format!("lag-{i:05}"));
    }
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
