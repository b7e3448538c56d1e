//! The reaper: deletes the Lease, and the pods, of every launcher that stopped renewing its
//! Lease (see [`crate::liveness`]): the guarantee that no pod outlives a `kill -9` of
//! `podline run`, or the loss of its host.
//!
//! Expiry is the client's business, as in Kubernetes' leader election, and is decided by the
//! pure [`Tracker`] (tested without a cluster):
//! - [`Clock::Observed`] (the continuous reaper, which `podline record` can run): a Lease is expired
//!   once the reaper has seen no change to it (its `resourceVersion`) for its
//!   `leaseDurationSeconds` plus the grace, measured on the reaper's own monotonic clock from
//!   when it first saw the current version: clock skew between hosts cannot expire a live
//!   launcher. A reaper that just started waits one full duration and grace before reaping.
//! - [`Clock::RenewTime`] (one pass, `podline gc`): a Lease is expired when its `renewTime` is
//!   older than `leaseDurationSeconds + grace` by the reaper's wall clock. This trusts the hosts'
//!   clocks to agree within the grace; a Lease without a `renewTime` counts as expired.
//!
//! Reaping one launcher: its Lease is deleted with a `resourceVersion` precondition (a launcher
//! that renewed meanwhile is alive: 409, left alone) and background propagation (the garbage
//! collector deletes the pods it owns); then the pods labelled with it are deleted directly, for
//! clusters whose collector is slow, except those annotated [`ON_FINISH_ANNOTATION`]`=keep`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Preconditions, PropagationPolicy};
use podline_client::retry::{self, RetryPolicy};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cleanup;
use crate::error::LaunchError;
use crate::liveness::{LAUNCHER_LABEL, ON_FINISH_ANNOTATION};

/// Default grace on top of a Lease's duration before it counts as expired: three renewal
/// periods of the default launcher ([`crate::liveness::DEFAULT_RENEW_EVERY`]).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(9);

/// Default time between two passes of the continuous reaper.
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(5);

/// How the reaper tells the time a Lease was last renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// When this reaper saw the Lease change (continuous mode; immune to clock skew).
    Observed,
    /// The Lease's `renewTime` against this wall-clock time (one pass).
    RenewTime(jiff::Timestamp),
}

/// What the reaper needs to know of one Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseView {
    /// Its namespace.
    pub namespace: String,
    /// Its name (the value of [`LAUNCHER_LABEL`] on its pods).
    pub name: String,
    /// Its `resourceVersion`: any write (a renewal) changes it.
    pub resource_version: String,
    /// `spec.renewTime`.
    pub renew_time: Option<jiff::Timestamp>,
    /// `spec.leaseDurationSeconds` (absent: 0).
    pub duration: Duration,
}

impl LeaseView {
    /// The view of a Lease as listed.
    pub fn of(lease: &Lease) -> Self {
        let spec = lease.spec.as_ref();
        Self {
            namespace: lease.metadata.namespace.clone().unwrap_or_default(),
            name: lease.metadata.name.clone().unwrap_or_default(),
            resource_version: lease.metadata.resource_version.clone().unwrap_or_default(),
            renew_time: spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0),
            duration: Duration::from_secs(
                spec.and_then(|s| s.lease_duration_seconds)
                    .and_then(|d| u64::try_from(d).ok())
                    .unwrap_or(0),
            ),
        }
    }
}

/// Remembers, per Lease, which version it last saw and when it first saw it; decides expiry.
#[derive(Debug, Default)]
pub struct Tracker {
    seen: BTreeMap<(String, String), (String, Instant)>,
}

