//! The simulated kubelet (and the scheduler it stands in for): runs the sim's pods on one node.
//!
//! [`Kubelet::spawn`] registers the node's Node object (`node.rs`), keeps its heartbeats
//! (`heartbeat.rs`: the node's Lease, its status report) and starts one task that
//! watches the cluster's pods and moves each through the phases a real node would: bound to
//! [`KubeletConfig::node_name`] after the schedule delay (`Scheduled` event; while the node is
//! cordoned or its Node deleted, `FailedScheduling` and a retry every second), images pulled
//! (`Pulling`/`Pulled`), containers created and started, Pending -> Running ->
//! Succeeded/Failed with the container statuses, conditions and times the real kubelet
//! writes, and finally removed after a deletion (`Killing`).
//!
//! Containers are **scripted** by default, through pod annotations prefixed `sim.podline.io/`
//! (a key applies to every container; `<key>.<container>` to one):
//!
//! | key | value | effect |
//! |---|---|---|
//! | `duration` | `150ms`, `2s`, `1m30s` | how long the container runs (default [`KubeletConfig::default_duration`]) |
//! | `exit-code` | `0`..`255` | exit code (0: reason Completed, else Error) |
//! | `oom` | `true` | exit 137, reason OOMKilled |
//! | `logs` | text | these lines (split on `\n`), spread over the run |
//! | `log-lines` | `N` | lines `line 1` .. `line N`, spread over the run |
//! | `termination-message` | text | `state.terminated.message` |
//! | `pull-delay` | duration | image pull time |
//! | `image-error` | `ErrImagePull`, `ImagePullBackOff`, `InvalidImageName`, `auth` | the pull fails like a real one (images containing `does-not-exist` too) |
//! | `image-error-transient` | `N` | with `image-error`: only the first N pulls fail |
//! | `schedule-delay` | duration | time to binding (pod-level) |
//! | `unschedulable` | `true` | stays Pending with a FailedScheduling event (pod-level) |
//!
//! A bad value fails the pod (`status.reason` `InvalidSimAnnotation`, a Warning event) with a
//! message naming the annotation and what it expects; the kubelet itself never stops.
//! With [`KubeletConfig::exec`] a container with a `command` or `args` runs as a local process
//! instead (see `exec.rs`).
//!
//! One task drives all pods: per-pod state machines (`pod.rs`) and a single timer wheel
//! (`DelayQueue`), so 100k pods cost memory, not threads or tasks. Any delay a pod asks for is
//! armed, however long (`activeDeadlineSeconds` up to 68 years, annotations, grace periods):
//! past the wheel's two-year limit it is chained in one-year hops. A step that panics all the
//! same fails that one pod (reason `SimKubeletError`) and the others keep running.

mod config;
mod exec;
mod heartbeat;
mod image;
mod node;
mod pod;
mod refs;
pub mod sandbox;
mod script;
mod status;
pub mod volumes;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::time::DelayQueue;

pub use config::KubeletConfig;
pub use script::{ANNOTATION_PREFIX, ScriptError};

use crate::cluster::{ChangeKind, Cluster, EventSubject, PodChange, PodEventSpec, PodRef};
use crate::logs::LogStore;
use exec::{ExecReport, ExecSpec};
use pod::{Ctx, Effect, Input, PodWork, TimerKind};

/// Entry point of the simulated kubelet.
///
/// It exists as a type so the sim has one obvious place to start it from: `Sim::start` calls
/// [`Kubelet::spawn`] when [`KubeletConfig::enabled`] is set.
#[derive(Debug)]
pub struct Kubelet;

impl Kubelet {
    /// Registers its Node (see `node.rs`) and starts the kubelet on the current tokio runtime;
    /// it runs until the handle is shut down or dropped. Pods that exist already are picked up
    /// too.
    pub fn spawn(cluster: Cluster, cfg: KubeletConfig) -> KubeletHandle {
        let changes = cluster.subscribe_pods();
        let (stop_tx, stop_rx) = oneshot::channel();
        let driver = Driver::new(cluster, cfg);
        let task = tokio::spawn(driver.run(changes, stop_rx));
        KubeletHandle {
            stop: Some(stop_tx),
            task: Some(task),
        }
    }
}

/// The running kubelet. Dropping it stops the kubelet (and kills exec-mode children).
#[derive(Debug)]
pub struct KubeletHandle {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl KubeletHandle {
    /// Stops the kubelet at once without waiting (for synchronous shutdown paths).
    pub fn stop(&self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }

