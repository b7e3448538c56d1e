//! Idempotent create: retry what a retry can fix, adopt our own pod, never touch another's.
//!
//! The launch id label is chosen before the first POST (see [`crate::spec`]). Then:
//!
//! - 409 `Conflict` (quota race), 429 (Retry-After honoured, capped), 5xx, connection errors and
//!   timeouts are retried with full-jitter exponential backoff and an overall deadline, by
//!   `podline_client::retry` (one info line per retry: attempt, status, reason, delay);
//! - 409 `AlreadyExists`: the pod is read back; if it carries our launch id, a previous attempt
//!   did create it and only the response was lost, so we adopt it; otherwise it belongs to
//!   someone else and the run fails without touching it;
//! - anything else (400, 401, 403, 404 namespace, 422) fails at once with the server's Status
//!   message and causes.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use podline_client::retry::{self, Disposition, RetryPolicy};
use tokio::time::Instant;

use crate::error::{LaunchError, StatusCause};
use crate::spec::{BuiltPod, LAUNCH_ID_LABEL};

/// A pod that exists on the server and is ours.
#[derive(Debug, Clone)]
pub struct Created {
    /// The server's copy.
    pub pod: Pod,
    /// Create calls made (1 = no retry).
    pub attempts: u32,
    /// Found by launch id after `AlreadyExists` (the create's response was lost).
    pub adopted: bool,
}

/// Creates `built.pod` per `policy`, adopting it if an earlier attempt succeeded unseen.
pub async fn create_idempotent(
    api: &Api<Pod>,
    built: &BuiltPod,
    policy: &RetryPolicy,
) -> Result<Created, LaunchError> {
    let started = Instant::now();
    let params = PostParams::default();
    let outcome =
        retry::retry_counted(policy, "create pod", || api.create(&params, &built.pod)).await;
    let attempts = outcome.attempts;
    let err = match outcome.result {
        Ok(pod) => {
            return Ok(Created {
                pod,
                attempts,
                adopted: false,
            });
        }
        Err(err) => err,
    };
    match retry::classify(&err) {
        Disposition::AlreadyExists => adopt(api, built, policy, attempts).await,
        Disposition::Fatal { .. } => Err(rejected(err)),
        Disposition::Retry { .. } => Err(LaunchError::CreateExhausted {
            attempts,
            elapsed: started.elapsed(),
            last: crate::error::describe_api_error(&err),
        }),
    }
}

/// Reads the pod holding our name and adopts it if its launch id is ours.
async fn adopt(
    api: &Api<Pod>,
    built: &BuiltPod,
    policy: &RetryPolicy,
    attempts: u32,
) -> Result<Created, LaunchError> {
    let existing = retry::retry(policy, "get pod after AlreadyExists", || {
        api.get(&built.name)
    })
    .await
    .map_err(|source| LaunchError::Api {
        action: "reading the pod that holds our name",
        source,
    })?;
    let theirs = existing
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LAUNCH_ID_LABEL))
        .cloned();
    if theirs.as_deref() == Some(built.launch_id.as_str()) {
        tracing::info!(pod = %built.name, attempts, "create response was lost; adopted our pod by launch id");
        Ok(Created {
            pod: existing,
            attempts,
            adopted: true,
        })
    } else {
        Err(LaunchError::ForeignPod {
            namespace: built.namespace.clone(),
            name: built.name.clone(),
            theirs,
            ours: built.launch_id.clone(),
        })
    }
}

/// Turns a non-retryable API error into [`LaunchError::CreateRejected`] with the server's
/// message and causes.
pub(crate) fn rejected(err: kube::Error) -> LaunchError {
    match err {
        kube::Error::Api(status) => LaunchError::CreateRejected {
            code: status.code,
            reason: status.reason.clone(),
            message: status.message.clone(),
            causes: StatusCause::all_of(&status),
        },
        other => LaunchError::Api {
            action: "creating the pod",
            source: other,
        },
    }
}

