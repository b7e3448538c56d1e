//! Pod specifics: create-time defaults (as the real server fills them), what an update may
//! change, graceful deletion, and namespace deletion (which removes the namespace's objects).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus, ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, Time};

use super::kinds::{ApiKind, Part};
use super::resources::{check_preconditions, json_response, success_status};
use super::validation::Causes;
use super::{AppState, RequestInfo};
use crate::cluster::{Stored, Write};
use crate::status::ApiError;
use axum::response::Response;
use http::StatusCode;

/// Default grace period of a pod without `terminationGracePeriodSeconds`.
pub const DEFAULT_GRACE_SECONDS: i64 = 30;

/// Fills the defaults the real server sets on a new pod.
pub fn default_pod(pod: &mut Pod) {
    if let Some(spec) = pod.spec.as_mut() {
        spec.restart_policy
            .get_or_insert_with(|| "Always".to_owned());
        spec.dns_policy
            .get_or_insert_with(|| "ClusterFirst".to_owned());
        spec.scheduler_name
            .get_or_insert_with(|| "default-scheduler".to_owned());
        spec.termination_grace_period_seconds
            .get_or_insert(DEFAULT_GRACE_SECONDS);
        spec.service_account_name
            .get_or_insert_with(|| "default".to_owned());
        spec.service_account
            .get_or_insert_with(|| "default".to_owned());
        spec.security_context.get_or_insert_with(Default::default);
        spec.enable_service_links.get_or_insert(true);
        spec.priority.get_or_insert(0);
        spec.preemption_policy
            .get_or_insert_with(|| "PreemptLowerPriority".to_owned());
        for c in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            let image = c.image.clone().unwrap_or_default();
            let last = image.rsplit('/').next().unwrap_or_default();
            let latest = !last.contains(':') || last.ends_with(":latest");
            c.image_pull_policy.get_or_insert_with(|| {
                if latest && !image.contains('@') {
                    "Always".to_owned()
                } else {
        add_default_tolerations(spec);
                    "IfNotPresent".to_owned()
                }
            });
            c.termination_message_path
                .get_or_insert_with(|| "/dev/termination-log".to_owned());
            c.termination_message_policy
                .get_or_insert_with(|| "File".to_owned());
            let resources = c.resources.get_or_insert_with(Default::default);
            default_resources(resources);
/// A container's resources as `SetDefaults_Pod` leaves them: a limit without a request makes the
/// request equal to it, and every quantity is in canonical form.
fn default_resources(resources: &mut ResourceRequirements) {
    if let Some(limits) = resources.limits.as_ref().filter(|l| !l.is_empty()) {
        let requests = resources.requests.get_or_insert_with(Default::default);
        for (name, limit) in limits {
            requests
                .entry(name.clone())
                .or_insert_with(|| limit.clone());
        }
    }
    for quantities in [resources.requests.as_mut(), resources.limits.as_mut()]
        .into_iter()
        .flatten()
    {
        for q in quantities.values_mut() {
            q.0 = super::quantity::canonicalize(&q.0);
        }
    }
}

/// Seconds the DefaultTolerationSeconds admission plugin gives its tolerations.
const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// The DefaultTolerationSeconds admission plugin: a pod that does not already tolerate the
/// not-ready (or unreachable) NoExecute taint gets a toleration of it for 300 s.
fn add_default_tolerations(spec: &mut PodSpec) {
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = tolerations.iter().any(|t| {
            t.key.as_deref().is_none_or(|k| k.is_empty() || k == key)
                && matches!(t.effect.as_deref(), None | Some("" | "NoExecute"))
        });
        if !tolerated {
            tolerations.push(Toleration {
                key: Some(key.to_owned()),
                operator: Some("Exists".to_owned()),
                effect: Some("NoExecute".to_owned()),
                toleration_seconds: Some(DEFAULT_TOLERATION_SECONDS),
                value: None,
            });
        }
    }
}

        }
    }
    // A new pod's status is the server's: Pending, whatever the client sent.
    pod.status = Some(PodStatus {
        phase: Some("Pending".to_owned()),
        qos_class: Some(super::qos::pod_qos(pod).to_owned()),
        ..PodStatus::default()
    });
}

/// An update of `old` into `new`: the main resource keeps the old status and may only change
/// the mutable parts of the spec; the status subresource keeps the old spec.
pub fn admit_pod_update(new: &mut Pod, old: &Pod, part: Part) -> Causes {
    let mut causes = Causes::default();
    match part {
        Part::Main => {
            new.status.clone_from(&old.status);
            // Mutable spec fields: container images, activeDeadlineSeconds, tolerations additions.
            let mut allowed = old.spec.clone();
            if let (Some(allowed), Some(spec)) = (allowed.as_mut(), new.spec.as_ref()) {
                for (a, c) in allowed.containers.iter_mut().zip(&spec.containers) {
                    a.image.clone_from(&c.image);
                }
                allowed.active_deadline_seconds = spec.active_deadline_seconds;
                allowed.tolerations.clone_from(&spec.tolerations);
            }
            if new.spec.is_none() {
                new.spec.clone_from(&old.spec);
            } else if serde_json::to_value(&allowed).ok() != serde_json::to_value(&new.spec).ok() {
                causes.forbidden(
                    "spec",
                    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
                );
            }
        }
        Part::Status => {
            new.spec.clone_from(&old.spec);
        }
    }
    if part == Part::Main {
        validate_deadline_update(&mut causes, new, old);
    }
    let mut meta = Causes::default();
    super::validation::validate_meta(&mut meta, &new.metadata);
    causes.0.extend(meta.0);
    causes
}

