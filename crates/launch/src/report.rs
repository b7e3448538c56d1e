//! What a run produced: the machine-readable [`TaskResult`] (for `-o json|yaml`) and the
//! human-readable failure report.
//!
//! Everything is derived from the final pod object and the pod's events, so the report is the
//! same whether podline saw every transition or only the last one.

use std::fmt::Write as _;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, Event, Pod};
use serde::{Deserialize, Serialize};

/// How one container ended (or where it is stuck).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerResult {
    /// Container name.
    pub name: String,
    /// Exit code, once terminated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Termination or waiting reason (`Completed`, `Error`, `OOMKilled`, `ErrImagePull`...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Termination message (`terminationMessagePath`) or waiting message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// When the pod reached each stage (from the pod object; second precision on the wire).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Timings {
    /// `metadata.creationTimestamp`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<Timestamp>,
    /// `PodScheduled` condition's transition time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduled: Option<Timestamp>,
    /// Earliest container start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<Timestamp>,
    /// Latest container finish.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished: Option<Timestamp>,
    /// Measured by podline: from the first create attempt to the create's answer (retries
    /// included), in ms. None for a reattached pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_to_created_ms: Option<u64>,
    /// Measured by podline: from the first create attempt to seeing the pod running, in ms
    /// (sub-second, unlike the wire timestamps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_to_running_ms: Option<u64>,
    /// When the task's clock (the one the two figures above read) started, for in-process
    /// measurements such as the launch benchmark, which compares it with the API server's
    /// receipt of the create. Not serialized: an `Instant` means nothing outside the process.
    #[serde(skip)]
    pub clock_started: Option<std::time::Instant>,
}

/// A Warning event of the pod, for failure reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventSummary {
    /// Event reason (`FailedScheduling`, `Failed`, `BackOff`...).
    pub reason: String,
    /// Event message.
    pub message: String,
    /// How many times it happened.
    pub count: i32,
}

/// The outcome of one task, printed with `-o json|yaml` and summarised by [`crate::Summary`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskResult {
    /// Pod name (empty if no pod was created).
    pub pod: String,
    /// Namespace.
    pub namespace: String,
    /// Pod uid, once known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The launch id label.
    pub launch_id: String,
    /// Last seen phase (`Succeeded`, `Failed`, `Pending`...); empty if never created.
    pub phase: String,
    /// The pod's `status.reason` (e.g. `DeadlineExceeded`, `Evicted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The pod's `status.message`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The main container's name.
    pub main_container: String,
    /// Per-container outcome, init containers first.
    pub containers: Vec<ContainerResult>,
    /// Stage times.
    pub timings: Timings,
    /// Create calls beyond the first (409/429/5xx/transport retries).
    pub retries: u32,
    /// The create's response was lost and the pod found by its launch id.
    pub adopted: bool,
    /// Reattaching ([`crate::LaunchConfig::reattach`]) found the pod running and attached to it.
    pub reattached: bool,
    /// Log stream reconnects (breaks and stalls).
    pub log_reconnects: u32,
    /// Whether podline deleted the pod at the end.
    pub deleted: bool,
    /// podline's own error, if the run failed outside the container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Which [`crate::LaunchError`] `error` is, when it is one: for a caller that adds its own
    /// words (the binary names its flags). Not part of the result document.
    #[serde(skip)]
    pub error_kind: Option<crate::ErrorKind>,
    /// Recent Warning events of the pod (filled on failure).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub warnings: Vec<EventSummary>,
    /// KubernetesPodOperator's XCom value: the content of `/airflow/xcom/return.json` (JSON
    /// text, as the main container wrote it), read through the pod's XCom sidecar
    /// ([`crate::xcom`]); None without a sidecar, or when the file was missing or empty.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub xcom: Option<String>,
    /// Why the XCom value could not be read, when the pod has the sidecar and the read failed
    /// (a caller that promised the value, like Airflow's operator, fails the task on it).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub xcom_error: Option<String>,
    /// The process exit code this result maps to (see [`crate::exit`]).
    pub exit_code: u8,
}

