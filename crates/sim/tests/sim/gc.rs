//! Finalizers, the garbage collector and namespace deletion, with the kubelet running: what
//! podline's crash-proof guarantees rest on (a launcher's pods owned by its Lease, a recorder's
//! finalizer holding a deleted pod until its final state is recorded).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use podline_testkit::wait_until;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

fn lease(name: &str) -> Lease {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"holderIdentity": "launcher", "leaseDurationSeconds": 15}
    }))
    .expect("lease")
}

/// A pod that runs for `seconds` in the sim's kubelet, owned by `owner` (if given).
fn task(name: &str, seconds: u32, owner: Option<&Lease>, finalizer: bool) -> Pod {
    let mut pod = json!({
        "metadata": {
            "name": name,
            "labels": {"app": "gc"},
            "annotations": {"sim.podline.io/duration": format!("{seconds}s")},
        },
        "spec": {"containers": [{"name": "main", "image": "busybox"}], "restartPolicy": "Never"}
    });
    if let Some(owner) = owner {
        pod["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "name": owner.metadata.name,
            "uid": owner.metadata.uid,
            "blockOwnerDeletion": true,
        }]);
    }
    if finalizer {
        pod["metadata"]["finalizers"] = json!(["podline.io/record"]);
    }
    serde_json::from_value(pod).expect("pod")
}

fn no_finalizers() -> Patch<serde_json::Value> {
    Patch::Merge(json!({"metadata": {"finalizers": null}}))
}

/// A running pod with a finalizer, deleted: the kubelet stops it, and it stays (grace period 0,
/// its final state intact) until the finalizer is removed; then it is gone.
#[tokio::test]
async fn a_deleted_pod_with_a_finalizer_waits_for_it_after_the_kubelet_stopped_it() {
    let sim = podline_testkit::start_sim(podline_testkit::test_config()).await;
    let pods: Api<Pod> = Api::namespaced(podline_testkit::client(&sim).await, "default");
    pods.create(&PostParams::default(), &task("held", 600, None, true))
        .await
        .expect("create");
    let running = wait_until(WAIT, || async {
        pods.get("held")
            .await
            .ok()
            .and_then(|p| p.status?.phase)
            .as_deref()
            == Some("Running")
    })
    .await;
    assert!(running, "the pod never ran");
    pods.delete("held", &DeleteParams::default().grace_period(1))
        .await
        .expect("delete");
    let stopped = wait_until(WAIT, || async {
        pods.get("held")
            .await
            .is_ok_and(|p| p.metadata.deletion_grace_period_seconds == Some(0))
    })
    .await;
    assert!(stopped, "the kubelet did not finish with the pod");
    let held = pods.get("held").await.expect("still stored");
    let phase = held.status.and_then(|s| s.phase).unwrap_or_default();
    assert!(
        phase == "Failed" || phase == "Succeeded",
        "the final state is kept: {phase}"
    );
    pods.patch("held", &PatchParams::default(), &no_finalizers())
        .await
        .expect("remove the finalizer");
    let gone = wait_until(WAIT, || async {
        pods.get_opt("held").await.is_ok_and(|p| p.is_none())
    })
    .await;
    assert!(gone, "the pod stayed after its finalizer went");
    sim.shutdown().await;
}

/// Issue 17's launcher case: 50 running pods owned by a launcher's Lease are all deleted by the
/// garbage collector when the Lease is deleted; a pod of another launcher stays.
#[tokio::test]
async fn every_pod_owned_by_a_deleted_lease_is_collected() {
    let sim = podline_testkit::start_sim(podline_testkit::test_config()).await;
    let client = podline_testkit::client(&sim).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let leases: Api<Lease> = Api::namespaced(client, "default");
    let mine = leases
        .create(&PostParams::default(), &lease("launcher-a"))
        .await
        .expect("lease a");
    let other = leases
        .create(&PostParams::default(), &lease("launcher-b"))
        .await
        .expect("lease b");
    for i in 0..50 {
        pods.create(
            &PostParams::default(),
            &task(&format!("a-{i}"), 600, Some(&mine), false),
        )
        .await
        .expect("create");
    }
    pods.create(
        &PostParams::default(),
        &task("b-0", 600, Some(&other), false),
    )
    .await
    .expect("create");
    leases
        .delete("launcher-a", &DeleteParams::default())
        .await
        .expect("delete lease");
    let collected = wait_until(WAIT, || async {
        let left = pods.list(&Default::default()).await.expect("list").items;
        left.len() == 1 && left[0].metadata.name.as_deref() == Some("b-0")
    })
    .await;
    let left: Vec<String> = pods
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert!(collected, "left: {left:?}");
    assert!(leases.get_opt("launcher-b").await.expect("get").is_some());
    sim.shutdown().await;
}

/// The node's heartbeat Lease is owned by its Node, as a kubelet's is: deleting the Node
/// collects the Lease.
#[tokio::test]
async fn deleting_the_node_collects_its_heartbeat_lease() {
    let sim = podline_testkit::start_sim(podline_testkit::test_config()).await;
    let client = podline_testkit::client(&sim).await;
    let node = podline_sim::KubeletConfig::default().node_name;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease = leases.get(&node).await.expect("the node's lease");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some(node.as_str())
    );
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client);
    nodes
        .delete(&node, &DeleteParams::default())
        .await
        .expect("delete the node");
    let collected = wait_until(WAIT, || async {
        leases.get_opt(&node).await.expect("get").is_none()
    })
    .await;
    assert!(collected, "the lease outlived its Node");
    sim.shutdown().await;
}

