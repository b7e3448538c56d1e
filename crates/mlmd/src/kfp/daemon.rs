//! KFP mode as a daemon: what `podline record --sink mlmd` (or `--kfp`) runs.

use std::future::Future;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use podline_client::timeouts::WatchTimeouts;
use podline_client::watch::{WatchConfig, WatchError};

use super::config::{EnvError, KfpEnv};
use super::sink::{KfpSink, SinkConfig, run};
use super::writer::KfpWriter;
use crate::client::{MlmdClient, MlmdClientConfig};
use crate::error::MlmdError;

/// Why KFP mode could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum KfpError {
    /// A KFP environment variable is invalid.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// `--mlmd-address` is not `host:port`.
    #[error(
        "invalid MLMD address {0:?}: expected HOST:PORT, e.g. metadata-grpc-service.kubeflow:8080"
    )]
    Address(String),
    /// The watch timeouts are inconsistent.
    #[error("invalid watch timeouts: {0}")]
    Timeouts(String),
    /// The MLMD client could not be built (bad endpoint or CA file).
    #[error(transparent)]
    Mlmd(#[from] MlmdError),
    /// The pod watch failed in a way no retry can fix (401, 403, missing namespace).
    #[error("pod watch failed: {0}")]
    Watch(#[from] WatchError),
}

/// The MLMD client configuration: from KFP's variables, with `address`
/// (`host:port`) overriding host and port when given.
pub fn mlmd_config(env: &KfpEnv, address: Option<&str>) -> Result<MlmdClientConfig, KfpError> {
    let mut config = env.mlmd_client_config();
    if let Some(address) = address {
        let (host, port) = address
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h.trim_matches(['[', ']']), p.parse::<u16>().ok()?)))
            .filter(|(h, _)| !h.is_empty())
            .ok_or_else(|| KfpError::Address(address.to_owned()))?;
        config.host = host.to_owned();
        config.port = port;
    }
    Ok(config)
}

/// Run KFP mode until `shutdown` completes or the watch fails fatally.
/// Watches `env.namespace_to_watch` (all namespaces when `None`) with KFP's
/// timeouts; MLMD outages are waited out, never fatal.
pub async fn run_daemon(
    kube: kube::Client,
    env: &KfpEnv,
    mlmd: &MlmdClientConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), KfpError> {
    let timeouts = WatchTimeouts::try_new(env.server_side_timeout, env.client_side_timeout)
        .map_err(|e| KfpError::Timeouts(e.to_string()))?;
    let writer = KfpWriter::new(
        MlmdClient::new(mlmd)?,
        env.pod_cache_size,
        env.context_cache_size,
    );
    let sink = KfpSink::new(writer, kube.clone(), SinkConfig::default());
    let pods: Api<Pod> = match &env.namespace_to_watch {
        Some(ns) => Api::namespaced(kube, ns),
        None => Api::all(kube),
    };
    tracing::info!(
        namespace = env.namespace_to_watch.as_deref().unwrap_or("(all)"),
        mlmd = %mlmd.url(),
        "recording Argo pods into ML Metadata (KFP mode)"
    );
    tokio::select! {
        result = run(&sink, pods, WatchConfig::default().timeouts(timeouts)) => result.map_err(KfpError::from),
        () = shutdown => {
            tracing::info!("KFP mode stopped");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mlmd_address_should_override_host_and_port() {
        let env = KfpEnv::from_lookup(|_| None).expect("defaults");
        let c = mlmd_config(&env, None).expect("default");
        assert_eq!(
            c.url(),
            "http://metadata-grpc-service.kubeflow.svc.cluster.local:8080"
        );
        let c = mlmd_config(&env, Some("127.0.0.1:9090")).expect("override");
        assert_eq!(c.url(), "http://127.0.0.1:9090");
        let c = mlmd_config(&env, Some("[::1]:9090")).expect("ipv6");
        assert_eq!(c.url(), "http://[::1]:9090");
        for bad in ["nohost", ":80", "host:port", "host:99999"] {
            assert!(
                matches!(mlmd_config(&env, Some(bad)), Err(KfpError::Address(_))),
                "{bad}"
            );
        }
    }
}