    /// Stops the kubelet and waits for it: pods stay as they are, exec-mode children are killed.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for KubeletHandle {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A pod the kubelet runs. Only what its Events refer to is kept of the latest object it saw
/// (not the object itself: 100k running pods must not cost 100k decoded pods).
struct Tracked {
    work: PodWork,
    /// The latest resourceVersion seen (Events name it in `involvedObject`).
    resource_version: Option<String>,
    /// The node the pod is bound to, once it is (Events name it as their source host).
    node_name: Option<String>,
    deleting: bool,
}

impl Tracked {
    /// Takes what Events need from the latest version of the pod.
    fn saw(&mut self, pod: &PodRef) {
        self.resource_version.clone_from(&pod.resource_version);
        self.node_name.clone_from(&pod.node_name);
    }

    /// The pod as its Events refer to it.
    fn subject(&self) -> EventSubject<'_> {
        EventSubject {
            namespace: &self.work.namespace,
            name: &self.work.name,
            uid: &self.work.uid,
            resource_version: self.resource_version.as_deref(),
            node_name: self.node_name.as_deref(),
        }
    }
}

/// Gives an exec-mode task access to the cluster's log store without borrowing the cluster.
#[derive(Clone)]
struct ClusterLogs(Cluster);

impl AsRef<LogStore> for ClusterLogs {
    fn as_ref(&self) -> &LogStore {
        self.0.logs()
    }
}

/// The kubelet's single task: pod changes, timers and exec reports in, cluster writes out.
struct Driver {
    cluster: Cluster,
    cfg: KubeletConfig,
    /// Boxed: the map keeps spare slots (and doubles when it grows), which should cost a pointer
    /// each, not a whole pod's state.
    pods: HashMap<Arc<str>, Box<Tracked>>,
    /// Armed timers: the pod, what the timer is for, and how much of its delay is still to run
    /// after this entry expires (see [`Driver::arm`]).
    timers: DelayQueue<(Arc<str>, TimerKind, Duration)>,
    images: HashSet<String>,
    next_ip: u32,
    exec_tx: mpsc::UnboundedSender<ExecReport>,
    exec_rx: mpsc::UnboundedReceiver<ExecReport>,
    exec_kills: HashMap<(Arc<str>, usize), oneshot::Sender<()>>,
    exec_tasks: JoinSet<()>,
}

impl Driver {
    /// A driver for the node `cfg` names, which it registers first (see `node.rs`): the
    /// scheduler places pods only on a Node that exists and is not cordoned.
    fn new(cluster: Cluster, cfg: KubeletConfig) -> Self {
        node::register(&cluster, &cfg.node_name);
        heartbeat::renew_lease(&cluster, &cfg.node_name);
        let (exec_tx, exec_rx) = mpsc::unbounded_channel();
        Driver {
            cluster,
            cfg,
            pods: HashMap::new(),
            timers: DelayQueue::new(),
            images: HashSet::new(),
            next_ip: 0,
            exec_tx,
            exec_rx,
            exec_kills: HashMap::new(),
            exec_tasks: JoinSet::new(),
        }
    }