/// Foreground deletion: the Lease waits (finalizer `foregroundDeletion`) until its pod, held by
/// a finalizer of its own, is gone; Orphan keeps the pods and removes their reference.
#[tokio::test]
async fn foreground_waits_for_blocking_pods_and_orphan_keeps_them() {
    let sim = podline_testkit::start_sim(podline_testkit::test_config()).await;
    let client = podline_testkit::client(&sim).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let leases: Api<Lease> = Api::namespaced(client, "default");
    let fg = leases
        .create(&PostParams::default(), &lease("fg"))
        .await
        .expect("lease");
    pods.create(
        &PostParams::default(),
        &task("fg-pod", 600, Some(&fg), true),
    )
    .await
    .expect("create");
    leases
        .delete("fg", &DeleteParams::foreground())
        .await
        .expect("delete");
    let deleting = wait_until(WAIT, || async {
        pods.get("fg-pod")
            .await
            .is_ok_and(|p| p.metadata.deletion_grace_period_seconds == Some(0))
    })
    .await;
    assert!(deleting, "the dependent was not deleted and stopped");
    let waiting = leases.get("fg").await.expect("owner waits");
    assert_eq!(
        waiting.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_owned()])
    );
    pods.patch("fg-pod", &PatchParams::default(), &no_finalizers())
        .await
        .expect("patch");
    let owner_gone = wait_until(WAIT, || async {
        leases.get_opt("fg").await.is_ok_and(|l| l.is_none())
    })
    .await;
    assert!(owner_gone, "the owner stayed after its dependent went");

    let orphaning = leases
        .create(&PostParams::default(), &lease("or"))
        .await
        .expect("lease");
    pods.create(
        &PostParams::default(),
        &task("or-pod", 600, Some(&orphaning), false),
    )
    .await
    .expect("create");
    let opts = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..DeleteParams::default()
    };
    leases.delete("or", &opts).await.expect("delete");
    let orphaned = wait_until(WAIT, || async {
        leases.get_opt("or").await.is_ok_and(|l| l.is_none())
    })
    .await;
    assert!(orphaned, "the orphaning owner stayed");
    let pod = pods.get("or-pod").await.expect("the dependent stays");
    assert!(pod.metadata.owner_references.is_none(), "{pod:?}");
    assert!(pod.metadata.deletion_timestamp.is_none());
    sim.shutdown().await;
}

/// A namespace deleted with running pods is Terminating until they are stopped and gone, then
/// removed; a create into it meanwhile is 403.
#[tokio::test]
async fn a_namespace_with_running_pods_terminates_then_goes() {
    let sim = podline_testkit::start_sim(podline_testkit::test_config()).await;
    let client = podline_testkit::client(&sim).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team"}})).expect("ns");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("create ns");
    let pods: Api<Pod> = Api::namespaced(client, "team");
    // p0's finalizer holds the namespace in Terminating until the test removes it.
    for i in 0..5 {
        pods.create(
            &PostParams::default(),
            &task(&format!("p{i}"), 600, None, i == 0),
        )
        .await
        .expect("create");
    }
    let deleted = namespaces
        .delete("team", &DeleteParams::default())
        .await
        .expect("delete");
    let terminating = deleted.left().expect("the namespace, not a Status");
    assert_eq!(
        terminating.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    let refused = pods
        .create(&PostParams::default(), &task("late", 1, None, false))
        .await
        .expect_err("create into a terminating namespace");
    match refused {
        kube::Error::Api(status) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("{other}"),
    }
    let stopped = wait_until(WAIT, || async {
        let left = pods.list(&Default::default()).await.expect("list").items;
        left.len() == 1 && left[0].metadata.deletion_grace_period_seconds == Some(0)
    })
    .await;
    assert!(stopped, "the namespace's pods were not deleted");
    assert!(namespaces.get_opt("team").await.expect("get").is_some());
    pods.patch("p0", &PatchParams::default(), &no_finalizers())
        .await
        .expect("patch");
    let gone = wait_until(WAIT, || async {
        namespaces.get_opt("team").await.is_ok_and(|n| n.is_none())
    })
    .await;
    assert!(gone, "the namespace stayed");
    assert!(sim.cluster().get_pod("team", "p0").is_none());
    sim.shutdown().await;
}

/// `PUT namespaces/{name}/finalize` with no finalizers ends a Terminating namespace at once, even
/// while content holds it (the operator's way out of a namespace stuck in Terminating).
#[tokio::test]
async fn finalizing_a_terminating_namespace_with_no_finalizers_removes_it() {
    use http::Method;
    let sim = super::common::sim_without_kubelet().await;
    let client = podline_testkit::client(&sim).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "stuck"}})).expect("ns");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("create ns");
    let pods: Api<Pod> = Api::namespaced(client, "stuck");
    pods.create(&PostParams::default(), &task("holder", 600, None, true))
        .await
        .expect("create");
    namespaces
        .delete("stuck", &DeleteParams::default())
        .await
        .expect("delete");
    let held = wait_until(WAIT, || async {
        pods.get("holder")
            .await
            .is_ok_and(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;
    assert!(held, "the namespace controller did not delete the pod");
    assert!(namespaces.get_opt("stuck").await.expect("get").is_some());
    let r = super::common::raw(
        &sim,
        Method::PUT,
        "/api/v1/namespaces/stuck/finalize",
        Some("application/json"),
        r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"stuck"},"spec":{"finalizers":[]}}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert!(namespaces.get_opt("stuck").await.expect("get").is_none());
    sim.shutdown().await;
}
