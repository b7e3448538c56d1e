//! What happens to the pod at the end ([`OnFinish`]: delete, delete-succeeded or keep), and the
//! delete itself (with a grace period, retried, 404 = done).
//!
//! The rule: no pod podline created outlives a failed, timed-out or killed run unless the user
//! asked to keep it. `activeDeadlineSeconds` on the pod is the server-side backstop for the
//! case where podline itself is SIGKILLed.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DeleteParams;
use podline_client::retry::{self, RetryPolicy};

/// What to do with the pod once the run is over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnFinish {
    /// Always delete (the default: no leftovers).
    #[default]
    Delete,
    /// Delete only when the task succeeded; keep failed pods for inspection.
    DeleteSucceeded,
    /// Never delete.
    Keep,
}

impl OnFinish {
    /// Parses `delete`, `delete-succeeded` or `keep`. The error says what was given and what
    /// is expected; the caller says what it was given for (clap names the binary's flag).
    pub fn parse(s: &str) -> Result<Self, crate::SpecError> {
        match s {
            "delete" => Ok(OnFinish::Delete),
            "delete-succeeded" => Ok(OnFinish::DeleteSucceeded),
            "keep" => Ok(OnFinish::Keep),
            other => Err(crate::SpecError::InvalidOnFinish {
                value: other.to_owned(),
            }),
        }
    }

    /// Whether to delete after a run that `succeeded` (or not). Interrupted and timed-out runs
    /// count as not succeeded.
    pub fn should_delete(self, succeeded: bool) -> bool {
        match self {
            OnFinish::Delete => true,
            OnFinish::DeleteSucceeded => succeeded,
            OnFinish::Keep => false,
        }
    }
}

/// Deletes the pod, retrying transient errors; a 404 means it is already gone (success).
/// Returns whether the pod is (being) deleted.
pub async fn delete_pod(
    api: &Api<Pod>,
    name: &str,
    grace: Option<Duration>,
    policy: &RetryPolicy,
) -> bool {
    let params = DeleteParams {
        grace_period_seconds: grace.map(|g| u32::try_from(g.as_secs()).unwrap_or(u32::MAX)),
        ..DeleteParams::default()
    };
    // The answer is the pod as it is being deleted, or a Status: only whether the call
    // succeeded matters, so the body is not decoded (a full pod per task adds up at hundreds of
    // tasks a second).
    let client = api.clone().into_client();
    let request = kube::core::Request::new(api.resource_url());
    let delete = || async {
        let mut req = request
            .delete(name, &params)
            .map_err(kube::Error::BuildRequest)?;
        req.extensions_mut().insert("delete");
        client.request_text(req).await.map(drop)
    };
    match retry::retry(policy, "delete pod", delete).await {
        Ok(_) => {
            tracing::debug!(pod = name, "pod deleted");
            true
        }
        Err(err) if retry::status_code(&err) == Some(404) => true,
        Err(err) => {
            tracing::warn!(pod = name, error = %err, "could not delete pod; it may outlive this run (activeDeadlineSeconds is the backstop)");
            false
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn on_finish_should_parse_and_decide() {
        assert_eq!(OnFinish::parse("delete").unwrap(), OnFinish::Delete);
        assert_eq!(
            OnFinish::parse("delete-succeeded").unwrap(),
            OnFinish::DeleteSucceeded
        );
        assert_eq!(OnFinish::parse("keep").unwrap(), OnFinish::Keep);
        let err = OnFinish::parse("remove").unwrap_err().to_string();
        assert_eq!(
            err,
            "\"remove\" is not what to do with the pod at the end (expected delete, delete-succeeded or keep)"
        );
        assert!(OnFinish::Delete.should_delete(false));
        assert!(OnFinish::DeleteSucceeded.should_delete(true));
        assert!(!OnFinish::DeleteSucceeded.should_delete(false));
        assert!(!OnFinish::Keep.should_delete(false));
    }
}
