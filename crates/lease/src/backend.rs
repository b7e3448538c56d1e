//! The calls an elector makes on its one Lease, behind a small trait so the election loop can
//! also be driven by an in-memory lease under paused time in unit tests.

use std::future::Future;

use futures::{Stream, StreamExt as _};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use tracing::{debug, warn};

/// Get, create and conditionally replace one named Lease.
pub(crate) trait LeaseApi: Send + Sync + 'static {
    /// The lease, or `None` if it doesn't exist yet.
    fn get(&self) -> impl Future<Output = Result<Option<Lease>, kube::Error>> + Send;
    /// Creates the lease; 409 AlreadyExists if another elector was first.
    fn create(&self, lease: &Lease) -> impl Future<Output = Result<Lease, kube::Error>> + Send;
    /// Replaces the lease if its resourceVersion still matches `lease`'s; 409 Conflict otherwise.
    fn replace(&self, lease: &Lease) -> impl Future<Output = Result<Lease, kube::Error>> + Send;
    /// Each version of the lease as the API server sends it, so a follower learns of a renewal
    /// (or a release) the moment it is written instead of at its next poll. Best effort: the
    /// stream may skip versions or end; the follower's polls remain the fallback.
    fn changes(&self) -> impl Stream<Item = Lease> + Send + 'static;
}

/// The real thing: a namespaced `Api<Lease>` and the lease's name.
pub(crate) struct KubeLeaseApi {
    pub(crate) api: Api<Lease>,
    pub(crate) name: String,
}

impl LeaseApi for KubeLeaseApi {
    async fn get(&self) -> Result<Option<Lease>, kube::Error> {
        self.api.get_opt(&self.name).await
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api.create(&PostParams::default(), lease).await
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api
            .replace(&self.name, &PostParams::default(), lease)
            .await
    }

    /// kube-runtime's watcher on this one Lease (a `metadata.name` field selector, which RBAC
    /// needs to authorise list and watch limited by `resourceNames`), retried with its default
    /// backoff. A 401/403 ends the stream with one warning: the follower still polls.
    fn changes(&self) -> impl Stream<Item = Lease> + Send + 'static {
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        watcher(self.api.clone(), config)
            .default_backoff()
            .applied_objects()
            .take_while(|item| {
                let go_on = match item {
                    Err(watcher::Error::InitialListFailed(err) | watcher::Error::WatchStartFailed(err))
                        if is_fatal(err) =>
                    {
                        warn!(error = %err, "cannot watch the lease; noticing its changes by polling only");
                        false
                    }
                    _ => true,
                };
                std::future::ready(go_on)
            })
            .filter_map(|item| {
                std::future::ready(match item {
                    Ok(lease) => Some(lease),
                    Err(err) => {
                        debug!(error = %err, "lease watch failed; retrying");
                        None
                    }
                })
            })
    }
}

/// Errors no retry can fix (bad credentials, missing RBAC, a missing namespace, an invalid name,
/// a rejected TLS certificate...): the one table every podline crate uses,
/// [`podline_client::retry::classify`]. Everything else (409, 429, 5xx, transport errors) is
/// worth retrying at the next period.
pub(crate) fn is_fatal(err: &kube::Error) -> bool {
    podline_client::retry::classify(err).is_fatal()
}

/// A 409 Conflict: someone wrote the lease since we read it (resourceVersion precondition).
pub(crate) fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 409)
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn api_error(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Status::failure("test", reason).with_code(code).boxed())
    }

    #[test]
    fn only_unfixable_answers_are_fatal() {
        for code in [400, 401, 403, 404, 422] {
            assert!(is_fatal(&api_error(code, "x")), "{code}");
        }
        for code in [409, 429, 500, 502, 503, 504] {
            assert!(!is_fatal(&api_error(code, "x")), "{code}");
        }
        assert!(is_conflict(&api_error(409, "Conflict")));
        assert!(!is_fatal(&api_error(409, "AlreadyExists")));
        assert!(!is_conflict(&api_error(500, "InternalError")));
    }

    /// The lease used to keep its own, shorter table (405, 410, 415, a rejected certificate were
    /// retried forever); now it asks the client's classification like the watch and the launcher.
    #[test]
    fn fatal_should_follow_the_clients_one_classification() {
        for code in 100..600 {
            let err = api_error(code, "x");
            assert_eq!(
                is_fatal(&err),
                podline_client::retry::classify(&err).is_fatal(),
                "{code}"
            );
        }
        assert!(is_fatal(&api_error(405, "MethodNotAllowed")));
    }
}