    async fn run(
        mut self,
        mut changes: broadcast::Receiver<PodChange>,
        mut stop: oneshot::Receiver<()>,
    ) {
        tracing::debug!(node = %self.cfg.node_name, exec = self.cfg.exec, "simulated kubelet started");
        self.guarded("", Self::resync);
        let mut heartbeats = tokio::time::interval_at(
            tokio::time::Instant::now() + heartbeat::RENEW_INTERVAL,
            heartbeat::RENEW_INTERVAL,
        );
        heartbeats.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut beats: u64 = 0;
        loop {
            // Unbiased: a flood of pod changes must not starve the timers (or the reverse).
            tokio::select! {
                _ = &mut stop => break,
                change = changes.recv() => match change {
                    Ok(change) => {
                        let uid = change.pod.uid.clone();
                        self.guarded(&uid, |driver| driver.on_change(change));
                    }
                    Err(RecvError::Lagged(missed)) => {
                        tracing::debug!(missed, "kubelet fell behind the pod feed; resyncing");
                        self.guarded("", Self::resync);
                    }
                    Err(RecvError::Closed) => break,
                },
                Some(expired) = self.timers.next(), if !self.timers.is_empty() => {
                    let (uid, kind, remaining) = expired.into_inner();
                    if remaining.is_zero() {
                        self.guarded(&uid, |driver| driver.step(&uid, Input::Timer(kind)));
                    } else {
                        self.arm(uid, kind, remaining);
                    }
                }
                Some(report) = self.exec_rx.recv() => {
                    self.exec_kills.remove(&(Arc::clone(&report.uid), report.idx));
                    let input = Input::ExecExited { idx: report.idx, run: report.run, exit: report.exit };
                    let uid = Arc::clone(&report.uid);
                    self.guarded(&uid, |driver| driver.step(&uid, input));
                }
                Some(_) = self.exec_tasks.join_next(), if !self.exec_tasks.is_empty() => {}
                _ = heartbeats.tick() => {
                    beats = beats.wrapping_add(1);
                    heartbeat::renew_lease(&self.cluster, &self.cfg.node_name);
                    if beats.is_multiple_of(heartbeat::STATUS_REPORT_EVERY) {
                        heartbeat::report_status(&self.cluster, &self.cfg.node_name);
                    }
                }
            }
        }
        tracing::debug!("simulated kubelet stopped");
    }

    fn on_change(&mut self, change: PodChange) {
        if change.pod.uid.is_empty() {
            return;
        }
        if change.kind == ChangeKind::Deleted {
            self.forget(&change.pod.uid);
            self.cluster.logs().remove_pod(&change.pod.uid);
            if self.cfg.exec {
                volumes::remove_pod_dir(&change.pod.uid);
            }
            return;
        }
        self.observe(&change.pod);
    }

    /// Re-reads every pod after missing changes: adopts new ones, notices deletions.
    fn resync(&mut self) {
        let pods = self.cluster.pods();
        let live: HashSet<&str> = pods
            .iter()
            .filter_map(|p| p.metadata.uid.as_deref())
            .collect();
        let gone: Vec<Arc<str>> = self
            .pods
            .keys()
            .filter(|uid| !live.contains(&***uid))
            .cloned()
            .collect();
        for uid in gone {
            self.forget(&uid);
            self.cluster.logs().remove_pod(&uid);
        }
        for pod in pods {
            self.observe(&PodRef::of(&pod));
        }
    }

    /// Handles the current state of a pod (from an event or a resync).
    fn observe(&mut self, change: &PodRef) {
        let uid = change.uid.as_str();
        if let Some(tracked) = self.pods.get_mut(uid) {
            tracked.saw(change);
            if let Some(node) = change.node_name.as_deref().filter(|n| !n.is_empty())
                && matches!(
                    tracked.work.stage,
                    pod::Stage::Scheduling | pod::Stage::Unschedulable
                )
            {
                // Bound through the API while waiting for (or given up by) the sim's scheduler.
                let key = Arc::clone(&tracked.work.uid);
                if node == self.cfg.node_name {
                    self.step(&key, Input::Bound);
                } else {
                    // Another node's now: nothing of it runs here.
                    self.forget(&key);
                    return;
                }
            }
            let Some(tracked) = self.pods.get_mut(uid) else {
                return;
            };
            if let Some(grace) = change.deletion_grace_seconds
                && !tracked.deleting
            {
                tracked.deleting = true;
                let grace = Duration::from_secs(u64::try_from(grace).unwrap_or(0));
                let key = Arc::clone(&tracked.work.uid);
                self.step(&key, Input::Delete { grace });
            }
            return;
        }
        // Not ours (yet): events queue up, so look at the pod as it is now, not as it was.
        let (namespace, name) = (change.namespace.as_str(), change.name.as_str());
        let Some(pod) = self.cluster.get_pod(namespace, name) else {
            return;
        };
        if pod.metadata.uid.as_deref() != Some(uid) || !self.is_ours(&pod) {
            return;
        }
        if pod.metadata.deletion_timestamp.is_some() {
            // Nothing of it runs here: there is nothing to stop.
            self.cluster.remove_pod(namespace, name, uid);
            return;
        }
        if !is_fresh(&pod) {
            return;
        }
        self.next_ip += 1;
        let (work, effects) = PodWork::new(&pod, &self.cfg, pod_ip(self.next_ip));
        let key = Arc::clone(&work.uid);
        let mut tracked = Tracked {
            work,
            resource_version: None,
            node_name: None,
            deleting: false,
        };
        tracked.saw(&PodRef::of(&pod));
        self.pods.insert(Arc::clone(&key), Box::new(tracked));
        self.apply(&key, effects);
    }