/// Default total create attempts: even if a third of all creates were refused, a pod would
/// exhaust them about twice in a million, and a real quota burst of 50 creates settles well
/// within them. Shared by [`default_create_policy`] and `podline run`'s flags.
pub const DEFAULT_CREATE_ATTEMPTS: u32 = 12;
/// Default first backoff window between create attempts (full jitter, doubling).
pub const DEFAULT_CREATE_BACKOFF_BASE: Duration = Duration::from_millis(100);
/// Default largest backoff window between create attempts (the seed fix's order of magnitude).
pub const DEFAULT_CREATE_BACKOFF_CAP: Duration = Duration::from_secs(15);
/// Default overall time budget for one create, responses included.
pub const DEFAULT_CREATE_DEADLINE: Duration = Duration::from_secs(120);

/// The create policy a library user gets when they set nothing: the same one as `podline run`
/// with no flags, so the library and the CLI never disagree about how hard a create is tried.
pub fn default_create_policy() -> RetryPolicy {
    // Proven invariant: the default base is > 0 and below the default cap.
    create_policy(
        DEFAULT_CREATE_ATTEMPTS,
        DEFAULT_CREATE_BACKOFF_BASE,
        DEFAULT_CREATE_BACKOFF_CAP,
        DEFAULT_CREATE_DEADLINE,
    )
    .expect("the default create backoff is valid")
}

/// The create retry policy from its knobs: `attempts` calls in total, full-jitter backoff from
/// `base` capped at `cap`, and an overall `deadline` (responses included). A base of zero or a
/// cap below the base is refused with the client's typed [`InvalidBackoff`] (it names the
/// values; the caller names where they came from).
///
/// [`InvalidBackoff`]: podline_client::error::InvalidBackoff
pub fn create_policy(
    attempts: u32,
    base: Duration,
    cap: Duration,
    deadline: Duration,
) -> Result<RetryPolicy, podline_client::error::InvalidBackoff> {
    let backoff = podline_client::backoff::FullJitter::try_new(base, cap, 2.0)?;
    Ok(RetryPolicy::new(backoff)
        .with_max_attempts(attempts)
        .with_deadline(Some(deadline)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use kube::core::Status;

    #[test]
    fn the_library_default_create_policy_matches_the_cli_defaults() {
        let policy = default_create_policy();
        assert_eq!(policy.max_attempts(), DEFAULT_CREATE_ATTEMPTS);
        assert_eq!(policy.deadline(), Some(DEFAULT_CREATE_DEADLINE));
        // A storm refusing a third of all creates exhausts 12 attempts about 2 times in a million.
        let all_refused = (1.0_f64 / 3.0).powi(i32::try_from(policy.max_attempts()).unwrap());
        assert!(all_refused < 3e-6, "{all_refused}");
    }

    #[test]
    fn rejected_should_keep_the_servers_message_and_causes() {
        let status: Status = serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 422,
            "reason": "Invalid", "message": "Pod \"x\" is invalid",
            "details": {"name": "x", "kind": "pods", "causes": [{
                "reason": "FieldValueRequired", "message": "Required value",
                "field": "spec.containers[0].image"}]}
        }))
        .unwrap();
        let err = rejected(kube::Error::Api(status.boxed()));
        assert_eq!(err.exit_code(), crate::exit::CREATE_FAILED);
        let text = err.to_string();
        for want in [
            "422",
            "Invalid",
            "Pod \"x\" is invalid",
            "spec.containers[0].image: Required value",
        ] {
            assert!(text.contains(want), "missing {want:?} in {text}");
        }
    }

    #[test]
    fn create_policy_should_reject_a_cap_below_the_base() {
        assert_eq!(
            create_policy(
                3,
                Duration::from_secs(2),
                Duration::from_secs(1),
                Duration::from_secs(9)
            )
            .unwrap_err(),
            podline_client::error::InvalidBackoff::CapBelowBase {
                base: Duration::from_secs(2),
                cap: Duration::from_secs(1),
            }
        );
        let policy = create_policy(
            5,
            Duration::from_millis(10),
            Duration::from_secs(1),
            Duration::from_secs(9),
        )
        .unwrap();
        assert_eq!(policy.max_attempts(), 5);
        assert_eq!(policy.deadline(), Some(Duration::from_secs(9)));
    }
}
