//! Deletion, finalizers, garbage collection (kube-controller-manager's, which the sim runs too)
//! and namespace deletion.

use std::time::Duration;

use http::Method;
use podline_conformance::{Raw, Target, assert_status, pod};
use podline_testkit::wait_until;
use serde_json::{Value, json};

/// Long enough for a cluster's controllers (garbage collector, namespace controller, kubelet).
const SETTLE: Duration = Duration::from_secs(45);

fn lease(name: &str) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name},
        "spec": {"holderIdentity": "conformance", "leaseDurationSeconds": 15}
    })
}

fn lease_path(t: &Target, name: &str) -> String {
    format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases{}",
        t.namespace(),
        if name.is_empty() {
            String::new()
        } else {
            format!("/{name}")
        }
    )
}

async fn create_lease(t: &Target, body: &Value) -> Value {
    let r = t.send_json(Method::POST, &lease_path(t, ""), body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()
}

async fn merge_patch(t: &Target, path: &str, patch: &Value) -> Raw {
    t.request(
        Method::PATCH,
        path,
        Some("application/merge-patch+json"),
        Some("application/json"),
        patch.to_string().into_bytes(),
    )
    .await
}

async fn delete(t: &Target, path: &str, options: &Value) -> Raw {
    t.send_json(Method::DELETE, path, options).await
}

/// Waits until GET `path` is 404; false if it is still there after [`SETTLE`].
async fn gone(t: &Target, path: &str) -> bool {
    wait_until(SETTLE, || async { t.get(path).await.status == 404 }).await
}

fn owner(lease: &Value, block: bool) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "name": lease["metadata"]["name"],
        "uid": lease["metadata"]["uid"],
        "blockOwnerDeletion": block,
    })
}

/// A delete with gracePeriodSeconds 0 is two writes: MODIFIED with the deletionTimestamp and
/// deletionGracePeriodSeconds 0, then DELETED.
#[tokio::test]
async fn a_grace_zero_pod_delete_is_modified_with_a_deletion_timestamp_then_deleted() {
    let t = Target::new().await;
    let created = t.create_pod(&pod("zero")).await.json();
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();
    let deleted = delete(
        &t,
        &format!("{}/zero", t.core_path("pods")),
        &json!({"gracePeriodSeconds": 0}),
    )
    .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    // A watch from the create's resourceVersion replays what followed it.
    let events = t
        .get(&format!(
            "{}?watch=1&fieldSelector=metadata.name%3Dzero&resourceVersion={rv}&timeoutSeconds=3",
            t.core_path("pods")
        ))
        .await;
    let events: Vec<Value> = events
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).expect("event"))
        .collect();
    let tail: Vec<&Value> = events
        .iter()
        .skip_while(|e| e["object"]["metadata"].get("deletionTimestamp").is_none())
        .collect();
    let kinds: Vec<&str> = tail.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds.last(), Some(&"DELETED"), "{events:?}");
    let first = tail.first().expect("an event with a deletionTimestamp");
    assert_eq!(first["type"], "MODIFIED", "{events:?}");
    assert_eq!(
        first["object"]["metadata"]["deletionGracePeriodSeconds"], 0,
        "{events:?}"
    );
}

/// A resourceVersion precondition that does not match is a Conflict worded by `BeforeDelete`,
/// naming the Kind.
#[tokio::test]
async fn a_stale_resource_version_precondition_is_a_conflict_naming_the_kind() {
    let t = Target::new().await;
    assert_eq!(t.create_pod(&pod("pre")).await.status, 201);
    let r = delete(
        &t,
        &format!("{}/pre", t.core_path("pods")),
        &json!({"preconditions": {"resourceVersion": "1"}}),
    )
    .await;
    let message = assert_status(&r, 409, "Conflict");
    let prefix = "Operation cannot be fulfilled on Pod \"pre\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (";
    assert!(message.starts_with(prefix), "{message}");
    assert!(
        message.ends_with("). The object might have been modified"),
        "{message}"
    );
    assert_eq!(r.json()["details"]["kind"], "Pod");
    assert_eq!(r.json()["details"]["name"], "pre");
}

