//! Discovery: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}[/{version}]`, and health.
//! Answered as the legacy (unaggregated) documents with `Content-Type: application/json`, which
//! kubectl and kube-rs accept when they asked for aggregated discovery first.

use axum::Json;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use podline_sim_core::version::{GIT_VERSION, GO_VERSION, KUBE_VERSION};
use serde_json::{Value, json};

const ALL_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn resource(
    name: &str,
    singular: &str,
    namespaced: bool,
    kind: &str,
    verbs: &[&str],
    short: &[&str],
) -> Value {
    let mut r = json!({
        "name": name,
        "singularName": singular,
        "namespaced": namespaced,
        "kind": kind,
        "verbs": verbs,
    });
    if !short.is_empty() {
        r["shortNames"] = json!(short);
    }
    if name == "pods" {
        r["categories"] = json!(["all"]);
    }
    if let Some(hash) = storage_version_hash(name) {
        r["storageVersionHash"] = json!(hash);
    }
    r
}

/// `pods/eviction`: a subresource of core pods whose kind is in another group (`policy/v1`
/// Eviction), which discovery says with `group` and `version`, as kube-apiserver does.
fn eviction_subresource() -> Value {
    let mut r = resource("pods/eviction", "", true, "Eviction", &["create"], &[]);
    r["group"] = json!("policy");
    r["version"] = json!("v1");
    r
}

/// kube-apiserver's `storageVersionHash` of a top-level resource (subresources have none): the
/// base64 of the first 8 bytes of the SHA-256 of `<group>/<version>/<Kind>` of its storage
/// version (`/v1/Pod` for pods), computed once and written down here.
fn storage_version_hash(resource: &str) -> Option<&'static str> {
    Some(match resource {
        "pods" => "xPOwRZ+Yhw8=",
        "namespaces" => "Q3oi5N2YM8M=",
        "events" => "r2yiGXH7wu8=",
        "leases" => "gqkMMb/YqFM=",
        "nodes" => "XwShjMxG9Fs=",
        "poddisruptionbudgets" => "EVWiDmWqyJw=",
        "workflowtaskresults" => "h+8WuvWnY6I=",
        "secrets" => "S6u1pOWzb84=",
        "configmaps" => "qFsyl6wFWjQ=",
        "serviceaccounts" => "pbx9ZvyFpBE=",
        "priorityclasses" => "1QwjyaZjj3Y=",
        "persistentvolumeclaims" => "QWTyNDq0dC4=",
        "storageclasses" => "K+m6uJwbjGY=",
        _ => return None,
    })
}

/// `200 ok` for /healthz, /livez, /readyz.
pub async fn ok() -> &'static str {
    "ok"
}

/// `/version`: kube-apiserver 1.32's `version.Info`, which has no emulation or
/// min-compatibility fields (those came with 1.33).
pub async fn version() -> Json<Value> {
    Json(json!({
        "major": KUBE_VERSION.0,
        "minor": KUBE_VERSION.1,
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": GO_VERSION,
        "compiler": "gc",
        "platform": "linux/amd64",
    }))
}

/// `/api`.
pub async fn api_versions() -> Json<Value> {
    Json(json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}],
    }))
}

