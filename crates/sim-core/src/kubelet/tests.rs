//! The driver against a real `Cluster` (no HTTP): adoption, resync, removal.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::cluster::{HistoryLimits, Write};

fn cluster() -> Cluster {
    Cluster::new(HistoryLimits {
        window: Duration::from_secs(75),
        max_events: 100_000,
    })
}

fn add_pod(cluster: &Cluster, name: &str, annotations: serde_json::Value) {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
    }))
    .unwrap();
    let mut pod = pod;
    pod.metadata.creation_timestamp = Some(Time(Timestamp::now()));
    cluster
        .write_pod("default", name, |_| Ok::<_, ()>((Write::Create(pod), ())))
        .unwrap();
}

fn phase_of(cluster: &Cluster, name: &str) -> Option<String> {
    cluster
        .get_pod("default", name)?
        .status
        .as_ref()?
        .phase
        .clone()
}

async fn wait(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn kubelet_should_adopt_pods_that_existed_before_it_started() {
    let cluster = cluster();
    for i in 0..20 {
        add_pod(&cluster, &format!("early-{i}"), serde_json::json!({}));
    }
    let kubelet = Kubelet::spawn(cluster.clone(), KubeletConfig::default());
    wait("every early pod to succeed", || {
        (0..20).all(|i| phase_of(&cluster, &format!("early-{i}")).as_deref() == Some("Succeeded"))
    })
    .await;
    kubelet.shutdown().await;
}

#[tokio::test]
async fn resync_should_adopt_missed_pods_and_forget_removed_ones() {
    let cluster = cluster();
    let mut driver = Driver::new(cluster.clone(), KubeletConfig::default());
    add_pod(
        &cluster,
        "missed",
        serde_json::json!({"sim.podline.io/unschedulable": "true"}),
    );
    driver.resync();
    assert!(
        driver.pods.contains_key("uid-missed"),
        "a pod seen only by resync is adopted"
    );
    assert!(!driver.timers.is_empty(), "and its schedule timer armed");
    assert!(cluster.remove_pod("default", "missed", "uid-missed"));
    driver.resync();
    assert!(
        driver.pods.is_empty(),
        "a pod gone from the store is forgotten"
    );
}

#[tokio::test]
async fn resync_should_not_readopt_finished_pods() {
    let cluster = cluster();
    add_pod(
        &cluster,
        "done",
        serde_json::json!({"sim.podline.io/duration": "10ms"}),
    );
    let kubelet = Kubelet::spawn(cluster.clone(), KubeletConfig::default());
    wait("the pod to succeed", || {
        phase_of(&cluster, "done").as_deref() == Some("Succeeded")
    })
    .await;
    kubelet.shutdown().await;
    let mut driver = Driver::new(cluster.clone(), KubeletConfig::default());
    driver.resync();
    assert!(driver.pods.is_empty());
}

#[tokio::test]
async fn deleted_pods_the_kubelet_does_not_run_should_be_removed() {
    let cluster = cluster();
    add_pod(&cluster, "orphan", serde_json::json!({}));
    cluster
        .mutate_pod("default", "orphan", "uid-orphan", |p| {
            p.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
            p.status = Some(k8s_openapi::api::core::v1::PodStatus {
                phase: Some("Succeeded".into()),
                ..Default::default()
            });
        })
        .unwrap();
    let kubelet = Kubelet::spawn(cluster.clone(), KubeletConfig::default());
    wait("the deleted pod to be removed", || {
        cluster.get_pod("default", "orphan").is_none()
    })
    .await;
    kubelet.shutdown().await;
}

#[tokio::test]
async fn logs_should_be_dropped_when_the_pod_is_removed() {
    let cluster = cluster();
    add_pod(
        &cluster,
        "talk",
        serde_json::json!({"sim.podline.io/logs": "hi"}),
    );
    let kubelet = Kubelet::spawn(cluster.clone(), KubeletConfig::default());
    wait("the pod to succeed", || {
        phase_of(&cluster, "talk").as_deref() == Some("Succeeded")
    })
    .await;
    assert_eq!(cluster.logs().line_count("uid-talk", "main"), 1);
    assert!(cluster.logs().is_finished("uid-talk", "main"));
    assert!(cluster.remove_pod("default", "talk", "uid-talk"));
    wait("the logs to be dropped", || {
        cluster.logs().line_count("uid-talk", "main") == 0
    })
    .await;
    kubelet.shutdown().await;
}

#[test]
fn pod_ips_should_be_unique_and_valid() {
    let ips: std::collections::HashSet<String> = (0..70_000).map(pod_ip).collect();
    assert_eq!(ips.len(), 70_000);
    assert!(
        ips.iter()
            .all(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok())
    );
}

#[tokio::test(start_paused = true)]
async fn timers_longer_than_the_wheel_allows_should_be_chained_not_panic() {
    let mut driver = Driver::new(cluster(), KubeletConfig::default());
    let uid: Arc<str> = Arc::from("uid-long");
    // 68 years (activeDeadlineSeconds 2147483647) and the largest Duration: the wheel alone
    // panics past about 2.2 years, `Instant + Duration` on the second.
    driver.arm(
        Arc::clone(&uid),
        TimerKind::Deadline,
        Duration::from_secs(2_147_483_647),
    );
    driver.arm(Arc::clone(&uid), TimerKind::KillDone, Duration::MAX);
    let started = tokio::time::Instant::now();
    let mut hops = 0;
    loop {
        let (_, kind, remaining) = driver.timers.next().await.unwrap().into_inner();
        hops += 1;
        if kind == TimerKind::Deadline && remaining.is_zero() {
            break;
        }
        driver.arm(Arc::clone(&uid), kind, remaining);
    }
    let waited = started.elapsed().as_secs();
    assert!(
        (2_147_483_647..2_147_483_647 + 2).contains(&waited),
        "the 68-year timer fired on time (after {waited} s)"
    );
    assert!(hops > 68, "as a chain of yearly hops ({hops})");
}

#[tokio::test]
async fn a_panic_in_one_pods_step_should_fail_that_pod_and_spare_the_others() {
    let cluster = cluster();
    add_pod(
        &cluster,
        "doomed",
        serde_json::json!({"sim.podline.io/duration": "1h"}),
    );
    let mut driver = Driver::new(cluster.clone(), KubeletConfig::default());
    driver.resync();
    assert!(driver.pods.contains_key("uid-doomed"));
    driver.guarded("uid-doomed", |_| panic!("injected"));
    assert!(
        !driver.pods.contains_key("uid-doomed"),
        "the pod is forgotten"
    );
    let pod = cluster.get_pod("default", "doomed").unwrap();
    let status = pod.status.as_ref().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("SimKubeletError"));
    assert!(status.message.as_deref().unwrap().contains("injected"));
    // The driver still runs the next pod to completion.
    add_pod(
        &cluster,
        "next",
        serde_json::json!({"sim.podline.io/duration": "10ms"}),
    );
    driver.resync();
    let (_stop_tx, stop_rx) = oneshot::channel();
    let run = tokio::spawn(driver.run(cluster.subscribe_pods(), stop_rx));
    wait("the next pod to succeed", || {
        phase_of(&cluster, "next").as_deref() == Some("Succeeded")
    })
    .await;
    run.abort();
}