/// An object with finalizers is not removed by DELETE: it gets a deletionTimestamp and stays
/// until an update empties its finalizers, and then it is gone.
#[tokio::test]
async fn a_lease_with_a_finalizer_stays_until_the_finalizer_is_removed() {
    let t = Target::new().await;
    let mut body = lease("held");
    body["metadata"]["finalizers"] = json!(["example.com/hold"]);
    create_lease(&t, &body).await;
    let path = lease_path(&t, "held");
    let r = delete(&t, &path, &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let answered = r.json();
    assert_eq!(answered["kind"], "Lease", "{answered}");
    assert!(
        answered["metadata"]["deletionTimestamp"].is_string(),
        "{answered}"
    );
    assert_eq!(answered["metadata"]["deletionGracePeriodSeconds"], 0);
    let still = t.get(&path).await;
    assert_eq!(still.status, 200, "{}", still.text());
    let r = merge_patch(&t, &path, &json!({"metadata": {"finalizers": null}})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        gone(&t, &path).await,
        "the lease stays after its last finalizer went"
    );
}

/// A pod with a finalizer stays, Terminating, after its containers stopped, until the finalizer
/// is removed.
#[tokio::test]
async fn a_pod_with_a_finalizer_waits_in_terminating() {
    let t = Target::new().await;
    let mut body = pod("held-pod");
    body["metadata"]["finalizers"] = json!(["example.com/hold"]);
    assert_eq!(t.create_pod(&body).await.status, 201);
    let path = format!("{}/held-pod", t.core_path("pods"));
    let r = delete(&t, &path, &json!({"gracePeriodSeconds": 0})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let still = t.get(&path).await;
    assert_eq!(still.status, 200, "{}", still.text());
    let meta = &still.json()["metadata"];
    assert!(meta["deletionTimestamp"].is_string(), "{meta}");
    assert_eq!(meta["deletionGracePeriodSeconds"], 0, "{meta}");
    let r = merge_patch(&t, &path, &json!({"metadata": {"finalizers": null}})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        gone(&t, &path).await,
        "the pod stays after its last finalizer went"
    );
}

/// No finalizer can be added to an object that is being deleted.
#[tokio::test]
async fn no_new_finalizer_may_be_added_to_an_object_being_deleted() {
    let t = Target::new().await;
    let mut body = lease("late");
    body["metadata"]["finalizers"] = json!(["example.com/a"]);
    create_lease(&t, &body).await;
    let path = lease_path(&t, "late");
    assert_eq!(delete(&t, &path, &json!({})).await.status, 200);
    let r = merge_patch(
        &t,
        &path,
        &json!({"metadata": {"finalizers": ["example.com/a", "example.com/b"]}}),
    )
    .await;
    let message = assert_status(&r, 422, "Invalid");
    assert_eq!(
        message,
        "Lease.coordination.k8s.io \"late\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"example.com/b\"}"
    );
    // Clean up for a cluster.
    merge_patch(&t, &path, &json!({"metadata": {"finalizers": null}})).await;
}

/// The garbage collector deletes a pod whose owner (a Lease) is deleted (background
/// propagation, the default).
#[tokio::test]
async fn pods_owned_by_a_deleted_lease_are_garbage_collected() {
    let t = Target::new().await;
    let owner_lease = create_lease(&t, &lease("launcher")).await;
    let mut body = pod("owned");
    body["metadata"]["ownerReferences"] = json!([owner(&owner_lease, false)]);
    assert_eq!(t.create_pod(&body).await.status, 201);
    let mut free = pod("free");
    free["metadata"]["labels"]["app"] = json!("free");
    assert_eq!(t.create_pod(&free).await.status, 201);
    let r = delete(&t, &lease_path(&t, "launcher"), &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["kind"], "Status", "{}", r.text());
    assert!(
        gone(&t, &format!("{}/owned", t.core_path("pods"))).await,
        "the owned pod outlived its owner"
    );
    assert_eq!(
        t.get(&format!("{}/free", t.core_path("pods"))).await.status,
        200
    );
}

/// A dependent whose owner never existed (no object with that uid) is collected too.
#[tokio::test]
async fn a_dependent_of_an_owner_that_does_not_exist_is_collected() {
    let t = Target::new().await;
    let mut body = lease("stray");
    body["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "name": "nobody",
        "uid": "00000000-0000-4000-8000-00000000dead",
    }]);
    create_lease(&t, &body).await;
    assert!(gone(&t, &lease_path(&t, "stray")).await);
}