/// `/api/v1`.
pub async fn core_v1() -> Json<Value> {
    Json(json!({
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            resource("bindings", "binding", true, "Binding", &["create"], &[]),
            resource("configmaps", "configmap", true, "ConfigMap", &ALL_VERBS, &["cm"]),
            resource("events", "event", true, "Event", &ALL_VERBS, &["ev"]),
            resource("namespaces", "namespace", false, "Namespace", &["create", "delete", "get", "list", "patch", "update", "watch"], &["ns"]),
            resource("namespaces/finalize", "", false, "Namespace", &["update"], &[]),
            resource("namespaces/status", "", false, "Namespace", &["get", "patch", "update"], &[]),
            resource("nodes", "node", false, "Node", &ALL_VERBS, &["no"]),
            resource("nodes/status", "", false, "Node", &["get", "patch", "update"], &[]),
            resource("persistentvolumeclaims", "persistentvolumeclaim", true, "PersistentVolumeClaim", &ALL_VERBS, &["pvc"]),
            resource("persistentvolumeclaims/status", "", true, "PersistentVolumeClaim", &["get", "patch", "update"], &[]),
            resource("pods", "pod", true, "Pod", &ALL_VERBS, &["po"]),
            resource("pods/binding", "", true, "Binding", &["create"], &[]),
            eviction_subresource(),
            resource("pods/log", "", true, "Pod", &["get"], &[]),
            resource("pods/status", "", true, "Pod", &["get", "patch", "update"], &[]),
            resource("secrets", "secret", true, "Secret", &ALL_VERBS, &[]),
            resource("serviceaccounts", "serviceaccount", true, "ServiceAccount", &ALL_VERBS, &["sa"]),
        ],
    }))
}

struct Group {
    name: &'static str,
    version: &'static str,
}

/// In kube-apiserver's order (policy, storage.k8s.io, scheduling.k8s.io, coordination.k8s.io).
const GROUPS: [Group; 5] = [
    Group {
        name: "policy",
        version: "v1",
    },
    Group {
        name: "storage.k8s.io",
        version: "v1",
    },
    Group {
        name: "scheduling.k8s.io",
        version: "v1",
    },
    Group {
        name: "coordination.k8s.io",
        version: "v1",
    },
    Group {
        name: "argoproj.io",
        version: "v1alpha1",
    },
];

fn group_json(g: &Group) -> Value {
    let gv = json!({"groupVersion": format!("{}/{}", g.name, g.version), "version": g.version});
    json!({"name": g.name, "versions": [gv.clone()], "preferredVersion": gv})
}

/// `/apis`.
pub async fn api_groups() -> Json<Value> {
    Json(json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": GROUPS.iter().map(group_json).collect::<Vec<_>>(),
    }))
}

/// `/apis/{group}`.
pub async fn api_group(Path(group): Path<String>) -> Response {
    match GROUPS.iter().find(|g| g.name == group) {
        Some(g) => {
            let mut doc = group_json(g);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            Json(doc).into_response()
        }
        None => super::respond::page_not_found(),
    }
}

/// `/apis/{group}/{version}`.
pub async fn group_version(Path((group, version)): Path<(String, String)>) -> Response {
    let resources = match (group.as_str(), version.as_str()) {
        ("policy", "v1") => vec![
            resource(
                "poddisruptionbudgets",
                "poddisruptionbudget",
                true,
                "PodDisruptionBudget",
                &ALL_VERBS,
                &["pdb"],
            ),
            resource(
                "poddisruptionbudgets/status",
                "",
                true,
                "PodDisruptionBudget",
                &["get", "patch", "update"],
                &[],
            ),
        ],
        ("storage.k8s.io", "v1") => vec![resource(
            "storageclasses",
            "storageclass",
            false,
            "StorageClass",
            &ALL_VERBS,
            &["sc"],
        )],
        ("scheduling.k8s.io", "v1") => vec![resource(
            "priorityclasses",
            "priorityclass",
            false,
            "PriorityClass",
            &ALL_VERBS,
            &["pc"],
        )],
        ("coordination.k8s.io", "v1") => {
            vec![resource("leases", "lease", true, "Lease", &ALL_VERBS, &[])]
        }
        ("argoproj.io", "v1alpha1") => vec![resource(
            "workflowtaskresults",
            "workflowtaskresult",
            true,
            "WorkflowTaskResult",
            &ALL_VERBS,
            &[],
        )],
        _ => return super::respond::page_not_found(),
    };
    Json(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{group}/{version}"),
        "resources": resources,
    }))
    .into_response()
}
