//! Rendering a [`PodWork`] into the pod object: the binding and the whole `status`.
//!
//! The status is a pure function of the kubelet's state, so every write is complete and
//! consistent. Times written here are the sim's ground truth (see CONTRACT.md): Pending is the
//! creationTimestamp, Running the earliest `startedAt`, Succeeded/Failed the latest `finishedAt`
//! or, when no container terminated, the Ready condition's `lastTransitionTime`.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::KubeletConfig;
use super::node::HOST_IP;
use super::pod::{CState, PodWork, Stage, Terminated};

/// Writes the binding (`spec.nodeName`) and the full status of `work` into `pod`.
pub(crate) fn render(work: &PodWork, cfg: &KubeletConfig, pod: &mut Pod) {
    if work.scheduled_at.is_some()
        && let Some(spec) = pod.spec.as_mut()
        && spec.node_name.is_none()
    {
        spec.node_name = Some(cfg.node_name.clone());
    }
    let mut status = PodStatus {
        phase: Some(work.phase().to_owned()),
        qos_class: pod
            .status
            .as_ref()
            .and_then(|s| s.qos_class.clone())
            .or_else(|| Some("BestEffort".to_owned())),
        ..PodStatus::default()
    };
    let existing = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    status.conditions = Some(merge_conditions(existing, conditions(work)));
    if let Some(start) = work.start_time {
        status.start_time = Some(Time(start));
        status.host_ip = Some(HOST_IP.to_owned());
        status.host_ips = Some(vec![HostIP {
            ip: HOST_IP.to_owned(),
        }]);
        status.pod_ip = Some(work.pod_ip.clone());
        status.pod_ips = Some(vec![PodIP {
            ip: work.pod_ip.clone(),
        }]);
        status.container_statuses = Some(work.containers.iter().map(container_status).collect());
    }
    if let Some((reason, message)) = &work.failure {
        status.reason = Some(reason.clone());
        status.message = Some(message.clone());
    }
    pod.status = Some(status);
}

/// The condition types the kubelet owns (`PodConditionsByKubelet`); it keeps every other one the
/// pod has (`DisruptionTarget` from an eviction, readiness gates' conditions).
const KUBELET_CONDITIONS: [&str; 5] = [
    "PodScheduled",
    "Ready",
    "Initialized",
    "ContainersReady",
    "PodReadyToStartContainers",
];

/// The conditions the kubelet writes, as its status manager merges them: the pod's conditions
/// the kubelet does not own first, then its own, each keeping the `lastTransitionTime` the pod
/// has for the same status (so `PodScheduled` keeps the time of a binding made through the API).
/// With no opinion yet (not scheduled), the pod's conditions stay as they are.
fn merge_conditions(existing: Vec<PodCondition>, ours: Vec<PodCondition>) -> Vec<PodCondition> {
    if ours.is_empty() {
        return existing;
    }
    let mut merged: Vec<PodCondition> = existing
        .iter()
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
        .cloned()
        .collect();
    for mut c in ours {
        if c.type_ == "PodScheduled"
            && let Some(old) = existing
                .iter()
                .find(|o| o.type_ == c.type_ && o.status == c.status)
        {
            c.last_transition_time.clone_from(&old.last_transition_time);
        }
        merged.push(c);
    }
    merged
}

fn condition(type_: &str, ok: bool, at: Option<Timestamp>) -> PodCondition {
    PodCondition {
        type_: type_.to_owned(),
        status: if ok { "True" } else { "False" }.to_owned(),
        last_transition_time: at.map(Time),
        ..PodCondition::default()
    }
}

fn conditions(work: &PodWork) -> Vec<PodCondition> {
    if work.stage == Stage::Unschedulable {
        return vec![PodCondition {
            reason: Some("Unschedulable".to_owned()),
            message: work
                .unschedulable
                .clone()
                .or_else(|| work.refused_by_node.as_deref().map(str::to_owned)),
            ..condition("PodScheduled", false, work.unschedulable_at)
        }];
    }
    let Some(scheduled_at) = work.scheduled_at else {
        return Vec::new();
    };
    let scheduled = condition("PodScheduled", true, Some(scheduled_at));
    let Some(start) = work.start_time else {
        return vec![scheduled];
    };
    let terminal = work.is_terminal();
    let sandbox_ready = !terminal && work.stage != Stage::Done;
    let sandbox_at = if sandbox_ready {
        Some(start)
    } else {
        work.ready_changed_at
    };
    let (reason, message) = if work.ready {
        (None, None)
    } else if terminal {
        (Some("PodCompleted".to_owned()), None)
    } else {
        let unready: Vec<&str> = work
            .containers
            .iter()
            .filter(|c| !matches!(c.state, CState::Running { .. }))
            .map(|c| c.name.as_str())
            .collect();
        (
            Some("ContainersNotReady".to_owned()),
            Some(format!(
                "containers with unready status: [{}]",
                unready.join(" ")
            )),
        )
    };
    let ready = PodCondition {
        reason: reason.clone(),
        message: message.clone(),
        ..condition("Ready", work.ready, work.ready_changed_at)
    };
    let containers_ready = PodCondition {
        reason,
        message,
        ..condition("ContainersReady", work.ready, work.ready_changed_at)
    };
    vec![
        condition("PodReadyToStartContainers", sandbox_ready, sandbox_at),
        condition("Initialized", true, Some(start)),
        ready,
        containers_ready,
        scheduled,
    ]
}

fn terminated_state(t: &Terminated) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            container_id: Some(t.container_id.clone()),
            exit_code: t.exit_code,
            reason: Some(t.reason.clone()),
            message: t.message.clone(),
            signal: t.signal,
            started_at: Some(Time(t.started)),
            finished_at: Some(Time(t.finished)),
        }),
        ..ContainerState::default()
    }
}

fn container_status(c: &super::pod::ContainerWork) -> ContainerStatus {
    let started = c.container_id.is_some();
    let (image, image_id) = match (&c.image_ref, started) {
        (Some(r), true) => (r.full.clone(), r.image_id()),
        _ => (c.image.clone(), String::new()),
    };
    let state = match &c.state {
        CState::Waiting { reason, message } => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some((*reason).to_owned()),
                message: message.clone(),
            }),
            ..ContainerState::default()
        },
        CState::Running { started } => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(*started)),
            }),
            ..ContainerState::default()
        },
        CState::Terminated(t) => terminated_state(t),
    };
    let running = matches!(c.state, CState::Running { .. });
    ContainerStatus {
        name: c.name.clone(),
        image,
        image_id,
        container_id: match &c.state {
            CState::Terminated(t) => Some(t.container_id.clone()),
            CState::Running { .. } => c.container_id.clone(),
            CState::Waiting { .. } => c.last_terminated.as_ref().map(|t| t.container_id.clone()),
        },
        ready: running,
        started: Some(running),
        restart_count: i32::try_from(c.restarts).unwrap_or(i32::MAX),
        state: Some(state),
        last_state: Some(
            c.last_terminated
                .as_deref()
                .map(terminated_state)
                .unwrap_or_default(),
        ),
        ..ContainerStatus::default()
    }
}
