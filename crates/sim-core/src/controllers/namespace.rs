//! Namespace deletion as kube-apiserver and kube-controller-manager's namespace controller do it:
//! DELETE answers 200 with the Namespace in phase `Terminating` (deletionTimestamp set,
//! `spec.finalizers: [kubernetes]` kept), creates into it are refused, the controller deletes its
//! contents (pods gracefully, objects with finalizers waiting for them), then removes the
//! `kubernetes` finalizer (the `finalize` subresource) and deletes the Namespace.

use std::time::Duration;

use bytes::Bytes;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Event, PersistentVolumeClaim, Pod, Secret, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, StatusCause, StatusDetails};

use crate::cluster::{Cluster, WeakCluster, WorkflowTaskResult, Write, now_time};
use crate::delete::{Deleted, arrange_removal, check_preconditions, delete_object};
use crate::kinds::ApiKind;
use crate::status::ApiError;

/// The finalizer every Namespace carries in `spec.finalizers` until the namespace controller has
/// emptied it.
pub const NAMESPACE_FINALIZER: &str = "kubernetes";

/// How often the namespace controller looks again at a Terminating namespace whose contents are
/// not all gone yet (graceful pod deletions, finalizers).
const RECHECK: Duration = Duration::from_millis(100);

/// Namespaces that can't be deleted, as on a cluster.
const PROTECTED: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Whether `namespace` exists and is Terminating (being deleted). Public for the API's create,
/// which refuses objects into such a namespace.
pub fn is_terminating(cluster: &Cluster, namespace: &str) -> bool {
    cluster
        .namespace_table()
        .get("", namespace)
        .is_some_and(|ns| {
            let ns = ns.decode();
            ns.metadata.deletion_timestamp.is_some()
                || ns.status.and_then(|s| s.phase).as_deref() == Some("Terminating")
        })
}

/// The NamespaceLifecycle admission's refusal of a create into a Terminating namespace (the
/// API's create answers it).
pub fn terminating_forbidden<K: ApiKind>(name: &str, namespace: &str) -> ApiError {
    let resource = if K::GROUP.is_empty() {
        K::RESOURCE.to_owned()
    } else {
        format!("{}.{}", K::RESOURCE, K::GROUP)
    };
    let subject = if name.is_empty() {
        format!("{resource} is forbidden")
    } else {
        format!("{resource} \"{name}\" is forbidden")
    };
    let mut err = ApiError::new(
        403,
        "Forbidden",
        format!(
            "{subject}: unable to create new content in namespace {namespace} because it is being terminated"
        ),
    );
    err.details = Some(Box::new(StatusDetails {
        name: (!name.is_empty()).then(|| name.to_owned()),
        group: (!K::GROUP.is_empty()).then(|| K::GROUP.to_owned()),
        kind: Some(K::RESOURCE.to_owned()),
        causes: Some(vec![StatusCause {
            reason: Some("NamespaceTerminating".to_owned()),
            message: Some(format!("namespace {namespace} is being terminated")),
            field: Some("metadata.namespace".to_owned()),
        }]),
        ..StatusDetails::default()
    }));
    err
}

/// DELETE of a namespace: marks it Terminating and starts its controller (see the module docs).
/// Returns the Namespace's JSON as the delete left it.
pub fn delete_namespace(
    cluster: &Cluster,
    name: &str,
    opts: &DeleteOptions,
) -> Result<Bytes, ApiError> {
    if PROTECTED.contains(&name) {
        return Err(ApiError::new(
            403,
            "Forbidden",
            format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
        ));
    }
    let (commit, json) = cluster.namespace_table().write(
        (String::new(), name.to_owned()),
        |current| {
            let Some(current) = current else {
                return Err(ApiError::not_found("", "namespaces", name));
            };
            let mut ns = current.decode();
            check_preconditions(opts, &ns)?;
            if ns.metadata.deletion_timestamp.is_some() {
                return Ok((Write::Unchanged, Some(current.json())));
            }
            ns.metadata.deletion_timestamp = Some(now_time());
            ns.metadata.deletion_grace_period_seconds = Some(0);
            ns.status.get_or_insert_with(Default::default).phase = Some("Terminating".to_owned());
            Ok((Write::Replace(ns), None))
        },
        |_, _| {},
    )?;
    if let Some(commit) = &commit {
        let uid = commit.obj.metadata.uid.clone().unwrap_or_default();
        tokio::spawn(run_controller(cluster.downgrade(), name.to_owned(), uid));
    }
    match (commit, json) {
        (Some(commit), _) => Ok(commit.event.json.clone()),
        (None, Some(json)) => Ok(json),
        (None, None) => Err(ApiError::internal("namespace delete stored nothing")),
    }
}

