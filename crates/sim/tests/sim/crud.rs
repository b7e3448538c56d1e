//! Pod CRUD through kube-rs's `Api<Pod>`: create, generateName, get, list with selectors and
//! pages, update conflicts, every patch type, the status subresource, delete with grace.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::common::{create_pods, pod, pod_json, sim_without_kubelet};

#[tokio::test]
async fn kube_rs_creates_gets_lists_and_deletes_a_pod() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::namespaced(podline_testkit::client(&sim).await, "default");
    let created = pods
        .create(&PostParams::default(), &pod("p1"))
        .await
        .expect("create");
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
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
    let list_rv: u64 = list
        .metadata
        .resource_version
        .expect("list rv")
        .parse()
        .expect("decimal");
    let pod_rv: u64 = got
        .metadata
        .resource_version
        .expect("rv")
        .parse()
        .expect("decimal");
    assert!(list_rv >= pod_rv);
    // Not scheduled: removed at once, and the answer is the object.
    let deleted = pods
        .delete("p1", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(deleted.left().is_some(), "delete answers the pod");
    assert!(pods.get_opt("p1").await.expect("get_opt").is_none());
    sim.shutdown().await;
}

#[tokio::test]
async fn generate_name_appends_five_characters() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let mut p = pod("");
    p.metadata.name = None;
    p.metadata.generate_name = Some("job-".to_owned());
    let a = pods
        .create(&PostParams::default(), &p)
        .await
        .expect("create a");
    let b = pods
        .create(&PostParams::default(), &p)
        .await
        .expect("create b");
    let (a, b) = (
        a.metadata.name.expect("name"),
        b.metadata.name.expect("name"),
    );
    assert!(a.starts_with("job-") && a.len() == 9, "{a}");
    assert_ne!(a, b);
    sim.shutdown().await;
}

#[tokio::test]
async fn resource_versions_increase_strictly_across_kinds() {
    let sim = sim_without_kubelet().await;
    let client = podline_testkit::client(&sim).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::default_namespaced(client);
    let mut last = 0u64;
    for i in 0..5 {
        let p = pods
            .create(&PostParams::default(), &pod(&format!("p{i}")))
            .await
            .expect("pod");
        let rv: u64 = p
            .metadata
            .resource_version
            .expect("rv")
            .parse()
            .expect("u64");
        assert!(rv > last);
        last = rv;
        let mut lease = k8s_openapi::api::coordination::v1::Lease::default();
        lease.metadata.name = Some(format!("l{i}"));
        let l = leases
            .create(&PostParams::default(), &lease)
            .await
            .expect("lease");
        let rv: u64 = l
            .metadata
            .resource_version
            .expect("rv")
            .parse()
            .expect("u64");
        assert!(rv > last);
        last = rv;
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    for (name, labels) in [
        ("a", json!({"app": "web", "tier": "front"})),
        ("b", json!({"app": "web"})),
        ("c", json!({"app": "db"})),
    ] {
        pods.create(&PostParams::default(), &pod_json(name, labels))
            .await
            .expect("create");
    }
    let names = |list: kube::core::ObjectList<Pod>| -> Vec<String> {
        list.items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect()
    };
    let cases = [
        ("app=web", vec!["a", "b"]),
        ("app==web,tier=front", vec!["a"]),
        ("app!=web", vec!["c"]),
        ("app in (db,cache)", vec!["c"]),
        ("app notin (web)", vec!["c"]),
        ("tier", vec!["a"]),
        ("!tier", vec!["b", "c"]),
    ];
    for (selector, want) in cases {
        let got = names(
            pods.list(&ListParams::default().labels(selector))
                .await
                .expect(selector),
        );
        assert_eq!(got, want, "selector {selector}");
    }
    let got = names(
        pods.list(&ListParams::default().fields("metadata.name=b"))
            .await
            .expect("fields"),
    );
    assert_eq!(got, vec!["b"]);
    let got = names(
        pods.list(&ListParams::default().fields("status.phase!=Pending"))
            .await
            .expect("phase"),
    );
    assert!(got.is_empty());
    let got = names(
        pods.list(&ListParams::default().fields("spec.nodeName="))
            .await
            .expect("node"),
    );
    assert_eq!(got.len(), 3, "unscheduled pods have an empty nodeName");
    let err = pods
        .list(&ListParams::default().fields("spec.bogus=1"))
        .await
        .expect_err("bad field");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 400),
        "{err:?}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn lists_page_with_limit_and_continue_and_count_what_remains() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let names: Vec<String> = (0..7).map(|i| format!("p{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    create_pods(&pods, &refs).await;
    let first = pods
        .list(&ListParams::default().limit(3))
        .await
        .expect("page 1");
    assert_eq!(first.items.len(), 3);
    assert_eq!(first.metadata.remaining_item_count, Some(4));
    let token = first.metadata.continue_.clone().expect("continue token");
    let second = pods
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .expect("page 2");
    assert_eq!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );
    let third = pods
        .list(
            &ListParams::default()
                .limit(3)
                .continue_token(second.metadata.continue_.as_deref().expect("token")),
        )
        .await
        .expect("page 3");
    assert_eq!(third.items.len(), 1);
    assert!(
        third
            .metadata
            .continue_
            .as_deref()
            .unwrap_or_default()
            .is_empty()
    );
    let all: Vec<String> = [first, second, third]
        .into_iter()
        .flat_map(|l| l.items)
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(all, names);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_stale_update_is_a_conflict_and_a_fresh_one_succeeds() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let created = pods
        .create(&PostParams::default(), &pod("u"))
        .await
        .expect("create");
    let mut fresh = created.clone();
    fresh
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("v".into(), "1".into());
    let updated = pods
        .replace("u", &PostParams::default(), &fresh)
        .await
        .expect("update");
    assert_ne!(
        updated.metadata.resource_version,
        created.metadata.resource_version
    );
    let mut stale = created;
    stale
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("v".into(), "2".into());
    let err = pods
        .replace("u", &PostParams::default(), &stale)
        .await
        .expect_err("stale");
    let kube::Error::Api(status) = err else {
        panic!("expected a Status")
    };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(status.message.contains("the object has been modified; please apply your changes to the latest version and try again"), "{}", status.message);
    sim.shutdown().await;
}