    /// Whether this node is (or will be) responsible for the pod.
    fn is_ours(&self, pod: &Pod) -> bool {
        match pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            None => true,
            Some(node) => node == self.cfg.node_name,
        }
    }

    fn step(&mut self, uid: &Arc<str>, mut input: Input) {
        if input == Input::Timer(TimerKind::Schedule) {
            // The scheduler binds only an unbound pod, like `pods/binding`: one bound through the
            // API meanwhile is run if it is this node's and left alone otherwise.
            let Some(tracked) = self.pods.get(uid) else {
                return;
            };
            let (namespace, name) = (&tracked.work.namespace, &tracked.work.name);
            match self.cluster.pod_node_name(namespace, name) {
                Some(node) if node == self.cfg.node_name => input = Input::Bound,
                Some(node) if !node.is_empty() => {
                    self.forget(uid);
                    return;
                }
                _ => {}
            }
        }
        let node_refusal = match self.pods.get(uid) {
            Some(tracked) if input == Input::Timer(TimerKind::Schedule) => {
                let (namespace, name) = (&tracked.work.namespace, &tracked.work.name);
                let claims = self
                    .cluster
                    .get_pod(namespace, name)
                    .and_then(|pod| volumes::claim_refusal(&self.cluster, &pod));
                claims.map(Arc::from).or_else(|| {
                    node::refusal(&self.cluster, &self.cfg.node_name, || {
                        self.cluster
                            .get_pod(namespace, name)
                            .and_then(|pod| pod.spec.as_ref()?.tolerations.clone())
                            .unwrap_or_default()
                    })
                })
            }
            _ => None,
        };
        let (mount_error, config_errors) = self.references(uid, &input);
        let Some(tracked) = self.pods.get_mut(uid) else {
            return;
        };
        let mut ctx = Ctx {
            now: Timestamp::now(),
            cfg: &self.cfg,
            images: &mut self.images,
            node_refusal,
            mount_error,
            config_errors,
        };
        let effects = tracked.work.step(input, &mut ctx);
        self.apply(uid, effects);
    }

    /// What the pod's references say before a step: why its volumes cannot be set up (read on
    /// admission and mount retries; in exec mode this also writes them to disk), and per
    /// container why its environment cannot be made. Only pods with references pay for
    /// reading their spec.
    fn references(&self, uid: &Arc<str>, input: &Input) -> (Option<String>, Vec<Option<String>>) {
        let Some(tracked) = self.pods.get(uid) else {
            return (None, Vec::new());
        };
        let work = &tracked.work;
        let mounting = matches!(
            input,
            Input::Timer(TimerKind::Admit | TimerKind::MountRetry)
        );
        let check_volumes = mounting && (work.volume_refs || self.cfg.exec);
        if !check_volumes && !work.env_refs {
            return (None, Vec::new());
        }
        let Some(pod) = self
            .cluster
            .get_pod(&work.namespace, &work.name)
            .filter(|pod| pod.metadata.uid.as_deref() == Some(&**uid))
        else {
            return (None, Vec::new());
        };
        let mount_error = if !check_volumes {
            None
        } else if self.cfg.exec {
            volumes::materialize(&self.cluster, &pod, &work.pod_ip).err()
        } else {
            volumes::mount_error(&self.cluster, &pod)
        };
        let config_errors = if work.env_refs {
            pod.spec
                .iter()
                .flat_map(|s| &s.containers)
                .map(|c| refs::container_env(&self.cluster, &pod, c, &work.pod_ip).err())
                .collect()
        } else {
            Vec::new()
        };
        (mount_error, config_errors)
    }

