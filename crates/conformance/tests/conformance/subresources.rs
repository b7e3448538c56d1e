//! The pod subresources that make no object of their own: `pods/binding` (a scheduler assigns a
//! pod to a node) and `pods/eviction` (`kubectl drain`'s API-initiated eviction).

use std::time::Duration;

use http::Method;
use podline_conformance::{Difference, Raw, Target, assert_status, pod};
use podline_testkit::wait_until;
use serde_json::{Value, json};

/// Long enough for a cluster's kubelet to start (or stop) a pod.
const SETTLE: Duration = Duration::from_secs(45);

/// The exact body kube-apiserver answers a binding or an eviction with, ending with the `\n`
/// its JSON serializer's `json.Encoder` writes after every object (apimachinery
/// `pkg/runtime/serializer/json/json.go`; measured on 1.32.13).
const CREATED_SUCCESS: &str = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\",\"code\":201}\n";

/// A pod no scheduler of the target places (it names a scheduler that does not exist), so it
/// waits for a binding.
fn unscheduled(name: &str) -> Value {
    let mut body = pod(name);
    body["spec"]["schedulerName"] = json!("podline-conformance-scheduler");
    body
}

/// A pod that runs until it is stopped (scripted on the sim, `sleep` on a cluster).
fn long_running(name: &str) -> Value {
    let mut body = pod(name);
    body["metadata"]["annotations"] = json!({"sim.podline.io/duration": "1h"});
    body["spec"]["containers"][0]["command"] = json!(["sleep", "3600"]);
    body["spec"]["terminationGracePeriodSeconds"] = json!(1);
    body
}

fn binding(name: &str, node: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}
    })
}

fn eviction(api_version: &str, name: &str, delete_options: Option<Value>) -> Value {
    let mut body = json!({
        "apiVersion": api_version,
        "kind": "Eviction",
        "metadata": {"name": name},
    });
    if let Some(options) = delete_options {
        body["deleteOptions"] = options;
    }
    body
}

async fn bind(t: &Target, name: &str, body: &Value) -> Raw {
    t.send_json(
        Method::POST,
        &format!("{}/{name}/binding", t.core_path("pods")),
        body,
    )
    .await
}

async fn evict(t: &Target, name: &str, body: &Value) -> Raw {
    t.send_json(
        Method::POST,
        &format!("{}/{name}/eviction", t.core_path("pods")),
        body,
    )
    .await
}

async fn get_pod(t: &Target, name: &str) -> Raw {
    t.get(&format!("{}/{name}", t.core_path("pods"))).await
}

fn condition<'a>(pod: &'a Value, type_: &str) -> Option<&'a Value> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// A binding sets `spec.nodeName` and `PodScheduled: True` and answers 201 with a Success Status;
/// binding the pod again is a Conflict on `pods/binding` naming the node it has.
#[tokio::test]
async fn a_binding_assigns_the_node_once_and_answers_a_success_status() {
    let t = Target::new().await;
    assert_eq!(t.create_pod(&unscheduled("bound")).await.status, 201);
    let node = t.node_name().await;
    let r = bind(&t, "bound", &binding("bound", &node)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.text(), CREATED_SUCCESS);
    let bound = get_pod(&t, "bound").await.json();
    assert_eq!(bound["spec"]["nodeName"], node.as_str(), "{bound}");
    let scheduled = condition(&bound, "PodScheduled").unwrap_or_else(|| panic!("{bound}"));
    assert_eq!(scheduled["status"], "True", "{scheduled}");
    assert!(scheduled["lastTransitionTime"].is_string(), "{scheduled}");
    let again = bind(&t, "bound", &binding("bound", "another-node")).await;
    let message = assert_status(&again, 409, "Conflict");
    assert_eq!(
        message,
        format!(
            "Operation cannot be fulfilled on pods/binding \"bound\": pod bound is already assigned to node \"{node}\""
        )
    );
    assert_eq!(
        again.json()["details"],
        json!({"name": "bound", "kind": "pods/binding"})
    );
}