impl TaskResult {
    /// True if the main container exited 0 and podline had no error of its own.
    pub fn succeeded(&self) -> bool {
        self.error.is_none() && self.exit_code == 0
    }

    /// The main container's exit code, if it terminated.
    pub fn container_exit_code(&self) -> Option<i32> {
        self.containers
            .iter()
            .find(|c| c.name == self.main_container)
            .and_then(|c| c.exit_code)
    }

    /// Fills pod-derived fields (phase, containers, timings) from the latest pod object.
    pub fn absorb_pod(&mut self, pod: &Pod) {
        self.uid = pod.metadata.uid.clone().or(self.uid.take());
        self.timings.created = pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
        let Some(status) = pod.status.as_ref() else {
            return;
        };
        self.phase = status.phase.clone().unwrap_or_default();
        self.reason = status.reason.clone();
        self.message = status.message.clone();
        self.timings.scheduled = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "PodScheduled" && c.status == "True")
            .and_then(|c| c.last_transition_time.as_ref().map(|t| t.0));
        let all: Vec<&ContainerStatus> = status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten())
            .collect();
        self.containers = all.iter().map(|cs| container_result(cs)).collect();
        let (mut started, mut finished) = (None::<Timestamp>, None::<Timestamp>);
        for cs in status.container_statuses.iter().flatten() {
            let state = cs.state.as_ref();
            let start = state
                .and_then(|s| s.running.as_ref().and_then(|r| r.started_at.as_ref()))
                .or_else(|| {
                    state.and_then(|s| s.terminated.as_ref().and_then(|t| t.started_at.as_ref()))
                })
                .map(|t| t.0);
            if let Some(s) = start {
                started = Some(started.map_or(s, |c| c.min(s)));
            }
            if let Some(f) = state
                .and_then(|s| s.terminated.as_ref())
                .and_then(|t| t.finished_at.as_ref())
                .map(|t| t.0)
            {
                finished = Some(finished.map_or(f, |c| c.max(f)));
            }
        }
        self.timings.started = started;
        self.timings.finished = finished;
    }

    /// Keeps the last `n` Warning events, newest last.
    pub fn absorb_events(&mut self, events: &[Event], n: usize) {
        let mut warnings: Vec<&Event> = events
            .iter()
            .filter(|e| e.type_.as_deref() == Some("Warning"))
            .collect();
        warnings.sort_by_key(|e| {
            e.last_timestamp
                .as_ref()
                .map(|t| t.0)
                .or_else(|| e.event_time.as_ref().map(|t| t.0))
        });
        let skip = warnings.len().saturating_sub(n);
        self.warnings = warnings
            .into_iter()
            .skip(skip)
            .map(|e| EventSummary {
                reason: e.reason.clone().unwrap_or_default(),
                message: e.message.clone().unwrap_or_default(),
                count: e.count.unwrap_or(1),
            })
            .collect();
    }

    /// A readable multi-line failure report: phase, reason, exit codes, termination messages,
    /// last Warning events.
    ///
    /// Its first line says what happened without judging it: a main container that exited with
    /// a code is told as such (a wrapper may treat that code as a skip, not a failure), and a
    /// pod that was never created is not called a failed pod. Every text the pod or the API
    /// server controls (names, reasons, messages, events) is written with its control
    /// characters escaped ([`printable`]): the report goes to terminals and task logs.
    pub fn failure_report(&self) -> String {
        let mut out = String::new();
        let pod = format!("{}/{}", printable(&self.namespace), printable(&self.pod));
        let main_code = self
            .containers
            .iter()
            .find(|c| c.name == self.main_container)
            .and_then(|c| c.exit_code)
            .filter(|code| *code != 0);
        if self.uid.is_none() && self.phase.is_empty() {
            if self.pod.is_empty() {
                let _ = writeln!(out, "task not run: no pod was created");
            } else {
                let _ = writeln!(out, "task not run: pod {pod} was not created");
            }
        } else if let Some(code) = main_code {
            let _ = writeln!(out, "task exited with code {code}: pod {pod}");
        } else {
            let _ = writeln!(out, "task failed: pod {pod}");
        }
        if let Some(error) = &self.error {
            let _ = writeln!(out, "  error:  {}", printable(error));
        }
        if !self.phase.is_empty() {
            let _ = write!(out, "  phase:  {}", printable(&self.phase));
            if let Some(reason) = &self.reason {
                let _ = write!(out, " ({})", printable(reason));
            }
            out.push('\n');
        }
        if let Some(message) = &self.message {
            let _ = writeln!(out, "  message: {}", printable(message));
        }
        for c in &self.containers {
            let _ = write!(out, "  container {}:", printable(&c.name));
            if let Some(code) = c.exit_code {
                let _ = write!(out, " exit code {code}");
            }
            if let Some(reason) = &c.reason {
                let _ = write!(out, " reason {}", printable(reason));
            }
            out.push('\n');
            if let Some(message) = c.message.as_deref().filter(|m| !m.is_empty()) {
                for line in message.lines() {
                    let _ = writeln!(out, "    | {}", printable(line));
                }
            }
        }
        if !self.warnings.is_empty() {
            let _ = writeln!(out, "  warning events:");
            for w in &self.warnings {
                let times = if w.count > 1 {
                    format!(" (x{})", w.count)
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "    {}: {}{times}",
                    printable(&w.reason),
                    printable(&w.message)
                );
            }
        }
        if self.deleted {
            let _ = writeln!(out, "  pod deleted");
        }
        out
    }
}

