//! `pods/{name}/binding` and the legacy `bindings` collection: a scheduler's way to assign a pod
//! to a node, as kube-apiserver's `BindingREST` does it.
//!
//! The pod gets `spec.nodeName` (only if it had none), the Binding's annotations, and the
//! `PodScheduled: True` condition, in one write that records no managed fields (the registry
//! writes storage directly). The answer is `201` with a Success Status. A pod already bound, being
//! deleted or gated is a 409 on `pods/binding`; the Binding's `metadata.uid` and
//! `resourceVersion` are preconditions on the pod. The simulated kubelet runs a pod bound to its
//! node whoever bound it (see podline-sim-core's `kubelet/mod.rs`).

use axum::response::Response;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use podline_sim_core::cluster::Write;
use serde::Deserialize;

use super::body::JsonBody;
use super::decode::{Expected, decode_as};
use super::{AppState, RequestInfo};
use crate::status::ApiError;

/// A Binding as the registry reads it: every field may be missing (Go's zero values), and
/// validation, not decoding, reports what is required.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct BindingBody {
    metadata: ObjectMeta,
    target: ObjectReference,
}

/// Which URL the binding came in on: the pod's subresource names the pod, the legacy
/// `bindings` collection takes the name from the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// `POST .../pods/{name}/binding`.
    Subresource,
    /// `POST .../namespaces/{ns}/bindings`.
    Legacy,
}

/// Handles a Binding create (see the module docs); `dry_run` checks everything and stores nothing.
pub(crate) fn bind(
    state: &AppState,
    info: &RequestInfo,
    route: Route,
    body: &JsonBody,
    dry_run: bool,
) -> Result<Response, ApiError> {
    let binding: BindingBody = decode_as(
        body,
        &Expected {
            kind: "Binding",
            api_versions: &["v1"],
            any_kind: false,
        },
    )?;
    let meta = &binding.metadata;
    let body_name = meta.name.clone().unwrap_or_default();
    let name = match route {
        Route::Subresource => info.name.clone(),
        Route::Legacy => body_name.clone(),
    };
    if let Some(ns) = meta.namespace.as_deref().filter(|ns| !ns.is_empty())
        && ns != info.namespace
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if name.is_empty() {
        // The registry's key function, for a legacy binding without a name.
        return Err(ApiError::bad_request("Name parameter required."));
    }
    if name != body_name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Binding object",
        ));
    }
    validate(&binding.target)?;
    let node = binding.target.name.clone().unwrap_or_default();
    let cluster = state.cluster();
    if !cluster.namespace_exists(&info.namespace) {
        return Err(ApiError::not_found("", "namespaces", &info.namespace));
    }
    let uid = meta.uid.clone().filter(|u| !u.is_empty());
    let rv = meta.resource_version.clone().filter(|r| !r.is_empty());
    let annotations = meta.annotations.clone().unwrap_or_default();
    let key = format!("/registry/pods/{}/{name}", info.namespace);
    cluster.write_pod(&info.namespace, &name, |current| {
        let Some(current) = current else {
            return Err(ApiError::not_found("", "pods", &name));
        };
        let mut pod = current.decode();
        check_preconditions(&key, &name, &pod, uid.as_deref(), rv.as_deref())?;
        assign(&mut pod, &node, &annotations).map_err(|why| {
            ApiError::conflict_message(
                "",
                "pods/binding",
                &name,
                format!("Operation cannot be fulfilled on pods/binding \"{name}\": {why}"),
            )
        })?;
        if dry_run {
            Ok((Write::Unchanged, ()))
        } else {
            Ok((Write::Replace(pod), ()))
        }
    })?;
    Ok(super::respond::created_success())
}

/// `ValidatePodBinding`. Its errors are not Status errors, so kube-apiserver answers them as a
/// 500 with no reason and the aggregated field errors as the message.
fn validate(target: &ObjectReference) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    if let Some(kind) = target
        .kind
        .as_deref()
        .filter(|k| !k.is_empty() && *k != "Node")
    {
        errors.push(format!(
            "target.kind: Unsupported value: {kind:?}: supported values: \"Node\", \"<empty>\""
        ));
    }
    if target.name.as_deref().is_none_or(str::is_empty) {
        errors.push("target.name: Required value".to_owned());
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(ApiError::new(500, "", errors.remove(0))),
        _ => Err(ApiError::new(500, "", format!("[{}]", errors.join(", ")))),
    }
}

