//! Error answers have the real server's Status shape: code, reason, message, details.

use http::{Method, StatusCode};
use serde_json::json;

use super::common::{raw, raw_with, sim_without_kubelet};

const PODS: &str = "/api/v1/namespaces/default/pods";

#[tokio::test]
async fn an_invalid_pod_is_422_with_causes_per_field() {
    let sim = sim_without_kubelet().await;
    let body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
        "spec": {"containers": [{"name": "main"}, {"name": "main", "image": "i"}], "restartPolicy": "Sometimes"}});
    let r = raw(
        &sim,
        Method::POST,
        PODS,
        Some("application/json"),
        &body.to_string(),
    )
    .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    let s = r.json();
    assert_eq!(s["kind"], "Status");
    assert_eq!(s["reason"], "Invalid");
    assert_eq!(s["code"], 422);
    assert_eq!(s["details"]["name"], "x");
    assert_eq!(s["details"]["kind"], "Pod");
    let causes = s["details"]["causes"].as_array().expect("causes");
    let fields: Vec<&str> = causes.iter().filter_map(|c| c["field"].as_str()).collect();
    assert!(fields.contains(&"spec.containers[0].image"), "{fields:?}");
    assert!(fields.contains(&"spec.containers[1].name"), "{fields:?}");
    assert!(fields.contains(&"spec.restartPolicy"), "{fields:?}");
    let message = s["message"].as_str().expect("message");
    assert!(message.starts_with("Pod \"x\" is invalid: ["), "{message}");
    assert!(
        message.contains("spec.containers[0].image: Required value"),
        "{message}"
    );

    // One cause: no brackets, exactly the real message shape.
    let body = json!({"metadata": {"name": "y"}, "spec": {"containers": [{"name": "c"}]}});
    let r = raw(
        &sim,
        Method::POST,
        PODS,
        Some("application/json"),
        &body.to_string(),
    )
    .await;
    assert_eq!(
        r.json()["message"],
        "Pod \"y\" is invalid: spec.containers[0].image: Required value"
    );

    let body = json!({"metadata": {"name": "Bad_Name"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let r = raw(
        &sim,
        Method::POST,
        PODS,
        Some("application/json"),
        &body.to_string(),
    )
    .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.json()["details"]["causes"][0]["field"], "metadata.name");
    let body = json!({"metadata": {"name": "z", "labels": {"k": "bad value!"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let r = raw(
        &sim,
        Method::POST,
        PODS,
        Some("application/json"),
        &body.to_string(),
    )
    .await;
    assert_eq!(r.json()["details"]["causes"][0]["field"], "metadata.labels");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_taken_name_is_409_already_exists_and_a_missing_namespace_is_404() {
    let sim = sim_without_kubelet().await;
    let body =
        json!({"metadata": {"name": "dup"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
            .to_string();
    assert_eq!(
        raw(&sim, Method::POST, PODS, Some("application/json"), &body)
            .await
            .status,
        StatusCode::CREATED
    );
    let r = raw(&sim, Method::POST, PODS, Some("application/json"), &body).await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    let s = r.json();
    assert_eq!(s["reason"], "AlreadyExists");
    assert_eq!(s["message"], "pods \"dup\" already exists");
    assert_eq!(s["details"], json!({"name": "dup", "kind": "pods"}));
    let r = raw(
        &sim,
        Method::POST,
        "/api/v1/namespaces/nope/pods",
        Some("application/json"),
        &body,
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.json()["message"], "namespaces \"nope\" not found");
    let r = raw(&sim, Method::GET, &format!("{PODS}/ghost"), None, "").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.json()["message"], "pods \"ghost\" not found");
    assert_eq!(r.json()["reason"], "NotFound");
    let r = raw(
        &sim,
        Method::GET,
        "/api/v1/namespaces/default/widgets",
        None,
        "",
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.json()["kind"], "Status");
    sim.shutdown().await;
}

#[tokio::test]
async fn malformed_json_is_400_a_wrong_content_type_415_a_wrong_verb_405() {
    let sim = sim_without_kubelet().await;
    let r = raw(
        &sim,
        Method::POST,
        PODS,
        Some("application/json"),
        "{\"metadata\": ",
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["reason"], "BadRequest");
    let r = raw(&sim, Method::POST, PODS, Some("text/plain"), "{}").await;
    assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(r.json()["reason"], "UnsupportedMediaType");
    let r = raw(
        &sim,
        Method::PATCH,
        &format!("{PODS}/x"),
        Some("application/apply-patch+yaml"),
        "{}",
    )
    .await;
    // Server-side apply is served: without a fieldManager it is invalid, not an unknown type.
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.json()["reason"], "Invalid");
    let r = raw(
        &sim,
        Method::POST,
        &format!("{PODS}/x/log"),
        Some("application/json"),
        "{}",
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = raw(&sim, Method::PUT, PODS, Some("application/json"), "{}").await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.json()["reason"], "MethodNotAllowed");
    sim.shutdown().await;
}

#[tokio::test]
async fn requests_without_the_right_bearer_token_are_401_except_health_and_version() {
    let sim = sim_without_kubelet().await;
    let r = raw_with(&sim, Method::GET, PODS, None, "", None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.json()["reason"], "Unauthorized");
    let r = raw_with(&sim, Method::GET, PODS, None, "", Some("wrong")).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = raw_with(&sim, Method::GET, "/healthz", None, "", None).await;
    assert_eq!(r.status, StatusCode::OK, "health checks need no token");
    // kube-apiserver's system:public-info-viewer lets anyone read /version; discovery is not.
    let r = raw_with(&sim, Method::GET, "/version", None, "", None).await;
    assert_eq!(r.status, StatusCode::OK, "/version needs no token");
    assert_eq!(r.json()["minor"], "32");
    let r = raw_with(&sim, Method::GET, "/version/", None, "", None).await;
    assert_eq!(
        r.status,
        StatusCode::OK,
        "/version/ too (the Python client asks for it)"
    );
    let r = raw_with(&sim, Method::GET, "/api", None, "", None).await;
    assert_eq!(
        r.status,
        StatusCode::UNAUTHORIZED,
        "discovery needs a token"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn discovery_lists_pods_events_namespaces_leases_and_workflowtaskresults() {
    let sim = sim_without_kubelet().await;
    let v1 = raw(&sim, Method::GET, "/api/v1", None, "").await.json();
    let pods = v1["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "pods")
        .expect("pods")
        .clone();
    assert_eq!(pods["shortNames"], json!(["po"]));
    assert!(
        pods["verbs"]
            .as_array()
            .expect("verbs")
            .contains(&json!("watch"))
    );
    let groups = raw(&sim, Method::GET, "/apis", None, "").await.json();
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert!(
        names.contains(&"coordination.k8s.io") && names.contains(&"argoproj.io"),
        "{names:?}"
    );
    let wtr = raw(&sim, Method::GET, "/apis/argoproj.io/v1alpha1", None, "")
        .await
        .json();
    assert_eq!(wtr["resources"][0]["name"], "workflowtaskresults");
    let version = raw(&sim, Method::GET, "/version", None, "").await.json();
    assert_eq!(version["major"], "1");
    sim.shutdown().await;
}
