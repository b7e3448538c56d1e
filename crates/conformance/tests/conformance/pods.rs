//! What kube-apiserver stores and returns for a pod it creates.

use podline_conformance::{Target, pod};
use serde_json::json;

/// Pods carry no `metadata.generation` in 1.32 (it came with in-place resize later).
#[tokio::test]
async fn a_created_pod_has_no_generation() {
    let t = Target::new().await;
    let r = t.create_pod(&pod("gen")).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    assert!(created["metadata"].get("generation").is_none(), "{created}");
    assert!(created["metadata"]["uid"].is_string(), "{created}");
    assert!(
        created["metadata"]["resourceVersion"].is_string(),
        "{created}"
    );
    assert!(
        created["metadata"]["creationTimestamp"].is_string(),
        "{created}"
    );
}

/// The DefaultTolerationSeconds admission plugin adds the not-ready and unreachable NoExecute
/// tolerations for 300 s to a pod that has none.
#[tokio::test]
async fn a_created_pod_gets_the_default_not_ready_and_unreachable_tolerations() {
    let t = Target::new().await;
    let created = t.create_pod(&pod("tol")).await.json();
    let tolerations = created["spec"]["tolerations"]
        .as_array()
        .unwrap_or_else(|| panic!("no tolerations: {created}"));
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let expected = json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300});
        assert!(tolerations.contains(&expected), "{key}: {tolerations:?}");
    }
}

/// `status.qosClass` follows the containers' requests and limits.
#[tokio::test]
async fn the_qos_class_follows_requests_and_limits() {
    let t = Target::new().await;
    let cases = [
        (
            "guaranteed",
            json!({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}),
            "Guaranteed",
        ),
        (
            "burstable",
            json!({"requests": {"cpu": "100m"}}),
            "Burstable",
        ),
        ("besteffort", json!({}), "BestEffort"),
    ];
    for (name, resources, class) in cases {
        let mut p = pod(name);
        p["spec"]["containers"][0]["resources"] = resources;
        let created = t.create_pod(&p).await.json();
        assert_eq!(created["status"]["qosClass"], class, "{name}: {created}");
    }
}

/// Resource quantities come back in canonical form.
#[tokio::test]
async fn resource_quantities_are_stored_in_canonical_form() {
    let t = Target::new().await;
    let mut p = pod("quantities");
    p["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "0.5", "memory": "1024Mi"}, "limits": {"cpu": "1.5", "memory": "1024Mi"}});
    let created = t.create_pod(&p).await.json();
    let resources = &created["spec"]["containers"][0]["resources"];
    assert_eq!(resources["requests"]["cpu"], "500m", "{resources}");
    assert_eq!(resources["requests"]["memory"], "1Gi", "{resources}");
    assert_eq!(resources["limits"]["cpu"], "1500m", "{resources}");
}

/// Items of a LIST carry no `apiVersion` or `kind` of their own (the list has them).
#[tokio::test]
async fn list_items_carry_no_api_version_or_kind() {
    let t = Target::new().await;
    assert!(t.create_pod(&pod("item")).await.status.is_success());
    let list = t.get(&t.core_path("pods")).await.json();
    assert_eq!(list["kind"], "PodList");
    assert_eq!(list["apiVersion"], "v1");
    let item = &list["items"][0];
    assert!(item.get("apiVersion").is_none(), "{item}");
    assert!(item.get("kind").is_none(), "{item}");
}
