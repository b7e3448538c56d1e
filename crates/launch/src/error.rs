//! Errors of the launcher, each mapped to a documented exit code.
//!
//! Two families: [`SpecError`] (the task as given cannot become a valid pod: a bad value,
//! template or label) and [`LaunchError`] (something went wrong while creating, starting or
//! following the pod). Every variant says what was wrong and, where it helps, what was expected.

use std::time::Duration;

use crate::cancel::CancelReason;
use crate::exit;

/// The task description cannot be turned into a pod. Raised before any API call, so nothing
/// has been created when it is returned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// A `KEY=VALUE` style value without `=` or with an empty key.
    #[error("{flag}: {value:?} is not KEY=VALUE (expected e.g. {flag} {example})")]
    NotKeyValue {
        /// What the value was given for, as the caller names it (the binary: its flag).
        flag: &'static str,
        /// What was given.
        value: String,
        /// A valid value, without the name: the message reads `expected e.g. {flag} {example}`.
        example: &'static str,
    },
    /// A label key or value that Kubernetes would reject.
    #[error("{flag}: {what} {value:?} is invalid: {why}")]
    InvalidLabel {
        /// Which labels, as the caller names them (a task field such as `nodeSelector`, or the
        /// binary's flag).
        flag: &'static str,
        /// "key" or "value".
        what: &'static str,
        /// What was given.
        value: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// A resource quantity such as `500m` or `1Gi` that does not parse.
    #[error("{flag}: {value:?} is not a Kubernetes quantity (expected e.g. cpu=500m,memory=1Gi)")]
    InvalidQuantity {
        /// Which resource list (`requests` or `limits`), as the caller names it.
        flag: &'static str,
        /// What was given.
        value: String,
    },
    /// A pod name that is not a DNS-1123 subdomain (only checked for a name used as is,
    /// [`crate::TaskSpec::exact_name`]).
    #[error(
        "name {value:?} is not a valid pod name: {why} (expected lower-case a-z, 0-9, '-' and '.', starting and ending alphanumeric, at most 253 characters)"
    )]
    InvalidName {
        /// What was given.
        value: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// Neither the task nor its template gives the main container an image.
    #[error("no image: give the task an image, or the first container of its pod template one")]
    MissingImage,
    /// The pod template file cannot be read. The message starts with the path, so a caller can
    /// say what the file was given as.
    #[error("{path}: cannot read: {source}")]
    TemplateRead {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The pod template file is neither a valid Pod in YAML nor in JSON.
    #[error("{path}: not a Pod manifest in YAML or JSON: {message}")]
    TemplateParse {
        /// The file.
        path: String,
        /// The parser's message (line/column where available).
        message: String,
    },
    /// A tasks file ([`crate::spec::parse_tasks`]) cannot be parsed. The message starts with
    /// the path, so a caller can say what the file was given as.
    #[error("{path}: {message}")]
    TasksFile {
        /// The file.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// One task of a tasks file is invalid. The whole file is checked before anything is
    /// created, and the message names the task (1-based index, and name or task id if it has
    /// one), the field and what was expected; it starts with the path, like
    /// [`SpecError::TasksFile`].
    #[error("{path}: task {index}{}: {field}: {message}", fmt_task_name(name))]
    Task {
        /// The file.
        path: String,
        /// The task's position in the file, from 1.
        index: usize,
        /// Its `name` (or `taskId`), if it has one.
        name: Option<String>,
        /// The field at fault, as spelled in the file (`image`, `command`...).
        field: String,
        /// What is wrong and what was expected.
        message: String,
    },
    /// An invalid image pull policy.
    #[error("{value:?} is not an image pull policy (expected Always, IfNotPresent or Never)")]
    InvalidPullPolicy {
        /// What was given.
        value: String,
    },
    /// An invalid [`crate::OnFinish`] action.
    #[error(
        "{value:?} is not what to do with the pod at the end (expected delete, delete-succeeded or keep)"
    )]
    InvalidOnFinish {
        /// What was given.
        value: String,
    },
    /// A numeric or duration knob out of range.
    #[error("{flag}: {message}")]
    OutOfRange {
        /// The setting, as the caller names it (a pod field such as `activeDeadlineSeconds`).
        flag: &'static str,
        /// What was expected.
        message: String,
    },
}

