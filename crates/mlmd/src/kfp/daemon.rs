//! KFP mode as a daemon: what the recorder runs when it writes into ML Metadata.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use podline_client::timeouts::{WatchTimeouts, parse_duration};
use podline_client::watch::{WatchConfig, WatchError};
use podline_daemon::{Health, Metrics};
use tokio_util::sync::CancellationToken;

use super::config::{EnvError, KfpEnv};
use super::pipeline::{self, PipelineConfig};
use super::sink::{KfpSink, SinkConfig};
use super::stats::SinkStats;
use super::writer::KfpWriter;
use crate::client::{MlmdClient, MlmdClientConfig};
use crate::error::MlmdError;

/// Why KFP mode could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum KfpError {
    /// A KFP environment variable is invalid.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// The MLMD address given to [`mlmd_config`] is not `host:port`.
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

/// What KFP mode reports: the health state every podline daemon serves (by
/// `podline_daemon::serve` on `/healthz`, `/readyz`, `/metrics`)
/// with KFP's counters registered in its metrics.
#[derive(Clone, Debug)]
pub struct Observability {
    /// Readiness and the metrics registry.
    pub health: Arc<Health>,
    /// KFP mode's counters (also in `health`'s metrics).
    pub stats: Arc<SinkStats>,
}

impl Observability {
    /// Readiness counts the watch as stalled after twice the client timeout
    /// without progress (an idle watch reconnects every client timeout).
    pub fn new(client_timeout: Duration) -> Self {
        let stats = Arc::new(SinkStats::default());
        let metrics = Arc::new(Metrics::with_extra(|r| stats.register(r)));
        Observability {
            health: Arc::new(Health::new(metrics, client_timeout * 2)),
            stats,
        }
    }
}

/// Run KFP mode until `shutdown` is cancelled (queued pods drained, then
/// `Ok`) or the watch fails fatally. Watches `env.namespace_to_watch` (all
/// namespaces when `None`) with `env`'s watch timeouts; MLMD outages are
/// waited out, never fatal. `workers` pods are written at once.
pub async fn run_daemon(
    kube: kube::Client,
    env: &KfpEnv,
    mlmd: &MlmdClientConfig,
    observability: &Observability,
    workers: usize,
    shutdown: CancellationToken,
) -> Result<(), KfpError> {
    let timeouts = env.watch_timeouts()?;
    let writer = KfpWriter::new(
        MlmdClient::new(mlmd)?,
        env.pod_cache_size,
        env.context_cache_size,
    );
    let sink_config = SinkConfig {
        finalize: env.finalize,
        ..SinkConfig::default()
    };
    let sink = KfpSink::new(writer, kube.clone(), sink_config)
        .observed_by(observability.health.clone(), observability.stats.clone());
    let pods: Api<Pod> = match &env.namespace_to_watch {
        Some(ns) => Api::namespaced(kube, ns),
        None => Api::all(kube),
    };
    tracing::info!(
        namespace = env.namespace_to_watch.as_deref().unwrap_or("(all)"),
        mlmd = %mlmd.url(),
        workers,
        server_timeout = ?timeouts.server,
        client_timeout = ?timeouts.client,
        finalize = env.finalize,
        "recording Argo pods into ML Metadata (KFP mode)"
    );
    let mut config = PipelineConfig::new(env.namespace_to_watch.clone());
    config.watch = WatchConfig::default().timeouts(timeouts);
    config.workers = workers;
    pipeline::run(Arc::new(sink), pods, config, shutdown).await?;
    tracing::info!("KFP mode stopped");
    Ok(())
}

impl KfpEnv {
    /// The watch timeouts as the watch takes them (validated again: they
    /// may have been overridden by flags after parsing).
    pub fn watch_timeouts(&self) -> Result<WatchTimeouts, KfpError> {
        WatchTimeouts::try_new(self.server_side_timeout, self.client_side_timeout)
            .map_err(|e| KfpError::Timeouts(e.to_string()))
    }

    /// Apply overrides of the server and client watch timeouts over
    /// `K8S_WATCH_SERVER_SIDE_TIMEOUT` / `K8S_WATCH_CLIENT_SIDE_TIMEOUT`:
    /// overrides win, then KFP's variables, then KFP's defaults (1800 s /
    /// 60 s). Each override is `(name, raw)`: the name it was given under
    /// (the caller's flag, say), which an error repeats, and its text; `None`
    /// when not given.
    pub fn override_watch_timeouts(
        &mut self,
        server: Option<(&str, &str)>,
        client: Option<(&str, &str)>,
    ) -> Result<(), KfpError> {
        let parse = |(flag, raw): (&str, &str)| {
            parse_duration(raw).map_err(|err| {
                KfpError::Timeouts(match err {
                    // Over the parser's bound (365 days): say so, with the range.
                    podline_client::timeouts::InvalidDuration::TooLong { .. } => {
                        format!("{flag}={raw:?} is {err}")
                    }
                    _ => format!(
                        "{flag}={raw:?} is not a duration: expected seconds (\"60\") or a duration like \"90s\", \"30m\""
                    ),
                })
            })
        };
        if let Some(given) = server {
            self.server_side_timeout = parse(given)?;
        }
        if let Some(given) = client {
            self.client_side_timeout = parse(given)?;
        }
        self.watch_timeouts().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_flags_should_win_over_kfp_variables_which_win_over_defaults() {
        let env = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            KfpEnv::from_lookup(move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
                .expect("valid")
        };
        let mut defaults = env(&[]);
        defaults
            .override_watch_timeouts(None, None)
            .expect("defaults");
        let t = defaults.watch_timeouts().expect("valid");
        assert_eq!((t.server.as_secs(), t.client.as_secs()), (1800, 60));

        let mut kfp = env(&[
            ("K8S_WATCH_SERVER_SIDE_TIMEOUT", "300"),
            ("K8S_WATCH_CLIENT_SIDE_TIMEOUT", "20"),
        ]);
        kfp.override_watch_timeouts(None, None).expect("env only");
        let t = kfp.watch_timeouts().expect("valid");
        assert_eq!((t.server.as_secs(), t.client.as_secs()), (300, 20));

        kfp.override_watch_timeouts(Some(("server", "10m")), Some(("client", "45")))
            .expect("flags");
        let t = kfp.watch_timeouts().expect("valid");
        assert_eq!((t.server.as_secs(), t.client.as_secs()), (600, 45));

        let err = kfp
            .override_watch_timeouts(None, Some(("client-flag", "soon")))
            .expect_err("not a duration");
        assert!(err.to_string().contains("client-flag=\"soon\""), "{err}");
        let err = kfp
            .override_watch_timeouts(Some(("server", "18446744073709551615")), None)
            .expect_err("over the parser's bound");
        assert!(err.to_string().contains("at most 365 days"), "{err}");
        let mut short = env(&[]);
        let err = short
            .override_watch_timeouts(Some(("server", "30")), None)
            .expect_err("client 60 s is not below server 30 s");
        assert!(err.to_string().contains("client timeout"), "{err}");
    }

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
