//! Deletion as kube-apiserver's generic registry does it (`rest.BeforeDelete` and
//! `Store.Delete`): preconditions, graceful deletion of pods, finalizers (an object with
//! `metadata.finalizers` gets a deletionTimestamp and stays until they are gone),
//! `propagationPolicy` (the garbage collector's `foregroundDeletion` and `orphan` finalizers), and
//! `deletecollection`.
//!
//! One entry point, [`delete_object`], serves the API's DELETE, `deletecollection`, the garbage
//! collector ([`crate::controllers::gc`]) and the namespace controller, so they all delete alike.

use std::sync::Arc;

use bytes::Bytes;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta, Time};

use crate::cluster::{Cluster, Write};
use crate::go_time::go_add_seconds;
use crate::kinds::ApiKind;
use crate::status::ApiError;

/// The garbage collector's finalizer of an owner deleted with `propagationPolicy: Foreground`.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// The garbage collector's finalizer of an owner deleted with `propagationPolicy: Orphan`.
pub const ORPHAN_FINALIZER: &str = "orphan";

/// What a delete did. Public for the API's DELETE answer (podline-sim's `api/delete.rs`).
pub enum Deleted<K> {
    /// The object is gone; its last state.
    Gone(Arc<K>),
    /// The object stays (graceful deletion or finalizers pending); its current state.
    Pending(Bytes),
}

/// A pod's uid and grace period when its removal waits for the kubelet (or, without one, a timer).
/// Public because [`delete_object`] returns it for its caller (the API or a controller) to
/// hand to [`arrange_removal`].
pub type PendingRemoval = Option<(String, i64)>;

/// The wording of `rest.BeforeDelete`'s precondition checks: the resource in the message and in
/// `details.kind` is the Kind (`Pod`, `Lease.coordination.k8s.io`). Public for the API's pod
/// subresources that delete or bind under preconditions (binding, eviction).
pub fn check_preconditions<K: ApiKind>(opts: &DeleteOptions, current: &K) -> Result<(), ApiError> {
    let Some(pre) = &opts.preconditions else {
        return Ok(());
    };
    let meta = current.meta();
    let name = meta.name.clone().unwrap_or_default();
    let qualified = if K::GROUP.is_empty() {
        K::KIND.to_owned()
    } else {
        format!("{}.{}", K::KIND, K::GROUP)
    };
    let fail = |why: String| {
        ApiError::conflict_message(
            K::GROUP,
            K::KIND,
            &name,
            format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}"),
        )
    };
    if let Some(uid) = &pre.uid
        && meta.uid.as_ref() != Some(uid)
    {
        return Err(fail(format!(
            "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
            meta.uid.clone().unwrap_or_default()
        )));
    }
    if let Some(rv) = &pre.resource_version
        && meta.resource_version.as_ref() != Some(rv)
    {
        return Err(fail(format!(
            "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
            meta.resource_version.clone().unwrap_or_default()
        )));
    }
    Ok(())
}

/// The pod strategy's `CheckGracefulDelete`: the asked grace period (or the pod's own), 0 for a
/// pod never scheduled or already terminal.
fn pod_grace(pod: &Pod, opts: &DeleteOptions) -> i64 {
    let spec = pod.spec.as_ref();
    let grace = opts
        .grace_period_seconds
        .or_else(|| spec.and_then(|s| s.termination_grace_period_seconds))
        .unwrap_or(crate::kinds::pod::DEFAULT_GRACE_SECONDS)
        .max(0);
    let scheduled = spec
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default();
    if !scheduled || matches!(phase, "Succeeded" | "Failed") {
        0
    } else {
        grace
    }
}

/// The garbage-collection policy a delete asks for (`propagationPolicy`, else the deprecated
/// `orphanDependents`), if any.
fn asked_policy(opts: &DeleteOptions) -> Result<Option<&'static str>, ApiError> {
    match (opts.propagation_policy.as_deref(), opts.orphan_dependents) {
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "meta.k8s.io",
            "DeleteOptions",
            "",
            vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusCause {
                    field: Some("propagationPolicy".to_owned()),
                    message: Some(
                        "Invalid value: \"...\": orphanDependents and deletionPropagation cannot be both set"
                            .to_owned(),
                    ),
                    reason: Some("FieldValueInvalid".to_owned()),
                },
            ],
        )),
        (Some("Foreground"), None) => Ok(Some("Foreground")),
        (Some("Background"), None) => Ok(Some("Background")),
        (Some("Orphan"), None) => Ok(Some("Orphan")),
        (Some(other), None) => Err(ApiError::new(
            422,
            "Invalid",
            format!(
                "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
            ),
        )),
        (None, Some(true)) => Ok(Some("Orphan")),
        (None, Some(false)) => Ok(Some("Background")),
        (None, None) => Ok(None),
    }
}

