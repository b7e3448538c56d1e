//! The pod state machine, driven by hand: timers fire in due order on a fake clock.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use super::*;
use crate::kubelet::status;

struct Harness {
    work: PodWork,
    cfg: KubeletConfig,
    images: HashSet<String>,
    now: Timestamp,
    timers: Vec<(Timestamp, TimerKind)>,
    effects: Vec<Effect>,
    removed: bool,
    node_refusal: Option<Arc<str>>,
    mount_error: Option<String>,
    config_errors: Vec<Option<String>>,
}

fn pod(annotations: &[(&str, &str)], spec: serde_json::Value) -> Pod {
    let annotations: BTreeMap<String, String> = annotations
        .iter()
        .map(|(k, v)| (format!("sim.podline.io/{k}"), (*v).to_owned()))
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "uid-1", "annotations": annotations},
        "spec": spec,
    }))
    .unwrap()
}

fn one_container(image: &str) -> serde_json::Value {
    serde_json::json!({"restartPolicy": "Never", "containers": [{"name": "main", "image": image}]})
}

impl Harness {
    fn new(pod: &Pod) -> Self {
        let cfg = KubeletConfig::default();
        let (work, effects) = PodWork::new(pod, &cfg, "10.244.0.2".into());
        let mut h = Harness {
            work,
            cfg,
            images: HashSet::new(),
            now: "2026-01-01T00:00:00Z".parse().unwrap(),
            timers: Vec::new(),
            effects: Vec::new(),
            removed: false,
            node_refusal: None,
            mount_error: None,
            config_errors: Vec::new(),
        };
        h.absorb(effects);
        h
    }

    fn absorb(&mut self, effects: Vec<Effect>) {
        for e in &effects {
            match e {
                Effect::Timer { after, kind } => self.timers.push((self.now + *after, *kind)),
                Effect::Remove => self.removed = true,
                _ => {}
            }
        }
        self.effects.extend(effects);
    }

    fn input(&mut self, input: Input) {
        let mut ctx = Ctx {
            now: self.now,
            cfg: &self.cfg,
            images: &mut self.images,
            node_refusal: self.node_refusal.clone(),
            mount_error: self.mount_error.clone(),
            config_errors: self.config_errors.clone(),
        };
        let effects = self.work.step(input, &mut ctx);
        self.absorb(effects);
    }

    /// Fires the earliest timer; false when none is left.
    fn fire(&mut self) -> bool {
        let Some(i) = (0..self.timers.len()).min_by_key(|&i| self.timers[i].0) else {
            return false;
        };
        let (due, kind) = self.timers.remove(i);
        self.now = self.now.max(due);
        self.input(Input::Timer(kind));
        true
    }

    /// Fires timers until none is left, the pod is removed, or `limit` fired.
    fn run(&mut self, limit: usize) {
        for _ in 0..limit {
            if self.removed || !self.fire() {
                return;
            }
        }
    }

    fn run_until(&mut self, limit: usize, done: impl Fn(&Harness) -> bool) {
        for _ in 0..limit {
            if done(self) || !self.fire() {
                return;
            }
        }
    }

    fn reasons(&self) -> Vec<&'static str> {
        self.effects
            .iter()
            .filter_map(|e| match e {
                Effect::Event(ev) => Some(ev.reason),
                _ => None,
            })
            .collect()
    }

    fn logs(&self) -> Vec<String> {
        self.effects
            .iter()
            .filter_map(|e| match e {
                Effect::Log { line, .. } => Some(line.clone()),
                _ => None,
            })
            .collect()
    }

    fn rendered(&self) -> Pod {
        let mut p = pod(&[], one_container("busybox"));
        status::render(&self.work, &self.cfg, &mut p);
        p
    }

    fn terminated(&self, idx: usize) -> &Terminated {
        match &self.work.containers[idx].state {
            CState::Terminated(t) => t,
            other => panic!("container {idx} is {other:?}, not terminated"),
        }
    }
}

#[test]
fn scripted_pod_should_run_to_success_with_real_events() {
    let mut h = Harness::new(&pod(&[("duration", "1s")], one_container("busybox")));
    assert_eq!(h.work.phase(), "Pending");
    h.run(100);
    assert_eq!(h.work.phase(), "Succeeded");
    assert_eq!(h.work.stage, Stage::Done);
    assert_eq!(
        h.reasons(),
        ["Scheduled", "Pulling", "Pulled", "Created", "Started"]
    );
    let t = h.terminated(0);
    assert_eq!((t.exit_code, t.reason.as_str()), (0, "Completed"));
    assert_eq!(
        t.finished.duration_since(t.started),
        jiff::SignedDuration::from_secs(1)
    );
    assert!(h.images.contains("docker.io/library/busybox:latest"));
}

