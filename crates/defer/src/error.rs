//! What can go wrong in a deferred launch ([`DeferError`]).

use podline_launch::{LaunchError, SpecError};

/// A deferred launch's failure, told as the task's error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeferError {
    /// The pod as given cannot be created (nothing was created).
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The create (or the lookup of the pod to reattach to) failed; see the launcher's error.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// The cluster could not be reached or configured.
    #[error("cannot connect to the cluster: {0}")]
    Connect(String),
    /// The pod given as JSON does not decode (told by position only: it may hold env values).
    #[error("the pod does not decode as a Kubernetes Pod: {0}")]
    Pod(String),
    /// KPO's XCom value could not be read through the sidecar.
    #[error("cannot read /airflow/xcom/return.json: {0}")]
    Xcom(String),
    /// An API call other than the create failed.
    #[error("{action}: {source}")]
    Api {
        /// What was being done.
        action: &'static str,
        /// The client's error.
        source: kube::Error,
    },
}
