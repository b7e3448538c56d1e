//! The reaper: deletes the Lease, and the pods, of every launcher that stopped renewing its
//! Lease (see [`crate::liveness`]): the guarantee that no pod outlives a `kill -9` of
//! `podline run`, or the loss of its host, without ever killing a live run.
//!
//! Expiry is decided by observation alone ([`Tracker`], see its module for the rule and its
//! proof): a Lease is expired once the reaper has seen it unchanged for `leaseDurationSeconds`
//! plus the grace, on its own monotonic clock; no host clock is read, and time the reaper could
//! not see (a failed list, a list slower than the grace, passes further apart than the grace)
//! restarts every Lease's clock, since a launcher cannot renew through an API outage either.
//! Each pass lists once, with no retries (the passes are the retry loop), bounded by the grace.
//!
//! - [`Reaper::run`] (the recorder's reaper): a pass every period, for good.
//! - [`Reaper::sweep`] (`podline gc`): passes until every Lease in scope was seen renewed
//!   (alive) or expired and reaped, or a time limit: one run of gc takes up to the longest
//!   Lease's duration + the grace after its last successful list without a gap.
//!
//! What remains assumed: a launcher renews at least twice per duration (podline's launcher
//! enforces it), an API outage the reaper could miss between two lists is shorter than the
//! grace, and listing works only when renewing does (true of kube-apiserver, whose lists and
//! writes both need etcd; a server answering lists but refusing every renewal for longer than
//! duration + grace looks like dead launchers).
//!
//! A Lease annotated with a keep-for-retry ([`crate::liveness::KEEP_FOR_RETRY_ANNOTATION`]: its
//! task will be retried) is *held* once seen unchanged for its duration + the grace, and reaped
//! only once seen unchanged for that keep on top, so the retry can reattach to its pod (and move
//! it to its own Lease, after which this reaping no longer touches it). `sweep` waits for a
//! held Lease whose keep ends within its limit and reaps it; one whose keep ends later counts as
//! decided (its launcher is dead) and is reported, for a later sweep to reap.
//!
//! Reaping one launcher: only Leases podline's launcher made ([`LeaseView::of_launcher`]); its
//! Lease is deleted with a `resourceVersion` precondition (a launcher that renewed meanwhile is
//! alive: 409, left alone) and background propagation (the garbage collector deletes the pods it
//! owns); then the pods labelled with it and owned by it are deleted directly, for clusters whose
//! collector is slow ([`judge_pod`]: pods of tasks that keep their pod and pods it does not own are left
//! alone).

mod tracker;
mod view;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Preconditions, PropagationPolicy};
use podline_client::list::Pages;
use podline_client::retry::{self, RetryPolicy};
use podline_client::watch::Skipped;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use tracker::{Blindness, Sighting, Tracker, Verdict};
pub use view::{LeaseView, PodVerdict, judge_pod};

use crate::cleanup;
use crate::error::describe_api_error;
use crate::liveness::LAUNCHER_LABEL;

/// Default grace on top of a Lease's duration before it counts as expired: three renewal
/// periods of the default launcher ([`crate::liveness::DEFAULT_RENEW_EVERY`]). It is also the
/// longest gap in the reaper's observation that does not restart every Lease's clock.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(9);

