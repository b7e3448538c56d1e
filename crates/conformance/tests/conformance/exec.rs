//! `pods/exec`'s answers before any stream is opened, which need no kubelet: kube-apiserver
//! 1.32's `ExecLocation` (`pkg/registry/core/pod/strategy.go`: `streamLocation`,
//! `validateContainer`) and its `UpgradeAwareHandler`
//! (`staging/src/k8s.io/apimachinery/pkg/util/proxy/upgradeaware.go`, `UpgradeRequired`).
//! The streams themselves are tested with kubectl and the Python client against the sim
//! (crates/sim/tests/sim/exec.rs, python.rs).

use http::Method;
use podline_conformance::{Target, assert_status, pod};
use serde_json::json;

/// A pod no scheduler of the target places (it names a scheduler that does not exist).
fn unscheduled(name: &str) -> serde_json::Value {
    let mut body = pod(name);
    body["spec"]["schedulerName"] = json!("podline-conformance-scheduler");
    body
}

fn exec_path(t: &Target, name: &str, query: &str) -> String {
    format!("{}/{name}/exec?{query}", t.core_path("pods"))
}

/// A missing pod is NotFound; a container the pod does not have, and no container named in a
/// pod of two, are BadRequests with `validateContainer`'s messages; a pod without a node is a
/// BadRequest (`pod X does not have a host assigned`); a plain (not upgrade) request for a pod
/// on a node is `Upgrade request required`.
#[tokio::test]
async fn exec_is_refused_before_the_upgrade_as_kube_apiserver_refuses_it() {
    let t = Target::new().await;
    let r = t
        .get(&exec_path(&t, "nope", "command=true&stdout=true"))
        .await;
    assert_eq!(
        assert_status(&r, 404, "NotFound"),
        "pods \"nope\" not found"
    );

    let mut two = unscheduled("exec-two");
    two["spec"]["containers"] = json!([
        {"name": "a", "image": "busybox"},
        {"name": "b", "image": "busybox"},
    ]);
    assert_eq!(t.create_pod(&two).await.status, 201);
    let r = t
        .get(&exec_path(
            &t,
            "exec-two",
            "command=true&stdout=true&container=c",
        ))
        .await;
    assert_eq!(
        assert_status(&r, 400, "BadRequest"),
        "container c is not valid for pod exec-two"
    );
    let r = t
        .get(&exec_path(&t, "exec-two", "command=true&stdout=true"))
        .await;
    assert_eq!(
        assert_status(&r, 400, "BadRequest"),
        "a container name must be specified for pod exec-two, choose one of: [a b]"
    );
    let r = t
        .get(&exec_path(
            &t,
            "exec-two",
            "command=true&stdout=true&container=a",
        ))
        .await;
    assert_eq!(
        assert_status(&r, 400, "BadRequest"),
        "pod exec-two does not have a host assigned"
    );

    // Bound to a node that need not exist (the binding subresource does not check): the
    // location is found, and a request that is no upgrade is refused by the proxy.
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "exec-two"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "podline-conformance-node"},
    });
    let r = t
        .send_json(
            Method::POST,
            &format!("{}/exec-two/binding", t.core_path("pods")),
            &binding,
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = t
        .get(&exec_path(
            &t,
            "exec-two",
            "command=true&stdout=true&container=a",
        ))
        .await;
    assert_eq!(
        assert_status(&r, 400, "BadRequest"),
        "Upgrade request required"
    );
}
