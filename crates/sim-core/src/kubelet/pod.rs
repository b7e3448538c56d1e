//! One pod's life on the simulated node: an explicit state machine with a pure step function.
//!
//! [`PodWork::step`] takes an [`Input`] (a timer firing, a deletion, an exec-mode child exiting)
//! and the current time, updates the pod's state, and returns the [`Effect`]s the driver must
//! carry out (write the status, record an event, arm a timer, append a log line, ...). It never
//! touches the cluster, the clock or a channel itself, so every transition is unit-testable.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use super::KubeletConfig;
use super::image::{self, ImageRef};
use super::node::NODE_LABELS;
use super::script::{self, ContainerScript, ImageErrorKind, PodScript, ScriptError};

/// Who reports an event: the scheduler binds pods, the kubelet runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Component {
    Scheduler,
    Kubelet,
}

impl Component {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Component::Scheduler => "default-scheduler",
            Component::Kubelet => "kubelet",
        }
    }
}

/// A core/v1 Event to record about the pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EventSpec {
    pub(crate) warning: bool,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
    pub(crate) component: Component,
    /// The container the event is about (None: the pod as a whole).
    pub(crate) container: Option<usize>,
}

/// Timers a pod arms; `run` is the container's restart count, so a timer armed for an earlier
/// run of a restarted (or killed) container is recognised as stale and ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum TimerKind {
    /// The scheduler's decision.
    Schedule,
    /// The kubelet picks up the bound pod.
    Admit,
    /// An image pull completes (successfully or not).
    Pull { idx: usize },
    /// Show `ImagePullBackOff` after `ErrImagePull`.
    PullBackOff { idx: usize },
    /// Try the pull again after the back-off.
    PullRetry { idx: usize },
    /// Emit the next scripted log line.
    Log { idx: usize, run: u32 },
    /// The scripted container exits.
    Exit { idx: usize, run: u32 },
    /// A crashed container restarts (restartPolicy OnFailure/Always).
    Restart { idx: usize, run: u32 },
    /// `activeDeadlineSeconds` ran out.
    Deadline,
    /// The grace period of a deleted pod ran out: kill what still runs, then remove.
    KillDone,
    /// Try again to set up the pod's volumes (after a FailedMount).
    MountRetry,
    /// Try again to create container `idx` (after a CreateContainerConfigError).
    ConfigRetry { idx: usize, run: u32 },
}

/// How an exec-mode child process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExecExit {
    pub(crate) exit_code: i32,
    pub(crate) reason: &'static str,
    pub(crate) message: Option<String>,
    pub(crate) signal: Option<i32>,
}

/// What happens to a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Input {
    Timer(TimerKind),
    /// Someone else bound the pod to this node (`pods/binding`): run it without scheduling.
    Bound,
    /// The pod got a deletionTimestamp.
    Delete {
        grace: Duration,
    },
    ExecExited {
        idx: usize,
        run: u32,
        exit: ExecExit,
    },
}

/// What the driver must do after a step, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Render the pod's status (and binding) into the stored object.
    Write,
    Event(EventSpec),
    Timer {
        after: Duration,
        kind: TimerKind,
    },
    Log {
        idx: usize,
        line: String,
        at: Timestamp,
    },
    FinishLog {
        idx: usize,
    },
    SpawnExec {
        idx: usize,
        run: u32,
    },
    KillExec {
        idx: usize,
    },
    /// Delete the object for good (after termination).
    Remove,
}

/// Where the pod is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Waiting for the scheduler.
    Scheduling,
    /// The scheduler found no node: stays until deleted, or, when only the node refused it
    /// ([`PodWork::refused_by_node`]), until the node takes pods again.
    Unschedulable,
    /// Bound to the node, waiting for the kubelet to pick it up.
    Bound,
    /// The kubelet runs it (pulls, containers).
    Active,
    /// Deleted while containers ran: waiting for them to stop.
    Terminating,
    /// Reached Succeeded or Failed; nothing more will happen but deletion.
    Done,
}

/// A container's current state, as `containerStatuses[].state` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CState {
    Waiting {
        reason: &'static str,
        message: Option<String>,
    },
    Running {
        started: Timestamp,
    },
    /// Boxed: a running pod should not pay for the terminated state it does not have yet.
    Terminated(Box<Terminated>),
}

/// A finished run of a container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Terminated {
    pub(crate) exit_code: i32,
    pub(crate) reason: String,
    pub(crate) message: Option<String>,
    pub(crate) signal: Option<i32>,
    pub(crate) started: Timestamp,
    pub(crate) finished: Timestamp,
    pub(crate) container_id: String,
}

/// One container of the pod.
#[derive(Clone, Debug)]
pub(crate) struct ContainerWork {
    pub(crate) name: String,
    /// The image as the spec writes it.
    pub(crate) image: String,
    pub(crate) image_ref: Option<ImageRef>,
    pub(crate) pull_policy: PullPolicy,
    pub(crate) script: ContainerScript,
    /// Runs as a local process (exec mode, and the container has a command or args).
    pub(crate) exec: bool,
    pub(crate) state: CState,
    /// Boxed like [`CState::Terminated`].
    pub(crate) last_terminated: Option<Box<Terminated>>,
    pub(crate) restarts: u32,
    pub(crate) pull_failures: u32,
    /// A pull is in flight (a `Pull` timer is armed).
    pub(crate) pulling: bool,
    pub(crate) logs_emitted: u32,
    pub(crate) container_id: Option<String>,
}