#[tokio::test]
async fn every_patch_type_applies_and_main_resource_patches_ignore_status() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    pods.create(&PostParams::default(), &pod("pt"))
        .await
        .expect("create");
    let pp = PatchParams::default();
    let merged = pods
        .patch(
            "pt",
            &pp,
            &Patch::Merge(
                json!({"metadata": {"labels": {"m": "1"}}, "status": {"phase": "Running"}}),
            ),
        )
        .await
        .expect("merge");
    assert_eq!(merged.labels().get("m").map(String::as_str), Some("1"));
    assert_eq!(
        merged.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending"),
        "main resource ignores status"
    );
    let strategic = pods
        .patch(
            "pt",
            &pp,
            &Patch::Strategic(json!({"metadata": {"annotations": {"s": "1"}}})),
        )
        .await
        .expect("strategic");
    assert_eq!(
        strategic.annotations().get("s").map(String::as_str),
        Some("1")
    );
    let jp = Patch::<()>::Json(
        serde_json::from_value(json!([{"op": "add", "path": "/metadata/labels/j", "value": "1"}]))
            .expect("json patch"),
    );
    let patched = pods.patch("pt", &pp, &jp).await.expect("json");
    assert_eq!(patched.labels().get("j").map(String::as_str), Some("1"));
    assert_eq!(patched.labels().get("m").map(String::as_str), Some("1"));
    // A merge patch carrying a stale resourceVersion is a precondition: 409.
    let err = pods
        .patch(
            "pt",
            &pp,
            &Patch::Merge(json!({"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}})),
        )
        .await
        .expect_err("stale rv");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn the_status_subresource_changes_only_status_and_merges_conditions_by_type() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    pods.create(&PostParams::default(), &pod("st"))
        .await
        .expect("create");
    let pp = PatchParams::default();
    pods.patch_status(
        "st",
        &pp,
        &Patch::Strategic(json!({"status": {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}
        ]}})),
    )
    .await
    .expect("status 1");
    let after = pods
        .patch_status(
            "st",
            &pp,
            &Patch::Strategic(json!({
                "metadata": {"labels": {"ignored-by-spec": "no"}},
                "spec": {"activeDeadlineSeconds": 5},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}
            })),
        )
        .await
        .expect("status 2");
    let status = after.status.expect("status");
    assert_eq!(status.phase.as_deref(), Some("Running"));
    let conditions = status.conditions.expect("conditions");
    assert_eq!(conditions.len(), 2, "merged by type, not replaced");
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
    assert_eq!(
        after.spec.and_then(|s| s.active_deadline_seconds),
        None,
        "status writes keep the spec"
    );
    let got = pods.get_status("st").await.expect("get status");
    assert_eq!(got.status.and_then(|s| s.phase).as_deref(), Some("Running"));
    sim.shutdown().await;
}

#[tokio::test]
async fn deleting_a_scheduled_pod_sets_a_deletion_timestamp_then_removes_it_after_grace() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let mut p = pod("g");
    p.spec.as_mut().expect("spec").node_name = Some("sim-node-1".into());
    pods.create(&PostParams::default(), &p)
        .await
        .expect("create");
    let answer = pods
        .delete(
            "g",
            &DeleteParams {
                grace_period_seconds: Some(1),
                ..DeleteParams::default()
            },
        )
        .await
        .expect("delete");
    let terminating = answer.left().expect("the object");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(1));
    assert!(
        pods.get_opt("g").await.expect("get").is_some(),
        "still there during grace"
    );
    let gone = podline_testkit::wait_until(Duration::from_secs(5), || async {
        pods.get_opt("g").await.expect("get").is_none()
    })
    .await;
    assert!(gone, "removed after the grace period");
    let truth = sim.ground_truth();
    assert!(
        truth
            .iter()
            .any(|h| h.name == "g" && h.deleted_at.is_some())
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn delete_preconditions_on_uid_are_checked() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    pods.create(&PostParams::default(), &pod("pre"))
        .await
        .expect("create");
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("other".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let err = pods.delete("pre", &dp).await.expect_err("precondition");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.message.contains("the UID in the precondition (other) does not match the UID in record")),
        "{err:?}"
    );
    sim.shutdown().await;
}
