//! How the simulated kubelet (and the scheduler it stands in for) behaves.

use std::time::Duration;

/// Settings of the simulated node: its name, how fast things happen, and how containers run.
///
/// The defaults are fast (tens of milliseconds) so tests and demos finish quickly; a real
/// cluster takes seconds for the same steps. Pods override most delays per pod with
/// `sim.podline.io/*` annotations (see the `kubelet` module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeletConfig {
    /// Whether to run a kubelet at all. `false`: pods stay
    /// Pending as on a control plane without nodes, and users drive status themselves.
    pub enabled: bool,
    /// The node pods are bound to (`spec.nodeName`). Default `sim-node-1`.
    pub node_name: String,
    /// Time from pod creation to binding (the scheduler's latency). Default 10 ms.
    pub schedule_delay: Duration,
    /// Time to pull an image. Default 10 ms.
    pub pull_delay: Duration,
    /// How long a scripted container runs when the pod says nothing. Default 100 ms.
    pub default_duration: Duration,
    /// Run containers' `command`/`args` as local child processes instead of scripts.
    /// Opt-in only: it executes whatever the pod asks for.
    pub exec: bool,
    /// Longest a deleted pod's containers take to stop (capped by the pod's grace period).
    /// Default 50 ms.
    pub kill_delay: Duration,
    /// First image-pull back-off; doubles per failed pull up to `max_backoff`. The real
    /// kubelet starts at 10 s; default 200 ms here so tests see `ImagePullBackOff` quickly.
    pub pull_backoff: Duration,
    /// First container restart back-off (restartPolicy OnFailure/Always); doubles up to
    /// `max_backoff`. Real kubelet: 10 s. Default 200 ms.
    pub restart_backoff: Duration,
    /// Cap of both back-offs. Real kubelet: 5 min. Default 5 s.
    pub max_backoff: Duration,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            node_name: crate::cluster::DEFAULT_NODE_NAME.to_owned(),
            schedule_delay: Duration::from_millis(10),
            pull_delay: Duration::from_millis(10),
            default_duration: Duration::from_millis(100),
            exec: false,
            kill_delay: Duration::from_millis(50),
            pull_backoff: Duration::from_millis(200),
            restart_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
        }
    }
}

impl KubeletConfig {
    /// Turns the kubelet on or off (off: pods stay Pending).
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Sets the node name pods are bound to.
    pub fn node_name(mut self, node_name: impl Into<String>) -> Self {
        self.node_name = node_name.into();
        self
    }

    /// Sets the default scheduling delay.
    pub fn schedule_delay(mut self, delay: Duration) -> Self {
        self.schedule_delay = delay;
        self
    }

    /// Sets the default image pull delay.
    pub fn pull_delay(mut self, delay: Duration) -> Self {
        self.pull_delay = delay;
        self
    }

    /// Sets how long scripted containers run by default.
    pub fn default_duration(mut self, duration: Duration) -> Self {
        self.default_duration = duration;
        self
    }

    /// Runs containers as local processes (opt-in: it runs what the pod asks for).
    pub fn exec(mut self, exec: bool) -> Self {
        self.exec = exec;
        self
    }

    /// Sets the longest time a deleted pod's containers take to stop.
    pub fn kill_delay(mut self, delay: Duration) -> Self {
        self.kill_delay = delay;
        self
    }

    /// Sets the first image-pull back-off.
    pub fn pull_backoff(mut self, delay: Duration) -> Self {
        self.pull_backoff = delay;
        self
    }

    /// Sets the first container restart back-off.
    pub fn restart_backoff(mut self, delay: Duration) -> Self {
        self.restart_backoff = delay;
        self
    }

    /// Sets the cap of both back-offs.
    pub fn max_backoff(mut self, delay: Duration) -> Self {
        self.max_backoff = delay;
        self
    }

    /// Back-off after `failures` consecutive failures: `base * 2^(failures-1)`, capped.
    pub(crate) fn backoff(&self, base: Duration, failures: u32) -> Duration {
        let factor = 1u32 << failures.saturating_sub(1).min(16);
        base.saturating_mul(factor).min(self.max_backoff)
    }
}
