//! The triggerer's half of a deferred launch: many waits, one watch ([`Waiters`]).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use podline_client::retry::RetryPolicy;
use podline_launch::podwatch::{PodState, SharedPodWatches};
use podline_launch::wait::{StartStep, StartTracker};
use podline_launch::{LAUNCH_ID_LABEL, Liveness};
use tokio::time::Instant;

use crate::error::DeferError;
use crate::outcome::{Outcome, judge};
use crate::start::label;

/// The waits of one process on one cluster: all waits for pods of one namespace share one watch
/// (on podline's launch-id label) and the client's one connection, so the API server's load
/// does not grow with the number of deferred tasks, only with the number of namespaces.
#[derive(Clone)]
pub struct Waiters {
    client: kube::Client,
    shared: SharedPodWatches,
    calls: RetryPolicy,
}

impl std::fmt::Debug for Waiters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiters")
            .field("shared", &self.shared)
            .finish_non_exhaustive()
    }
}

impl Waiters {
    /// No watch yet: each namespace's starts with its first wait and lasts as long as `self`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            shared: SharedPodWatches::new(client.clone()),
            client,
            calls: RetryPolicy::default().with_deadline(Some(Duration::from_secs(30))),
        }
    }

    /// Waits until pod `namespace/name`, launched with `launch_id`, has ended, and returns its
    /// [`Outcome`] judged on `base_container`. A pod already ended (a wait re-created after a
    /// triggerer died) resolves at once; a pod of that name with another launch id is not the
    /// task's and resolves as an error, untouched.
    ///
    /// The wait subscribes to the shared watch first, then reads the pod once: an end that
    /// happened before the subscription shows in that read, one after it arrives on the watch.
    ///
    /// With an `owner` (this process's Lease, see [`crate::ownership`]), a running pod is moved
    /// to that Lease before the wait, and an ended one is released from every podline Lease.
    /// With `start` limits, a pod that cannot start (a permanent image error, not scheduled or
    /// not started in time) ends the wait as the synchronous launcher reports it.
    pub async fn wait(
        &self,
        namespace: &str,
        name: &str,
        launch_id: &str,
        base_container: &str,
        options: &WaitOptions<'_>,
    ) -> Result<Outcome, DeferError> {
        let owner = options.owner;
        let mut state = self.shared.subscribe(namespace, name);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let now = podline_client::retry::retry(&self.calls, "get pod", || api.get_opt(name))
            .await
            .map_err(|source| DeferError::Api {
                action: "reading the pod to wait for",
                source,
            })?;
        let Some(pod) = now else {
            return Ok(Outcome::gone(namespace, name));
        };
        if let Some(outcome) = verdict(&pod, namespace, name, launch_id, base_container) {
            self.release(&api, Some(&pod), launch_id, owner).await;
            return Ok(outcome);
        }
        if let Some(liveness) = owner
            && !crate::ownership::owned_by(&pod, liveness)
        {
            match crate::ownership::own(&api, &pod, liveness, &self.calls).await {
                Ok(_) => tracing::debug!(
                    pod = name,
                    lease = liveness.name(),
                    "pod owned by this process's Lease"
                ),
                Err(err) => {
                    tracing::warn!(pod = name, error = %err, "could not move the pod to this process's Lease; it stays with its previous owner")
                }
            }
        }
        let mut start = options.start.map(|limits| {
            StartTracker::new(
                name,
                base_container,
                limits.schedule_timeout,
                limits.startup_timeout,
                Instant::now(),
            )
        });
        let mut deadline = None;
        loop {
            if let Some((outcome, last)) = {
                let seen = state.borrow_and_update();
                let ended = from_state(&seen, namespace, name, launch_id, base_container);
                let ended = match (ended, &mut start, &seen.pod) {
                    (None, Some(tracker), Some(pod)) => match tracker.step(pod, Instant::now()) {
                        StartStep::Wait { until } => {
                            deadline = Some(until);
                            None
                        }
                        StartStep::Started => {
                            start = None;
                            deadline = None;
                            None
                        }
                        StartStep::Failed(err) => Some(start_failed(pod, namespace, name, &err)),
                    },
                    (ended, _, _) => ended,
                };
                ended.map(|outcome| (outcome, seen.pod.clone()))
            } {
                self.release(&api, last.as_ref(), launch_id, owner).await;
                return Ok(outcome);
            }
            let changed = match deadline {
                Some(until) => tokio::select! {
                    changed = state.changed() => changed,
                    () = tokio::time::sleep_until(until) => {
                        let err = start.as_ref().map(StartTracker::timed_out);
                        let last = state.borrow().pod.clone();
                        if let (Some(err), Some(pod)) = (err, last) {
                            self.release(&api, Some(&pod), launch_id, owner).await;
                            return Ok(start_failed(&pod, namespace, name, &err));
                        }
                        deadline = None;
                        continue;
                    }
                },
                None => state.changed().await,
            };
            if changed.is_err() {
                // The feed dropped the pod's channel after its last state (gone), or ended.
                let last = state.borrow();
                return Ok(
                    from_state(&last, namespace, name, launch_id, base_container)
                        .unwrap_or_else(|| Outcome::gone(namespace, name)),
                );
            }
        }
    }

    /// An ended pod of this launch leaves every podline Lease (only when this process owns
    /// pods at all).
    async fn release(
        &self,
        api: &Api<Pod>,
        pod: Option<&Pod>,
        launch_id: &str,
        owner: Option<&Liveness>,
    ) {
        if let (Some(_), Some(pod)) = (owner, pod)
            && label(pod, LAUNCH_ID_LABEL).as_deref() == Some(launch_id)
        {
            crate::ownership::disown(api, pod, &self.calls).await;
        }
    }
}