/// The kubelet of the node a pod is bound to runs it, whoever bound it.
#[tokio::test]
async fn a_pod_bound_through_the_binding_subresource_runs() {
    let t = Target::new().await;
    assert_eq!(t.create_pod(&unscheduled("runs")).await.status, 201);
    let node = t.node_name().await;
    let r = bind(&t, "runs", &binding("runs", &node)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let done = wait_until(SETTLE, || async {
        get_pod(&t, "runs").await.json()["status"]["phase"] == "Succeeded"
    })
    .await;
    assert!(done, "{}", get_pod(&t, "runs").await.text());
    if !t.tolerates(Difference::KubeletTimings) {
        // No scheduler of the sim's placed it: the only Scheduled event would be the binder's.
        let events = t
            .get(&format!(
                "{}?fieldSelector=involvedObject.name%3Druns",
                t.core_path("events")
            ))
            .await
            .json();
        let reasons: Vec<&str> = events["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|e| e["reason"].as_str())
            .collect();
        assert!(!reasons.contains(&"Scheduled"), "{reasons:?}");
        assert!(reasons.contains(&"Started"), "{reasons:?}");
    }
}

/// Binding a pod that does not exist is NotFound; a Binding without a target name fails
/// validation, which the registry answers as a 500 with no reason.
#[tokio::test]
async fn a_binding_of_a_missing_pod_is_not_found_and_one_without_a_target_fails() {
    let t = Target::new().await;
    let r = bind(&t, "nope", &binding("nope", "n1")).await;
    assert_eq!(
        assert_status(&r, 404, "NotFound"),
        "pods \"nope\" not found"
    );
    assert_eq!(t.create_pod(&unscheduled("untargeted")).await.status, 201);
    let r = bind(
        &t,
        "untargeted",
        &json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "untargeted"}, "target": {}}),
    )
    .await;
    assert_eq!(r.status, 500, "{}", r.text());
    let status = r.json();
    assert_eq!(status["message"], "target.name: Required value", "{status}");
    assert!(status.get("reason").is_none(), "{status}");
    let r = bind(&t, "untargeted", &binding("other-name", "n1")).await;
    assert_eq!(
        assert_status(&r, 400, "BadRequest"),
        "name in URL does not match name in Binding object"
    );
}

/// An eviction of an unscheduled pod answers 201 with a Success Status and deletes it: the watch
/// shows the `DisruptionTarget` condition written first, then the grace-0 delete's two writes.
#[tokio::test]
async fn an_eviction_marks_the_pod_as_a_disruption_target_and_deletes_it() {
    let t = Target::new().await;
    let created = t.create_pod(&unscheduled("evicted")).await.json();
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();
    let r = evict(&t, "evicted", &eviction("policy/v1", "evicted", None)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.text(), CREATED_SUCCESS);
    assert_eq!(get_pod(&t, "evicted").await.status, 404);
    let events = t
        .events_since(&t.core_path("pods"), "evicted", &rv, 2)
        .await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds, ["MODIFIED", "MODIFIED", "DELETED"], "{events:?}");
    let marked = &events[0]["object"];
    let target = condition(marked, "DisruptionTarget").unwrap_or_else(|| panic!("{marked}"));
    assert_eq!(target["status"], "True");
    assert_eq!(target["reason"], "EvictionByEvictionAPI");
    assert_eq!(target["message"], "Eviction API: evicting");
    assert!(marked["metadata"].get("deletionTimestamp").is_none());
    assert_eq!(
        events[1]["object"]["metadata"]["deletionGracePeriodSeconds"], 0,
        "{events:?}"
    );
}

/// Evicting a running pod deletes it gracefully with the Eviction's `deleteOptions`.
#[tokio::test]
async fn an_eviction_of_a_running_pod_deletes_it_with_its_delete_options() {
    let t = Target::new().await;
    assert_eq!(t.create_pod(&long_running("drained")).await.status, 201);
    let running = wait_until(SETTLE, || async {
        get_pod(&t, "drained").await.json()["status"]["phase"] == "Running"
    })
    .await;
    assert!(running, "{}", get_pod(&t, "drained").await.text());
    let options = json!({"gracePeriodSeconds": 20});
    let r = evict(
        &t,
        "drained",
        &eviction("policy/v1", "drained", Some(options)),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let pod = get_pod(&t, "drained").await;
    if pod.status == 200 {
        let pod = pod.json();
        assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 20, "{pod}");
        assert!(condition(&pod, "DisruptionTarget").is_some(), "{pod}");
    }
    let gone = wait_until(SETTLE, || async {
        get_pod(&t, "drained").await.status == 404
    })
    .await;
    assert!(gone, "the evicted pod stayed");
}

