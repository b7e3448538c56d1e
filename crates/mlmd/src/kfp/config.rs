//! KFP mode configuration from the environment, with the metadata-writer's
//! variable names and defaults, parsed strictly (the original silently turned
//! a string client timeout into "no timeout").

use std::path::PathBuf;
use std::time::Duration;

use crate::client::{MlmdClientConfig, MlmdTls};

/// A bad environment value: names the variable, the value and what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{var}={value:?} is invalid: expected {expected}")]
pub struct EnvError {
    /// The variable.
    pub var: &'static str,
    /// The value found (these variables hold no secrets).
    pub value: String,
    /// What would be accepted.
    pub expected: String,
}

/// Everything KFP's metadata-writer reads from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KfpEnv {
    /// `NAMESPACE_TO_WATCH`: `Some(ns)`, or `None` for all namespaces (set to
    /// the empty string). Default `default`.
    pub namespace_to_watch: Option<String>,
    /// `K8S_WATCH_SERVER_SIDE_TIMEOUT` (seconds, default 1800): the watch
    /// request's `timeoutSeconds`.
    pub server_side_timeout: Duration,
    /// `K8S_WATCH_CLIENT_SIDE_TIMEOUT` (seconds, default 60): the read
    /// timeout. Must be shorter than the server-side timeout.
    pub client_side_timeout: Duration,
    /// `POD_NAMESPACE` (default `kubeflow`): where `metadata-grpc-service` runs.
    pub pod_namespace: String,
    /// `CLUSTER_DOMAIN` (default `.svc.cluster.local`, with the leading dot).
    pub cluster_domain: String,
    /// `METADATA_GRPC_MAX_RECEIVE_MESSAGE_LENGTH` (bytes; default gRPC's 4 MiB).
    pub max_receive_message_length: Option<usize>,
    /// `METADATA_TLS_ENABLED` (`1/true/yes` or `0/false/no`; default false).
    pub tls_enabled: bool,
    /// `CA_CERT_PATH`: PEM CA for the MLMD TLS channel.
    pub ca_cert_path: Option<PathBuf>,
    /// `POD_NAME_TO_EXECUTION_ID_SIZE` (default 5000): capacity of the
    /// per-pod memo (the original's LRUs).
    pub pod_cache_size: usize,
    /// `WORKFLOW_NAME_TO_CONTEXT_ID_SIZE` (default 5000): capacity of the
    /// context id cache.
    pub context_cache_size: usize,
    /// Hold recorded pods with KFP mode's finalizer until their final state
    /// is in MLMD ([`crate::kfp::finalize`]). Not one of KFP's variables: off
    /// unless the caller turns it on.
    pub finalize: bool,
}

/// MLMD's port in KFP (hard-coded there too).
pub const MLMD_PORT: u16 = 8080;

impl KfpEnv {
    /// Read from the process environment.
    pub fn from_env() -> Result<KfpEnv, EnvError> {
        KfpEnv::from_lookup(|k| std::env::var(k).ok())
    }

    /// Read through `lookup` (tests pass a map).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<KfpEnv, EnvError> {
        let server = seconds(&lookup, "K8S_WATCH_SERVER_SIDE_TIMEOUT", 1800)?;
        let client = seconds(&lookup, "K8S_WATCH_CLIENT_SIDE_TIMEOUT", 60)?;
        if client >= server {
            return Err(EnvError {
                var: "K8S_WATCH_CLIENT_SIDE_TIMEOUT",
                value: client.as_secs().to_string(),
                expected: format!(
                    "fewer seconds than K8S_WATCH_SERVER_SIDE_TIMEOUT ({}), so a silent \
                     connection is detected before the server ends the watch",
                    server.as_secs()
                ),
            });
        }
        let tls_enabled = match lookup("METADATA_TLS_ENABLED") {
            None => false,
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" => true,
                "0" | "false" | "no" | "" => false,
                _ => {
                    return Err(EnvError {
                        var: "METADATA_TLS_ENABLED",
                        value: v,
                        expected: "one of 1, true, yes, 0, false, no".into(),
                    });
                }
            },
        };
        let max_receive_message_length = match lookup("METADATA_GRPC_MAX_RECEIVE_MESSAGE_LENGTH") {
            None => None,
            Some(v) if v.trim().is_empty() => None,
            Some(_) => Some(positive(
                &lookup,
                "METADATA_GRPC_MAX_RECEIVE_MESSAGE_LENGTH",
                0,
            )?),
        };
        // Accepted for compatibility; podline writes no debug files.
        positive(&lookup, "DEBUG_FILES_SIZE", 5000)?;
        positive(&lookup, "PODS_WITH_WRITTEN_METADATA_SIZE", 5000)?;
        Ok(KfpEnv {
            namespace_to_watch: match lookup("NAMESPACE_TO_WATCH") {
                None => Some("default".into()),
                Some(ns) if ns.is_empty() => None,
                Some(ns) => Some(ns),
            },
            server_side_timeout: server,
            client_side_timeout: client,
            pod_namespace: lookup("POD_NAMESPACE").unwrap_or_else(|| "kubeflow".into()),
            cluster_domain: lookup("CLUSTER_DOMAIN").unwrap_or_else(|| ".svc.cluster.local".into()),
            max_receive_message_length,
            tls_enabled,
            ca_cert_path: lookup("CA_CERT_PATH")
                .filter(|p| !p.is_empty())
                .map(PathBuf::from),
            pod_cache_size: positive(&lookup, "POD_NAME_TO_EXECUTION_ID_SIZE", 5000)?,
            context_cache_size: positive(&lookup, "WORKFLOW_NAME_TO_CONTEXT_ID_SIZE", 5000)?,
            finalize: false,
        })
    }

    /// MLMD's host: `metadata-grpc-service.<POD_NAMESPACE><CLUSTER_DOMAIN>`.
    pub fn mlmd_host(&self) -> String {
        format!(
            "metadata-grpc-service.{}{}",
            self.pod_namespace, self.cluster_domain
        )
    }

    /// The MLMD client configuration these variables describe.
    pub fn mlmd_client_config(&self) -> MlmdClientConfig {
        let mut config = MlmdClientConfig::new(self.mlmd_host(), MLMD_PORT);
        config.max_receive_message_length = self.max_receive_message_length;
        if self.tls_enabled {
            config.tls = Some(MlmdTls {
                ca_cert_path: self.ca_cert_path.clone(),
            });
        }
        config
    }
}