#[test]
fn phases_should_pass_through_running() {
    let mut h = Harness::new(&pod(&[], one_container("busybox")));
    let mut phases = vec![h.work.phase()];
    while h.fire() {
        if phases.last() != Some(&h.work.phase()) {
            phases.push(h.work.phase());
        }
    }
    assert_eq!(phases, ["Pending", "Running", "Succeeded"]);
}

#[test]
fn exit_codes_should_map_to_reasons() {
    for (annotations, code, reason, phase) in [
        (vec![("exit-code", "1")], 1, "Error", "Failed"),
        (vec![("exit-code", "0")], 0, "Completed", "Succeeded"),
        (vec![("exit-code", "137")], 137, "Error", "Failed"),
        (vec![("oom", "true")], 137, "OOMKilled", "Failed"),
    ] {
        let mut h = Harness::new(&pod(&annotations, one_container("busybox")));
        h.run(100);
        let t = h.terminated(0);
        assert_eq!(
            (t.exit_code, t.reason.as_str(), h.work.phase()),
            (code, reason, phase)
        );
    }
}

#[test]
fn termination_message_should_be_reported() {
    let mut h = Harness::new(&pod(
        &[("termination-message", "bye")],
        one_container("busybox"),
    ));
    h.run(100);
    assert_eq!(h.terminated(0).message.as_deref(), Some("bye"));
}

/// The kubelet reports at most the last 4096 bytes of a termination message
/// (`MaxContainerTerminationMessageLength`, `tail.ReadAtMost`).
#[test]
fn a_long_termination_message_should_keep_its_last_4096_bytes() {
    let message = format!("{}{}", "a".repeat(100 * 1024), "b".repeat(4000));
    let mut h = Harness::new(&pod(
        &[("termination-message", message.as_str())],
        one_container("busybox"),
    ));
    h.run(100);
    let reported = h.terminated(0).message.clone().unwrap_or_default();
    assert_eq!(reported.len(), 4096);
    assert!(reported.ends_with(&"b".repeat(4000)) && reported.starts_with(&"a".repeat(96)));
}