/// Sets the garbage collector's finalizers for `policy` (`deletionFinalizersForGarbageCollection`):
/// Foreground adds `foregroundDeletion`, Orphan adds `orphan`, Background removes both.
fn apply_policy(meta: &mut ObjectMeta, policy: Option<&str>) {
    let Some(policy) = policy else { return };
    let finalizers = meta.finalizers.get_or_insert_with(Vec::new);
    finalizers.retain(|f| f != FOREGROUND_FINALIZER && f != ORPHAN_FINALIZER);
    match policy {
        "Foreground" => finalizers.push(FOREGROUND_FINALIZER.to_owned()),
        "Orphan" => finalizers.push(ORPHAN_FINALIZER.to_owned()),
        _ => {}
    }
    if finalizers.is_empty() {
        meta.finalizers = None;
    }
}

/// Whether a write leaving `meta` so must remove the object instead (the registry's
/// `shouldDeleteDuringUpdate`): being deleted, no finalizers left, and no grace period pending.
pub(crate) fn should_delete_during_update(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
        && meta.finalizers.as_ref().is_none_or(Vec::is_empty)
        && meta.deletion_grace_period_seconds.unwrap_or(0) == 0
}

/// The write that stores `obj` after an update: a delete when its last finalizer went (see
/// `should_delete_during_update`). Public for the API's PUT and PATCH handlers.
pub fn update_write<K: ApiKind>(obj: K) -> Write<K> {
    if should_delete_during_update(obj.meta()) {
        Write::Delete(obj)
    } else {
        Write::Replace(obj)
    }
}

/// The update validation of `ValidateObjectMetaUpdate` about deletion: no finalizer may be added
/// to an object being deleted. Returns the cause's message. Public for the API's update
/// handlers, which validate.
pub fn no_new_finalizers(new: &ObjectMeta, old: &ObjectMeta) -> Option<String> {
    old.deletion_timestamp.as_ref()?;
    let old_set: std::collections::BTreeSet<&str> = old
        .finalizers
        .iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let extra: std::collections::BTreeSet<&str> = new
        .finalizers
        .iter()
        .flatten()
        .map(String::as_str)
        .filter(|f| !old_set.contains(f))
        .collect();
    if extra.is_empty() {
        return None;
    }
    let list: Vec<String> = extra.iter().map(|f| format!("{f:?}")).collect();
    Some(format!(
        "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
        list.join(", ")
    ))
}

