//! Awaiting the pod's start: an explicit state machine fed by the pod watch.
//!
//! [`StartTracker::step`] looks at each new version of the pod (from a watch on
//! `metadata.name`, never a polling loop) and the current time, and says whether to keep
//! waiting (and until when), or that the pod started, or that the start failed:
//!
//! ```text
//! Unscheduled --PodScheduled=True--> Scheduled --container running/terminated--> Started
//!     |  schedule_timeout                |  startup_timeout or permanent image error
//!     v                                  v
//!   Failed(ScheduleTimeout)            Failed(StartupTimeout | ImageError)
//! ```
//!
//! Image pull trouble is split by [`classify_waiting`]: a missing image, an invalid name or an
//! auth failure will never fix itself and fails at once; a registry hiccup (5xx, rate limit,
//! timeout, "back-off pulling") is waited through until the startup timeout.

use podline_phase::Phase;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use tokio::time::Instant;

use crate::error::LaunchError;

/// Default limit for the pod to be scheduled (as Airflow's `schedule_timeout`).
pub const DEFAULT_SCHEDULE_TIMEOUT: Duration = Duration::from_secs(120);
/// Default limit for the containers to start once scheduled (as Airflow's `startup_timeout`).
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(120);

/// `now + timeout`, without the panic `Instant + Duration` has on overflow: a timeout too long
/// for the clock (only possible from a [`crate::LaunchConfig`] built in code; the CLI bounds its
/// durations) gives the latest instant the clock can represent from `now` within it, which is
/// decades away, so in effect no deadline.
pub fn deadline_after(now: Instant, timeout: Duration) -> Instant {
    let mut timeout = timeout;
    loop {
        // Halving ends: `now + 0` never overflows.
        if let Some(deadline) = now.checked_add(timeout) {
            return deadline;
        }
        timeout /= 2;
    }
}

/// What a container's `waiting` state means for the launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitingKind {
    /// Normal progress (`ContainerCreating`, `PodInitializing`, ...): keep waiting.
    Progress,
    /// A pull or config problem that may clear by itself: keep waiting until the timeout.
    Transient,
    /// A problem no waiting can fix: fail now.
    Permanent,
}

/// Classifies a container's waiting `reason` and `message`.
///
/// Permanent: `InvalidImageName`, `ErrImageNeverPull`, and pull errors (`ErrImagePull`,
/// `ImagePullBackOff`) whose message says the image does not exist ("not found", "NotFound",
/// "manifest unknown", "does not exist") or that access is refused ("unauthorized", "denied",
/// "401", "403", "forbidden"). Any other pull error is transient (registry 5xx, rate limits,
/// timeouts, plain "Back-off pulling image").
pub fn classify_waiting(reason: &str, message: &str) -> WaitingKind {
    match reason {
        "InvalidImageName" | "ErrImageNeverPull" => WaitingKind::Permanent,
        "ErrImagePull" | "ImagePullBackOff" | "ErrImageInspect" => {
            let m = message.to_ascii_lowercase();
            const PERMANENT: &[&str] = &[
                "not found",
                "notfound",
                "manifest unknown",
                "does not exist",
                "unauthorized",
                "denied",
                "forbidden",
                " 401",
                " 403",
                "invalid reference format",
            ];
            if PERMANENT.iter().any(|p| m.contains(p)) {
                WaitingKind::Permanent
            } else {
                WaitingKind::Transient
            }
        }
        "CreateContainerConfigError"
        | "CreateContainerError"
        | "RunContainerError"
        | "CrashLoopBackOff" => WaitingKind::Transient,
        _ => WaitingKind::Progress,
    }
}

/// Where the start is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Created, not yet bound to a node. Deadline: schedule timeout.
    Unscheduled { deadline: Instant },
    /// Bound to a node, containers not yet running. Deadline: startup timeout.
    Scheduled { deadline: Instant },
    /// A container runs or ran.
    Started,
}

/// The verdict of one [`StartTracker::step`].
#[derive(Debug)]
pub enum StartStep {
    /// Keep watching; give up at `until` if nothing changes.
    Wait {
        /// When the current stage times out.
        until: Instant,
    },
    /// The pod started (or even finished already).
    Started,
    /// The pod cannot start.
    Failed(LaunchError),
}

/// The start state machine. Create one right after the create returned, feed it every pod
/// version the watch delivers, and call [`StartTracker::timed_out`] when a deadline passes.
#[derive(Debug)]
pub struct StartTracker {
    pod: String,
    main_container: String,
    schedule_timeout: Duration,
    startup_timeout: Duration,
    stage: Stage,
    last_detail: Option<String>,
}

impl StartTracker {
    /// Starts the clock for the schedule timeout now.
    pub fn new(
        pod: &str,
        main_container: &str,
        schedule_timeout: Duration,
        startup_timeout: Duration,
        now: Instant,
    ) -> Self {
        Self {
            pod: pod.to_owned(),
            main_container: main_container.to_owned(),
            schedule_timeout,
            startup_timeout,
            stage: Stage::Unscheduled {
                deadline: deadline_after(now, schedule_timeout),
            },
            last_detail: None,
        }
    }