fn positive(
    lookup: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: usize,
) -> Result<usize, EnvError> {
    match lookup(var) {
        None => Ok(default),
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(EnvError {
                var,
                value: v,
                expected: "a positive integer".into(),
            }),
        },
    }
}

fn seconds(
    lookup: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: u64,
) -> Result<Duration, EnvError> {
    match lookup(var) {
        None => Ok(Duration::from_secs(default)),
        Some(v) => match v.trim().parse::<u64>() {
            Ok(n) if n > 0 => Ok(Duration::from_secs(n)),
            _ => Err(EnvError {
                var,
                value: v,
                expected: "a positive whole number of seconds, e.g. 60".into(),
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> Result<KfpEnv, EnvError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        KfpEnv::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_should_match_kfp() {
        let e = env(&[]).expect("defaults");
        assert_eq!(e.namespace_to_watch.as_deref(), Some("default"));
        assert_eq!(e.server_side_timeout, Duration::from_secs(1800));
        assert_eq!(e.client_side_timeout, Duration::from_secs(60));
        assert_eq!(
            e.mlmd_host(),
            "metadata-grpc-service.kubeflow.svc.cluster.local"
        );
        assert_eq!(e.mlmd_client_config().port, 8080);
        assert!(!e.tls_enabled);
        assert_eq!(e.max_receive_message_length, None);
        assert_eq!(e.pod_cache_size, 5000);
    }

    #[test]
    fn empty_namespace_to_watch_should_mean_all_namespaces() {
        assert_eq!(
            env(&[("NAMESPACE_TO_WATCH", "")])
                .expect("ok")
                .namespace_to_watch,
            None
        );
        assert_eq!(
            env(&[("NAMESPACE_TO_WATCH", "team-a")])
                .expect("ok")
                .namespace_to_watch
                .as_deref(),
            Some("team-a")
        );
    }

    #[test]
    fn garbage_numbers_should_be_named_errors() {
        let e = env(&[("K8S_WATCH_CLIENT_SIDE_TIMEOUT", "60s")]).expect_err("unit suffix");
        assert_eq!(e.var, "K8S_WATCH_CLIENT_SIDE_TIMEOUT");
        assert!(e.to_string().contains("\"60s\""), "{e}");
        assert_eq!(
            env(&[("K8S_WATCH_SERVER_SIDE_TIMEOUT", "0")])
                .expect_err("zero")
                .var,
            "K8S_WATCH_SERVER_SIDE_TIMEOUT"
        );
        assert_eq!(
            env(&[("METADATA_GRPC_MAX_RECEIVE_MESSAGE_LENGTH", "lots")])
                .expect_err("bad")
                .var,
            "METADATA_GRPC_MAX_RECEIVE_MESSAGE_LENGTH"
        );
        assert_eq!(
            env(&[("POD_NAME_TO_EXECUTION_ID_SIZE", "-1")])
                .expect_err("neg")
                .var,
            "POD_NAME_TO_EXECUTION_ID_SIZE"
        );
        assert_eq!(
            env(&[("METADATA_TLS_ENABLED", "maybe")])
                .expect_err("bool")
                .var,
            "METADATA_TLS_ENABLED"
        );
    }

    #[test]
    fn client_timeout_must_be_below_server_timeout() {
        let e = env(&[("K8S_WATCH_CLIENT_SIDE_TIMEOUT", "1800")]).expect_err("equal");
        assert_eq!(e.var, "K8S_WATCH_CLIENT_SIDE_TIMEOUT");
        assert!(
            env(&[
                ("K8S_WATCH_CLIENT_SIDE_TIMEOUT", "30"),
                ("K8S_WATCH_SERVER_SIDE_TIMEOUT", "3600")
            ])
            .is_ok()
        );
    }

    #[test]
    fn tls_and_message_size_should_reach_the_client_config() {
        let e = env(&[
            ("METADATA_TLS_ENABLED", "Yes"),
            ("CA_CERT_PATH", "/etc/pki/tls/certs/ca.crt"),
            ("METADATA_GRPC_MAX_RECEIVE_MESSAGE_LENGTH", "104857600"),
            ("POD_NAMESPACE", "kf"),
            ("CLUSTER_DOMAIN", ".cluster.example"),
        ])
        .expect("valid");
        let c = e.mlmd_client_config();
        assert_eq!(c.host, "metadata-grpc-service.kf.cluster.example");
        assert_eq!(c.max_receive_message_length, Some(104_857_600));
        assert_eq!(
            c.tls.and_then(|t| t.ca_cert_path),
            Some(PathBuf::from("/etc/pki/tls/certs/ca.crt"))
        );
    }
}