/// `text` with every control character (C0 with newline and ESC, DEL, C1) written as a visible
/// escape (`\n`, `\t`, `\r`, else `\u{1b}`), so pod-controlled text cannot move the cursor,
/// recolour or inject lines where the report is shown (as `podline show` and kubectl since
/// CVE-2021-25743 do).
fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for ch in text.chars() {
        match ch {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            ch if ch.is_control() => {
                let _ = write!(out, "{}", ch.escape_unicode());
            }
            ch => out.push(ch),
        }
    }
    out
}

fn container_result(cs: &ContainerStatus) -> ContainerResult {
    let state = cs.state.as_ref();
    if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
        return ContainerResult {
            name: cs.name.clone(),
            exit_code: Some(t.exit_code),
            reason: t.reason.clone(),
            message: t.message.clone(),
        };
    }
    if let Some(w) = state.and_then(|s| s.waiting.as_ref()) {
        return ContainerResult {
            name: cs.name.clone(),
            exit_code: None,
            reason: w.reason.clone(),
            message: w.message.clone(),
        };
    }
    ContainerResult {
        name: cs.name.clone(),
        ..ContainerResult::default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, PodCondition, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn t(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    fn finished_pod(code: i32) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.uid = Some("u1".into());
        pod.metadata.creation_timestamp = Some(t("2026-01-01T00:00:00Z"));
        pod.status = Some(PodStatus {
            phase: Some(if code == 0 { "Succeeded" } else { "Failed" }.into()),
            conditions: Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "True".into(),
                last_transition_time: Some(t("2026-01-01T00:00:01Z")),
                ..Default::default()
            }]),
            container_statuses: Some(vec![ContainerStatus {
                name: "task".into(),
                state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: code,
                        reason: Some("Error".into()),
                        message: Some("boom\nsecond line".into()),
                        started_at: Some(t("2026-01-01T00:00:02Z")),
                        finished_at: Some(t("2026-01-01T00:00:03Z")),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        });
        pod
    }

    #[test]
    fn absorb_pod_should_fill_phase_containers_and_timings() {
        let mut r = TaskResult {
            main_container: "task".into(),
            ..Default::default()
        };
        r.absorb_pod(&finished_pod(137));
        assert_eq!(r.phase, "Failed");
        assert_eq!(r.container_exit_code(), Some(137));
        assert_eq!(
            r.timings.created,
            Some("2026-01-01T00:00:00Z".parse().unwrap())
        );
        assert_eq!(
            r.timings.scheduled,
            Some("2026-01-01T00:00:01Z".parse().unwrap())
        );
        assert_eq!(
            r.timings.started,
            Some("2026-01-01T00:00:02Z".parse().unwrap())
        );
        assert_eq!(
            r.timings.finished,
            Some("2026-01-01T00:00:03Z".parse().unwrap())
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["containers"][0]["exitCode"], 137);
        assert_eq!(json["phase"], "Failed");
    }

    #[test]
    fn failure_report_should_show_phase_exit_code_message_and_warnings() {
        let mut r = TaskResult {
            pod: "p".into(),
            namespace: "ns".into(),
            main_container: "task".into(),
            ..Default::default()
        };
        r.absorb_pod(&finished_pod(1));
        let ev = |reason: &str, ty: &str, ts: &str| Event {
            type_: Some(ty.into()),
            reason: Some(reason.into()),
            message: Some(format!("{reason} happened")),
            last_timestamp: Some(t(ts)),
            ..Default::default()
        };
        r.absorb_events(
            &[
                ev("Old", "Warning", "2026-01-01T00:00:01Z"),
                ev("Normal", "Normal", "2026-01-01T00:00:02Z"),
                ev("BackOff", "Warning", "2026-01-01T00:00:03Z"),
            ],
            1,
        );
        let report = r.failure_report();
        for want in [
            "ns/p",
            "Failed",
            "exit code 1",
            "| boom",
            "| second line",
            "BackOff happened",
        ] {
            assert!(report.contains(want), "missing {want:?} in\n{report}");
        }
        assert!(!report.contains("Old happened"));
        assert!(
            report.starts_with("task exited with code 1: pod ns/p\n"),
            "{report}"
        );
    }

    /// The report goes to terminals and task logs: pod-controlled text (termination message,
    /// reasons, events) is escaped, never written raw.
    #[test]
    fn failure_report_should_escape_pod_controlled_text() {
        let mut r = TaskResult {
            pod: "p".into(),
            namespace: "ns".into(),
            main_container: "task".into(),
            ..Default::default()
        };
        let mut pod = finished_pod(1);
        if let Some(status) = pod.status.as_mut() {
            status.reason = Some("Evil\u{1b}]0;title\u{7}".into());
            status.message = Some("msg\u{1b}[2J\u{9b}31m".into());
            if let Some(term) = status
                .container_statuses
                .as_mut()
                .and_then(|c| c.first_mut())
                .and_then(|c| c.state.as_mut())
                .and_then(|s| s.terminated.as_mut())
            {
                term.message = Some("line\u{1b}[31mred\rback\nsecond".into());
            }
        }
        r.absorb_pod(&pod);
        r.error = Some("pod failed: \u{1b}[1mbold".into());
        let report = r.failure_report();
        assert!(
            !report.chars().any(|c| c.is_control() && c != '\n'),
            "{report:?}"
        );
        assert!(report.contains("line\\u{1b}[31mred\\rback"), "{report}");
        assert!(report.contains("| second"), "{report}");
    }

    /// A pod that was never created is not called a failed pod.
    #[test]
    fn failure_report_of_a_pod_never_created_should_say_so() {
        let r = TaskResult {
            pod: "p".into(),
            namespace: "ns".into(),
            error: Some("create rejected".into()),
            ..Default::default()
        };
        let report = r.failure_report();
        assert!(
            report.starts_with("task not run: pod ns/p was not created\n"),
            "{report}"
        );
    }
}