/// `propagationPolicy: Orphan` deletes the owner and keeps its dependents, without their
/// reference to it.
#[tokio::test]
async fn orphan_propagation_keeps_the_dependents_and_drops_their_owner_reference() {
    let t = Target::new().await;
    let owner_lease = create_lease(&t, &lease("parent")).await;
    let mut child = lease("child");
    child["metadata"]["ownerReferences"] = json!([owner(&owner_lease, false)]);
    create_lease(&t, &child).await;
    let r = delete(
        &t,
        &lease_path(&t, "parent"),
        &json!({"propagationPolicy": "Orphan"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(gone(&t, &lease_path(&t, "parent")).await);
    let child_path = lease_path(&t, "child");
    let orphaned = wait_until(SETTLE, || async {
        let r = t.get(&child_path).await;
        r.status == 200 && r.json()["metadata"].get("ownerReferences").is_none()
    })
    .await;
    assert!(orphaned, "{}", t.get(&child_path).await.text());
}

/// `propagationPolicy: Foreground`: the owner gets the `foregroundDeletion` finalizer and stays
/// until its blocking dependents are gone.
#[tokio::test]
async fn foreground_deletion_waits_for_the_blocking_dependents() {
    let t = Target::new().await;
    let owner_lease = create_lease(&t, &lease("fg-owner")).await;
    let mut child = lease("fg-child");
    child["metadata"]["ownerReferences"] = json!([owner(&owner_lease, true)]);
    child["metadata"]["finalizers"] = json!(["example.com/hold"]);
    create_lease(&t, &child).await;
    let owner_path = lease_path(&t, "fg-owner");
    let child_path = lease_path(&t, "fg-child");
    let r = delete(&t, &owner_path, &json!({"propagationPolicy": "Foreground"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let answered = r.json();
    assert_eq!(
        answered["metadata"]["finalizers"],
        json!(["foregroundDeletion"]),
        "{answered}"
    );
    let child_deleting = wait_until(SETTLE, || async {
        t.get(&child_path).await.json()["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    assert!(child_deleting, "the dependent was not deleted");
    assert_eq!(
        t.get(&owner_path).await.status,
        200,
        "the owner did not wait"
    );
    merge_patch(&t, &child_path, &json!({"metadata": {"finalizers": null}})).await;
    assert!(gone(&t, &child_path).await);
    assert!(
        gone(&t, &owner_path).await,
        "the owner stayed after its dependents went"
    );
}

/// DELETE of a namespace answers it Terminating with its `kubernetes` finalizer; creates into it
/// are refused; its contents go and then it does.
#[tokio::test]
async fn a_deleted_namespace_terminates_refuses_creates_and_goes() {
    let t = Target::new().await;
    let name = format!("{}-doomed", t.namespace());
    let r = t
        .send_json(
            Method::POST,
            "/api/v1/namespaces",
            &json!({"metadata": {"name": name}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let lease_in = format!("/apis/coordination.k8s.io/v1/namespaces/{name}/leases");
    let mut held = lease("held");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let r = t.send_json(Method::POST, &lease_in, &held).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let ns_path = format!("/api/v1/namespaces/{name}");
    let r = delete(&t, &ns_path, &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let ns = r.json();
    assert_eq!(ns["kind"], "Namespace", "{ns}");
    assert_eq!(ns["status"]["phase"], "Terminating", "{ns}");
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]), "{ns}");
    assert!(ns["metadata"]["deletionTimestamp"].is_string(), "{ns}");
    let r = t
        .send_json(
            Method::POST,
            &format!("/api/v1/namespaces/{name}/pods"),
            &pod("late"),
        )
        .await;
    let message = assert_status(&r, 403, "Forbidden");
    assert_eq!(
        message,
        format!(
            "pods \"late\" is forbidden: unable to create new content in namespace {name} because it is being terminated"
        )
    );
    // The held lease keeps the namespace until its finalizer goes.
    let held_path = format!("{lease_in}/held");
    let deleting = wait_until(SETTLE, || async {
        t.get(&held_path).await.json()["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    assert!(deleting, "the namespace's lease was not deleted");
    assert_eq!(t.get(&ns_path).await.status, 200);
    merge_patch(&t, &held_path, &json!({"metadata": {"finalizers": null}})).await;
    assert!(gone(&t, &ns_path).await, "the namespace stayed");
}

/// Discovery lists the namespaces/finalize subresource.
#[tokio::test]
async fn discovery_lists_the_namespace_finalize_subresource() {
    let t = Target::new().await;
    let doc = t.get("/api/v1").await.json();
    let finalize = doc["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "namespaces/finalize")
        .unwrap_or_else(|| panic!("no namespaces/finalize: {doc}"));
    assert_eq!(finalize["verbs"], json!(["update"]), "{finalize}");
}

/// A running pod deleted gracefully: MODIFIED with the deletionTimestamp and the grace period,
/// the kubelet's status with its containers terminated, then the kubelet's own grace-0 delete,
/// which is two writes like any grace-0 delete: MODIFIED with `deletionGracePeriodSeconds: 0`
/// (the containers terminated), then DELETED.
#[tokio::test]
async fn a_running_pods_graceful_delete_ends_with_a_grace_zero_modified_then_deleted() {
    let t = Target::new().await;
    let mut body = pod("graceful");
    body["metadata"]["annotations"] = json!({"sim.podline.io/duration": "1h"});
    body["spec"]["containers"][0]["command"] = json!(["sleep", "3600"]);
    let path = format!("{}/graceful", t.core_path("pods"));
    assert_eq!(t.create_pod(&body).await.status, 201);
    let running = wait_until(SETTLE, || async {
        t.get(&path).await.json()["status"]["phase"] == "Running"
    })
    .await;
    assert!(running, "{}", t.get(&path).await.text());
    let rv = t.get(&path).await.json()["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();
    let r = delete(&t, &path, &json!({"gracePeriodSeconds": 2})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(gone(&t, &path).await, "the deleted pod stayed");
    let events = t
        .events_since(&t.core_path("pods"), "graceful", &rv, 1)
        .await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(kinds.len() >= 3, "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"DELETED"), "{events:?}");
    assert!(
        kinds[..kinds.len() - 1].iter().all(|k| *k == "MODIFIED"),
        "{kinds:?}"
    );
    let first = &events[0]["object"]["metadata"];
    assert!(first["deletionTimestamp"].is_string(), "{first}");
    assert_eq!(first["deletionGracePeriodSeconds"], 2, "{first}");
    let last_write = &events[events.len() - 2]["object"];
    assert_eq!(
        last_write["metadata"]["deletionGracePeriodSeconds"], 0,
        "{events:?}"
    );
    assert!(
        last_write["status"]["containerStatuses"][0]["state"]["terminated"].is_object(),
        "{last_write}"
    );
}