/// PUT `namespaces/{name}/finalize`: replaces `spec.finalizers` (only) with `finalizers`.
/// Returns the Namespace's JSON as the write left it.
pub fn finalize(cluster: &Cluster, name: &str, finalizers: &[String]) -> Result<Bytes, ApiError> {
    let (commit, json) = cluster.namespace_table().write(
        (String::new(), name.to_owned()),
        |current| {
            let Some(current) = current else {
                return Err(ApiError::not_found("", "namespaces", name));
            };
            let mut ns = current.decode();
            let spec = ns.spec.get_or_insert_with(Default::default);
            let new = (!finalizers.is_empty()).then(|| finalizers.to_vec());
            if spec.finalizers == new {
                return Ok((Write::Unchanged, Some(current.json())));
            }
            spec.finalizers = new;
            // The finalize store's `ShouldDeleteDuringUpdate`: a Terminating namespace with no
            // finalizer left goes (what `kubectl replace --raw .../finalize` relies on).
            let done = ns.metadata.deletion_timestamp.is_some()
                && ns
                    .spec
                    .as_ref()
                    .and_then(|s| s.finalizers.as_ref())
                    .is_none()
                && ns.metadata.finalizers.as_ref().is_none_or(Vec::is_empty);
            if done {
                Ok((Write::Delete(ns), None))
            } else {
                Ok((Write::Replace(ns), None))
            }
        },
        |_, _| {},
    )?;
    match (commit, json) {
        (Some(commit), _) => Ok(commit.event.json.clone()),
        (None, Some(json)) => Ok(json),
        (None, None) => Err(ApiError::internal("finalize stored nothing")),
    }
}

/// The namespace controller for one Terminating namespace: deletes its contents until none is
/// left, then finalizes and deletes the Namespace. Ends when the namespace (this uid) is gone.
async fn run_controller(weak: WeakCluster, name: String, uid: String) {
    loop {
        let Some(cluster) = weak.upgrade() else {
            return;
        };
        let Some(ns) = cluster.namespace_table().get("", &name).map(|s| s.decode()) else {
            return;
        };
        if ns.metadata.uid.as_deref() != Some(uid.as_str()) {
            return;
        }
        let remaining = delete_all::<Pod>(&cluster, &name)
            + delete_all::<Lease>(&cluster, &name)
            + delete_all::<PodDisruptionBudget>(&cluster, &name)
            + delete_all::<WorkflowTaskResult>(&cluster, &name)
            + delete_all::<Secret>(&cluster, &name)
            + delete_all::<ConfigMap>(&cluster, &name)
            + delete_all::<ServiceAccount>(&cluster, &name)
            + delete_all::<PersistentVolumeClaim>(&cluster, &name)
            + delete_all::<Event>(&cluster, &name);
        if remaining == 0 && finish(&cluster, &name, &uid) {
            // Anything written meanwhile (a kubelet's last Event) goes with it.
            delete_all::<Event>(&cluster, &name);
            return;
        }
        drop(cluster);
        tokio::time::sleep(RECHECK).await;
    }
}

/// Deletes every object of kind `K` in `namespace` not already being deleted; returns how many
/// are still stored.
fn delete_all<K: ApiKind>(cluster: &Cluster, namespace: &str) -> usize {
    let (items, _) = K::table(cluster).snapshot(Some(namespace), None);
    let mut left = 0;
    for stored in items {
        let obj = stored.decode();
        let name = obj.meta().name.clone().unwrap_or_default();
        if obj.meta().deletion_timestamp.is_some() {
            left += 1;
            continue;
        }
        let opts = DeleteOptions {
            preconditions: Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions {
                    uid: obj.meta().uid.clone(),
                    resource_version: None,
                },
            ),
            ..DeleteOptions::default()
        };
        match delete_object::<K>(cluster, namespace, &name, &opts) {
            Ok((Deleted::Gone(_), _)) | Err(_) => {}
            Ok((Deleted::Pending(_), pending)) => {
                arrange_removal(cluster, namespace, &name, pending);
                left += 1;
            }
        }
    }
    left
}

/// Removes the `kubernetes` finalizer and, when no finalizer is left, the Namespace. False while
/// other finalizers (a user's) hold it.
fn finish(cluster: &Cluster, name: &str, uid: &str) -> bool {
    let result = cluster.namespace_table().write(
        (String::new(), name.to_owned()),
        |current| {
            let Some(current) = current else {
                return Err(());
            };
            let before = current.decode();
            if before.metadata.uid.as_deref() != Some(uid) {
                return Err(());
            }
            let mut ns = before.clone();
            if let Some(spec) = ns.spec.as_mut() {
                if let Some(f) = spec.finalizers.as_mut() {
                    f.retain(|f| f != NAMESPACE_FINALIZER);
                }
                if spec.finalizers.as_ref().is_some_and(Vec::is_empty) {
                    spec.finalizers = None;
                }
            }
            let spec_empty = ns
                .spec
                .as_ref()
                .and_then(|s| s.finalizers.as_ref())
                .is_none_or(Vec::is_empty);
            let meta_empty = ns.metadata.finalizers.as_ref().is_none_or(Vec::is_empty);
            if spec_empty && meta_empty {
                Ok((Write::Delete(ns), true))
            } else if ns == before {
                Ok((Write::Unchanged, false))
            } else {
                Ok((Write::Replace(ns), false))
            }
        },
        |_, _| {},
    );
    matches!(result, Ok((_, true)) | Err(()))
}
