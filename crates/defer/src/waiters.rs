//! The triggerer's half of a deferred launch: many waits, one watch ([`Waiters`]).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use podline_client::retry::RetryPolicy;
use podline_launch::LAUNCH_ID_LABEL;
use podline_launch::podwatch::{PodState, SharedPodWatches};

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
    pub async fn wait(
        &self,
        namespace: &str,
        name: &str,
        launch_id: &str,
        base_container: &str,
    ) -> Result<Outcome, DeferError> {
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
            return Ok(outcome);
        }
        loop {
            if let Some(outcome) = {
                let seen = state.borrow_and_update();
                from_state(&seen, namespace, name, launch_id, base_container)
            } {
                return Ok(outcome);
            }
            if state.changed().await.is_err() {
                // The feed dropped the pod's channel after its last state (gone), or ended.
                let last = state.borrow();
                return Ok(
                    from_state(&last, namespace, name, launch_id, base_container)
                        .unwrap_or_else(|| Outcome::gone(namespace, name)),
                );
            }
        }
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
