//! Launch Kubernetes pods as tasks: idempotent create under 409 storms, await start, follow
//! logs, report, clean up.
//!
//! Depends on podline-client only (the sim and testkit in its tests); it must not depend on the
//! recorder, the store or the binary: flag names and exit messages are the binary's.
//!
//! This is the job of Airflow's KubernetesPodOperator, without its known failure modes
//! (duplicate pods on retry, orphans after a kill, stalled or lossy logs, opaque failures).
//!
//! # Main types
//!
//! - [`TaskSpec`]: what to run (image, command, env, labels, resources, template...).
//!   [`TaskSpec::build_pod`] turns it into a [`BuiltPod`] with a unique name and a launch id.
//! - [`StartTracker`]: the start state machine (schedule timeout, startup timeout, permanent
//!   image errors fail fast).
//! - [`Dedup`]: exactly-once log lines across stream reconnects.
//! - [`TaskResult`]: the outcome, serialisable (JSON, YAML), with a readable failure report.
//! - [`Launcher`]: runs one task end to end (create, start, logs, completion, cleanup);
//!   [`run_many`] runs many with a concurrency limit and a [`Summary`].
//! - [`exit`]: the documented exit codes.
//!
//! # Flow of one run ([`Launcher::run`])
//!
//! 1. [`TaskSpec::build_pod`]: template + the task's fields, unique name, launch id label,
//!    `restartPolicy: Never` (errors here exit 2, nothing is created).
//! 2. [`create::create_idempotent`]: retries 409 Conflict / 429 / 5xx / transport errors with
//!    full-jitter backoff and a deadline; `AlreadyExists` with our launch id is adopted, with
//!    another is refused (exit 5); 400/401/403/404/422 fail at once (exit 3).
//! 3. [`podwatch`]: one feed loop publishes the pod's state to every later stage, from a watch
//!    on `metadata.name=<pod>`, or (in [`run_many`]) one watch per namespace shared by all
//!    tasks, subscribed before the create.
//! 4. [`StartTracker`]: schedule and startup timeouts, fast failure on permanent image errors
//!    (exit 4); start and completion are awaited by one wait loop.
//! 5. [`logs::follow`]: streams logs to a [`LogSink`], resuming with `sinceTime` + [`Dedup`].
//! 6. Completion: the main container's exit code becomes the process exit code; the task is
//!    over when the main container has terminated (a sidecar that never exits does not hold
//!    it, [`wait::main_terminated`]). A pod with KubernetesPodOperator's XCom sidecar has its
//!    `/airflow/xcom/return.json` read through `pods/exec` into the result ([`xcom`]). The overall
//!    timeout, if set, ends the run with exit 4 before the start and 124 after it.
//! 7. [`cleanup`]: what the task's [`OnFinish`] says, and deletion after failures, timeouts,
//!    signals and panics in steps 3-6.
//!
//! # Example: build a pod
//!
//! ```
//! use podline_launch::TaskSpec;
//!
//! let spec = TaskSpec {
//!     image: Some("busybox:1.36".into()),
//!     command: vec!["sh".into(), "-c".into(), "echo hello".into()],
//!     ..TaskSpec::default()
//! };
//! let built = spec.build_pod("default").unwrap();
//! assert!(built.name.starts_with("busybox-"));
//! assert_eq!(built.pod.spec.unwrap().restart_policy.as_deref(), Some("Never"));
//! ```
//!
//! # Example: run a task
//!
//! ```no_run
//! # async fn demo(client: kube::Client) {
//! use std::sync::Arc;
//! use podline_launch::{Cancel, LaunchConfig, Launcher, StdoutSink, TaskSpec};
//!
//! let launcher = Launcher::new(client, "default", LaunchConfig::default());
//! let spec = TaskSpec {
//!     image: Some("busybox:1.36".into()),
//!     command: vec!["sh".into(), "-c".into(), "echo hello; exit 3".into()],
//!     ..TaskSpec::default()
//! };
//! let result = launcher.run(&spec, Arc::new(StdoutSink), &Cancel::new()).await;
//! assert_eq!(result.exit_code, 3); // the container's exit code
//! # }
//! ```

pub mod cancel;
pub mod cleanup;
pub mod create;
pub mod dedup;
pub mod error;
pub mod exit;
pub mod launcher;
pub mod liveness;
pub mod logs;
pub mod many;
pub mod podwatch;
pub mod reaper;
pub mod report;
pub mod selection;
pub mod spec;
pub mod wait;
pub mod watched;
pub mod xcom;

pub use cleanup::OnFinish;
pub use dedup::Dedup;
pub use error::{ErrorKind, LaunchError, SpecError, StatusCause};
pub use launcher::{Cancel, CancelReason, LaunchConfig, Launcher, LogMode, find_live_task_pod};
pub use liveness::{
    KEEP_FOR_RETRY_ANNOTATION, LAUNCHER_LABEL, Liveness, LivenessConfig, MAX_KEEP_FOR_RETRY,
    ON_FINISH_ANNOTATION,
};
pub use logs::{BufferSink, LogConfig, LogSink, NullSink, StdoutSink};
pub use many::{Keep, Summary, run_many, run_many_kept};
pub use report::{ContainerResult, EventSummary, TaskResult, Timings};
pub use selection::{Containers, Lifecycle, LogSelection};
pub use spec::{BuiltPod, LAUNCH_ID_LABEL, PullPolicy, RUN_LABEL, TASK_ID_LABEL, TaskSpec};
pub use wait::{StartStep, StartTracker, WaitingKind};
