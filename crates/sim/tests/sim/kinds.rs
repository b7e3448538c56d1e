//! Namespaces, events, leases and workflowtaskresults.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::Api;
use kube::api::{
    ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;

use super::common::{pod, sim_without_kubelet};

#[tokio::test]
async fn namespaces_exist_and_can_be_created_listed_and_deleted() {
    let sim = sim_without_kubelet().await;
    let client = podline_testkit::client(&sim).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    for expected in ["default", "kube-system", "kube-public"] {
        assert!(names.iter().any(|n| n == expected), "{names:?}");
    }
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "team-a"}})).expect("ns");
    let created = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("create");
    assert_eq!(
        created.status.and_then(|s| s.phase).as_deref(),
        Some("Active")
    );
    let pods: Api<Pod> = Api::namespaced(client, "team-a");
    pods.create(&PostParams::default(), &pod("in-a"))
        .await
        .expect("pod in new namespace");
    namespaces
        .delete("team-a", &Default::default())
        .await
        .expect("delete");
    // Terminating first; the namespace controller then removes its contents and it.
    let gone = podline_testkit::wait_until(std::time::Duration::from_secs(10), || async {
        namespaces
            .get_opt("team-a")
            .await
            .is_ok_and(|n| n.is_none())
    })
    .await;
    assert!(gone, "the namespace stayed");
    assert!(
        sim.cluster().get_pod("team-a", "in-a").is_none(),
        "its pods went with it"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn leases_support_crud_watch_and_optimistic_concurrency() {
    let sim = sim_without_kubelet().await;
    let leases: Api<Lease> = Api::namespaced(podline_testkit::client(&sim).await, "kube-system");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}
    }))
    .expect("lease");
    let created = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("create");
    let mut watch = leases
        .watch(
            &WatchParams::default(),
            created.metadata.resource_version.as_deref().expect("rv"),
        )
        .await
        .expect("watch")
        .boxed();
    let mut mine = created.clone();
    mine.spec.as_mut().expect("spec").holder_identity = Some("b".into());
    leases
        .replace("leader", &PostParams::default(), &mine)
        .await
        .expect("take over");
    let mut theirs = created;
    theirs.spec.as_mut().expect("spec").holder_identity = Some("c".into());
    let err = leases
        .replace("leader", &PostParams::default(), &theirs)
        .await
        .expect_err("stale");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );
    match watch.try_next().await.expect("event") {
        Some(WatchEvent::Modified(l)) => {
            assert_eq!(l.spec.and_then(|s| s.holder_identity).as_deref(), Some("b"))
        }
        other => panic!("expected MODIFIED, got {other:?}"),
    }
    leases
        .delete("leader", &Default::default())
        .await
        .expect("delete");
    sim.shutdown().await;
}

#[tokio::test]
async fn pod_events_are_recorded_aggregated_and_listable_and_clients_can_create_events() {
    let sim = sim_without_kubelet().await;
    let client = podline_testkit::client(&sim).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let p = pods
        .create(&PostParams::default(), &pod("ev"))
        .await
        .expect("pod");
    sim.cluster().record_event(
        &p,
        "Warning",
        "BackOff",
        "Back-off pulling image",
        "kubelet",
    );
    sim.cluster().record_event(
        &p,
        "Warning",
        "BackOff",
        "Back-off pulling image",
        "kubelet",
    );
    sim.cluster().record_event(
        &p,
        "Normal",
        "Scheduled",
        "Successfully assigned default/ev to sim-node-1",
        "default-scheduler",
    );
    let events: Api<Event> = Api::default_namespaced(client);
    let list = events
        .list(&ListParams::default().fields("involvedObject.name=ev,reason=BackOff"))
        .await
        .expect("list");
    assert_eq!(list.items.len(), 1, "repeats aggregate into one Event");
    let backoff = &list.items[0];
    assert_eq!(backoff.count, Some(2));
    assert_eq!(backoff.type_.as_deref(), Some("Warning"));
    assert_eq!(backoff.involved_object.uid, p.metadata.uid);
    let mine: Event = serde_json::from_value(json!({
        "metadata": {"name": "custom.1"},
        "involvedObject": {"kind": "Pod", "name": "ev", "namespace": "default"},
        "reason": "Custom", "message": "hello", "type": "Normal"
    }))
    .expect("event");
    events
        .create(&PostParams::default(), &mine)
        .await
        .expect("create event");
    assert_eq!(
        events
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        3
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn workflowtaskresults_are_a_generic_namespaced_store() {
    let sim = sim_without_kubelet().await;
    let gvk = GroupVersionKind::gvk("argoproj.io", "v1alpha1", "WorkflowTaskResult");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "workflowtaskresults");
    let api: Api<DynamicObject> =
        Api::namespaced_with(podline_testkit::client(&sim).await, "default", &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "WorkflowTaskResult",
        "metadata": {"name": "wf-1", "labels": {"workflows.argoproj.io/workflow": "wf"}},
        "outputs": {"parameters": [{"name": "p", "value": "42"}]}
    }))
    .expect("obj");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create");
    let got = api.get("wf-1").await.expect("get");
    assert_eq!(got.data["outputs"]["parameters"][0]["value"], "42");
    let list = api
        .list(&ListParams::default().labels("workflows.argoproj.io/workflow=wf"))
        .await
        .expect("list");
    assert_eq!(list.items.len(), 1);
    api.delete("wf-1", &Default::default())
        .await
        .expect("delete");
    assert!(api.get_opt("wf-1").await.expect("get").is_none());
    sim.shutdown().await;
}