#[test]
fn log_lines_should_be_emitted_in_order_before_exit() {
    let mut h = Harness::new(&pod(
        &[("log-lines", "3"), ("duration", "300ms")],
        one_container("busybox"),
    ));
    h.run(100);
    assert_eq!(h.logs(), ["line 1", "line 2", "line 3"]);
    let last_log = h
        .effects
        .iter()
        .rposition(|e| matches!(e, Effect::Log { .. }))
        .unwrap();
    let finish = h
        .effects
        .iter()
        .position(|e| matches!(e, Effect::FinishLog { .. }))
        .unwrap();
    assert!(
        last_log < finish,
        "the log must be finished after its last line"
    );
    // Spread over the run: line 2 a third of the way in.
    let times: Vec<Timestamp> = h
        .effects
        .iter()
        .filter_map(|e| {
            if let Effect::Log { at, .. } = e {
                Some(*at)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(
        times[1].duration_since(times[0]),
        jiff::SignedDuration::from_millis(100)
    );
}

#[test]
fn literal_logs_should_be_split_into_lines() {
    let mut h = Harness::new(&pod(&[("logs", "hello\nworld")], one_container("busybox")));
    h.run(100);
    assert_eq!(h.logs(), ["hello", "world"]);
}

#[test]
fn permanent_image_error_should_back_off_and_stay_pending() {
    let mut h = Harness::new(&pod(
        &[("image-error", "ErrImagePull")],
        one_container("busybox"),
    ));
    h.run(30);
    assert_eq!(h.work.phase(), "Pending");
    let reasons = h.reasons();
    assert!(
        reasons.contains(&"Failed") && reasons.contains(&"BackOff"),
        "{reasons:?}"
    );
    assert!(h.work.containers[0].pull_failures >= 3);
    let CState::Waiting { reason, .. } = &h.work.containers[0].state else {
        panic!()
    };
    assert!(matches!(*reason, "ErrImagePull" | "ImagePullBackOff"));
    let message = h.effects.iter().find_map(|e| match e {
        Effect::Event(ev) if ev.reason == "Failed" => Some(ev.message.clone()),
        _ => None,
    });
    assert_eq!(
        message.unwrap(),
        "Failed to pull image \"busybox\": rpc error: code = NotFound desc = failed to pull and unpack image \
         \"docker.io/library/busybox:latest\": failed to resolve reference \"docker.io/library/busybox:latest\": \
         docker.io/library/busybox:latest: not found"
    );
}

#[test]
fn err_image_pull_should_turn_into_image_pull_back_off() {
    let mut h = Harness::new(&pod(&[], one_container("example.com/does-not-exist:1")));
    h.run_until(50, |h| {
        matches!(
            h.work.containers[0].state,
            CState::Waiting {
                reason: "ImagePullBackOff",
                ..
            }
        )
    });
    let CState::Waiting { reason, message } = &h.work.containers[0].state else {
        panic!()
    };
    assert_eq!(*reason, "ImagePullBackOff");
    assert_eq!(
        message.as_deref(),
        Some("Back-off pulling image \"example.com/does-not-exist:1\"")
    );
}

#[test]
fn transient_image_error_should_succeed_after_n_failures() {
    let annotations = [
        ("image-error", "ErrImagePull"),
        ("image-error-transient", "2"),
    ];
    let mut h = Harness::new(&pod(&annotations, one_container("busybox")));
    h.run(100);
    assert_eq!(h.work.containers[0].pull_failures, 2);
    assert_eq!(h.work.phase(), "Succeeded");
}

#[test]
fn auth_error_should_say_unauthorized() {
    let mut h = Harness::new(&pod(
        &[("image-error", "auth")],
        one_container("private/app"),
    ));
    h.run_until(20, |h| h.work.containers[0].pull_failures > 0);
    let CState::Waiting { reason, message } = &h.work.containers[0].state else {
        panic!()
    };
    assert_eq!(*reason, "ErrImagePull");
    assert!(message.as_deref().unwrap().ends_with("401 Unauthorized"));
}

#[test]
fn invalid_image_name_should_stay_pending_without_retries() {
    let mut h = Harness::new(&pod(&[], one_container("Not A Valid Image")));
    h.run(100);
    assert_eq!(h.work.phase(), "Pending");
    let CState::Waiting { reason, message } = &h.work.containers[0].state else {
        panic!()
    };
    assert_eq!(*reason, "InvalidImageName");
    assert!(
        message
            .as_deref()
            .unwrap()
            .contains("invalid reference format")
    );
    assert!(h.timers.is_empty(), "no retry for an invalid name");
}

#[test]
fn unschedulable_pod_should_stay_pending_with_failed_scheduling() {
    let mut h = Harness::new(&pod(&[("unschedulable", "true")], one_container("busybox")));
    h.run(100);
    assert_eq!(h.work.stage, Stage::Unschedulable);
    assert_eq!(h.reasons(), ["FailedScheduling"]);
    let p = h.rendered();
    let cond = &p.status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
    assert_eq!(
        (cond.type_.as_str(), cond.status.as_str()),
        ("PodScheduled", "False")
    );
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    assert!(
        cond.message
            .as_deref()
            .unwrap()
            .starts_with("0/1 nodes are available")
    );
    assert_eq!(p.spec.unwrap().node_name, None);
}

/// A cordoned (or deleted) node takes no new pod: it waits Unschedulable with one
/// FailedScheduling event, the scheduler tries again every NODE_RETRY without repeating it, and
/// once the node takes pods again the pod is bound and runs.
#[test]
fn a_pod_waits_while_the_node_refuses_and_runs_once_it_takes_pods() {
    let mut h = Harness::new(&pod(&[], one_container("busybox")));
    h.node_refusal = Some("0/1 nodes are available: 1 node(s) were unschedulable.".into());
    h.run_until(10, |h| h.work.stage == Stage::Unschedulable);
    assert_eq!(h.work.stage, Stage::Unschedulable);
    assert_eq!(h.reasons(), ["FailedScheduling"]);
    let p = h.rendered();
    let cond = &p.status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(
        cond.message.as_deref(),
        Some("0/1 nodes are available: 1 node(s) were unschedulable.")
    );
    for _ in 0..3 {
        let retry_at = h.now + NODE_RETRY;
        assert!(
            h.timers
                .iter()
                .any(|(due, kind)| *kind == TimerKind::Schedule && *due == retry_at),
            "the scheduler tries again after NODE_RETRY: {:?}",
            h.timers
        );
        h.run_until(10, |h| h.now >= retry_at);
    }
    assert_eq!(h.reasons(), ["FailedScheduling"], "reported once");
    let transition = cond.last_transition_time.clone();
    // Another reason (uncordoned, but tainted): reported once more, with the new message.
    let tainted = "0/1 nodes are available: 1 node(s) had untolerated taint {gpu: a100}.";
    h.node_refusal = Some(tainted.into());
    let retry_at = h.now + NODE_RETRY;
    h.run_until(10, |h| h.now >= retry_at);
    assert_eq!(h.reasons(), ["FailedScheduling", "FailedScheduling"]);
    let p = h.rendered();
    let cond = &p.status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
    assert_eq!(cond.message.as_deref(), Some(tainted));
    assert_eq!(
        cond.last_transition_time, transition,
        "still False since then"
    );
    h.node_refusal = None;
    h.run(100);
    assert_eq!(h.work.stage, Stage::Done);
    assert_eq!(
        h.reasons()[..3],
        ["FailedScheduling", "FailedScheduling", "Scheduled"]
    );
    assert_eq!(
        h.rendered().spec.unwrap().node_name.as_deref(),
        Some(KubeletConfig::default().node_name.as_str())
    );
}

#[test]
fn node_selector_mismatch_should_be_unschedulable() {
    let spec = serde_json::json!({"nodeSelector": {"disk": "ssd"}, "containers": [{"name": "main", "image": "busybox"}]});
    let mut h = Harness::new(&pod(&[], spec));
    h.run(10);
    assert_eq!(h.work.stage, Stage::Unschedulable);
}

#[test]
fn active_deadline_should_fail_the_pod() {
    let spec = serde_json::json!({"restartPolicy": "Never", "activeDeadlineSeconds": 1, "containers": [{"name": "main", "image": "busybox"}]});
    let mut h = Harness::new(&pod(&[("duration", "1h")], spec));
    h.run(100);
    assert_eq!(h.work.phase(), "Failed");
    assert_eq!(
        h.work.failure,
        Some((
            "DeadlineExceeded".into(),
            "Pod was active on the node longer than the specified deadline".into()
        ))
    );
    assert_eq!(h.terminated(0).exit_code, 137);
    assert!(h.reasons().contains(&"DeadlineExceeded"));
    assert!(h.reasons().contains(&"Killing"));
    let status = h.rendered().status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
}

#[test]
fn active_deadline_while_pulling_should_fail_with_ready_transition_time() {
    let spec = serde_json::json!({"restartPolicy": "Never", "activeDeadlineSeconds": 2, "containers": [{"name": "main", "image": "busybox"}]});
    let mut h = Harness::new(&pod(&[("image-error", "ErrImagePull")], spec));
    h.run_until(100, |h| h.work.failure.is_some());
    assert_eq!(h.work.phase(), "Failed");
    let status = h.rendered().status.unwrap();
    let ready = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        ready.last_transition_time.unwrap().0,
        h.now,
        "ground truth of the failure"
    );
}

#[test]
fn deleting_a_running_pod_should_kill_then_remove() {
    let mut h = Harness::new(&pod(&[("duration", "1h")], one_container("busybox")));
    h.run_until(20, |h| h.work.phase() == "Running");
    h.input(Input::Delete {
        grace: Duration::from_secs(30),
    });
    assert!(h.reasons().contains(&"Killing"));
    assert!(!h.removed);
    h.run(10);
    assert!(h.removed);
    let t = h.terminated(0);
    assert_eq!((t.exit_code, t.reason.as_str()), (137, "Error"));
    let write = h.effects.iter().rposition(|e| *e == Effect::Write).unwrap();
    let remove = h.effects.iter().position(|e| *e == Effect::Remove).unwrap();
    assert!(write < remove, "the final status is written before removal");
    assert_eq!(h.work.phase(), "Failed");
}

#[test]
fn deleting_a_pending_pod_should_remove_it_at_once() {
    let mut h = Harness::new(&pod(
        &[("image-error", "ErrImagePull")],
        one_container("busybox"),
    ));
    h.run_until(20, |h| h.work.containers[0].pull_failures > 0);
    h.input(Input::Delete {
        grace: Duration::from_secs(30),
    });
    assert!(h.removed);
    let mut h = Harness::new(&pod(&[("unschedulable", "true")], one_container("busybox")));
    h.run(5);
    h.input(Input::Delete {
        grace: Duration::from_secs(30),
    });
    assert!(h.removed);
}

#[test]
fn bad_annotation_should_fail_the_pod_with_a_clear_message() {
    let mut h = Harness::new(&pod(&[("duration", "forever")], one_container("busybox")));
    h.run(100);
    assert_eq!(h.work.phase(), "Failed");
    let (reason, message) = h.work.failure.clone().unwrap();
    assert_eq!(reason, "InvalidSimAnnotation");
    assert!(
        message.contains("sim.podline.io/duration") && message.contains("expected"),
        "{message}"
    );
    assert!(h.reasons().contains(&"InvalidSimAnnotation"));
}

#[test]
fn unknown_annotation_should_warn_and_still_run() {
    let mut h = Harness::new(&pod(&[("exitcode", "1")], one_container("busybox")));
    h.run(100);
    assert_eq!(h.work.phase(), "Succeeded");
    assert!(h.reasons().contains(&"UnknownSimAnnotation"));
}

#[test]
fn on_failure_should_restart_until_policy_allows() {
    let spec = serde_json::json!({"restartPolicy": "OnFailure", "containers": [{"name": "main", "image": "busybox"}]});
    let mut h = Harness::new(&pod(&[("exit-code", "2")], spec));
    h.run_until(200, |h| h.work.containers[0].restarts >= 2);
    assert!(h.work.containers[0].restarts >= 2);
    assert_eq!(h.work.phase(), "Running");
    assert!(h.reasons().contains(&"BackOff"));
    let status = h.rendered().status.unwrap();
    let cs = &status.container_statuses.unwrap()[0];
    assert!(cs.restart_count >= 2);
    assert_eq!(
        cs.last_state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        2
    );
}

#[test]
fn multiple_containers_should_fail_if_any_fails() {
    let spec = serde_json::json!({"restartPolicy": "Never", "containers": [
        {"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}]});
    let mut h = Harness::new(&pod(&[("exit-code.b", "3"), ("duration.b", "500ms")], spec));
    h.run(100);
    assert_eq!(h.work.phase(), "Failed");
    assert_eq!(h.terminated(0).exit_code, 0);
    assert_eq!(h.terminated(1).exit_code, 3);
}

#[test]
fn rendered_status_should_look_like_the_kubelets() {
    let mut h = Harness::new(&pod(&[("duration", "1h")], one_container("busybox")));
    h.run_until(20, |h| h.work.phase() == "Running");
    let p = h.rendered();
    assert_eq!(
        p.spec.as_ref().unwrap().node_name.as_deref(),
        Some("sim-node-1")
    );
    let s = p.status.unwrap();
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(s.host_ip.as_deref(), Some(crate::kubelet::node::HOST_IP));
    assert_eq!(s.pod_ip.as_deref(), Some("10.244.0.2"));
    assert!(s.start_time.is_some());
    let types: Vec<(String, String)> = s
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    let expected = [
        ("PodReadyToStartContainers", "True"),
        ("Initialized", "True"),
        ("Ready", "True"),
        ("ContainersReady", "True"),
        ("PodScheduled", "True"),
    ];
    assert_eq!(types, expected.map(|(a, b)| (a.to_owned(), b.to_owned())));
    let cs = &s.container_statuses.unwrap()[0];
    assert!(cs.ready);
    assert_eq!(cs.image, "docker.io/library/busybox:latest");
    assert!(cs.image_id.starts_with("docker.io/library/busybox@sha256:"));
    let id = cs
        .container_id
        .as_deref()
        .unwrap()
        .strip_prefix("containerd://")
        .unwrap();
    assert_eq!(id.len(), 64);
    assert!(
        cs.state
            .as_ref()
            .unwrap()
            .running
            .as_ref()
            .unwrap()
            .started_at
            .is_some()
    );
}

#[test]
fn image_present_with_if_not_present_should_skip_the_pull() {
    let spec = serde_json::json!({"containers": [{"name": "main", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent"}], "restartPolicy": "Never"});
    let mut h = Harness::new(&pod(&[], spec.clone()));
    h.images.insert("docker.io/library/busybox:1.36".into());
    h.run(100);
    assert_eq!(h.reasons(), ["Scheduled", "Pulled", "Created", "Started"]);
}

#[test]
fn stale_timers_should_be_ignored() {
    let mut h = Harness::new(&pod(&[], one_container("busybox")));
    h.run(100);
    let before = h.effects.len();
    h.input(Input::Timer(TimerKind::Exit { idx: 0, run: 0 }));
    h.input(Input::Timer(TimerKind::Pull { idx: 0 }));
    h.input(Input::Timer(TimerKind::Schedule));
    assert_eq!(h.effects.len(), before);
}

#[test]
fn a_pod_naming_another_scheduler_waits_for_a_binding_then_runs_unannounced() {
    let mut spec = one_container("busybox");
    spec["schedulerName"] = serde_json::json!("my-scheduler");
    let mut h = Harness::new(&pod(&[], spec));
    assert!(h.timers.is_empty(), "the sim's scheduler leaves it alone");
    assert_eq!(h.work.stage, Stage::Scheduling);
    h.input(Input::Bound);
    assert_eq!(h.work.stage, Stage::Bound);
    h.run(100);
    assert_eq!(h.work.phase(), "Succeeded");
    let reasons = h.reasons();
    assert!(!reasons.contains(&"Scheduled"), "{reasons:?}");
    assert!(reasons.contains(&"Started"), "{reasons:?}");
}

#[test]
fn a_binding_after_the_scheduler_bound_the_pod_changes_nothing() {
    let mut h = Harness::new(&pod(&[], one_container("busybox")));
    h.run_until(10, |h| h.work.stage != Stage::Scheduling);
    let stage = h.work.stage;
    let before = h.effects.len();
    h.input(Input::Bound);
    assert_eq!(h.work.stage, stage);
    assert_eq!(h.effects.len(), before, "no effect");
}

#[test]
fn rendering_keeps_conditions_the_kubelet_does_not_own_and_the_binding_time() {
    let mut h = Harness::new(&pod(&[("duration", "1h")], one_container("busybox")));
    h.run_until(100, |h| h.work.phase() == "Running");
    let mut p = pod(&[], one_container("busybox"));
    let bound_at: Timestamp = "2025-06-01T00:00:00Z".parse().unwrap();
    p.status = Some(k8s_openapi::api::core::v1::PodStatus {
        conditions: Some(vec![
            k8s_openapi::api::core::v1::PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("EvictionByEvictionAPI".into()),
                ..Default::default()
            },
            k8s_openapi::api::core::v1::PodCondition {
                type_: "PodScheduled".into(),
                status: "True".into(),
                last_transition_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    bound_at,
                )),
                ..Default::default()
            },
        ]),
        ..Default::default()
    });
    status::render(&h.work, &h.cfg, &mut p);
    let conditions = p.status.unwrap().conditions.unwrap();
    let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(
        types,
        [
            "DisruptionTarget",
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled"
        ]
    );
    let scheduled = conditions.last().unwrap();
    assert_eq!(
        scheduled.last_transition_time.as_ref().map(|t| t.0),
        Some(bound_at)
    );
}

#[test]
fn a_volume_that_cannot_be_set_up_keeps_the_pod_creating_until_it_can() {
    let mut h = Harness::new(&pod(&[], one_container("busybox:1.36")));
    h.mount_error = Some(
        "MountVolume.SetUp failed for volume \"creds\" : secret \"creds\" not found".to_owned(),
    );
    h.run_until(20, |h| {
        h.reasons().iter().filter(|r| **r == "FailedMount").count() >= 2
    });
    assert!(!h.reasons().contains(&"Pulling"), "{:?}", h.reasons());
    assert_eq!(h.work.phase(), "Pending");
    assert!(matches!(
        h.work.containers[0].state,
        CState::Waiting {
            reason: "ContainerCreating",
            ..
        }
    ));
    h.mount_error = None;
    h.run_until(20, |h| h.work.phase() == "Running");
    assert_eq!(h.work.phase(), "Running");
}

#[test]
fn a_missing_env_reference_waits_in_create_container_config_error_then_starts() {
    let mut h = Harness::new(&pod(&[], one_container("busybox:1.36")));
    let message = "secret \"creds\" not found".to_owned();
    h.config_errors = vec![Some(message.clone())];
    h.run_until(20, |h| {
        matches!(
            h.work.containers[0].state,
            CState::Waiting {
                reason: "CreateContainerConfigError",
                ..
            }
        )
    });
    match &h.work.containers[0].state {
        CState::Waiting { reason, message: m } => {
            assert_eq!(*reason, "CreateContainerConfigError");
            assert_eq!(m.as_deref(), Some(message.as_str()));
        }
        other => panic!("{other:?}"),
    }
    assert!(h.effects.iter().any(|e| matches!(e, Effect::Event(ev)
        if ev.reason == "Failed" && ev.message == format!("Error: {message}"))));
    assert_eq!(h.work.phase(), "Pending");
    h.config_errors = vec![None];
    h.run_until(20, |h| h.work.phase() == "Running");
    assert_eq!(h.work.phase(), "Running");
}