/// Limits on a pod's start (KubernetesPodOperator's `schedule_timeout_seconds` and
/// `startup_timeout_seconds`), counted from the wait's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartLimits {
    /// How long the pod may stay unscheduled.
    pub schedule_timeout: Duration,
    /// How long its containers may take to start once it is scheduled.
    pub startup_timeout: Duration,
}

/// How a wait treats its pod besides awaiting its end.
#[derive(Debug, Clone, Copy, Default)]
pub struct WaitOptions<'a> {
    /// This process's Lease, which owns the pod while it runs ([`crate::ownership`]).
    pub owner: Option<&'a Liveness>,
    /// Fail a pod that cannot start, as the synchronous launcher does.
    pub start: Option<StartLimits>,
}

/// The outcome of a pod that could not start: the launcher's error as the task's.
fn start_failed(
    pod: &Pod,
    namespace: &str,
    name: &str,
    err: &podline_launch::LaunchError,
) -> Outcome {
    let waiting = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .find_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone());
    Outcome {
        phase: pod.status.as_ref().and_then(|s| s.phase.clone()),
        reason: waiting,
        ..Outcome::failed_to_follow(namespace, name, err.to_string())
    }
}

fn from_state(
    state: &PodState,
    namespace: &str,
    name: &str,
    launch_id: &str,
    base_container: &str,
) -> Option<Outcome> {
    if let Some(fatal) = &state.fatal {
        return Some(Outcome::failed_to_follow(namespace, name, fatal.clone()));
    }
    let judged = state
        .pod
        .as_ref()
        .and_then(|pod| verdict(pod, namespace, name, launch_id, base_container));
    match judged {
        Some(outcome) => Some(outcome),
        None if state.gone => Some(Outcome::gone(namespace, name)),
        None => None,
    }
}

/// The outcome of `pod` if it has ended, or if it is not the task's pod.
fn verdict(
    pod: &Pod,
    namespace: &str,
    name: &str,
    launch_id: &str,
    base_container: &str,
) -> Option<Outcome> {
    let theirs = label(pod, LAUNCH_ID_LABEL);
    if theirs.as_deref() != Some(launch_id) {
        return Some(Outcome::failed_to_follow(
            namespace,
            name,
            format!(
                "pod {namespace}/{name} carries launch id {theirs:?}, not this task's {launch_id:?}: \
                 it is not this task's pod (left untouched)"
            ),
        ));
    }
    let mut outcome = judge(pod, base_container)?;
    outcome.namespace = namespace.to_owned();
    outcome.pod = name.to_owned();
    Some(outcome)
}
