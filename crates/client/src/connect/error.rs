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
    #[error("cannot use kubeconfig from {source_name}: {}", KubeconfigText(error))]
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
    /// The kubeconfig user's exec credential plugin gave no credential (its message names the
    /// command and never holds the plugin's output).
    #[error("{0}")]
    ExecPlugin(super::ExecError),
    /// The configuration was read but the client could not be built (TLS material, auth,
    /// server name...).
    #[error("cannot build a Kubernetes client: {}", Chain(.0))]
    Transport(TransportError),
}

/// What kube reported about a kubeconfig, told without quoting the file: a YAML error by its
/// position and kind ([`crate::parse_error::yaml`]; kube's own text renders the lines around
/// it, the user's token and `client-key-data` among them), anything else with its causes once.
#[derive(Clone, Copy)]
pub struct KubeconfigText<'a>(pub &'a kube::config::KubeconfigError);

impl std::fmt::Display for KubeconfigText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            kube::config::KubeconfigError::Parse(err) => write!(
                f,
                "not valid kubeconfig YAML: {}",
                crate::parse_error::yaml(err)
            ),
            other => write!(f, "{}", Chain(other)),
        }
    }
}
