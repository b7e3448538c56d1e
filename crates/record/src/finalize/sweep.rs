//! Once per start: the metadata of every pod in the recorder's namespace(s), paged.
//!
//! Why: a restart resumes the watch from the stored resourceVersion, so a pod whose last event
//! is older than that (its final state committed, the recorder killed before the removal) sends
//! nothing more, and a pod that was quiet since before finalizers were turned on was never given
//! the finalizer. The sweep fixes both, and is the scope valve: a pod carrying the recorder's
//! *own* finalizer that its selector does not match (the selector changed, or the pod's labels
//! did while the recorder was down) is released at once, as no recorder of this scope will ever
//! record it.
//!
//! Each scope owns only its own pods: the valve never touches another finalizer, so the pods of
//! another label shard (`podline.io/record-<other>`) and the pods the launcher
//! created (`podline.io/record`, which a sharded recorder adopts only on the pods of its scope)
//! stay held however the shards restart. [`sort`] is that rule, pure.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use kube::core::ObjectMeta;
use podline_client::finalizer::{has_finalizer, is_recorder_finalizer};
use podline_client::list::Pages;
use podline_client::retry::{RetryPolicy, retry};

use super::config::FinalizeConfig;
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
    /// Pods in scope that also carry another recorder's finalizer: another scope overlaps this
    /// one (or the pod's labels moved it here). Harmless, as each releases only its own, but
    /// recorded twice.
    pub overlapping: usize,
    /// Pods whose metadata does not decode (each logged by name when readable): left as they
    /// are, the rest of their page swept.
    pub undecodable: usize,
}

/// What the sweep does with one listed pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sorting {
    /// In scope, not being deleted, without the own finalizer: add it.
    Add,
    /// Out of scope, carrying the own finalizer: release it (the scope valve; only the own).
    Release,
    /// In scope, being deleted, held by the own or the adopted finalizer: read it and record it
    /// like a watched one (its last event may be older than the resume point).
    Feed,
    /// Nothing to do: in scope and held; being deleted with nothing of ours on it; or out of
    /// scope without the own finalizer (another scope's pod, whatever it carries).
    Leave,
}

/// Sorts one listed pod out for the recorder with `config` watching `selector` (see the module
/// docs): only the own finalizer is ever released from a pod out of scope.
pub(crate) fn sort(
    meta: &ObjectMeta,
    selector: Option<&LabelSelector>,
    config: &FinalizeConfig,
) -> Sorting {
    let own = has_finalizer(meta, &config.finalizer);
    if !in_scope(meta, selector) {
        return if own {
            Sorting::Release
        } else {
            Sorting::Leave
        };
    }
    let adopted = config
        .adopt
        .as_deref()
        .is_some_and(|adopted| has_finalizer(meta, adopted));
    match (meta.deletion_timestamp.is_some(), own || adopted) {
        (false, _) if !own => Sorting::Add,
        (true, true) => Sorting::Feed,
        _ => Sorting::Leave,
    }
}

/// Whether a pod of this recorder's scope also carries another recorder's finalizer.
pub(crate) fn overlaps(meta: &ObjectMeta, config: &FinalizeConfig) -> bool {
    meta.finalizers.iter().flatten().any(|f| {
        is_recorder_finalizer(f)
            && *f != config.finalizer
            && Some(f.as_str()) != config.adopt.as_deref()
    })
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
    let mut pages = Pages::metadata(&api, ListParams::default().limit(PAGE));
    while let Some(page) = pages
        .next(&policy, "list pods for the finalizer sweep")
        .await
    {
        let page = match page {
            Ok(page) => page,
            Err(err) => {
                tracing::warn!(error = %podline_client::error::Chain(&err), "finalizer sweep: cannot list pods; pods already waiting in Terminating are released when they change, or at the next start");
                return report;
            }
        };
        // Logged by the lister, by name; the rest of the page is swept.
        report.undecodable += page.skipped.len();
        let mut deleting = Vec::new();
        for pod in page.items {
            report.pods += 1;
            let meta = pod.metadata;
            if in_scope(&meta, selector) && overlaps(&meta, finalize.config()) {
                report.overlapping += 1;
            }
            match sort(&meta, selector, finalize.config()) {
                Sorting::Add => {
                    report.adds += 1;
                    finalize.worker().add(&meta);
                }
                Sorting::Release => {
                    report.out_of_scope += 1;
                    finalize
                        .worker()
                        .remove(Ticket::new(&meta, ReleaseReason::OutOfScope));
                }
                Sorting::Feed => deleting.push(meta),
                Sorting::Leave => {}
            }
        }
        for meta in deleting {
            if feed(&api, &meta, finalize, queue, lifecycle, &policy).await {
                report.terminating += 1;
            }
        }
    }
    report
}