impl Tracker {
    /// A tracker that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes in one listing of every Lease in scope at `now` and returns those expired under
    /// `clock` with `grace`. Leases absent from the listing are forgotten.
    pub fn observe(
        &mut self,
        leases: &[LeaseView],
        now: Instant,
        clock: Clock,
        grace: Duration,
    ) -> Vec<LeaseView> {
        let listed: BTreeSet<(String, String)> = leases
            .iter()
            .map(|l| (l.namespace.clone(), l.name.clone()))
            .collect();
        self.seen.retain(|key, _| listed.contains(key));
        let mut expired = Vec::new();
        for lease in leases {
            let key = (lease.namespace.clone(), lease.name.clone());
            let entry = self
                .seen
                .entry(key)
                .or_insert_with(|| (lease.resource_version.clone(), now));
            if entry.0 != lease.resource_version {
                *entry = (lease.resource_version.clone(), now);
            }
            let limit = lease.duration.saturating_add(grace);
            let dead = match clock {
                Clock::Observed => now.saturating_duration_since(entry.1) > limit,
                Clock::RenewTime(wall) => match lease.renew_time {
                    None => true,
                    Some(renewed) => {
                        let age = wall.duration_since(renewed);
                        age.is_positive() && age.unsigned_abs() > limit
                    }
                },
            };
            if dead {
                expired.push(lease.clone());
            }
        }
        expired
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pass {
    /// Launcher Leases seen.
    pub leases: usize,
    /// Expired Leases deleted.
    pub reaped: Vec<String>,
    /// Pods deleted directly (the garbage collector deletes the ones it owns, too).
    pub pods_deleted: usize,
    /// Pods of reaped launchers left alone because their task keeps its pod
    /// ([`OnFinish::Keep`](crate::OnFinish::Keep)).
    pub pods_kept: usize,
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
    /// each Lease's duration.
    pub fn new(client: kube::Client, namespace: Option<String>, grace: Duration) -> Self {
        Self {
            client,
            namespace,
            grace,
            calls: RetryPolicy::default().with_deadline(Some(Duration::from_secs(30))),
        }
    }

    fn leases(&self) -> Api<Lease> {
        match &self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    /// One pass: list the launcher Leases, reap the expired ones.
    pub async fn pass(&self, tracker: &mut Tracker, clock: Clock) -> Result<Pass, LaunchError> {
        let lp = ListParams::default().labels(LAUNCHER_LABEL);
        let api = self.leases();
        let list = retry::retry(&self.calls, "list launcher leases", || api.list(&lp))
            .await
            .map_err(|source| LaunchError::Api {
                action: "listing the launchers' Leases",
                source,
            })?;
        let views: Vec<LeaseView> = list.items.iter().map(LeaseView::of).collect();
        let mut pass = Pass {
            leases: views.len(),
            ..Pass::default()
        };
        for lease in tracker.observe(&views, Instant::now(), clock, self.grace) {
            self.reap(&lease, &mut pass).await?;
        }
        Ok(pass)
    }

    /// Reaps one expired launcher: its Lease (unless renewed meanwhile), then its pods.
    async fn reap(&self, lease: &LeaseView, pass: &mut Pass) -> Result<(), LaunchError> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &lease.namespace);
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            preconditions: Some(Preconditions {
                resource_version: Some(lease.resource_version.clone()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match retry::retry(&self.calls, "delete an expired lease", || {
            leases.delete(&lease.name, &params)
        })
        .await
        {
            Ok(_) => {}
            Err(err) if retry::status_code(&err) == Some(404) => {}
            Err(err) if retry::status_code(&err) == Some(409) => {
                tracing::info!(lease = %lease.name, namespace = %lease.namespace, "the launcher renewed its Lease just in time; left alone");
                return Ok(());
            }
            Err(source) => {
                return Err(LaunchError::Api {
                    action: "deleting an expired launcher Lease",
                    source,
                });
            }
        }
        tracing::warn!(lease = %lease.name, namespace = %lease.namespace, "launcher Lease expired: deleting its pods");
        pass.reaped
            .push(format!("{}/{}", lease.namespace, lease.name));
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &lease.namespace);
        let lp = ListParams::default().labels(&format!("{LAUNCHER_LABEL}={}", lease.name));
        let list = retry::retry(&self.calls, "list a dead launcher's pods", || {
            pods.list(&lp)
        })
        .await
        .map_err(|source| LaunchError::Api {
            action: "listing the pods of an expired launcher",
            source,
        })?;
        for pod in list.items {
            let keep = pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ON_FINISH_ANNOTATION))
                .is_some_and(|v| v == "keep");
            if keep {
                pass.pods_kept += 1;
                continue;
            }
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let name = pod.metadata.name.clone().unwrap_or_default();
            if cleanup::delete_pod(&pods, &name, None, &self.calls).await {
                pass.pods_deleted += 1;
            }
        }
        Ok(())
    }

    /// Reaps every `period` until `stop`, on the observed clock. A failed pass is logged and
    /// the next one tries again.
    pub async fn run(&self, period: Duration, stop: CancellationToken) {
        let mut tracker = Tracker::new();
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = stop.cancelled() => return,
            }
            match self.pass(&mut tracker, Clock::Observed).await {
                Ok(pass) if !pass.reaped.is_empty() => {
                    tracing::info!(reaped = ?pass.reaped, pods = pass.pods_deleted, "reaper pass");
                }
                Ok(_) => {}
                Err(err) => tracing::warn!(error = %err, "reaper pass failed; trying again"),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn view(name: &str, rv: &str, renewed: Option<jiff::Timestamp>) -> LeaseView {
        LeaseView {
            namespace: "ns".into(),
            name: name.into(),
            resource_version: rv.into(),
            renew_time: renewed,
            duration: Duration::from_secs(10),
        }
    }

    /// Kube's rule: expired once unchanged for duration + grace on the reaper's clock, counted
    /// from the first sighting; a renewal (new resourceVersion) restarts the count.
    #[test]
    fn observed_expiry_should_count_from_the_last_change_seen() {
        let grace = Duration::from_secs(5);
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut tracker = Tracker::new();
        // An ancient renewTime does not matter on this clock.
        let old = Some(jiff::Timestamp::UNIX_EPOCH);
        let a1 = [view("a", "1", old)];
        assert!(
            tracker
                .observe(&a1, at(0), Clock::Observed, grace)
                .is_empty()
        );
        assert!(
            tracker
                .observe(&a1, at(15), Clock::Observed, grace)
                .is_empty()
        );
        // Renewed at 15: the count restarts.
        let a2 = [view("a", "2", old)];
        assert!(
            tracker
                .observe(&a2, at(16), Clock::Observed, grace)
                .is_empty()
        );
        assert!(
            tracker
                .observe(&a2, at(31), Clock::Observed, grace)
                .is_empty()
        );
        let dead = tracker.observe(&a2, at(32), Clock::Observed, grace);
        assert_eq!(dead, a2.to_vec());
        // Gone from the listing: forgotten, and a new Lease of the same name starts afresh.
        assert!(
            tracker
                .observe(&[], at(33), Clock::Observed, grace)
                .is_empty()
        );
        assert!(
            tracker
                .observe(&a2, at(40), Clock::Observed, grace)
                .is_empty()
        );
    }

    /// One pass trusts renewTime against the wall clock; a Lease renewed in the future (skew) or
    /// recently is alive, one without a renewTime is dead.
    #[test]
    fn renew_time_expiry_should_compare_with_the_wall_clock() {
        let grace = Duration::from_secs(5);
        let now = jiff::Timestamp::from_second(1_000_000).unwrap();
        let ago = |s: i64| Some(jiff::Timestamp::from_second(1_000_000 - s).unwrap());
        let t = Instant::now();
        let leases = [
            view("fresh", "1", ago(14)),
            view("stale", "1", ago(16)),
            view("future", "1", ago(-100)),
            view("never", "1", None),
        ];
        let dead: Vec<String> = Tracker::new()
            .observe(&leases, t, Clock::RenewTime(now), grace)
            .into_iter()
            .map(|l| l.name)
            .collect();
        assert_eq!(dead, ["stale", "never"]);
    }
}