/// `spec.activeDeadlineSeconds` on update, as kube-apiserver's `ValidatePodUpdate`: in range,
/// never raised, never removed once set.
fn validate_deadline_update(causes: &mut Causes, new: &Pod, old: &Pod) {
    use super::validation::{ACTIVE_DEADLINE_RANGE_MSG, MAX_ACTIVE_DEADLINE_SECONDS};
    let field = "spec.activeDeadlineSeconds";
    let new_value = new.spec.as_ref().and_then(|s| s.active_deadline_seconds);
    let old_value = old.spec.as_ref().and_then(|s| s.active_deadline_seconds);
    match (new_value, old_value) {
        (Some(n), _) if !(1..=MAX_ACTIVE_DEADLINE_SECONDS).contains(&n) => {
            causes.invalid(field, &n.to_string(), ACTIVE_DEADLINE_RANGE_MSG);
        }
        (Some(n), Some(o)) if n > o => {
            causes.invalid(
                field,
                &n.to_string(),
                "must be less than or equal to previous value",
            );
        }
        (None, Some(_)) => {
            causes.invalid(
                field,
                "null",
                "must not update from a positive integer to nil value",
            );
        }
        _ => {}
    }
}

/// Deletes a pod like the real server: at once when it was never scheduled, is terminal, or the
/// grace period is 0; otherwise it gets a deletionTimestamp (MODIFIED) and is removed when the
/// kubelet has stopped it (or, without a kubelet, when the grace period ends). Answers the object.
pub fn delete(
    state: &AppState,
    info: &RequestInfo,
    opts: DeleteOptions,
) -> Result<Response, ApiError> {
    let cluster = state.cluster();
    let (event, pending_removal) = cluster.write_pod(&info.namespace, &info.name, |current| {
        let Some(current) = current else {
            return Err(ApiError::not_found("", "pods", &info.name));
        };
        let pod = &current.decode();
        check_preconditions(&opts, pod)?;
        let spec = pod.spec.as_ref();
        let grace = opts
            .grace_period_seconds
            .or_else(|| spec.and_then(|s| s.termination_grace_period_seconds))
            .unwrap_or(DEFAULT_GRACE_SECONDS)
            .max(0);
        let scheduled = spec
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or_default();
        let terminal = matches!(phase, "Succeeded" | "Failed");
        let mut next = pod.clone();
        let now = Timestamp::now();
        if !scheduled || terminal || grace == 0 {
            next.metadata.deletion_timestamp.get_or_insert(Time(now));
            next.metadata.deletion_grace_period_seconds = Some(0);
            return Ok((Write::Delete(next), None));
        }
        if let Some(existing) = pod.metadata.deletion_grace_period_seconds
            && existing <= grace
        {
            // Already terminating with a shorter or equal grace period: nothing changes.
            return Ok((Write::Unchanged, None));
        }
        next.metadata.deletion_timestamp = Some(Time(
            now.saturating_add(SignedDuration::from_secs(grace))
                .unwrap_or(now),
        ));
        next.metadata.deletion_grace_period_seconds = Some(grace);
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        Ok((Write::Replace(next), Some((uid, grace))))
    })?;
    if let Some((uid, grace)) = pending_removal
        && !cluster.kubelet_enabled()
    {
        cluster.remove_after(
            info.namespace.clone(),
            info.name.clone(),
            uid,
            Duration::from_secs(grace as u64),
        );
    }
    match event {
        Some(commit) => Ok(json_response(StatusCode::OK, commit.event.json.clone())),
        None => match cluster.pod_table().get(&info.namespace, &info.name) {
            Some(stored) => Ok(json_response(StatusCode::OK, stored.json())),
            None => Err(ApiError::not_found("", "pods", &info.name)),
        },
    }
}

/// Deletes a namespace and everything in it (the sim has no namespace finalizer controller, so
/// this happens at once). The initial `default` namespace cannot be deleted, like on a cluster.
pub fn delete_namespace(state: &AppState, name: &str) -> Result<Response, ApiError> {
    if matches!(name, "default" | "kube-system" | "kube-public") {
        return Err(ApiError::new(
            403,
            "Forbidden",
            format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
        ));
    }
    let cluster = state.cluster();
    let Some(ns) = cluster.namespace_table().get("", name) else {
        return Err(ApiError::not_found("", "namespaces", name));
    };
    let (pods, _) = cluster.pod_table().snapshot(Some(name), None);
    for pod in pods.iter().map(Stored::decode) {
        if let Some(uid) = pod.metadata.uid.as_deref() {
            cluster.remove_pod(name, pod.metadata.name.as_deref().unwrap_or_default(), uid);
        }
    }
    remove_all(cluster.event_table(), name);
    remove_all(cluster.lease_table(), name);
    remove_all(cluster.workflow_task_result_table(), name);
    let _ = cluster.namespace_table().write(
        (String::new(), name.to_owned()),
        |current| match current {
            Some(current) => Ok((Write::Delete(current.decode()), ())),
            None => Err(()),
        },
        |_, _| {},
    );
    Ok(success_status(&ns.decode()))
}

fn remove_all<K: ApiKind>(table: &crate::cluster::Table<K>, namespace: &str) {
    let (items, _) = table.snapshot(Some(namespace), None);
    for item in items {
        let name = item.decode().meta().name.clone().unwrap_or_default();
        let _ = table.write(
            (namespace.to_owned(), name),
            |current| match current {
                Some(current) => Ok::<_, ()>((Write::Delete(current.decode()), ())),
                None => Err(()),
            },
            |_, _| {},
        );
    }
}