/// The storage layer's precondition check of the Binding's uid and resourceVersion, as the
/// registry reports it: a Conflict on `pods` quoting the storage error.
fn check_preconditions(
    key: &str,
    name: &str,
    pod: &Pod,
    uid: Option<&str>,
    rv: Option<&str>,
) -> Result<(), ApiError> {
    let meta = &pod.metadata;
    let failed = match (uid, rv) {
        (Some(uid), _) if meta.uid.as_deref() != Some(uid) => format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            meta.uid.as_deref().unwrap_or_default()
        ),
        (_, Some(rv)) if meta.resource_version.as_deref() != Some(rv) => format!(
            "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
            meta.resource_version.as_deref().unwrap_or_default()
        ),
        _ => return Ok(()),
    };
    Err(ApiError::conflict_message(
        "",
        "pods",
        name,
        format!(
            "Operation cannot be fulfilled on pods \"{name}\": StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: {failed}"
        ),
    ))
}

/// `setPodNodeAndMetadata`: binds an unbound, ungated pod that is not being deleted; the error
/// says why not, in the registry's words.
fn assign(
    pod: &mut Pod,
    node: &str,
    annotations: &std::collections::BTreeMap<String, String>,
) -> Result<(), String> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    if pod.metadata.deletion_timestamp.is_some() {
        return Err(format!(
            "pod {name} is being deleted, cannot be assigned to a host"
        ));
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    if let Some(bound) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Err(format!("pod {name} is already assigned to node {bound:?}"));
    }
    if spec
        .scheduling_gates
        .as_ref()
        .is_some_and(|g| !g.is_empty())
    {
        return Err(format!("pod {name} has non-empty .spec.schedulingGates"));
    }
    spec.node_name = Some(node.to_owned());
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .extend(annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
    update_condition(
        pod,
        PodCondition {
            type_: "PodScheduled".to_owned(),
            status: "True".to_owned(),
            ..PodCondition::default()
        },
    );
    Ok(())
}

/// `podutil.UpdatePodCondition`: adds the condition, or updates the one of its type, keeping
/// its `lastTransitionTime` unless the status changes.
pub(crate) fn update_condition(pod: &mut Pod, mut condition: PodCondition) {
    let now = Time(Timestamp::now());
    let conditions = pod
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(existing) => {
            condition.last_transition_time = if existing.status == condition.status {
                existing.last_transition_time.clone()
            } else {
                Some(now)
            };
            *existing = condition;
        }
        None => {
            condition.last_transition_time = Some(now);
            conditions.push(condition);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_errors_are_aggregated_like_field_error_lists() {
        let err = validate(&ObjectReference::default()).expect_err("no target");
        assert_eq!((err.code, err.reason.as_str()), (500, ""));
        assert_eq!(err.message, "target.name: Required value");
        let err = validate(&ObjectReference {
            kind: Some("Pod".to_owned()),
            ..ObjectReference::default()
        })
        .expect_err("a pod target");
        assert_eq!(
            err.message,
            "[target.kind: Unsupported value: \"Pod\": supported values: \"Node\", \"<empty>\", target.name: Required value]"
        );
        let node = ObjectReference {
            kind: Some("Node".to_owned()),
            name: Some("n1".to_owned()),
            ..ObjectReference::default()
        };
        assert!(validate(&node).is_ok());
    }

    #[test]
    fn a_bound_pod_cannot_be_bound_again() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("p".to_owned());
        assign(&mut pod, "n1", &Default::default()).expect("binds");
        let conditions = pod.status.as_ref().and_then(|s| s.conditions.clone());
        let scheduled = &conditions.expect("conditions")[0];
        assert_eq!(
            (scheduled.type_.as_str(), scheduled.status.as_str()),
            ("PodScheduled", "True")
        );
        assert!(scheduled.last_transition_time.is_some());
        assert_eq!(
            assign(&mut pod, "n2", &Default::default()),
            Err("pod p is already assigned to node \"n1\"".to_owned())
        );
    }
}