    /// Advances on a new version of the pod.
    pub fn step(&mut self, pod: &Pod, now: Instant) -> StartStep {
        let status = pod.status.as_ref();
        let phase = status
            .and_then(|s| s.phase.as_deref())
            .and_then(Phase::parse)
            .unwrap_or(Phase::Pending);
        if matches!(phase, Phase::Running | Phase::Succeeded | Phase::Failed) {
            self.stage = Stage::Started;
            return StartStep::Started;
        }
        let statuses: &[ContainerStatus] = status
            .and_then(|s| s.container_statuses.as_deref())
            .unwrap_or(&[]);
        for cs in statuses {
            let state = cs.state.as_ref();
            if state.is_some_and(|s| s.running.is_some() || s.terminated.is_some()) {
                self.stage = Stage::Started;
                return StartStep::Started;
            }
        }
        for cs in statuses {
            let Some(waiting) = cs.state.as_ref().and_then(|s| s.waiting.as_ref()) else {
                continue;
            };
            let reason = waiting.reason.as_deref().unwrap_or("");
            let message = waiting.message.as_deref().unwrap_or("");
            match classify_waiting(reason, message) {
                WaitingKind::Permanent => {
                    return StartStep::Failed(LaunchError::ImageError {
                        pod: self.pod.clone(),
                        container: cs.name.clone(),
                        reason: reason.to_owned(),
                        message: message.to_owned(),
                    });
                }
                WaitingKind::Transient => {
                    self.last_detail = Some(format!("{}: {reason}: {message}", cs.name));
                }
                WaitingKind::Progress => {}
            }
        }
        let scheduled = status
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or(&[])
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
            || pod
                .spec
                .as_ref()
                .is_some_and(|s| s.node_name.as_deref().is_some_and(|n| !n.is_empty()));
        if !scheduled
            && let Some(cond) = status
                .and_then(|s| s.conditions.as_deref())
                .unwrap_or(&[])
                .iter()
                .find(|c| c.type_ == "PodScheduled")
            && let Some(msg) = &cond.message
        {
            self.last_detail = Some(msg.clone());
        }
        match self.stage {
            Stage::Unscheduled { .. } if scheduled => {
                // The startup clock starts when we see the pod scheduled, as Airflow does.
                let deadline = deadline_after(now, self.startup_timeout);
                self.stage = Stage::Scheduled { deadline };
                StartStep::Wait { until: deadline }
            }
            Stage::Unscheduled { deadline } | Stage::Scheduled { deadline } => {
                StartStep::Wait { until: deadline }
            }
            Stage::Started => StartStep::Started,
        }
    }

    /// The current deadline, if still waiting.
    pub fn deadline(&self) -> Option<Instant> {
        match self.stage {
            Stage::Unscheduled { deadline } | Stage::Scheduled { deadline } => Some(deadline),
            Stage::Started => None,
        }
    }

    /// The failure for a passed deadline (schedule or startup, whichever stage we are in).
    pub fn timed_out(&self) -> LaunchError {
        match self.stage {
            Stage::Unscheduled { .. } => LaunchError::ScheduleTimeout {
                pod: self.pod.clone(),
                timeout: self.schedule_timeout,
                detail: self.last_detail.clone(),
            },
            _ => LaunchError::StartupTimeout {
                pod: self.pod.clone(),
                timeout: self.startup_timeout,
                detail: self.last_detail.clone(),
            },
        }
    }

    /// The last scheduler or waiting message seen, if any (for timeout reports).
    pub fn detail(&self) -> Option<&str> {
        self.last_detail.as_deref()
    }

    /// The main container's name (the one whose exit code is the task's).
    pub fn main_container(&self) -> &str {
        &self.main_container
    }
}

/// True once the pod reached a terminal phase.
pub fn is_finished(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(Phase::is_terminal_str)
}

/// True once `container` has terminated (its logs are complete).
pub fn container_terminated(pod: &Pod, container: &str) -> bool {
    let status = pod.status.as_ref();
    let in_list = |list: Option<&Vec<ContainerStatus>>| {
        list.into_iter().flatten().any(|cs| {
            cs.name == container && cs.state.as_ref().is_some_and(|s| s.terminated.is_some())
        })
    };
    is_finished(pod)
        || in_list(status.and_then(|s| s.container_statuses.as_ref()))
        || in_list(status.and_then(|s| s.init_container_statuses.as_ref()))
}

/// Whether a task is over as KubernetesPodOperator judges it: its main (base) container has
/// terminated, or the whole pod finished. A sidecar still running (KPO's XCom sidecar, a proxy
/// that never exits) does not hold the task; its outcome is the main container's.
pub fn main_terminated(pod: &Pod, main: &str) -> bool {
    container_terminated(pod, main)
}