/// `imagePullPolicy`, with the API server's default applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

/// The pod's restart policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RestartPolicy {
    Never,
    OnFailure,
    Always,
}

/// Everything the kubelet knows about one pod it runs.
#[derive(Clone, Debug)]
pub(crate) struct PodWork {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) uid: Arc<str>,
    pub(crate) restart_policy: RestartPolicy,
    pub(crate) active_deadline: Option<Duration>,
    /// A bad scripting annotation: the kubelet fails the pod with it once admitted.
    pub(crate) invalid: Option<ScriptError>,
    pub(crate) warnings: Vec<String>,
    /// Why the scheduler cannot place the pod, if it cannot.
    pub(crate) unschedulable: Option<String>,
    pub(crate) stage: Stage,
    pub(crate) containers: Vec<ContainerWork>,
    pub(crate) scheduled_at: Option<Timestamp>,
    pub(crate) unschedulable_at: Option<Timestamp>,
    /// Set while the pod is Unschedulable only because the node refused it (see
    /// [`Ctx::node_refusal`]): the refusal's message. The scheduler tries again every
    /// [`NODE_RETRY`]. `unschedulable` is the reason no node could ever take the pod.
    pub(crate) refused_by_node: Option<Arc<str>>,
    pub(crate) start_time: Option<Timestamp>,
    pub(crate) ready: bool,
    pub(crate) ready_changed_at: Option<Timestamp>,
    /// Pod-level failure (`status.reason`, `status.message`), e.g. DeadlineExceeded.
    pub(crate) failure: Option<(String, String)>,
    pub(crate) pod_ip: String,
    /// How long a scripted container runs without a `duration` annotation.
    pub(crate) default_duration: Duration,
    /// The pod has volumes whose contents come from other objects (secret, configMap,
    /// projected): the driver checks them before the containers start ([`Ctx::mount_error`]).
    pub(crate) volume_refs: bool,
    /// A container reads its environment from other objects (`valueFrom`, `envFrom`): the
    /// driver resolves it before a container starts ([`Ctx::config_errors`]).
    pub(crate) env_refs: bool,
    /// Waiting for its volumes (FailedMount); how many set-ups failed so far.
    pub(crate) mounting: bool,
    pub(crate) mount_failures: u32,
}

/// What a step may read and update outside the pod.
pub(crate) struct Ctx<'a> {
    pub(crate) now: Timestamp,
    pub(crate) cfg: &'a KubeletConfig,
    /// Images already on the node (a `Pulled ... already present` needs no pull).
    pub(crate) images: &'a mut HashSet<String>,
    /// Why the node takes no new pod now (it is cordoned or has a taint the pod does not
    /// tolerate, or its Node object is gone): the scheduler's FailedScheduling message. Read by
    /// the driver for schedule timers only.
    pub(crate) node_refusal: Option<Arc<str>>,
    /// Why the pod's volumes cannot be set up now (the FailedMount message); read on admission
    /// and mount retries of pods with [`PodWork::volume_refs`].
    pub(crate) mount_error: Option<String>,
    /// Per container: why its environment cannot be made now (the kubelet's
    /// CreateContainerConfigError message); empty when no container has references.
    pub(crate) config_errors: Vec<Option<String>>,
}

/// How often the scheduler tries again a pod the node refused (kube-scheduler retries on the
/// node's update; the sim polls).
pub(crate) const NODE_RETRY: Duration = Duration::from_secs(1);

/// The scheduler name of kube-scheduler's default profile (the sim's scheduler plays it).
pub(crate) const DEFAULT_SCHEDULER: &str = "default-scheduler";

