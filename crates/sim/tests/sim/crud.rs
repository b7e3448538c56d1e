//! Pod CRUD through kube-rs's `Api<Pod>`.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};

use super::common::{pod, sim_without_kubelet};

#[tokio::test]
async fn kube_rs_creates_gets_lists_and_deletes_a_pod() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::namespaced(podline_testkit::client(&sim).await, "default");
    let created = pods
        .create(&PostParams::default(), &pod("p1"))
        .await
        .expect("create");
    assert!(created.metadata.uid.is_some());
    assert_eq!(
        created.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
    let got = pods.get("p1").await.expect("get");
    assert_eq!(
        got.metadata.resource_version,
        created.metadata.resource_version
    );
    let list = pods.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 1);
    // Not scheduled: deleted at once.
    pods.delete("p1", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(pods.get_opt("p1").await.expect("get_opt").is_none());
    sim.shutdown().await;
}
