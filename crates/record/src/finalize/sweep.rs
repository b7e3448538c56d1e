//! Once per start: the metadata of every pod in the recorder's namespace(s), paged.
//!
//! Why: a restart resumes the watch from the stored resourceVersion, so a pod whose last event
//! is older than that (its final state committed, the recorder killed before the removal) sends
//! nothing more, and a pod that was quiet since before finalizers were turned on was never given
//! the finalizer. The sweep fixes both, and is the scope valve: a pod carrying the finalizer that
//! the recorder's selector does not match (the selector changed) is released at once, as no
//! recorder of this scope will ever record it.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use kube::core::ObjectMeta;
use podline_client::finalizer::has_finalizer;
use podline_client::retry::{RetryPolicy, retry};

use super::running::Finalize;
use crate::lifecycle::{LifecycleConfig, observe};
use crate::queue::Queue;
use crate::selector::LabelSelector;
use crate::ticket::{ReleaseReason, Ticket};

/// Pods per LIST page.
const PAGE: u32 = 500;

/// What one sweep found (for the log line and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SweepReport {
    /// Pods listed.
    pub pods: usize,
    /// Pods in scope asked to get the finalizer.
    pub adds: usize,
    /// Pods out of scope whose finalizer is removed.
    pub out_of_scope: usize,
    /// Pods in scope waiting in Terminating, fed to the recorder.
    pub terminating: usize,
}

/// Lists the pods' metadata in `namespace` (all with `None`) and sorts each pod out (see the
/// module docs). Errors end the sweep with a warning: recording goes on without it.
pub(crate) async fn sweep(
    client: &kube::Client,
    namespace: Option<&str>,
    selector: Option<&LabelSelector>,
    finalize: &Finalize,
    queue: &Queue,
    lifecycle: &LifecycleConfig,
) -> SweepReport {
    let api: Api<Pod> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let policy = RetryPolicy::default();
    let mut report = SweepReport::default();
    let mut continue_token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(PAGE);
        if let Some(token) = &continue_token {
            params = params.continue_token(token);
        }
        let page = match retry(&policy, "list pods for the finalizer sweep", || {
            api.list_metadata(&params)
        })
        .await
        {
            Ok(page) => page,
            Err(err) => {
                tracing::warn!(error = %podline_client::error::Chain(&err), "finalizer sweep: cannot list pods; pods already waiting in Terminating are released when they change, or at the next start");
                return report;
            }
        };
        for pod in &page.items {
            report.pods += 1;
            sort_out(&pod.metadata, selector, finalize, &mut report);
        }
        let deleting: Vec<ObjectMeta> = page
            .items
            .into_iter()
            .map(|p| p.metadata)
            .filter(|meta| {
                meta.deletion_timestamp.is_some()
                    && has_finalizer(meta, finalize.finalizer())
                    && in_scope(meta, selector)
            })
            .collect();
        for meta in deleting {
            if feed(&api, &meta, finalize, queue, lifecycle, &policy).await {
                report.terminating += 1;
            }
        }
        continue_token = page.metadata.continue_.filter(|t| !t.is_empty());
        if continue_token.is_none() {
            return report;
        }
    }
}

fn in_scope(meta: &ObjectMeta, selector: Option<&LabelSelector>) -> bool {
    let empty = Default::default();
    selector.is_none_or(|s| s.matches(meta.labels.as_ref().unwrap_or(&empty)))
}

/// Adds to a pod in scope, releases one out of scope; pods waiting in Terminating are the
/// caller's.
fn sort_out(
    meta: &ObjectMeta,
    selector: Option<&LabelSelector>,
    finalize: &Finalize,
    report: &mut SweepReport,
) {
    let carries = has_finalizer(meta, finalize.finalizer());
    if !in_scope(meta, selector) {
        if carries {
            report.out_of_scope += 1;
            finalize
                .worker()
                .remove(Ticket::new(meta, ReleaseReason::OutOfScope));
        }
        return;
    }
    if !carries && meta.deletion_timestamp.is_none() {
        report.adds += 1;
        finalize.worker().add(meta);
    }
}

/// Reads a pod waiting in Terminating and records it like a watched one (without moving the
/// resume point: this read is not part of the watch's sequence). False if it is gone or
/// cannot be read or decoded.
async fn feed(
    api: &Api<Pod>,
    meta: &ObjectMeta,
    finalize: &Finalize,
    queue: &Queue,
    lifecycle: &LifecycleConfig,
    policy: &RetryPolicy,
) -> bool {
    let Some(name) = meta.name.as_deref() else {
        return false;
    };
    let namespaced: Api<Pod> = match meta.namespace.as_deref() {
        Some(ns) => Api::namespaced(api.clone().into_client(), ns),
        None => api.clone(),
    };
    let pod = match retry(policy, "read a terminating pod", || {
        namespaced.get_opt(name)
    })
    .await
    {
        Ok(Some(pod)) if pod.metadata.uid == meta.uid => pod,
        Ok(_) => return false,
        Err(err) => {
            tracing::warn!(namespace = meta.namespace.as_deref().unwrap_or_default(), pod = name, error = %podline_client::error::Chain(&err), "finalizer sweep: cannot read a pod waiting in Terminating");
            return false;
        }
    };
    match observe(&pod, lifecycle) {
        Ok(obs) => {
            queue.upsert(obs.clone()).await;
            finalize.observed(&pod.metadata, &obs);
            true
        }
        Err(err) => {
            tracing::warn!(error = %err, "finalizer sweep: cannot record a pod waiting in Terminating");
            false
        }
    }
}
