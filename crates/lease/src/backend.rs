//! The three calls an elector makes on its one Lease, behind a small trait so the election loop
//! can also be driven by an in-memory lease under paused time in unit tests.

use std::future::Future;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};

/// Get, create and conditionally replace one named Lease.
pub(crate) trait LeaseApi: Send + Sync + 'static {
    /// The lease, or `None` if it doesn't exist yet.
    fn get(&self) -> impl Future<Output = Result<Option<Lease>, kube::Error>> + Send;
    /// Creates the lease; 409 AlreadyExists if another elector was first.
    fn create(&self, lease: &Lease) -> impl Future<Output = Result<Lease, kube::Error>> + Send;
    /// Replaces the lease if its resourceVersion still matches `lease`'s; 409 Conflict otherwise.
    fn replace(&self, lease: &Lease) -> impl Future<Output = Result<Lease, kube::Error>> + Send;
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
}

/// Errors no retry can fix: bad credentials, missing RBAC, a missing namespace, an invalid name.
/// Everything else (409, 429, 5xx, transport errors) is worth retrying at the next period.
pub(crate) fn is_fatal(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(status) => matches!(status.code, 400 | 401 | 403 | 404 | 422),
        _ => false,
    }
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
        assert!(!is_conflict(&api_error(500, "InternalError")));
    }
}
