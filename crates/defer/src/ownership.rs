//! Who owns a deferred task's pod while it runs: the Lease of the triggerer process that waits
//! for it ([`own`], [`disown`]).
//!
//! The synchronous launcher's pods are owned by the Lease of the `podline run` that made them
//! (podline-launch's `liveness`): a launcher that dies stops renewing, a reaper deletes the Lease
//! and the pods it owns. A deferred pod outlives the worker that created it by design, so it is
//! owned instead by the Lease of the triggerer waiting for it (one Lease per triggerer process,
//! renewed by that process's tokio runtime): each wait, on a fresh triggerer as on the first,
//! moves the pod's label and `ownerReference` to its own Lease before it waits. A triggerer that
//! dies stops renewing; if a new triggerer re-creates the trigger within the Lease's duration,
//! the pod is moved to the new Lease and the reaper of the old one leaves it alone; if none
//! does, the pod is reaped with the dead triggerer's Lease. The Lease's duration is therefore
//! chosen longer than Airflow's triggerer health-check threshold (how long Airflow waits before
//! re-assigning a dead triggerer's triggers) plus a triggerer's start.
//!
//! A triggerer never releases its Lease (that would collect the pods it owns, and a triggerer
//! stopping for a restart must not delete them); the Lease expires and is reaped.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use kube::api::{Patch, PatchParams};
use podline_client::retry::RetryPolicy;
use podline_launch::liveness::LEASE_NAME_PREFIX;
use podline_launch::{LAUNCHER_LABEL, Liveness};

use crate::error::DeferError;

/// The pod's owners other than a podline launcher's (or triggerer's) Lease: kept as they are.
fn foreign_owners(pod: &Pod) -> Vec<OwnerReference> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|o| !is_podline_lease(o))
        .cloned()
        .collect()
}

fn is_podline_lease(owner: &OwnerReference) -> bool {
    owner.kind == "Lease"
        && owner.api_version == "coordination.k8s.io/v1"
        && owner.name.starts_with(LEASE_NAME_PREFIX)
}

/// Whether `pod` is owned by `liveness`'s Lease and labelled with it already.
pub fn owned_by(pod: &Pod, liveness: &Liveness) -> bool {
    let labelled = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LAUNCHER_LABEL))
        .is_some_and(|v| v == liveness.name());
    labelled
        && pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| is_podline_lease(o) && o.name == liveness.name())
}

/// Moves `pod` to `liveness`'s Lease (creating the Lease in its namespace on first use): the
/// launcher label names it and the only podline `ownerReference` is to it (a dead triggerer's
/// is dropped, other owners are kept). Returns the pod as patched.
pub async fn own(
    api: &Api<Pod>,
    pod: &Pod,
    liveness: &Liveness,
    calls: &RetryPolicy,
) -> Result<Pod, DeferError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let mut owners = foreign_owners(pod);
    owners.push(liveness.owner_in(&namespace).await?);
    let name = pod.metadata.name.clone().unwrap_or_default();
    let patch = serde_json::json!({
        "metadata": {
            "labels": { LAUNCHER_LABEL: liveness.name() },
            "ownerReferences": owners,
        }
    });
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    podline_client::retry::retry(calls, "own the deferred pod", || {
        api.patch(&name, &params, &patch)
    })
    .await
    .map_err(|source| DeferError::Api {
        action: "moving the pod to this triggerer's Lease",
        source,
    })
}

/// Drops every podline Lease's `ownerReference` from an ended pod (this triggerer's, or a
/// dead one's if the pod ended while no triggerer watched): from here on the task's clean-up
/// (`on_finish_action`) decides its fate, not a Lease. Best effort: a failure is logged (the
/// pod, which has ended, is then collected with the Lease).
pub async fn disown(api: &Api<Pod>, pod: &Pod, calls: &RetryPolicy) {
    let owned = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(is_podline_lease);
    if !owned {
        return;
    }
    let name = pod.metadata.name.clone().unwrap_or_default();
    let patch = serde_json::json!({ "metadata": { "ownerReferences": foreign_owners(pod) } });
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    let patched = podline_client::retry::retry(calls, "disown the deferred pod", || {
        api.patch(&name, &params, &patch)
    })
    .await;
    if let Err(err) = patched {
        tracing::warn!(pod = %name, error = %err, "could not detach the ended pod from the triggerer's Lease");
    }
}
