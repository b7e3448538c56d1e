//! `pods/{name}/eviction`: the API-initiated eviction (`kubectl drain`, the descheduler), as
//! kube-apiserver's `EvictionREST` does it.
//!
//! The body is a `policy/v1` Eviction (`policy/v1beta1` is still accepted, as in 1.32, though
//! discovery lists only v1). The pod gets the `DisruptionTarget` condition (reason
//! `EvictionByEvictionAPI`) and is then deleted with the Eviction's `deleteOptions`, exactly as a
//! DELETE with those options would delete it (graceful for a running pod, two writes for an
//! unbound one). The answer is `201` with a Success Status. A running pod covered by a
//! PodDisruptionBudget goes only if the budget allows a disruption, which the eviction takes
//! from it (`podline_sim_core::controllers::disruption::take`); else the answer is
//! kube-apiserver's 429 (`Cannot evict pod as it would violate the pod's disruption budget.`,
//! the budget's counts in its cause).

use axum::response::Response;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta};
use podline_sim_core::cluster::{Cluster, Write};
use podline_sim_core::controllers::disruption;
use podline_sim_core::delete;
use podline_sim_core::kinds::ApiKind;
use serde::Deserialize;

use super::binding::update_condition;
use super::body::JsonBody;
use super::decode::{Expected, decode_as};
use super::{AppState, RequestInfo};
use crate::status::ApiError;

/// How often an eviction whose delete lost a race is tried again (the registry retries
/// conflicts 20 times, 500 ms apart; the sim's writes are quick, so it retries at once).
const ATTEMPTS: usize = 20;

/// An Eviction as the registry reads it.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct EvictionBody {
    metadata: ObjectMeta,
    delete_options: Option<DeleteOptions>,
}

/// Handles an Eviction create (see the module docs). `query_dry_run` is the request's `dryRun`
/// values.
pub(crate) fn evict(
    state: &AppState,
    info: &RequestInfo,
    body: &JsonBody,
    query_dry_run: &[String],
) -> Result<Response, ApiError> {
    let eviction: EvictionBody = decode_as(
        body,
        &Expected {
            kind: "Eviction",
            api_versions: &["policy/v1", "policy/v1beta1"],
            any_kind: false,
        },
    )?;
    if let Some(ns) = eviction
        .metadata
        .namespace
        .as_deref()
        .filter(|ns| !ns.is_empty())
        && ns != info.namespace
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if eviction.metadata.name.as_deref().unwrap_or_default() != info.name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let mut opts = propagate_dry_run(eviction.delete_options, query_dry_run)?;
    // `BeforeDelete`: a negative grace period is treated as 1 s.
    if opts.grace_period_seconds.is_some_and(|g| g < 0) {
        opts.grace_period_seconds = Some(1);
    }
    let dry_run = opts.dry_run.iter().flatten().any(|d| d == "All");
    let client_rv = opts
        .preconditions
        .as_ref()
        .is_some_and(|p| p.resource_version.is_some());
    let cluster = state.cluster();
    let (ns, name) = (info.namespace.as_str(), info.name.as_str());
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let Some(stored) = Pod::table(cluster).get(ns, name) else {
            return Err(ApiError::not_found("", "pods", name));
        };
        let pod = stored.decode();
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or_default();
        let deleting = pod.metadata.deletion_timestamp.is_some();
        let mut one = opts.clone();
        // `canIgnorePDB`: a terminal, pending or deleted pod is no disruption a budget counts.
        if !matches!(phase, "Succeeded" | "Failed" | "Pending") && !deleting {
            // The budget path: one attempt, as kube-apiserver makes one.
            let allowed = disruption::take(cluster, &pod, dry_run)?;
            // An unready pod let go without taking a disruption must still be that version
            // (it might have become ready since).
            if allowed == disruption::Allowed::DeleteIfUnchanged && !client_rv {
                one.preconditions
                    .get_or_insert_with(Default::default)
                    .resource_version
                    .clone_from(&pod.metadata.resource_version);
            }
            mark_and_delete(cluster, ns, name, one, dry_run)?;
            return Ok(super::respond::created_success());
        }
        // A pending pod may become ready (and count for a budget) at any moment: the delete is
        // conditional on the version just read (`shouldEnforceResourceVersion`).
        if phase == "Pending" && !deleting && !client_rv {
            one.preconditions
                .get_or_insert_with(Default::default)
                .resource_version
                .clone_from(&pod.metadata.resource_version);
        }
        match mark_and_delete(cluster, ns, name, one, dry_run) {
            Ok(()) => return Ok(super::respond::created_success()),
            Err(err) if err.code == 409 && !client_rv => last = Some(err),
            Err(err) => return Err(err),
        }
    }
    Err(last.unwrap_or_else(|| ApiError::internal("eviction failed")))
}