/// Binds `name` as `pods/binding` would: nodeName set on an unbound pod.
fn bind(cluster: &Cluster, name: &str, node: &str) {
    cluster
        .mutate_pod("default", name, &format!("uid-{name}"), |p| {
            let spec = p.spec.get_or_insert_with(Default::default);
            assert!(spec.node_name.is_none(), "already bound");
            spec.node_name = Some(node.to_owned());
        })
        .unwrap();
}

#[tokio::test]
async fn a_pod_bound_to_this_node_before_the_scheduler_runs_it_without_scheduling_it() {
    let cluster = cluster();
    let cfg = KubeletConfig::default().schedule_delay(Duration::from_secs(3600));
    let kubelet = Kubelet::spawn(cluster.clone(), cfg.clone());
    add_pod(&cluster, "bound", serde_json::json!({}));
    bind(&cluster, "bound", &cfg.node_name);
    wait("the bound pod to succeed", || {
        phase_of(&cluster, "bound").as_deref() == Some("Succeeded")
    })
    .await;
    kubelet.shutdown().await;
}

#[tokio::test]
async fn the_scheduler_leaves_a_pod_bound_elsewhere_alone() {
    let cluster = cluster();
    let mut driver = Driver::new(cluster.clone(), KubeletConfig::default());
    add_pod(&cluster, "elsewhere", serde_json::json!({}));
    driver.resync();
    assert!(driver.pods.contains_key("uid-elsewhere"));
    // Bound through the API before the schedule timer fires (the change not yet seen).
    bind(&cluster, "elsewhere", "another-node");
    let uid: Arc<str> = Arc::from("uid-elsewhere");
    driver.step(&uid, Input::Timer(TimerKind::Schedule));
    assert!(!driver.pods.contains_key("uid-elsewhere"), "forgotten");
    let pod = cluster.get_pod("default", "elsewhere").unwrap();
    assert_eq!(
        pod.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("another-node")
    );
    assert!(
        pod.status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_none()
    );
}

/// Without a kubelet, the store removes a gracefully deleted pod when its grace period ends,
/// however long: a grace period past tokio's two-year timer limit waits as a chain of hops
/// instead of panicking the removal task.
#[tokio::test(start_paused = true)]
async fn a_removal_after_years_of_grace_waits_them_out() {
    let cluster = cluster();
    add_pod(&cluster, "patient", serde_json::json!({}));
    let years = |n: u64| Duration::from_secs(n * 365 * 24 * 3600);
    cluster.remove_after(
        "default".to_owned(),
        "patient".to_owned(),
        "uid-patient".to_owned(),
        years(3),
    );
    tokio::time::sleep(years(2)).await;
    assert!(cluster.get_pod("default", "patient").is_some());
    tokio::time::sleep(years(1) + Duration::from_secs(1)).await;
    assert!(cluster.get_pod("default", "patient").is_none());
}
