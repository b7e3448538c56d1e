//! The simulated kubelet (owned by sim-kubelet; this is sim-core's placeholder so the crate
//! builds): schedules pods, moves their phases, writes their logs and events.

use std::time::Duration;

use crate::cluster::Cluster;

/// Configuration of the simulated kubelet.
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// Whether the kubelet runs (false = `--no-kubelet`: pods stay Pending).
    pub enabled: bool,
    /// The node pods are scheduled to.
    pub node_name: String,
    /// Delay before a pod is scheduled.
    pub schedule_delay: Duration,
    /// Delay of an image pull.
    pub pull_delay: Duration,
    /// How long a scripted container runs without a `duration` annotation.
    pub default_duration: Duration,
    /// Run containers' commands as local processes (opt-in).
    pub exec: bool,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            node_name: "sim-node-1".to_owned(),
            schedule_delay: Duration::from_millis(10),
            pull_delay: Duration::from_millis(10),
            default_duration: Duration::from_millis(100),
            exec: false,
        }
    }
}

/// The running kubelet.
#[derive(Debug)]
pub struct Kubelet;

impl Kubelet {
    /// Starts the kubelet against `cluster`.
    pub fn spawn(cluster: Cluster, cfg: KubeletConfig) -> KubeletHandle {
        let _ = (cluster, cfg);
        KubeletHandle { task: None }
    }
}

/// Handle of a running kubelet; [`KubeletHandle::stop`] ends it.
#[derive(Debug)]
pub struct KubeletHandle {
    task: Option<tokio::task::JoinHandle<()>>,
}

impl KubeletHandle {
    /// Stops the kubelet.
    pub fn stop(&self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}
