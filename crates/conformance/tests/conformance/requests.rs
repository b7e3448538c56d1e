//! Writes and errors: status codes, reasons and messages of kube-apiserver's answers.

use http::Method;
use podline_conformance::{Target, assert_status, pod};
use serde_json::json;

/// A PUT without `metadata.resourceVersion` is an unconditional update.
#[tokio::test]
async fn a_put_without_resource_version_is_an_unconditional_update() {
    let t = Target::new().await;
    let created = t.create_pod(&pod("put")).await.json();
    let mut update = created.clone();
    update["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("resourceVersion");
    update["metadata"]["labels"]["changed"] = json!("yes");
    let r = t
        .send_json(
            Method::PUT,
            &format!("{}/put", t.core_path("pods")),
            &update,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["metadata"]["labels"]["changed"], "yes");
}

/// PATCH with a content type that is not a patch type is 415 UnsupportedMediaType before any
/// handler runs: go-restful refuses it by the route's `Consumes`, and kube-apiserver's service
/// error handler turns go-restful's text into a Status with empty details (apiserver
/// `pkg/endpoints/installer.go` and `pkg/server/handler.go`; measured on 1.32.13).
#[tokio::test]
async fn a_patch_sent_as_plain_json_is_unsupported_media_type() {
    let t = Target::new().await;
    assert!(t.create_pod(&pod("patch")).await.status.is_success());
    let r = t
        .send_json(
            Method::PATCH,
            &format!("{}/patch", t.core_path("pods")),
            &json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .await;
    let message = assert_status(&r, 415, "UnsupportedMediaType");
    assert_eq!(message, "415: Unsupported Media Type");
    assert_eq!(r.json()["details"], json!({}), "{}", r.text());
}

/// A create whose body is of a type no serializer decodes is 415 listing the serializers the
/// server negotiates (JSON, YAML, protobuf; CBOR is off in 1.32), with no details
/// (apimachinery `pkg/runtime/serializer` negotiation `NewUnsupportedMediaTypeError`;
/// measured on 1.32.13).
#[tokio::test]
async fn a_create_of_an_unknown_media_type_lists_the_accepted_types() {
    let t = Target::new().await;
    let r = t
        .request(
            Method::POST,
            &t.core_path("pods"),
            Some("text/plain"),
            Some("application/json"),
            pod("plain").to_string().into_bytes(),
        )
        .await;
    let message = assert_status(&r, 415, "UnsupportedMediaType");
    assert_eq!(
        message,
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    );
}

/// A Lease with a zero duration is invalid.
#[tokio::test]
async fn a_lease_with_zero_duration_is_invalid() {
    let t = Target::new().await;
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "zero"},
        "spec": {"holderIdentity": "me", "leaseDurationSeconds": 0}
    });
    let path = format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases",
        t.namespace()
    );
    let r = t.send_json(Method::POST, &path, &lease).await;
    let message = assert_status(&r, 422, "Invalid");
    assert!(
        message.contains("spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"),
        "{message}"
    );
}

/// An unknown resource in a known group version is a NotFound Status without `details.kind`.
#[tokio::test]
async fn an_unknown_resource_is_not_found_without_a_kind() {
    let t = Target::new().await;
    let r = t.get(&t.core_path("nonesuches")).await;
    let message = assert_status(&r, 404, "NotFound");
    assert_eq!(message, "the server could not find the requested resource");
    let status = r.json();
    assert!(status["details"].get("kind").is_none(), "{status}");
}

/// A path outside every API group is a plain-text `404 page not found`.
#[tokio::test]
async fn an_unknown_group_is_a_plain_text_404() {
    let t = Target::new().await;
    let r = t.get("/apis/nonesuch.example.com/v1").await;
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(
        r.content_type().starts_with("text/plain"),
        "{:?}",
        r.headers
    );
    assert_eq!(r.text().trim_end(), "404 page not found");
}

/// DELETE on a collection with a label selector deletes the matching pods and answers 200 with
/// them.
#[tokio::test]
async fn deletecollection_with_a_label_selector_deletes_the_matching_pods() {
    let t = Target::new().await;
    for (name, app) in [("a1", "x"), ("a2", "x"), ("b1", "y")] {
        let mut p = pod(name);
        p["metadata"]["labels"]["app"] = json!(app);
        assert!(t.create_pod(&p).await.status.is_success());
    }
    let r = t
        .request(
            Method::DELETE,
            &format!("{}?labelSelector=app%3Dx", t.core_path("pods")),
            None,
            Some("application/json"),
            Vec::new(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let deleted = r.json();
    assert_eq!(deleted["kind"], "PodList", "{deleted}");
    let list = t.get(&t.core_path("pods")).await.json();
    let left: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|p| p["metadata"].get("deletionTimestamp").is_none())
        .filter_map(|p| p["metadata"]["name"].as_str())
        .collect();
    assert_eq!(left, ["b1"], "{list}");
}