/// Whether `container` (a regular container) is running now.
pub fn container_running(pod: &Pod, container: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .any(|cs| cs.name == container && cs.state.as_ref().is_some_and(|s| s.running.is_some()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_should_saturate_instead_of_panicking() {
        let now = Instant::now();
        assert_eq!(
            deadline_after(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        let far = deadline_after(now, Duration::MAX);
        assert!(
            far > now + Duration::from_secs(100 * 365 * 24 * 3600),
            "{far:?}"
        );
        // The tracker takes any timeout without panicking.
        let tracker = StartTracker::new("p", "c", Duration::MAX, Duration::MAX, now);
        assert!(tracker.deadline().is_some_and(|d| d > now));
    }
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateWaiting, PodCondition, PodStatus,
    };

    fn pod(phase: &str, scheduled: bool, waiting: Option<(&str, &str)>, running: bool) -> Pod {
        let mut conditions = vec![];
        if scheduled {
            conditions.push(PodCondition {
                type_: "PodScheduled".into(),
                status: "True".into(),
                ..Default::default()
            });
        }
        let state = if running {
            ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..Default::default()
            }
        } else {
            ContainerState {
                waiting: waiting.map(|(r, m)| ContainerStateWaiting {
                    reason: Some(r.into()),
                    message: Some(m.into()),
                }),
                ..Default::default()
            }
        };
        Pod {
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions: Some(conditions),
                container_statuses: Some(vec![ContainerStatus {
                    name: "task".into(),
                    state: Some(state),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn image_errors_should_be_classified() {
        use WaitingKind::*;
        let cases = [
            (
                "InvalidImageName",
                "couldn't parse image reference",
                Permanent,
            ),
            ("ErrImageNeverPull", "", Permanent),
            ("ErrImagePull", "rpc error: manifest unknown", Permanent),
            ("ErrImagePull", "failed to resolve: not found", Permanent),
            (
                "ErrImagePull",
                "pull access denied, repository does not exist",
                Permanent,
            ),
            (
                "ErrImagePull",
                "unexpected status: 401 Unauthorized",
                Permanent,
            ),
            ("ImagePullBackOff", "403 Forbidden", Permanent),
            (
                "ErrImagePull",
                "received unexpected HTTP status: 503 Service Unavailable",
                Transient,
            ),
            (
                "ErrImagePull",
                "toomanyrequests: pull QPS exceeded",
                Transient,
            ),
            (
                "ImagePullBackOff",
                "Back-off pulling image \"x\"",
                Transient,
            ),
            ("ContainerCreating", "", Progress),
            (
                "CreateContainerConfigError",
                "secret \"s\" not found",
                Transient,
            ),
        ];
        for (reason, message, want) in cases {
            assert_eq!(
                classify_waiting(reason, message),
                want,
                "{reason}: {message}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn tracker_should_move_from_schedule_to_startup_deadline() {
        let t0 = Instant::now();
        let mut t = StartTracker::new(
            "p",
            "task",
            Duration::from_secs(10),
            Duration::from_secs(20),
            t0,
        );
        match t.step(&pod("Pending", false, None, false), t0) {
            StartStep::Wait { until } => assert_eq!(until, t0 + Duration::from_secs(10)),
            other => panic!("{other:?}"),
        }
        assert!(matches!(t.timed_out(), LaunchError::ScheduleTimeout { .. }));
        let t1 = t0 + Duration::from_secs(5);
        match t.step(
            &pod("Pending", true, Some(("ContainerCreating", "")), false),
            t1,
        ) {
            StartStep::Wait { until } => assert_eq!(until, t1 + Duration::from_secs(20)),
            other => panic!("{other:?}"),
        }
        assert!(matches!(t.timed_out(), LaunchError::StartupTimeout { .. }));
        assert!(matches!(
            t.step(&pod("Pending", true, None, true), t1),
            StartStep::Started
        ));
        assert_eq!(t.deadline(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn tracker_should_fail_fast_on_permanent_and_wait_on_transient_pull_errors() {
        let t0 = Instant::now();
        let mut t = StartTracker::new(
            "p",
            "task",
            Duration::from_secs(10),
            Duration::from_secs(20),
            t0,
        );
        let transient = pod(
            "Pending",
            true,
            Some(("ErrImagePull", "503 Service Unavailable")),
            false,
        );
        assert!(matches!(t.step(&transient, t0), StartStep::Wait { .. }));
        let timeout = t.timed_out().to_string();
        assert!(timeout.contains("503"), "{timeout}");
        let permanent = pod(
            "Pending",
            true,
            Some(("ErrImagePull", "manifest unknown")),
            false,
        );
        match t.step(&permanent, t0) {
            StartStep::Failed(LaunchError::ImageError { reason, .. }) => {
                assert_eq!(reason, "ErrImagePull")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn finished_pod_counts_as_started_and_terminated() {
        let mut p = pod("Succeeded", true, None, false);
        let now = Instant::now();
        let mut t = StartTracker::new(
            "p",
            "task",
            Duration::from_secs(1),
            Duration::from_secs(1),
            now,
        );
        assert!(matches!(t.step(&p, now), StartStep::Started));
        assert!(is_finished(&p));
        assert!(container_terminated(&p, "task"));
        p.status.as_mut().unwrap().phase = Some("Running".into());
        assert!(!container_terminated(&p, "task"));
    }
}
