//! Where a configuration was found ([`ConfigSource`]), for the startup log and for messages.

use std::ffi::OsString;
use std::path::PathBuf;

/// Where the configuration was found, for a one-line startup log and for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// An explicit file, chosen by the program
    /// ([`ConnectOptions::kubeconfig`](super::ConnectOptions::kubeconfig)); shown as its path.
    Flag(PathBuf),
    /// From the `KUBECONFIG` list.
    Env(OsString),
    /// From `~/.kube/config`.
    Home(PathBuf),
    /// From the pod's service account.
    InCluster,
}

impl std::fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigSource::Flag(p) => write!(f, "{}", p.display()),
            ConfigSource::Env(v) => write!(f, "KUBECONFIG={}", v.to_string_lossy()),
            ConfigSource::Home(p) => write!(f, "{}", p.display()),
            ConfigSource::InCluster => write!(f, "in-cluster service account"),
        }
    }
}