fn in_scope(meta: &ObjectMeta, selector: Option<&LabelSelector>) -> bool {
    let empty = Default::default();
    selector.is_none_or(|s| s.matches(meta.labels.as_ref().unwrap_or(&empty)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use podline_client::finalizer::RECORD_FINALIZER;

    const A: &str = "podline.io/record-a";
    const B: &str = "podline.io/record-b";

    fn pod(shard: &str, finalizers: &[&str], deleting: bool) -> ObjectMeta {
        ObjectMeta {
            labels: Some([("shard".to_owned(), shard.to_owned())].into()),
            finalizers: Some(finalizers.iter().map(|f| (*f).to_owned()).collect()),
            deletion_timestamp: deleting.then_some(Time(jiff::Timestamp::UNIX_EPOCH)),
            ..ObjectMeta::default()
        }
    }

    fn shard_a() -> (LabelSelector, FinalizeConfig) {
        (
            LabelSelector::parse("shard=a").unwrap(),
            FinalizeConfig::for_shard("a").unwrap(),
        )
    }

    /// The bug of issue 27: shard a's sweep released podline.io/record from shard b's pods,
    /// which then went while shard b was down, unrecorded. Out of its scope, a shard releases
    /// only its own finalizer, never another shard's nor the launcher's.
    #[test]
    fn a_shard_releases_only_its_own_finalizer_from_pods_out_of_its_scope() {
        let (selector, config) = shard_a();
        let sort = |meta: &ObjectMeta| sort(meta, Some(&selector), &config);
        for deleting in [false, true] {
            assert_eq!(sort(&pod("b", &[B], deleting)), Sorting::Leave);
            assert_eq!(
                sort(&pod("b", &[RECORD_FINALIZER], deleting)),
                Sorting::Leave
            );
            assert_eq!(
                sort(&pod("b", &[B, RECORD_FINALIZER], deleting)),
                Sorting::Leave
            );
            assert_eq!(sort(&pod("b", &[], deleting)), Sorting::Leave);
            // Its own finalizer out of its scope (its selector changed, or the pod's labels):
            // the scope valve releases it.
            assert_eq!(sort(&pod("b", &[A], deleting)), Sorting::Release);
            assert_eq!(
                sort(&pod("b", &[RECORD_FINALIZER, A, B], deleting)),
                Sorting::Release
            );
        }
    }

    /// In its scope a shard adds its own finalizer (also next to the launcher's, which it adopts,
    /// and next to another shard's: overlapping scopes each hold the pod), and records a pod
    /// being deleted that its own or the adopted finalizer holds.
    #[test]
    fn a_shard_holds_the_pods_of_its_scope_and_feeds_the_deleted_ones() {
        let (selector, config) = shard_a();
        let sort = |meta: &ObjectMeta| sort(meta, Some(&selector), &config);
        assert_eq!(sort(&pod("a", &[], false)), Sorting::Add);
        assert_eq!(sort(&pod("a", &[RECORD_FINALIZER], false)), Sorting::Add);
        assert_eq!(sort(&pod("a", &[B], false)), Sorting::Add);
        assert_eq!(sort(&pod("a", &[A], false)), Sorting::Leave);
        assert_eq!(sort(&pod("a", &[A], true)), Sorting::Feed);
        assert_eq!(sort(&pod("a", &[RECORD_FINALIZER], true)), Sorting::Feed);
        // Being deleted with nothing of this shard's on it: not its to hold or release.
        assert_eq!(sort(&pod("a", &[], true)), Sorting::Leave);
        assert_eq!(sort(&pod("a", &[B], true)), Sorting::Leave);
    }

    /// An unsharded recorder owns podline.io/record and adopts nothing: without a selector every
    /// listed pod is in scope (its valve never fires); with one (a library user's choice; the
    /// command line asks for a shard) it releases only podline.io/record, never a shard's.
    #[test]
    fn an_unsharded_recorder_owns_only_podline_io_record() {
        let config = FinalizeConfig::default();
        assert_eq!(sort(&pod("b", &[B], false), None, &config), Sorting::Add);
        assert_eq!(sort(&pod("b", &[B], true), None, &config), Sorting::Leave);
        assert_eq!(
            sort(&pod("b", &[RECORD_FINALIZER], true), None, &config),
            Sorting::Feed
        );
        let selector = LabelSelector::parse("shard=a").unwrap();
        assert_eq!(
            sort(&pod("b", &[B], false), Some(&selector), &config),
            Sorting::Leave
        );
        assert_eq!(
            sort(
                &pod("b", &[RECORD_FINALIZER], false),
                Some(&selector),
                &config
            ),
            Sorting::Release
        );
    }

    #[test]
    fn another_recorders_finalizer_in_scope_is_an_overlap() {
        let (_, a) = shard_a();
        assert!(overlaps(&pod("a", &[A, B], false), &a));
        assert!(!overlaps(&pod("a", &[A, RECORD_FINALIZER], false), &a));
        assert!(!overlaps(&pod("a", &[A, "example.com/x"], false), &a));
        let unsharded = FinalizeConfig::default();
        assert!(overlaps(
            &pod("a", &[RECORD_FINALIZER, A], false),
            &unsharded
        ));
        assert!(!overlaps(&pod("a", &[RECORD_FINALIZER], false), &unsharded));
    }
}
