//! Why no client could be built ([`ConnectError`]).

use super::source::ConfigSource;
use crate::error::Chain;
use crate::transport::TransportError;

/// Why no client could be built. Messages name the file or source that failed.
///
/// Each message is complete on its own (it includes what kube reported, each cause once), so
/// `source()` returns nothing: a chain printer would otherwise print the causes twice.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// A kubeconfig was found but could not be read, parsed or used (e.g. unknown context).
    #[error("cannot use kubeconfig from {source_name}: {}", Chain(error))]
    Kubeconfig {
        /// Where it came from.
        source_name: ConfigSource,
        /// What kube said.
        error: kube::config::KubeconfigError,
    },
    /// A context makes no sense without a kubeconfig.
    #[error(
        "context {0} was asked for, but no kubeconfig was found (no explicit file, KUBECONFIG unset, no ~/.kube/config)"
    )]
    ContextWithoutKubeconfig(String),
    /// No kubeconfig anywhere and not running in a cluster.
    #[error(
        "no Kubernetes configuration found: no explicit kubeconfig, KUBECONFIG unset, no ~/.kube/config, and not in a pod ({})", Chain(.0)
    )]
    NoConfig(kube::config::InClusterError),
    /// The configuration was read but the client could not be built (TLS material, auth,
    /// server name...).
    #[error("cannot build a Kubernetes client: {}", Chain(.0))]
    Transport(TransportError),
}