impl SpecError {
    /// The process exit code for this error: always [`exit::USAGE`].
    pub fn exit_code(&self) -> u8 {
        exit::USAGE
    }
}

/// One cause attached to a Kubernetes `Status` (e.g. which field of the pod was invalid).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StatusCause {
    /// The field, e.g. `spec.containers[0].image`.
    pub field: String,
    /// The server's message for that field.
    pub message: String,
}

/// Why a launch failed. Each variant maps to one exit code (see [`LaunchError::exit_code`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The task description was invalid.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The API server rejected the create with an error no retry can fix (400, 401, 403, 404,
    /// 422...). Carries the server's own message and causes.
    #[error(
        "create rejected by the API server: HTTP {code} {reason}: {message}{}",
        fmt_causes(causes)
    )]
    CreateRejected {
        /// HTTP status code.
        code: u16,
        /// The Status `reason`, e.g. `Invalid` or `Forbidden`.
        reason: String,
        /// The Status `message`.
        message: String,
        /// The Status `details.causes`.
        causes: Vec<StatusCause>,
    },
    /// Retryable errors continued until the attempts or the deadline ran out.
    #[error(
        "create failed after {attempts} attempts over {:.1}s: last error: {last}",
        elapsed.as_secs_f64()
    )]
    CreateExhausted {
        /// Attempts made.
        attempts: u32,
        /// Time spent.
        elapsed: Duration,
        /// The last error seen.
        last: String,
    },
    /// A pod with our name exists but carries a different launch id: someone else's pod. It was
    /// not touched. The remedy (another name, or a random suffix) is the caller's to word: the
    /// binary adds its flags ([`ErrorKind::ForeignPod`]).
    #[error(
        "pod {namespace}/{name} already exists and was not created by this run (launch id {theirs:?}, ours {ours}); it was left untouched"
    )]
    ForeignPod {
        /// Namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// The launch id found on the existing pod (if any).
        theirs: Option<String>,
        /// Our launch id.
        ours: String,
    },
    /// The pod was not scheduled in time.
    #[error("pod {pod} was not scheduled within {timeout:?}{}", fmt_detail(detail))]
    ScheduleTimeout {
        /// Pod name.
        pod: String,
        /// The limit.
        timeout: Duration,
        /// Last scheduler message, if any.
        detail: Option<String>,
    },
    /// The pod was scheduled but its containers did not start in time.
    #[error(
        "pod {pod} did not start within {timeout:?} after scheduling{}",
        fmt_detail(detail)
    )]
    StartupTimeout {
        /// Pod name.
        pod: String,
        /// The limit.
        timeout: Duration,
        /// Last waiting reason/message, if any.
        detail: Option<String>,
    },
    /// The run's overall timeout expired before the pod started.
    #[error(
        "pod {pod} did not start before the run's overall timeout of {timeout:?} expired{}",
        fmt_detail(detail)
    )]
    TimeoutBeforeStart {
        /// Pod name.
        pod: String,
        /// The overall limit.
        timeout: Duration,
        /// Last scheduler or waiting message, if any.
        detail: Option<String>,
    },
    /// The pod started, and was still running when the run's overall timeout expired.
    #[error(
        "pod {pod} timed out: still running when the run's overall timeout of {timeout:?} expired"
    )]
    TimeoutWhileRunning {
        /// Pod name.
        pod: String,
        /// The overall limit.
        timeout: Duration,
    },
    /// The image can never be pulled (not found, invalid name, unauthorized).
    #[error("pod {pod}: container {container} cannot start: {reason}: {message}")]
    ImageError {
        /// Pod name.
        pod: String,
        /// Container name.
        container: String,
        /// Waiting reason, e.g. `ErrImagePull`.
        reason: String,
        /// Waiting message.
        message: String,
    },
    /// The pod vanished (deleted by someone else) before it finished.
    #[error("pod {pod} disappeared before it finished (deleted by someone else?)")]
    PodGone {
        /// Pod name.
        pod: String,
    },
    /// The pod was deleted, or killed by its deletion, because this launcher's liveness Lease
    /// expired or vanished: a reaper judged the launcher dead (or someone deleted the Lease).
    /// Told apart from [`LaunchError::PodGone`] so that the user learns why (issue 27).
    #[error(
        "pod {pod} was deleted because this run's liveness Lease {lease} expired or vanished: a \
         reaper (podline gc, or a recorder that reaps) saw it unrenewed for its duration + grace and \
         judged this launcher dead (it could not reach the API server, or was stalled, for that \
         long), or someone deleted the Lease; the task was stopped, not failed by its command"
    )]
    LeaseLost {
        /// Pod name.
        pod: String,
        /// `namespace/name` of the Lease.
        lease: String,
    },
    /// The run was cancelled (SIGINT/SIGTERM); the pod was deleted.
    #[error("interrupted by {reason}{}", if pod.is_empty() { String::new() } else { format!(" while running pod {pod}") })]
    Interrupted {
        /// Pod name (may be empty when interrupted before create).
        pod: String,
        /// Which signal cancelled the run.
        reason: CancelReason,
    },
    /// Reattach ([`crate::LaunchConfig::reattach`]) found more than one live pod for the task
    /// id. The binary names its flag before the message ([`ErrorKind::AmbiguousReattach`]).
    #[error(
        "{count} live pods carry task id {task_id:?}; refusing to guess which to reattach to (delete the extra ones)"
    )]
    AmbiguousReattach {
        /// Task id.
        task_id: String,
        /// How many were found.
        count: usize,
    },
    /// A Kubernetes API call other than create failed for good.
    #[error("{action}: {}", describe_api_error(source))]
    Api {
        /// What was being done.
        action: &'static str,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The pod watch failed with an error no retry can fix.
    #[error("watching pod {pod}: {message}")]
    Watch {
        /// Pod name.
        pod: String,
        /// The watch error.
        message: String,
    },
}