/// Deletes `namespace/name` of kind `K` as kube-apiserver's registry does (see the module docs).
/// A pod deleted gracefully (bound, not terminal, grace > 0) is answered as pending with its
/// removal returned for the caller to arrange; a grace-0 delete writes the deletionTimestamp
/// (MODIFIED) and then removes the object (DELETED), like the real two-step delete. Public for
/// the API's DELETE, deletecollection and eviction, which delete as the controllers do.
pub fn delete_object<K: ApiKind>(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    opts: &DeleteOptions,
) -> Result<(Deleted<K>, PendingRemoval), ApiError> {
    let policy = asked_policy(opts)?;
    let is_pod = K::RESOURCE == "pods";
    let (commit, (then_delete, pending)) = K::commit(cluster, namespace, name, |current| {
        let Some(current) = current else {
            return Err(ApiError::not_found(K::GROUP, K::RESOURCE, name));
        };
        let mut obj = current.decode();
        check_preconditions(opts, &obj)?;
        let now = Timestamp::now();
        let already = obj.meta().deletion_timestamp.clone();
        let mut graceful = false;
        let mut grace = 0;
        if is_pod {
            // Invariant: K is Pod when its resource is "pods" (kinds.rs).
            let pod: Pod = serde_json::from_slice(&current.json())
                .map_err(|e| ApiError::internal(format!("stored pod is not JSON: {e}")))?;
            grace = pod_grace(&pod, opts);
            let meta = obj.meta_mut();
            match (&already, meta.deletion_grace_period_seconds) {
                (None, _) => {
                    meta.deletion_timestamp = Some(Time(go_add_seconds(now, grace)));
                    meta.deletion_grace_period_seconds = Some(grace);
                    graceful = true;
                }
                // Being deleted with no grace left: finish (or wait for finalizers).
                (Some(_), None | Some(0)) => {}
                (Some(ts), Some(existing)) => {
                    if opts.grace_period_seconds.is_none() || grace >= existing {
                        // Graceful deletion pending: only a shorter grace period changes it.
                        return Ok((Write::Unchanged, (false, None)));
                    }
                    let requested =
                        go_add_seconds(go_add_seconds(ts.0, existing.wrapping_neg()), grace);
                    meta.deletion_timestamp = Some(Time(requested));
                    meta.deletion_grace_period_seconds = Some(grace);
                    graceful = true;
                }
            }
        }
        apply_policy(obj.meta_mut(), policy);
        let has_finalizers = obj
            .meta()
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty());
        let uid = obj.meta().uid.clone().unwrap_or_default();
        if graceful {
            if grace == 0 && !has_finalizers {
                return Ok((Write::Replace(obj), (true, None)));
            }
            let pending = (grace > 0).then_some((uid, grace));
            return Ok((Write::Replace(obj), (false, pending)));
        }
        if has_finalizers {
            let meta = obj.meta_mut();
            if meta.deletion_timestamp.is_none() {
                meta.deletion_timestamp = Some(Time(now));
                meta.deletion_grace_period_seconds = Some(0);
            }
            if serde_json::to_value(&obj).ok() == serde_json::to_value(current.decode()).ok() {
                return Ok((Write::Unchanged, (false, None)));
            }
            return Ok((Write::Replace(obj), (false, None)));
        }
        Ok((Write::Delete(obj), (false, None)))
    })?;
    let Some(commit) = commit else {
        return match K::table(cluster).get(namespace, name) {
            Some(stored) => Ok((Deleted::Pending(stored.json()), pending)),
            None => Err(ApiError::not_found(K::GROUP, K::RESOURCE, name)),
        };
    };
    if commit.event.kind == crate::cluster::ChangeKind::Deleted {
        return Ok((Deleted::Gone(commit.obj), None));
    }
    if !then_delete {
        return Ok((Deleted::Pending(commit.event.json.clone()), pending));
    }
    let uid = commit.obj.meta().uid.clone();
    let removed = K::commit(cluster, namespace, name, |current| match current {
        Some(current) => {
            let obj = current.decode();
            if obj.meta().uid == uid && should_delete_during_update(obj.meta()) {
                Ok((Write::Delete(obj), ()))
            } else {
                Err(())
            }
        }
        None => Err(()),
    });
    match removed {
        Ok((Some(removed), ())) => Ok((Deleted::Gone(removed.obj), None)),
        // Someone else finished or changed it meanwhile: answer what the first step wrote.
        _ => Ok((Deleted::Pending(commit.event.json.clone()), None)),
    }
}

/// The JSON of what a delete left (for `deletecollection`'s list, which the API builds).
pub fn deleted_json<K: ApiKind>(deleted: &Deleted<K>) -> Option<Bytes> {
    match deleted {
        Deleted::Gone(obj) => {
            let mut json = Vec::new();
            obj.write_json(&mut json);
            Some(Bytes::from(json))
        }
        Deleted::Pending(json) => Some(json.clone()),
    }
}

/// Arranges the end of a graceful pod deletion when no kubelet runs: the store removes the pod
/// when its grace period ends. Public for the API's deletes (see [`PendingRemoval`]).
pub fn arrange_removal(cluster: &Cluster, namespace: &str, name: &str, pending: PendingRemoval) {
    if let Some((uid, grace)) = pending
        && !cluster.kubelet_enabled()
    {
        cluster.remove_after(
            namespace.to_owned(),
            name.to_owned(),
            uid,
            std::time::Duration::from_secs(u64::try_from(grace).unwrap_or(0)),
        );
    }
}