/// `policy/v1beta1` Evictions are still accepted (discovery lists only v1).
#[tokio::test]
async fn a_policy_v1beta1_eviction_is_accepted() {
    let t = Target::new().await;
    assert_eq!(t.create_pod(&unscheduled("old-api")).await.status, 201);
    let r = evict(&t, "old-api", &eviction("policy/v1beta1", "old-api", None)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(get_pod(&t, "old-api").await.status, 404);
}

/// Evicting a missing pod is NotFound; an Eviction named unlike the URL is a BadRequest; a stale
/// resourceVersion precondition is a Conflict worded like a DELETE's, and the pod stays.
#[tokio::test]
async fn an_eviction_checks_the_pod_its_name_and_its_preconditions() {
    let t = Target::new().await;
    let r = evict(&t, "nope", &eviction("policy/v1", "nope", None)).await;
    assert_eq!(
        assert_status(&r, 404, "NotFound"),
        "pods \"nope\" not found"
    );
    assert_eq!(t.create_pod(&unscheduled("kept")).await.status, 201);
    let r = evict(&t, "kept", &eviction("policy/v1", "other", None)).await;
    assert_eq!(
        assert_status(&r, 400, "BadRequest"),
        "name in URL does not match name in Eviction object"
    );
    let stale = json!({"preconditions": {"resourceVersion": "1"}});
    let r = evict(&t, "kept", &eviction("policy/v1", "kept", Some(stale))).await;
    let message = assert_status(&r, 409, "Conflict");
    assert!(
        message.starts_with("Operation cannot be fulfilled on Pod \"kept\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ("),
        "{message}"
    );
    assert_eq!(r.json()["details"]["kind"], "Pod");
    assert_eq!(get_pod(&t, "kept").await.status, 200);
}

/// Discovery lists the binding and eviction subresources (the eviction's kind in group policy).
#[tokio::test]
async fn discovery_lists_the_binding_and_eviction_subresources() {
    let t = Target::new().await;
    let doc = t.get("/api/v1").await.json();
    let find = |name: &str| {
        doc["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name}: {doc}"))
    };
    let binding = find("pods/binding");
    assert_eq!(binding["kind"], "Binding", "{binding}");
    assert_eq!(binding["verbs"], json!(["create"]), "{binding}");
    let eviction = find("pods/eviction");
    assert_eq!(
        (
            &eviction["group"],
            &eviction["version"],
            &eviction["kind"],
            &eviction["verbs"]
        ),
        (
            &json!("policy"),
            &json!("v1"),
            &json!("Eviction"),
            &json!(["create"])
        ),
        "{eviction}"
    );
    assert_eq!(find("bindings")["verbs"], json!(["create"]));
}

/// A PodDisruptionBudget is kept by the disruption controller (its status counts the ready pods
/// it selects, `observedGeneration` catches up with its generation); an eviction it allows takes
/// its one disruption, and the next eviction is refused with 429 and the budget's counts.
#[tokio::test]
async fn a_disruption_budget_lets_one_eviction_through_then_answers_429() {
    let t = Target::new().await;
    for name in ["guarded-a", "guarded-b"] {
        let mut body = long_running(name);
        body["metadata"]["labels"] = json!({"app": "guarded"});
        assert_eq!(t.create_pod(&body).await.status, 201);
    }
    let ready = |name: &'static str| {
        let t = &t;
        async move {
            let pod = get_pod(t, name).await.json();
            condition(&pod, "Ready").is_some_and(|c| c["status"] == "True")
        }
    };
    assert!(
        wait_until(SETTLE, || async {
            ready("guarded-a").await && ready("guarded-b").await
        })
        .await,
        "the guarded pods become ready"
    );
    let budgets = format!(
        "/apis/policy/v1/namespaces/{}/poddisruptionbudgets",
        t.namespace()
    );
    let budget = json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guarded"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    });
    let created = t.send_json(Method::POST, &budgets, &budget).await;
    assert_eq!(created.status, 201, "{}", created.text());
    let created = created.json();
    assert_eq!(created["metadata"]["generation"], 1, "{created}");
    let path = format!("{budgets}/guarded");
    let settled = wait_until(SETTLE, || async {
        let status = t.get(&path).await.json()["status"].clone();
        status["observedGeneration"] == 1 && status["disruptionsAllowed"] == 1
    })
    .await;
    let status = t.get(&path).await.json()["status"].clone();
    assert!(settled, "the controller allows one disruption: {status}");
    assert_eq!(
        (
            &status["currentHealthy"],
            &status["desiredHealthy"],
            &status["expectedPods"]
        ),
        (&json!(2), &json!(1), &json!(2)),
        "{status}"
    );
    let allowed = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "DisruptionAllowed"))
        .unwrap_or_else(|| panic!("a DisruptionAllowed condition in {status}"));
    assert_eq!(
        (&allowed["status"], &allowed["reason"]),
        (&json!("True"), &json!("SufficientPods"))
    );

    let r = evict(&t, "guarded-a", &eviction("policy/v1", "guarded-a", None)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = evict(&t, "guarded-b", &eviction("policy/v1", "guarded-b", None)).await;
    assert_eq!(
        assert_status(&r, 429, "TooManyRequests"),
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    let cause = &r.json()["details"]["causes"][0];
    assert_eq!(cause["reason"], "DisruptionBudget", "{cause}");
    assert!(
        cause["message"].as_str().is_some_and(
            |m| m.starts_with("The disruption budget guarded needs 1 healthy pods and has ")
        ),
        "{cause}"
    );
    assert_eq!(
        get_pod(&t, "guarded-b").await.status,
        200,
        "the refused pod stays"
    );
}