impl PodWork {
    /// Reads a new pod; returns its work and the first effects (warnings, the schedule timer).
    pub(crate) fn new(pod: &Pod, cfg: &KubeletConfig, pod_ip: String) -> (PodWork, Vec<Effect>) {
        let meta = &pod.metadata;
        let spec = pod.spec.clone().unwrap_or_default();
        let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
        let (script, warnings, invalid) = match script::parse(meta.annotations.as_ref(), &names) {
            Ok(parsed) => (parsed.script, parsed.warnings, None),
            Err(e) => (
                PodScript {
                    containers: vec![ContainerScript::default(); names.len()],
                    ..PodScript::default()
                },
                Vec::new(),
                Some(e),
            ),
        };
        let containers = spec
            .containers
            .iter()
            .zip(&script.containers)
            .map(|(c, s)| {
                let image = c.image.clone().unwrap_or_default();
                let image_ref = ImageRef::parse(&image);
                let pull_policy = match c.image_pull_policy.as_deref() {
                    Some("Always") => PullPolicy::Always,
                    Some("Never") => PullPolicy::Never,
                    Some("IfNotPresent") => PullPolicy::IfNotPresent,
                    _ if image_ref.as_ref().is_none_or(|r| r.latest) => PullPolicy::Always,
                    _ => PullPolicy::IfNotPresent,
                };
                ContainerWork {
                    name: c.name.clone(),
                    exec: cfg.exec
                        && (c.command.as_ref().is_some_and(|v| !v.is_empty())
                            || c.args.as_ref().is_some_and(|v| !v.is_empty())),
                    image,
                    image_ref,
                    pull_policy,
                    script: s.clone(),
                    state: CState::Waiting {
                        reason: "ContainerCreating",
                        message: None,
                    },
                    last_terminated: None,
                    restarts: 0,
                    pull_failures: 0,
                    pulling: false,
                    logs_emitted: 0,
                    container_id: None,
                }
            })
            .collect();
        let node_selector_miss = spec.node_selector.as_ref().is_some_and(|sel| {
            sel.iter().any(|(k, v)| {
                let node_value = match k.as_str() {
                    "kubernetes.io/hostname" => Some(cfg.node_name.as_str()),
                    _ => NODE_LABELS
                        .iter()
                        .find(|(nk, _)| nk == k)
                        .map(|(_, nv)| *nv),
                };
                node_value != Some(v.as_str())
            })
        });
        let unschedulable = if script.unschedulable || node_selector_miss {
            Some(
                "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. \
                 preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
                    .to_owned(),
            )
        } else {
            None
        };
        let restart_policy = match spec.restart_policy.as_deref() {
            Some("Never") => RestartPolicy::Never,
            Some("OnFailure") => RestartPolicy::OnFailure,
            _ => RestartPolicy::Always,
        };
        let already_bound = spec.node_name.as_deref() == Some(cfg.node_name.as_str());
        // kube-scheduler places only the pods that name it; others wait for their own scheduler
        // to bind them (`pods/binding`).
        let ours_to_schedule = spec
            .scheduler_name
            .as_deref()
            .is_none_or(|s| s.is_empty() || s == DEFAULT_SCHEDULER);
        let schedule_delay = script.schedule_delay.unwrap_or(cfg.schedule_delay);
        let work = PodWork {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: Arc::from(meta.uid.clone().unwrap_or_default()),
            restart_policy,
            active_deadline: spec
                .active_deadline_seconds
                .map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(0))),
            invalid,
            warnings,
            unschedulable,
            stage: if already_bound {
                Stage::Bound
            } else {
                Stage::Scheduling
            },
            containers,
            scheduled_at: None,
            unschedulable_at: None,
            refused_by_node: None,
            start_time: None,
            ready: false,
            ready_changed_at: None,
            failure: None,
            pod_ip,
            default_duration: cfg.default_duration,
            volume_refs: super::volumes::has_references(pod),
            env_refs: spec.containers.iter().any(|c| {
                c.env_from.as_ref().is_some_and(|e| !e.is_empty())
                    || c.env.iter().flatten().any(|v| v.value_from.is_some())
            }),
            mounting: false,
            mount_failures: 0,
        };
        let mut effects: Vec<Effect> = work
            .warnings
            .iter()
            .map(|w| event(true, "UnknownSimAnnotation", w.clone(), Component::Kubelet))
            .collect();
        if already_bound {
            effects.push(Effect::Timer {
                after: Duration::ZERO,
                kind: TimerKind::Admit,
            });
        } else if ours_to_schedule {
            effects.push(Effect::Timer {
                after: schedule_delay,
                kind: TimerKind::Schedule,
            });
        }
        (work, effects)
    }

    /// Advances the pod by one input; returns what the driver must do.
    pub(crate) fn step(&mut self, input: Input, ctx: &mut Ctx<'_>) -> Vec<Effect> {
        let mut fx = Vec::new();
        let dirty = match input {
            Input::Timer(kind) => self.on_timer(kind, ctx, &mut fx),
            Input::Bound => self.on_bound(ctx, &mut fx),
            Input::Delete { grace } => self.on_delete(grace, ctx, &mut fx),
            Input::ExecExited { idx, run, exit } => self.on_exec_exit(idx, run, exit, ctx, &mut fx),
        };
        if dirty {
            self.settle(ctx.now, &mut fx);
            // The write goes before a removal so the final status is visible (and recorded).
            let at = fx
                .iter()
                .position(|e| *e == Effect::Remove)
                .unwrap_or(fx.len());
            fx.insert(at, Effect::Write);
        }
        fx
    }

    /// The pod phase the kubelet reports, from the container states (the kubelet's
    /// `getPhase`): Pending while any container has not started, Running while any runs, then
    /// Succeeded if all exited 0, else Failed (with restartPolicy Never).
    pub(crate) fn phase(&self) -> &'static str {
        if self.failure.is_some() {
            return "Failed";
        }
        if matches!(
            self.stage,
            Stage::Scheduling | Stage::Unschedulable | Stage::Bound
        ) {
            return "Pending";
        }
        let (mut waiting, mut running, mut stopped, mut succeeded) = (0, 0, 0, 0);
        for c in &self.containers {
            match &c.state {
                CState::Running { .. } => running += 1,
                CState::Terminated(t) => {
                    stopped += 1;
                    if t.exit_code == 0 {
                        succeeded += 1;
                    }
                }
                CState::Waiting { .. } if c.last_terminated.is_some() => stopped += 1,
                CState::Waiting { .. } => waiting += 1,
            }
        }
        if waiting > 0 {
            "Pending"
        } else if running > 0 {
            "Running"
        } else if stopped == 0 {
            "Pending"
        } else if self.restart_policy == RestartPolicy::Always {
            "Running"
        } else if stopped == succeeded {
            "Succeeded"
        } else if self.restart_policy == RestartPolicy::OnFailure {
            "Running"
        } else {
            "Failed"
        }
    }

    /// Whether the pod reached Succeeded or Failed.
    pub(crate) fn is_terminal(&self) -> bool {
        matches!(self.phase(), "Succeeded" | "Failed")
    }

    fn on_timer(&mut self, kind: TimerKind, ctx: &mut Ctx<'_>, fx: &mut Vec<Effect>) -> bool {
        match kind {
            TimerKind::Schedule => self.on_schedule(ctx, fx),
            TimerKind::Admit => self.on_admit(ctx, fx),
            TimerKind::Pull { idx } => self.on_pull_done(idx, ctx, fx),
            TimerKind::PullBackOff { idx } => self.on_pull_backoff(idx, ctx, fx),
            TimerKind::PullRetry { idx } => self.on_pull_retry(idx, ctx, fx),
            TimerKind::Log { idx, run } => {
                self.on_log(idx, run, ctx.now, fx);
                false
            }
            TimerKind::Exit { idx, run } => self.on_scripted_exit(idx, run, ctx, fx),
            TimerKind::Restart { idx, run } => self.on_restart(idx, run, ctx, fx),
            TimerKind::Deadline => self.on_deadline(ctx, fx),
            TimerKind::KillDone => self.on_kill_done(ctx, fx),
            TimerKind::MountRetry => self.on_mount_retry(ctx, fx),
            TimerKind::ConfigRetry { idx, run } => self.on_config_retry(idx, run, ctx, fx),
        }
    }

    fn on_schedule(&mut self, ctx: &mut Ctx<'_>, fx: &mut Vec<Effect>) -> bool {
        let retrying = self.stage == Stage::Unschedulable && self.refused_by_node.is_some();
        if self.stage != Stage::Scheduling && !retrying {
            return false;
        }
        if let Some(message) = self.unschedulable.clone() {
            self.stage = Stage::Unschedulable;
            self.unschedulable_at = Some(ctx.now);
            fx.push(event(
                true,
                "FailedScheduling",
                message,
                Component::Scheduler,
            ));
            return true;
        }
        if let Some(refusal) = ctx.node_refusal.take() {
            fx.push(Effect::Timer {
                after: NODE_RETRY,
                kind: TimerKind::Schedule,
            });
            if retrying && self.refused_by_node.as_deref() == Some(&*refusal) {
                return false;
            }
            // A first refusal, or a different one (cordoned, then tainted): a new event and
            // message, as kube-scheduler writes them; the condition's transition time stays.
            if !retrying {
                self.stage = Stage::Unschedulable;
                self.unschedulable_at = Some(ctx.now);
            }
            fx.push(event(
                true,
                "FailedScheduling",
                refusal.to_string(),
                Component::Scheduler,
            ));
            self.refused_by_node = Some(refusal);
            return true;
        }
        self.refused_by_node = None;
        self.stage = Stage::Bound;
        self.scheduled_at = Some(ctx.now);
        let message = format!(
            "Successfully assigned {}/{} to {}",
            self.namespace, self.name, ctx.cfg.node_name
        );
        fx.push(event(false, "Scheduled", message, Component::Scheduler));
        fx.push(Effect::Timer {
            after: Duration::ZERO,
            kind: TimerKind::Admit,
        });
        true
    }

    /// Bound by another scheduler (or by hand) before ours placed it, or after ours gave up:
    /// the kubelet picks it up. The binding wrote `PodScheduled` itself, and a scheduler other
    /// than the sim's records its own events, so there is nothing to write or report here.
    fn on_bound(&mut self, ctx: &mut Ctx<'_>, fx: &mut Vec<Effect>) -> bool {
        if !matches!(self.stage, Stage::Scheduling | Stage::Unschedulable) {
            return false;
        }
        self.stage = Stage::Bound;
        self.scheduled_at = Some(ctx.now);
        fx.push(Effect::Timer {
            after: Duration::ZERO,
            kind: TimerKind::Admit,
        });
        false
    }

    fn on_admit(&mut self, ctx: &mut Ctx<'_>, fx: &mut Vec<Effect>) -> bool {
        if self.stage != Stage::Bound {
            return false;
        }
        self.stage = Stage::Active;
        self.scheduled_at.get_or_insert(ctx.now);
        self.start_time = Some(ctx.now);
        self.ready_changed_at = Some(ctx.now);
        if let Some(invalid) = &self.invalid {
            let message = invalid.to_string();
            for c in &mut self.containers {
                c.state = CState::Waiting {
                    reason: "CreateContainerConfigError",
                    message: Some(message.clone()),
                };
            }
            fx.push(event(
                true,
                "InvalidSimAnnotation",
                message.clone(),
                Component::Kubelet,
            ));
            self.failure = Some(("InvalidSimAnnotation".to_owned(), message));
            return true;
        }
        if let Some(deadline) = self.active_deadline {
            fx.push(Effect::Timer {
                after: deadline,
                kind: TimerKind::Deadline,
            });
        }
        if self.mount_failed(ctx, fx) {
            return true;
        }
        for idx in 0..self.containers.len() {
            self.begin_pull(idx, ctx, fx);
        }
        true
    }

    /// The volume manager's wait: when a volume cannot be set up, a `FailedMount` event and a
    /// retry after a growing back-off; the containers stay in ContainerCreating. Returns
    /// whether the pod waits.
    fn mount_failed(&mut self, ctx: &mut Ctx<'_>, fx: &mut Vec<Effect>) -> bool {
        let Some(message) = ctx.mount_error.take() else {
            self.mounting = false;
            return false;
        };
        self.mounting = true;
        self.mount_failures = self.mount_failures.saturating_add(1);
        fx.push(event(true, "FailedMount", message, Component::Kubelet));
        fx.push(Effect::Timer {
            after: ctx.cfg.backoff(ctx.cfg.pull_backoff, self.mount_failures),
            kind: TimerKind::MountRetry,
        });
        true
    }

    fn on_mount_retry(&mut self, ctx: &mut Ctx<'_>, fx: &mut Vec<Effect>) -> bool {
        if self.stage != Stage::Active || !self.mounting {
            return false;
        }
        if self.mount_failed(ctx, fx) {
            return false;
        }
        for idx in 0..self.containers.len() {
            self.begin_pull(idx, ctx, fx);
        }
        true
    }

    /// The kubelet's pod sync after a CreateContainerConfigError: it tries to create the
    /// container again.
    fn on_config_retry(
        &mut self,
        idx: usize,
        run: u32,
        ctx: &mut Ctx<'_>,
        fx: &mut Vec<Effect>,
    ) -> bool {
        let Some(c) = self.containers.get(idx) else {
            return false;
        };
        if self.stage != Stage::Active
            || c.restarts != run
            || !matches!(
                c.state,
                CState::Waiting {
                    reason: "CreateContainerConfigError",
                    ..
                }
            )
        {
            return false;
        }
        self.start_container(idx, ctx, fx)
    }

    fn begin_pull(&mut self, idx: usize, ctx: &mut Ctx<'_>, fx: &mut Vec<Effect>) {
        let c = &mut self.containers[idx];
        let invalid =
            c.image_ref.is_none() || c.script.image_error == Some(ImageErrorKind::InvalidName);
        if invalid {
            let message = image::invalid_name_message(&c.image);
            c.state = CState::Waiting {
                reason: "InvalidImageName",
                message: Some(message.clone()),
            };
            fx.push(container_event(idx, true, "InspectFailed", message));
            fx.push(container_event(
                idx,
                true,
                "Failed",
                "Error: InvalidImageName".to_owned(),
            ));
            return;
        }
        let full = c
            .image_ref
            .as_ref()
            .map(|r| r.full.clone())
            .unwrap_or_default();
        let scripted_error = c.script.image_error.is_some() || c.image.contains("does-not-exist");
        let present = ctx.images.contains(&full);
        match c.pull_policy {
            PullPolicy::Never if !present => {
                let message = format!(
                    "Container image \"{}\" is not present with pull policy of Never",
                    c.image
                );
                c.state = CState::Waiting {
                    reason: "ErrImageNeverPull",
                    message: Some(message.clone()),
                };
                fx.push(container_event(idx, true, "ErrImageNeverPull", message));
                fx.push(container_event(
                    idx,
                    true,
                    "Failed",
                    "Error: ErrImageNeverPull".to_owned(),
                ));
            }
            PullPolicy::Never | PullPolicy::IfNotPresent if present && !scripted_error => {
                let message = format!("Container image \"{}\" already present on machine", c.image);
                fx.push(container_event(idx, false, "Pulled", message));
                self.start_container(idx, ctx, fx);
            }
            _ => {
                c.pulling = true;
                fx.push(container_event(
                    idx,
                    false,
                    "Pulling",
                    format!("Pulling image \"{}\"", c.image),
                ));
                let after = c.script.pull_delay.unwrap_or(ctx.cfg.pull_delay);
                fx.push(Effect::Timer {
                    after,
                    kind: TimerKind::Pull { idx },
                });
            }
        }
    }

    fn on_pull_done(&mut self, idx: usize, ctx: &mut Ctx<'_>, fx: &mut Vec<Effect>) -> bool {
        if self.stage != Stage::Active || !self.containers.get(idx).is_some_and(|c| c.pulling) {
            return false;
        }
        let c = &mut self.containers[idx];
        c.pulling = false;
        let Some(image_ref) = c.image_ref.clone() else {
            return false;
        };
        let kind = c.script.image_error.or_else(|| {
            c.image
                .contains("does-not-exist")
                .then_some(ImageErrorKind::NotFound)
        });
        let fails = kind.is_some()
            && c.script
                .transient_failures
                .is_none_or(|n| c.pull_failures < n);
        if let (true, Some(kind)) = (fails, kind) {
            c.pull_failures = c.pull_failures.saturating_add(1);
            let message = match kind {
                ImageErrorKind::Unauthorized => {
                    image::unauthorized_message(&c.image, &image_ref.full, &image_ref.repository)
                }
                _ => image::not_found_message(&c.image, &image_ref.full),
            };
            c.state = CState::Waiting {
                reason: "ErrImagePull",
                message: Some(message.clone()),
            };
            fx.push(container_event(idx, true, "Failed", message));
            fx.push(container_event(
                idx,
                true,
                "Failed",
                "Error: ErrImagePull".to_owned(),
            ));
            fx.push(Effect::Timer {
                after: ctx.cfg.pull_backoff,
                kind: TimerKind::PullBackOff { idx },
            });
            return true;
        }
        let pull_time = c.script.pull_delay.unwrap_or(ctx.cfg.pull_delay);
        let took = image::go_duration(pull_time);
        let message = format!(
            "Successfully pulled image \"{}\" in {took} ({took} including waiting). Image size: {} bytes.",
            c.image,
            image_ref.size_bytes()
        );
        ctx.images.insert(image_ref.full);
        fx.push(container_event(idx, false, "Pulled", message));
        self.start_container(idx, ctx, fx);
        true
    }

    fn on_pull_backoff(&mut self, idx: usize, ctx: &mut Ctx<'_>, fx: &mut Vec<Effect>) -> bool {
        if self.stage != Stage::Active {
            return false;
        }
        let Some(c) = self.containers.get_mut(idx) else {
            return false;
        };
        if !matches!(
            c.state,
            CState::Waiting {
                reason: "ErrImagePull",
                ..
            }
        ) {
            return false;
        }
        let message = format!("Back-off pulling image \"{}\"", c.image);
        c.state = CState::Waiting {
            reason: "ImagePullBackOff",
            message: Some(message.clone()),
        };
        fx.push(container_event(idx, false, "BackOff", message));
        fx.push(container_event(
            idx,
            true,
            "Failed",
            "Error: ImagePullBackOff".to_owned(),
        ));
        let after = ctx.cfg.backoff(ctx.cfg.pull_backoff, c.pull_failures);
        fx.push(Effect::Timer {
            after,
            kind: TimerKind::PullRetry { idx },
        });
        true
    }

    fn on_pull_retry(&mut self, idx: usize, ctx: &mut Ctx<'_>, fx: &mut Vec<Effect>) -> bool {
        if self.stage != Stage::Active {
            return false;
        }
        let Some(c) = self.containers.get_mut(idx) else {
            return false;
        };
        if !matches!(
            c.state,
            CState::Waiting {
                reason: "ImagePullBackOff",
                ..
            }
        ) || c.pulling
        {
            return false;
        }
        c.pulling = true;
        fx.push(container_event(
            idx,
            false,
            "Pulling",
            format!("Pulling image \"{}\"", c.image),
        ));
        let after = c.script.pull_delay.unwrap_or(ctx.cfg.pull_delay);
        fx.push(Effect::Timer {
            after,
            kind: TimerKind::Pull { idx },
        });
        false
    }

    /// Creates and starts container `idx` now (its image is on the node), unless its
    /// environment cannot be made: then it waits in `CreateContainerConfigError` with the
    /// kubelet's message (and a `Failed` event `Error: <message>`, kuberuntime's
    /// `startContainer`), and the kubelet tries again after a back-off. Returns whether the
    /// status changed.
    fn start_container(&mut self, idx: usize, ctx: &mut Ctx<'_>, fx: &mut Vec<Effect>) -> bool {
        let now = ctx.now;
        let uid = Arc::clone(&self.uid);
        let c = &mut self.containers[idx];
        let run = c.restarts;
        if let Some(Some(message)) = ctx.config_errors.get(idx) {
            let same = matches!(&c.state, CState::Waiting { reason: "CreateContainerConfigError", message: Some(m) } if m == message);
            c.state = CState::Waiting {
                reason: "CreateContainerConfigError",
                message: Some(message.clone()),
            };
            c.pull_failures = c.pull_failures.saturating_add(1);
            fx.push(container_event(
                idx,
                true,
                "Failed",
                format!("Error: {message}"),
            ));
            fx.push(Effect::Timer {
                after: ctx.cfg.backoff(ctx.cfg.pull_backoff, c.pull_failures),
                kind: TimerKind::ConfigRetry { idx, run },
            });
            return !same;
        }
        c.container_id = Some(format!(
            "containerd://{}",
            image::hex64(&[&uid, &c.name, &run.to_string()])
        ));
        c.state = CState::Running { started: now };
        c.logs_emitted = 0;
        fx.push(container_event(
            idx,
            false,
            "Created",
            format!("Created container: {}", c.name),
        ));
        fx.push(container_event(
            idx,
            false,
            "Started",
            format!("Started container {}", c.name),
        ));
        if c.exec {
            fx.push(Effect::SpawnExec { idx, run });
            return true;
        }
        fx.push(Effect::Timer {
            after: self.duration(idx),
            kind: TimerKind::Exit { idx, run },
        });
        if self.containers[idx].script.logs.len() > 0 {
            self.on_log(idx, run, now, fx);
        }
        true
    }

    fn duration(&self, idx: usize) -> Duration {
        self.containers[idx]
            .script
            .duration
            .unwrap_or(self.default_duration)
    }

    /// Emits the next scripted log line and arms the timer for the one after.
    fn on_log(&mut self, idx: usize, run: u32, now: Timestamp, fx: &mut Vec<Effect>) {
        let duration = self.duration(idx);
        let Some(c) = self.containers.get_mut(idx) else {
            return;
        };
        let CState::Running { started } = c.state else {
            return;
        };
        let total = c.script.logs.len();
        if c.restarts != run || c.logs_emitted >= total {
            return;
        }
        fx.push(Effect::Log {
            idx,
            line: c.script.logs.line(c.logs_emitted),
            at: now,
        });
        c.logs_emitted += 1;
        if c.logs_emitted < total {
            // Line k (0-based) is due at start + duration * k / total.
            let due = duration.mul_f64(f64::from(c.logs_emitted) / f64::from(total));
            let elapsed = Duration::try_from(now.duration_since(started)).unwrap_or_default();
            fx.push(Effect::Timer {
                after: due.saturating_sub(elapsed),
                kind: TimerKind::Log { idx, run },
            });
        }
    }

    fn on_scripted_exit(
        &mut self,
        idx: usize,
        run: u32,
        ctx: &mut Ctx<'_>,
        fx: &mut Vec<Effect>,
    ) -> bool {
        let Some(c) = self.containers.get_mut(idx) else {
            return false;
        };
        if c.restarts != run
            || !matches!(c.state, CState::Running { .. })
            || self.stage != Stage::Active
        {
            return false;
        }
        while c.logs_emitted < c.script.logs.len() {
            fx.push(Effect::Log {
                idx,
                line: c.script.logs.line(c.logs_emitted),
                at: ctx.now,
            });
            c.logs_emitted += 1;
        }
        let (exit_code, reason) = if c.script.oom {
            (137, "OOMKilled")
        } else if c.script.exit_code == 0 {
            (0, "Completed")
        } else {
            (c.script.exit_code, "Error")
        };
        let exit = ExecExit {
            exit_code,
            reason,
            message: c.script.termination_message.clone(),
            signal: None,
        };
        self.container_exited(idx, exit, ctx, fx);
        true
    }

    fn on_exec_exit(
        &mut self,
        idx: usize,
        run: u32,
        exit: ExecExit,
        ctx: &mut Ctx<'_>,
        fx: &mut Vec<Effect>,
    ) -> bool {
        let Some(c) = self.containers.get(idx) else {
            return false;
        };
        if c.restarts != run || !matches!(c.state, CState::Running { .. }) {
            return false;
        }
        match self.stage {
            Stage::Active => {
                if exit.reason == "StartError" {
                    let message = exit.message.clone().unwrap_or_default();
                    fx.push(container_event(
                        idx,
                        true,
                        "Failed",
                        format!("Error: {message}"),
                    ));
                }
                self.container_exited(idx, exit, ctx, fx);
                true
            }
            Stage::Terminating => {
                self.terminate(idx, exit, ctx.now, fx);
                if !self
                    .containers
                    .iter()
                    .any(|c| matches!(c.state, CState::Running { .. }))
                {
                    self.finish_termination(fx);
                }
                true
            }
            _ => false,
        }
    }

    /// Records container `idx` as terminated, then restarts it if the policy says so.
    fn container_exited(
        &mut self,
        idx: usize,
        exit: ExecExit,
        ctx: &mut Ctx<'_>,
        fx: &mut Vec<Effect>,
    ) {
        let failed = exit.exit_code != 0;
        let restart = match self.restart_policy {
            RestartPolicy::Always => true,
            RestartPolicy::OnFailure => failed,
            RestartPolicy::Never => false,
        };
        if !restart {
            self.terminate(idx, exit, ctx.now, fx);
            return;
        }
        let (namespace, name, uid) = (
            self.namespace.clone(),
            self.name.clone(),
            Arc::clone(&self.uid),
        );
        let c = &mut self.containers[idx];
        let CState::Running { started } = c.state else {
            return;
        };
        c.last_terminated = Some(Box::new(Terminated {
            exit_code: exit.exit_code,
            reason: exit.reason.to_owned(),
            message: exit.message,
            signal: exit.signal,
            started,
            finished: ctx.now,
            container_id: c.container_id.clone().unwrap_or_default(),
        }));
        let backoff = ctx
            .cfg
            .backoff(ctx.cfg.restart_backoff, c.restarts.saturating_add(1));
        let secs = backoff.as_secs().max(1);
        c.state = CState::Waiting {
            reason: "CrashLoopBackOff",
            message: Some(format!(
                "back-off {secs}s restarting failed container={} pod={name}_{namespace}({uid})",
                c.name
            )),
        };
        let message = format!(
            "Back-off restarting failed container {} in pod {name}_{namespace}({uid})",
            c.name
        );
        fx.push(container_event(idx, true, "BackOff", message));
        fx.push(Effect::Timer {
            after: backoff,
            kind: TimerKind::Restart {
                idx,
                run: c.restarts,
            },
        });
    }

    fn on_restart(
        &mut self,
        idx: usize,
        run: u32,
        ctx: &mut Ctx<'_>,
        fx: &mut Vec<Effect>,
    ) -> bool {
        let Some(c) = self.containers.get_mut(idx) else {
            return false;
        };
        if self.stage != Stage::Active
            || c.restarts != run
            || !matches!(
                c.state,
                CState::Waiting {
                    reason: "CrashLoopBackOff",
                    ..
                }
            )
        {
            return false;
        }
        c.restarts = c.restarts.saturating_add(1);
        let message = format!("Container image \"{}\" already present on machine", c.image);
        fx.push(container_event(idx, false, "Pulled", message));
        self.start_container(idx, ctx, fx);
        true
    }

    /// Marks container `idx` terminated with `exit` (no restart) and closes its log.
    fn terminate(&mut self, idx: usize, exit: ExecExit, now: Timestamp, fx: &mut Vec<Effect>) {
        let c = &mut self.containers[idx];
        let CState::Running { started } = c.state else {
            return;
        };
        c.state = CState::Terminated(Box::new(Terminated {
            exit_code: exit.exit_code,
            reason: exit.reason.to_owned(),
            message: exit.message,
            signal: exit.signal,
            started,
            finished: now,
            container_id: c.container_id.clone().unwrap_or_default(),
        }));
        fx.push(Effect::FinishLog { idx });
    }

    /// Kills every running container now (deadline or end of grace): exit 137, reason Error.
    fn kill_running(&mut self, now: Timestamp, fx: &mut Vec<Effect>) {
        for idx in 0..self.containers.len() {
            if matches!(self.containers[idx].state, CState::Running { .. }) {
                if self.containers[idx].exec {
                    fx.push(Effect::KillExec { idx });
                }
                let exit = ExecExit {
                    exit_code: 137,
                    reason: "Error",
                    message: None,
                    signal: None,
                };
                self.terminate(idx, exit, now, fx);
            }
        }
    }

    fn on_deadline(&mut self, ctx: &mut Ctx<'_>, fx: &mut Vec<Effect>) -> bool {
        if self.stage != Stage::Active || self.is_terminal() {
            return false;
        }
        let message = "Pod was active on the node longer than the specified deadline".to_owned();
        fx.push(event(
            true,
            "DeadlineExceeded",
            message.clone(),
            Component::Kubelet,
        ));
        for (idx, c) in self.containers.iter().enumerate() {
            if matches!(c.state, CState::Running { .. }) {
                fx.push(container_event(
                    idx,
                    false,
                    "Killing",
                    format!("Stopping container {}", c.name),
                ));
            }
        }
        self.kill_running(ctx.now, fx);
        self.failure = Some(("DeadlineExceeded".to_owned(), message));
        true
    }

    fn on_delete(&mut self, grace: Duration, ctx: &mut Ctx<'_>, fx: &mut Vec<Effect>) -> bool {
        match self.stage {
            Stage::Terminating => false,
            Stage::Scheduling | Stage::Unschedulable | Stage::Bound | Stage::Done => {
                fx.push(Effect::Remove);
                false
            }
            Stage::Active => {
                let running: Vec<usize> = (0..self.containers.len())
                    .filter(|&i| matches!(self.containers[i].state, CState::Running { .. }))
                    .collect();
                if running.is_empty() {
                    // Nothing started (pulling, image errors): a pending pod goes at once.
                    for idx in 0..self.containers.len() {
                        fx.push(Effect::FinishLog { idx });
                    }
                    fx.push(Effect::Remove);
                    return false;
                }
                self.stage = Stage::Terminating;
                for &idx in &running {
                    let c = &self.containers[idx];
                    fx.push(container_event(
                        idx,
                        false,
                        "Killing",
                        format!("Stopping container {}", c.name),
                    ));
                    if c.exec {
                        fx.push(Effect::KillExec { idx });
                    }
                }
                let after = grace.min(ctx.cfg.kill_delay);
                fx.push(Effect::Timer {
                    after,
                    kind: TimerKind::KillDone,
                });
                false
            }
        }
    }

    fn on_kill_done(&mut self, ctx: &mut Ctx<'_>, fx: &mut Vec<Effect>) -> bool {
        if self.stage != Stage::Terminating {
            return false;
        }
        self.kill_running(ctx.now, fx);
        self.finish_termination(fx);
        true
    }

    /// All containers of a deleted pod stopped: close logs, then remove the object.
    fn finish_termination(&mut self, fx: &mut Vec<Effect>) {
        for idx in 0..self.containers.len() {
            fx.push(Effect::FinishLog { idx });
        }
        fx.push(Effect::Remove);
        self.stage = Stage::Done;
    }

    /// Updates readiness and the stage after a change.
    fn settle(&mut self, now: Timestamp, _fx: &mut [Effect]) {
        let terminal = self.is_terminal();
        let ready = matches!(self.stage, Stage::Active)
            && !terminal
            && self
                .containers
                .iter()
                .all(|c| matches!(c.state, CState::Running { .. }));
        if ready != self.ready {
            self.ready = ready;
            self.ready_changed_at = Some(now);
        }
        if terminal && self.stage == Stage::Active {
            // The Ready condition's transition time marks the end when no container ran.
            self.ready_changed_at = Some(now);
            self.stage = Stage::Done;
        }
    }
}

/// An event about the pod as a whole.
fn event(warning: bool, reason: &'static str, message: String, component: Component) -> Effect {
    Effect::Event(EventSpec {
        warning,
        reason,
        message,
        component,
        container: None,
    })
}

/// A kubelet event about container `idx` (its `involvedObject.fieldPath` names it).
fn container_event(idx: usize, warning: bool, reason: &'static str, message: String) -> Effect {
    Effect::Event(EventSpec {
        warning,
        reason,
        message,
        component: Component::Kubelet,
        container: Some(idx),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