/// Default time between two passes of the continuous reaper (shorter than the grace).
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(5);

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum ReaperError {
    /// The list of the launchers' Leases failed.
    #[error("listing the launchers' Leases: {}", describe_api_error(source))]
    List {
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The list of the launchers' Leases was not answered within the grace (its answer would
    /// have been a gap in the observation anyway).
    #[error("listing the launchers' Leases: no answer within {0:?} (the grace)")]
    ListTimedOut(Duration),
    /// Reaping an expired launcher failed.
    #[error("{action}: {}", describe_api_error(source))]
    Reap {
        /// What was being done.
        action: &'static str,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

impl ReaperError {
    /// Whether no later pass can do better (e.g. 403: RBAC), so a bounded sweep stops at once.
    pub fn is_permanent(&self) -> bool {
        match self {
            ReaperError::List { source } | ReaperError::Reap { source, .. } => {
                retry::classify(source).is_fatal()
            }
            ReaperError::ListTimedOut(_) => false,
        }
    }
}

/// What one pass, or a sweep of passes, did.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pass {
    /// podline launcher Leases seen.
    pub leases: usize,
    /// Expired Leases deleted (`namespace/name`).
    pub reaped: Vec<String>,
    /// Pods deleted directly (the garbage collector deletes the ones it owns, too).
    pub pods_deleted: usize,
    /// Pods of reaped launchers left alone because their task keeps its pod
    /// ([`OnFinish::Keep`](crate::OnFinish::Keep)).
    pub pods_kept: usize,
    /// Pods labelled with a reaped Lease that it does not own: not the launcher's, left alone.
    pub pods_not_owned: usize,
    /// Leases labelled [`LAUNCHER_LABEL`] that podline's launcher did not make: left alone.
    pub foreign_leases: usize,
    /// Leases of dead launchers (seen unchanged for their duration + the grace) kept, with
    /// their pods, for a retry of their task (`namespace/name`), as of the last pass.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<String>,
    /// Listed Leases and pods that did not decode (`namespace/name` when readable): logged and
    /// left alone, never judged.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub undecodable: Vec<String>,
}

/// What [`Reaper::sweep`] did: its passes added up, and what it could not decide.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize)]
pub struct Sweep {
    /// The passes' work (`leases`: distinct Leases seen over the sweep).
    #[serde(flatten)]
    pub work: Pass,
    /// Leases neither seen renewed nor expired when the time limit came (`namespace/name`).
    pub undecided: Vec<String>,
    /// Lists that failed or timed out (each restarted every Lease's clock).
    pub failed_lists: u32,
    /// How long the sweep observed, in seconds.
    pub observed_seconds: f64,
    /// The last failure, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// The reaper: its scope and timing.
#[derive(Clone)]
pub struct Reaper {
    client: kube::Client,
    namespace: Option<String>,
    grace: Duration,
    calls: RetryPolicy,
}

impl std::fmt::Debug for Reaper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reaper")
            .field("namespace", &self.namespace)
            .field("grace", &self.grace)
            .finish_non_exhaustive()
    }
}

impl Reaper {
    /// A reaper of the launchers in `namespace` (None: all namespaces), with `grace` on top of
    /// each Lease's duration (and as the longest observation gap that is not an outage).
    pub fn new(client: kube::Client, namespace: Option<String>, grace: Duration) -> Self {
        Self {
            client,
            namespace,
            grace,
            calls: RetryPolicy::default().with_deadline(Some(Duration::from_secs(30))),
        }
    }

    /// A tracker with this reaper's grace, for [`Reaper::pass`].
    pub fn tracker(&self) -> Tracker {
        Tracker::new(self.grace)
    }

    fn leases(&self) -> Api<Lease> {
        match &self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    /// One pass: list the launcher Leases once (bounded by the grace, no retries), reap the
    /// expired ones. Any failure is a loss of sight for `tracker`: the next successful pass
    /// restarts every clock.
    pub async fn pass(&self, tracker: &mut Tracker) -> Result<Pass, ReaperError> {
        let result = self.look_and_reap(tracker).await;
        if result.is_err() {
            tracker.lost_sight();
        }
        result
    }

    async fn look_and_reap(&self, tracker: &mut Tracker) -> Result<Pass, ReaperError> {
        let lp = ListParams::default().labels(LAUNCHER_LABEL);
        let api = self.leases();
        let asked = Instant::now();
        // One attempt: the passes are the retry loop. A Lease that does not decode is logged
        // and skipped: never judged (its clock starts when it decodes again), never reaped.
        let once = RetryPolicy::default().with_max_attempts(1);
        let listing = Pages::objects(&api, lp).all(&once, "list launcher leases");
        let list = match tokio::time::timeout(self.grace, listing).await {
            Ok(Ok(list)) => list,
            Ok(Err(source)) => return Err(ReaperError::List { source }),
            Err(_) => return Err(ReaperError::ListTimedOut(self.grace)),
        };
        let sight = Sighting {
            asked,
            answered: Instant::now(),
        };
        let views: Vec<LeaseView> = list
            .items
            .iter()
            .filter_map(LeaseView::of_launcher)
            .collect();
        let mut pass = Pass {
            leases: views.len(),
            foreign_leases: list.items.len() - views.len(),
            undecodable: list.skipped.iter().map(Skipped::object_name).collect(),
            ..Pass::default()
        };
        let verdict = tracker.observe(&views, sight);
        match verdict.restarted {
            Some(Blindness::FailedList) => tracing::info!(
                leases = views.len(),
                "the reaper sees the Leases again after failed lists: every Lease's clock restarts"
            ),
            Some(Blindness::Gap(gap)) => tracing::info!(
                leases = views.len(), ?gap, grace = ?self.grace,
                "the reaper could not see the Leases for longer than the grace: every Lease's clock restarts"
            ),
            None => {}
        }
        for lease in &verdict.newly_held {
            tracing::info!(lease = %lease.name, namespace = %lease.namespace, keep_for_retry = ?lease.keep_for_retry,
                "launcher Lease seen unchanged for its duration + grace, kept for a retry of its task: its pods are reaped once it stays unchanged for that long too");
        }
        for lease in verdict.expired {
            if self.reap(&lease, &mut pass).await? {
                tracker.forget(&lease);
            }
        }
        pass.held = tracker.held();
        Ok(pass)
    }

    /// Reaps one expired launcher: its Lease (unless renewed meanwhile), then the pods it owns.
    /// Returns whether the Lease is gone.
    async fn reap(&self, lease: &LeaseView, pass: &mut Pass) -> Result<bool, ReaperError> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &lease.namespace);
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            preconditions: Some(Preconditions {
                resource_version: Some(lease.resource_version.clone()),
                uid: Some(lease.uid.clone()),
            }),
            ..DeleteParams::default()
        };
        match retry::retry(&self.calls, "delete an expired lease", || {
            leases.delete(&lease.name, &params)
        })
        .await
        {
            Ok(_) => {}
            Err(err) if retry::status_code(&err) == Some(404) => return Ok(true),
            Err(err) if retry::status_code(&err) == Some(409) => {
                tracing::info!(lease = %lease.name, namespace = %lease.namespace, "the launcher renewed its Lease just in time; left alone");
                return Ok(false);
            }
            Err(source) => {
                return Err(ReaperError::Reap {
                    action: "deleting an expired launcher Lease",
                    source,
                });
            }
        }
        tracing::warn!(lease = %lease.name, namespace = %lease.namespace, duration = ?lease.duration, grace = ?self.grace,
            "launcher Lease seen unchanged for its duration + grace: deleted, deleting its pods");
        pass.reaped.push(lease.key());
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &lease.namespace);
        let lp = ListParams::default().labels(&format!("{LAUNCHER_LABEL}={}", lease.name));
        // A pod that does not decode is logged and skipped: the garbage collector still deletes
        // it with the Lease, if the Lease owns it.
        let list = Pages::objects(&pods, lp)
            .all(&self.calls, "list a dead launcher's pods")
            .await
            .map_err(|source| ReaperError::Reap {
                action: "listing the pods of an expired launcher",
                source,
            })?;
        pass.undecodable
            .extend(list.skipped.iter().map(Skipped::object_name));
        for pod in list.items {
            match judge_pod(&pod, lease) {
                PodVerdict::Kept => pass.pods_kept += 1,
                PodVerdict::NotOurs => {
                    if pod.metadata.deletion_timestamp.is_none() {
                        pass.pods_not_owned += 1;
                    }
                }
                PodVerdict::Delete => {
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    if cleanup::delete_pod(&pods, &name, None, &self.calls).await {
                        pass.pods_deleted += 1;
                    }
                }
            }
        }
        Ok(true)
    }

    /// Reaps every `period` until `stop`. A failed pass is logged and the next one tries again
    /// (having lost sight: every clock restarts). `period` must be shorter than the grace, or
    /// every pass is a gap and nothing is ever reaped (the CLI refuses such flags).
    pub async fn run(&self, period: Duration, stop: CancellationToken) {
        if period >= self.grace {
            tracing::warn!(?period, grace = ?self.grace,
                "the reaper's period is not shorter than its grace: every pass counts as a gap in its observation, so it reaps nothing");
        }
        let mut tracker = self.tracker();
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = stop.cancelled() => return,
            }
            let pass = tokio::select! {
                pass = self.pass(&mut tracker) => pass,
                () = stop.cancelled() => return,
            };
            match pass {
                Ok(pass) if !pass.reaped.is_empty() => {
                    tracing::info!(reaped = ?pass.reaped, pods = pass.pods_deleted, "reaper pass");
                }
                Ok(_) => {}
                Err(err) => {
                    tracing::warn!(error = %err, "reaper pass failed; every Lease's clock restarts at the next one")
                }
            }
        }
    }

    /// Passes every `period` (shorter than the grace) until every podline Lease in scope was
    /// seen renewed (alive), expired and reaped, held for a retry of its task past `limit` (dead;
    /// reaped by a later sweep; one whose keep ends within `limit` is waited for), or gone; or until `limit` has passed, leaving
    /// the rest [`Sweep::undecided`]. A failed list restarts every clock, so no Lease is reaped
    /// on the first answer after errors. Fails at once on an error no later pass can fix
    /// (e.g. 403), and when not one list succeeded within `limit`.
    pub async fn sweep(&self, period: Duration, limit: Duration) -> Result<Sweep, ReaperError> {
        let started = Instant::now();
        let mut tracker = self.tracker();
        let mut sweep = Sweep::default();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut listed = false;
        let mut last_failure = None;
        loop {
            match self.pass(&mut tracker).await {
                Ok(pass) => {
                    listed = true;
                    sweep.work.reaped.extend(pass.reaped);
                    sweep.work.pods_deleted += pass.pods_deleted;
                    sweep.work.pods_kept += pass.pods_kept;
                    sweep.work.pods_not_owned += pass.pods_not_owned;
                    for name in pass.undecodable {
                        if !sweep.work.undecodable.contains(&name) {
                            sweep.work.undecodable.push(name);
                        }
                    }
                    sweep.work.foreign_leases = sweep.work.foreign_leases.max(pass.foreign_leases);
                    sweep.work.held = pass.held;
                    seen.extend(tracker.tracked());
                    seen.extend(sweep.work.reaped.iter().cloned());
                    // Held Leases are decided (dead), but one whose keep ends within the
                    // limit is waited for and reaped.
                    if tracker.undecided().is_empty() && !tracker.held_expiring_by(started + limit)
                    {
                        break;
                    }
                }
                Err(err) if err.is_permanent() => return Err(err),
                Err(err) => {
                    tracing::debug!(error = %err, "a gc pass failed; every Lease's clock restarts");
                    sweep.failed_lists += 1;
                    last_failure = Some(err);
                }
            }
            if started.elapsed().saturating_add(period) > limit {
                if !listed && let Some(err) = last_failure {
                    return Err(err);
                }
                sweep.undecided = tracker.undecided();
                break;
            }
            tokio::time::sleep(period).await;
        }
        sweep.work.leases = seen.len();
        sweep.observed_seconds = started.elapsed().as_secs_f64();
        sweep.last_error = last_failure.map(|e| e.to_string());
        Ok(sweep)
    }
}