/// `propagateDryRun`: the request's `dryRun` and the Eviction's `deleteOptions.dryRun` must agree
/// when both are given (else a 500 with no reason, as the registry's plain error is answered).
fn propagate_dry_run(
    options: Option<DeleteOptions>,
    query_dry_run: &[String],
) -> Result<DeleteOptions, ApiError> {
    let mut options = options.unwrap_or_default();
    let in_body = options.dry_run.clone().unwrap_or_default();
    if in_body.is_empty() {
        options.dry_run = (!query_dry_run.is_empty()).then(|| query_dry_run.to_vec());
    } else if !query_dry_run.is_empty() && in_body != query_dry_run {
        return Err(ApiError::new(
            500,
            "",
            format!(
                "Non-matching dry-run options in request and content: [{}] and [{}]",
                query_dry_run.join(" "),
                in_body.join(" ")
            ),
        ));
    }
    Ok(options)
}

/// `addConditionAndDeletePod`: the `DisruptionTarget` condition (checking the preconditions
/// against the latest pod), then the delete, conditional on the version the condition write
/// made when the caller asked for a resourceVersion.
fn mark_and_delete(
    cluster: &Cluster,
    ns: &str,
    name: &str,
    mut opts: DeleteOptions,
    dry_run: bool,
) -> Result<(), ApiError> {
    if dry_run {
        let Some(stored) = Pod::table(cluster).get(ns, name) else {
            return Err(ApiError::not_found("", "pods", name));
        };
        return delete::check_preconditions::<Pod>(&opts, &stored.decode());
    }
    let (commit, unchanged_rv) = Pod::commit(cluster, ns, name, |current| {
        let Some(current) = current else {
            return Err(ApiError::not_found("", "pods", name));
        };
        let old = current.decode();
        delete::check_preconditions::<Pod>(&opts, &old)?;
        let mut pod = old.clone();
        update_condition(
            &mut pod,
            PodCondition {
                type_: "DisruptionTarget".to_owned(),
                status: "True".to_owned(),
                reason: Some("EvictionByEvictionAPI".to_owned()),
                message: Some("Eviction API: evicting".to_owned()),
                ..PodCondition::default()
            },
        );
        if pod == old {
            Ok((Write::Unchanged, old.metadata.resource_version.clone()))
        } else {
            Ok((Write::Replace(pod), None))
        }
    })?;
    let written_rv = commit
        .and_then(|c| c.obj.metadata.resource_version.clone())
        .or(unchanged_rv);
    if let Some(pre) = opts.preconditions.as_mut()
        && pre.resource_version.is_some()
    {
        pre.resource_version = written_rv;
    }
    let (_, pending) = delete::delete_object::<Pod>(cluster, ns, name, &opts)?;
    delete::arrange_removal(cluster, ns, name, pending);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dry_run_in_the_body_and_the_query_must_agree() {
        let all = vec!["All".to_owned()];
        let from_query = propagate_dry_run(None, &all).expect("ok");
        assert_eq!(from_query.dry_run, Some(all.clone()));
        let body = DeleteOptions {
            dry_run: Some(all.clone()),
            ..DeleteOptions::default()
        };
        assert_eq!(
            propagate_dry_run(Some(body.clone()), &[])
                .expect("ok")
                .dry_run,
            Some(all.clone())
        );
        let err = propagate_dry_run(Some(body), &["Other".to_owned()]).expect_err("differ");
        assert_eq!(err.code, 500);
        assert_eq!(
            err.message,
            "Non-matching dry-run options in request and content: [Other] and [All]"
        );
    }
}