    /// Carries out a step's effects in order.
    fn apply(&mut self, uid: &Arc<str>, effects: Vec<Effect>) {
        for effect in effects {
            let Some(tracked) = self.pods.get_mut(uid) else {
                return;
            };
            match effect {
                Effect::Write => {
                    let work = &tracked.work;
                    let cfg = &self.cfg;
                    let written =
                        self.cluster
                            .mutate_pod(&work.namespace, &work.name, &work.uid, |pod| {
                                status::render(work, cfg, pod);
                            });
                    match written {
                        Some(pod) => tracked.saw(&PodRef::of(&pod)),
                        None => {
                            // Gone or replaced by a new pod of the same name.
                            self.forget(uid);
                            return;
                        }
                    }
                }
                Effect::Event(ev) => {
                    let kind = if ev.warning { "Warning" } else { "Normal" };
                    let field_path = ev
                        .container
                        .and_then(|idx| tracked.work.containers.get(idx))
                        .map(|c| format!("spec.containers{{{}}}", c.name));
                    self.cluster.record_pod_event(
                        &tracked.subject(),
                        &PodEventSpec {
                            event_type: kind,
                            reason: ev.reason,
                            message: &ev.message,
                            component: ev.component.name(),
                            field_path: field_path.as_deref(),
                        },
                    );
                }
                Effect::Timer { after, kind } => self.arm(Arc::clone(uid), kind, after),
                Effect::Log { idx, line, at } => {
                    let container = &tracked.work.containers[idx].name;
                    self.cluster.logs().append(uid, container, &line, at);
                }
                Effect::FinishLog { idx } => {
                    let container = &tracked.work.containers[idx].name;
                    self.cluster.logs().finish(uid, container);
                }
                Effect::SpawnExec { idx, run } => self.spawn_exec(uid, idx, run),
                Effect::KillExec { idx } => {
                    if let Some(kill) = self.exec_kills.remove(&(Arc::clone(uid), idx)) {
                        let _ = kill.send(());
                    }
                }
                Effect::Remove => {
                    let work = &tracked.work;
                    self.cluster
                        .remove_pod(&work.namespace, &work.name, &work.uid);
                    if self.cfg.exec {
                        volumes::remove_pod_dir(&work.uid);
                    }
                    self.forget(uid);
                    return;
                }
            }
        }
        // A finished pod needs no more memory here (its logs stay until it is removed).
        if self
            .pods
            .get(uid)
            .is_some_and(|t| t.work.stage == pod::Stage::Done && !t.deleting)
        {
            self.forget(uid);
        }
    }

    /// Arms a timer `after` from now, whatever its length: the timer wheel panics on delays
    /// past about two years (and `Instant + Duration` on ones past the clock's range), while
    /// pods may ask for 68 years (`activeDeadlineSeconds`) or more (annotations, grace periods).
    /// A longer delay runs as a chain of [`MAX_TIMER`] hops, so it still fires on time.
    fn arm(&mut self, uid: Arc<str>, kind: TimerKind, after: Duration) {
        let hop = after.min(MAX_TIMER);
        let remaining = after.saturating_sub(hop);
        self.timers.insert((uid, kind, remaining), hop);
    }