/// A client error as a user reads it. kube's own `Display` of an API error appends the whole
/// `Status` in `Debug` form (`Status { status: Some(Failure), ... }`); this gives the server's
/// answer the way a rejected create shows it: `HTTP 409 Conflict: <message>`, with the causes.
pub fn describe_api_error(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => {
            let causes = StatusCause::all_of(status);
            format!(
                "HTTP {} {}: {}{}",
                status.code,
                status.reason,
                status.message,
                fmt_causes(&causes)
            )
        }
        other => other.to_string(),
    }
}

impl StatusCause {
    /// The field causes a kube `Status` answer carries (none when it has no details).
    pub(crate) fn all_of(status: &kube::core::Status) -> Vec<StatusCause> {
        status
            .details
            .as_ref()
            .map(|d| {
                d.causes
                    .iter()
                    .map(|c| StatusCause {
                        field: c.field.clone(),
                        message: c.message.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn fmt_task_name(name: &Option<String>) -> String {
    name.as_ref()
        .map(|n| format!(" ({n:?})"))
        .unwrap_or_default()
}

fn fmt_causes(causes: &[StatusCause]) -> String {
    causes
        .iter()
        .map(|c| format!("\n  - {}: {}", c.field, c.message))
        .collect()
}

fn fmt_detail(detail: &Option<String>) -> String {
    detail
        .as_ref()
        .map(|d| format!(": {d}"))
        .unwrap_or_default()
}

/// Which [`LaunchError`] a run ended with, kept next to its message in
/// [`crate::TaskResult::error_kind`]: a caller that words advice in its own terms (the binary
/// names its flags, a tasks file its fields) can tell the failures apart without parsing text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// [`LaunchError::Spec`].
    Spec,
    /// [`LaunchError::CreateRejected`].
    CreateRejected,
    /// [`LaunchError::CreateExhausted`].
    CreateExhausted,
    /// [`LaunchError::ForeignPod`]: the pod's name is taken by a pod of someone else.
    ForeignPod,
    /// [`LaunchError::ScheduleTimeout`].
    ScheduleTimeout,
    /// [`LaunchError::StartupTimeout`].
    StartupTimeout,
    /// [`LaunchError::TimeoutBeforeStart`].
    TimeoutBeforeStart,
    /// [`LaunchError::TimeoutWhileRunning`].
    TimeoutWhileRunning,
    /// [`LaunchError::ImageError`].
    ImageError,
    /// [`LaunchError::PodGone`].
    PodGone,
    /// [`LaunchError::LeaseLost`].
    LeaseLost,
    /// [`LaunchError::Interrupted`].
    Interrupted,
    /// [`LaunchError::AmbiguousReattach`]: several live pods carry the task id.
    AmbiguousReattach,
    /// [`LaunchError::Api`].
    Api,
    /// [`LaunchError::Watch`].
    Watch,
}

impl LaunchError {
    /// Which failure this is, without its data.
    pub fn kind(&self) -> ErrorKind {
        match self {
            LaunchError::Spec(_) => ErrorKind::Spec,
            LaunchError::CreateRejected { .. } => ErrorKind::CreateRejected,
            LaunchError::CreateExhausted { .. } => ErrorKind::CreateExhausted,
            LaunchError::ForeignPod { .. } => ErrorKind::ForeignPod,
            LaunchError::ScheduleTimeout { .. } => ErrorKind::ScheduleTimeout,
            LaunchError::StartupTimeout { .. } => ErrorKind::StartupTimeout,
            LaunchError::TimeoutBeforeStart { .. } => ErrorKind::TimeoutBeforeStart,
            LaunchError::TimeoutWhileRunning { .. } => ErrorKind::TimeoutWhileRunning,
            LaunchError::ImageError { .. } => ErrorKind::ImageError,
            LaunchError::PodGone { .. } => ErrorKind::PodGone,
            LaunchError::LeaseLost { .. } => ErrorKind::LeaseLost,
            LaunchError::Interrupted { .. } => ErrorKind::Interrupted,
            LaunchError::AmbiguousReattach { .. } => ErrorKind::AmbiguousReattach,
            LaunchError::Api { .. } => ErrorKind::Api,
            LaunchError::Watch { .. } => ErrorKind::Watch,
        }
    }

    /// The process exit code for this failure, as documented in [`crate::exit`].
    pub fn exit_code(&self) -> u8 {
        match self {
            LaunchError::Spec(_) => exit::USAGE,
            LaunchError::CreateRejected { .. } | LaunchError::CreateExhausted { .. } => {
                exit::CREATE_FAILED
            }
            LaunchError::ScheduleTimeout { .. }
            | LaunchError::StartupTimeout { .. }
            | LaunchError::TimeoutBeforeStart { .. }
            | LaunchError::ImageError { .. } => exit::START_FAILED,
            LaunchError::TimeoutWhileRunning { .. } => exit::TIMED_OUT,
            LaunchError::ForeignPod { .. } | LaunchError::AmbiguousReattach { .. } => {
                exit::NAME_CLASH
            }
            LaunchError::Interrupted { reason, .. } => reason.exit_code(),
            LaunchError::PodGone { .. }
            | LaunchError::LeaseLost { .. }
            | LaunchError::Api { .. }
            | LaunchError::Watch { .. } => exit::LOST,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn conflict() -> kube::Error {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "code": 409, "reason": "Conflict",
            "message": "Operation cannot be fulfilled on resourcequotas \"compute\": the object has been modified",
        }))
        .unwrap();
        kube::Error::Api(status.boxed())
    }

    #[test]
    fn api_errors_should_read_like_the_servers_answer_not_a_debug_dump() {
        let text = describe_api_error(&conflict());
        assert_eq!(
            text,
            "HTTP 409 Conflict: Operation cannot be fulfilled on resourcequotas \"compute\": the object has been modified"
        );
        let exhausted = LaunchError::CreateExhausted {
            attempts: 12,
            elapsed: Duration::from_millis(1234),
            last: describe_api_error(&conflict()),
        }
        .to_string();
        assert!(
            exhausted.starts_with(
                "create failed after 12 attempts over 1.2s: last error: HTTP 409 Conflict"
            ),
            "{exhausted}"
        );
        let api = LaunchError::Api {
            action: "listing pods",
            source: conflict(),
        }
        .to_string();
        for text in [&exhausted, &api] {
            assert!(
                !text.contains("Status {") && !text.contains("ListMeta"),
                "{text}"
            );
        }
    }
}
