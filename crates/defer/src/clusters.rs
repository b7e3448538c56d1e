//! One connection and one set of [`Waiters`] per cluster in a process ([`Clusters`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use podline_client::connect::{ConnectOptions, connect};
use podline_client::retry::RetryPolicy;
use podline_launch::create::default_create_policy;
use podline_launch::{Liveness, LivenessConfig};

use crate::error::DeferError;
use crate::waiters::Waiters;

/// Which cluster: a kubeconfig file (None: kubectl's lookup, then in-cluster) and a context.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ClusterKey {
    /// An explicit kubeconfig file.
    pub kubeconfig: Option<PathBuf>,
    /// A context of it (None: its current context).
    pub context: Option<String>,
}

/// A connected cluster: its client (one HTTP/2 connection) and its shared waits.
#[derive(Clone)]
pub struct Cluster {
    /// The client, with podline's stack.
    pub client: kube::Client,
    /// A client over HTTP/1.1 for calls that upgrade the connection (`pods/exec`: KPO's XCom
    /// sidecar), which HTTP/2 cannot carry.
    pub upgrade_client: kube::Client,
    /// The namespace the configuration names (for a pod that names none).
    pub namespace: String,
    /// The waits on this cluster, one watch per namespace.
    pub waiters: Waiters,
    /// This process's Lease on this cluster (see [`crate::ownership`]), started on first use.
    liveness: OnceLock<Arc<Liveness>>,
}

impl Cluster {
    /// This process's Lease on this cluster, which owns the pods its waits follow; started
    /// (renewed every `config`'s period from then on, never released) on the first call, whose
    /// `config` is kept. Must be called on a tokio runtime (it spawns the renewal).
    pub fn liveness(&self, config: LivenessConfig) -> Arc<Liveness> {
        self.liveness
            .get_or_init(|| {
                Liveness::start(
                    self.client.clone(),
                    &podline_launch::spec::new_launch_id(),
                    podline_launch::liveness::holder_identity("podline-triggerer"),
                    config,
                    RetryPolicy::default().with_deadline(Some(std::time::Duration::from_secs(30))),
                    default_create_policy(),
                )
            })
            .clone()
    }
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("namespace", &self.namespace)
            .field("waiters", &self.waiters)
            .finish_non_exhaustive()
    }
}

/// The clusters a process talks to, each connected once: every trigger of a triggerer that
/// names the same cluster gets the same [`Cluster`], hence the same watches.
#[derive(Debug, Default)]
pub struct Clusters {
    connected: tokio::sync::Mutex<HashMap<ClusterKey, Arc<Cluster>>>,
}

impl Clusters {
    /// No cluster yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The cluster `key`, connected on first use.
    pub async fn get(&self, key: &ClusterKey) -> Result<Arc<Cluster>, DeferError> {
        let mut connected = self.connected.lock().await;
        if let Some(cluster) = connected.get(key) {
            return Ok(cluster.clone());
        }
        let options = ConnectOptions {
            kubeconfig: key.kubeconfig.clone(),
            context: key.context.clone(),
            ..ConnectOptions::default()
        };
        let done = connect(&options)
            .await
            .map_err(|err| DeferError::Connect(err.to_string()))?;
        let cluster = Arc::new(Cluster {
            waiters: Waiters::new(done.client.clone()),
            client: done.client,
            upgrade_client: done.upgrade_client,
            namespace: done.namespace,
            liveness: OnceLock::new(),
        });
        connected.insert(key.clone(), cluster.clone());
        Ok(cluster)
    }
}