    /// Runs one handler of the loop so that a panic in it costs one pod, not the kubelet: the
    /// pod (`uid`; empty when the handler is not about one pod) is failed with reason
    /// `SimKubeletError` and forgotten, and every other pod keeps running.
    fn guarded(&mut self, uid: &str, handler: impl FnOnce(&mut Self)) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(self)));
        let Err(panic) = outcome else {
            return;
        };
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        tracing::error!(uid, panic = %what, "simulated kubelet step failed; failing its pod");
        let Some(tracked) = self.pods.get(uid) else {
            return;
        };
        let (namespace, name) = (tracked.work.namespace.clone(), tracked.work.name.clone());
        self.forget(uid);
        let message = format!("the simulated kubelet failed on this pod: {what}");
        // The write that fails the pod may meet what made the step panic (the pod itself): it
        // is guarded too, so the kubelet goes on with the other pods whatever happens to it.
        let cluster = &self.cluster;
        let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = cluster.mutate_pod(&namespace, &name, uid, |pod| {
                let status = pod.status.get_or_insert_with(Default::default);
                status.phase = Some("Failed".to_owned());
                status.reason = Some("SimKubeletError".to_owned());
                status.message = Some(message);
            });
        }));
        if failed.is_err() {
            tracing::error!(
                uid,
                "could not mark the pod Failed after its kubelet step panicked"
            );
        }
    }

    fn spawn_exec(&mut self, uid: &Arc<str>, idx: usize, run: u32) {
        let Some(tracked) = self.pods.get(uid) else {
            return;
        };
        // Exec mode only: read the spec from the store rather than keeping every pod decoded.
        let pod = self
            .cluster
            .get_pod(&tracked.work.namespace, &tracked.work.name)
            .filter(|pod| pod.metadata.uid.as_deref() == Some(&*tracked.work.uid));
        let container = pod
            .as_ref()
            .and_then(|pod| pod.spec.as_ref())
            .and_then(|s| s.containers.get(idx));
        let hostname = tracked.work.name.clone();
        let (Some(pod), Some(container)) = (pod.as_ref(), container) else {
            return;
        };
        // Resolved when the container was created (`references`); a change since is seen
        // here, and a reference gone meanwhile leaves its variable out.
        let env = refs::container_env(&self.cluster, pod, container, &tracked.work.pod_ip)
            .unwrap_or_default();
        let mounts = volumes::container_mounts(pod, container);
        let Some(spec) =
            ExecSpec::from_container(Arc::clone(uid), idx, run, &hostname, container, env, mounts)
        else {
            return;
        };
        if !spec.mounts.is_empty() && !sandbox::can_mount() {
            let message = format!(
                "the sim is not root: the volumes of container {:?} are not mounted at their mountPath (their contents are under {})",
                spec.container,
                volumes::pod_dir(uid).display()
            );
            let field_path = format!("spec.containers{{{}}}", spec.container);
            self.cluster.record_pod_event(
                &tracked.subject(),
                &PodEventSpec {
                    event_type: "Warning",
                    reason: "VolumesNotMounted",
                    message: &message,
                    component: "kubelet",
                    field_path: Some(&field_path),
                },
            );
        }
        let (kill_tx, kill_rx) = oneshot::channel();
        self.exec_kills.insert((Arc::clone(uid), idx), kill_tx);
        let logs = ClusterLogs(self.cluster.clone());
        self.exec_tasks
            .spawn(exec::run(spec, logs, kill_rx, self.exec_tx.clone()));
    }

    /// Stops tracking a pod; dropping its kill senders kills any exec-mode child it has.
    fn forget(&mut self, uid: &str) {
        if let Some(tracked) = self.pods.remove(uid) {
            for idx in 0..tracked.work.containers.len() {
                self.exec_kills
                    .remove(&(Arc::clone(&tracked.work.uid), idx));
            }
        }
    }
}

/// What a process run in a container's context gets: its environment as the kubelet resolves
/// it and its volumes. Public for `pods/exec` in exec mode (podline-sim's `api/exec.rs`), so a
/// command run there sees what the container's own process sees.
#[derive(Clone, Debug, Default)]
pub struct ContainerContext {
    /// The container's variables (a reference that cannot be resolved is left out).
    pub env: Vec<(String, String)>,
    /// Its volumes, for [`sandbox::isolate`].
    pub mounts: Vec<volumes::Mount>,
}

/// The context of `container` of `pod` (see [`ContainerContext`]).
pub fn container_context(
    cluster: &Cluster,
    pod: &Pod,
    container: &k8s_openapi::api::core::v1::Container,
) -> ContainerContext {
    let pod_ip = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_default();
    ContainerContext {
        env: refs::container_env(cluster, pod, container, &pod_ip).unwrap_or_default(),
        mounts: volumes::container_mounts(pod, container),
    }
}

impl Drop for Driver {
    /// The pods' own volume directories go with the kubelet, however it ends (stopped, or its
    /// task aborted); claims' stay, as volumes do.
    fn drop(&mut self) {
        if self.cfg.exec {
            for pod in self.cluster.pods() {
                if let Some(uid) = pod.metadata.uid.as_deref() {
                    volumes::remove_pod_dir(uid);
                }
            }
        }
    }
}

/// Longest single timer-wheel entry: well inside `DelayQueue`'s limit (2^36 ms, about 2.2
/// years) and the clock's range; longer delays are chained (see [`Driver::arm`]).
const MAX_TIMER: Duration = Duration::from_secs(365 * 24 * 3600);

/// A pod nobody ran yet: not terminal and no container started.
fn is_fresh(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return true;
    };
    if matches!(
        status.phase.as_deref(),
        Some("Succeeded" | "Failed" | "Running")
    ) {
        return false;
    }
    !status.container_statuses.iter().flatten().any(|c| {
        c.state
            .as_ref()
            .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
    })
}

/// The n-th pod IP of the node's pod CIDR (10.244.0.0/16, then the following /16s).
fn pod_ip(n: u32) -> String {
    let n = n + 1;
    format!(
        "10.{}.{}.{}",
        244 + (n >> 16) % 12,
        (n >> 8) & 0xff,
        n & 0xff
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
