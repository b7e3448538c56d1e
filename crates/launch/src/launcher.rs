//! [`Launcher`]: one task from spec to exit code — create, await start, follow logs, await
//! completion, report, clean up — with cancellation (SIGINT/SIGTERM) and an overall timeout.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::ListParams;
use podline_client::retry::RetryPolicy;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::cleanup::{self, OnFinish};
use crate::create;
use crate::error::LaunchError;
use crate::exit;
use crate::logs::{self, LogConfig, LogSink};
use crate::podwatch::{self, PodState, SharedPodWatches};
use crate::report::TaskResult;
use crate::spec::{BuiltPod, LAUNCH_ID_LABEL, TASK_ID_LABEL, TaskSpec};
use crate::wait::{self, StartStep, StartTracker};

/// Which logs to follow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogMode {
    /// The main container only, unprefixed (so stdout is exactly the container's output).
    #[default]
    Main,
    /// Every container, each line prefixed with `[container] `.
    AllContainers,
    /// No logs (many-task runs).
    None,
}

/// Why a run was cancelled; decides the exit code (130 or 143).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelReason {
    /// SIGINT / Ctrl-C.
    Interrupt,
    /// SIGTERM.
    Terminate,
}

/// Everything that shapes a run besides the task itself.
#[derive(Debug, Clone)]
pub struct LaunchConfig {
    /// Retry policy of the create (attempts, backoff, deadline).
    pub create: RetryPolicy,
    /// Retry policy of other unary calls (get, delete, list).
    pub calls: RetryPolicy,
    /// Limit for the pod to be scheduled.
    pub schedule_timeout: Duration,
    /// Limit for the containers to start once scheduled.
    pub startup_timeout: Duration,
    /// Overall limit for the whole run (None: no limit); on expiry the pod is deleted.
    pub timeout: Option<Duration>,
    /// What to do with the pod at the end.
    pub on_finish: OnFinish,
    /// Grace period for deletes (None: the pod's own).
    pub delete_grace: Option<Duration>,
    /// Which logs to follow.
    pub logs: LogMode,
    /// Log-following knobs.
    pub log: LogConfig,
    /// With a task id: attach to its live pod instead of creating a second one.
    pub reattach: bool,
    /// How many Warning events a failure report shows.
    pub warning_events: usize,
}

impl Default for LaunchConfig {
    fn default() -> Self {
        Self {
            create: create::default_create_policy(),
            calls: RetryPolicy::default().with_deadline(Some(Duration::from_secs(30))),
            schedule_timeout: wait::DEFAULT_SCHEDULE_TIMEOUT,
            startup_timeout: wait::DEFAULT_STARTUP_TIMEOUT,
            timeout: None,
            on_finish: OnFinish::Delete,
            delete_grace: None,
            logs: LogMode::Main,
            log: LogConfig::default(),
            reattach: false,
            warning_events: 5,
        }
    }
}

/// Runs tasks as pods. Cheap to clone (the client is shared).
#[derive(Clone)]
pub struct Launcher {
    client: kube::Client,
    default_namespace: String,
    config: Arc<LaunchConfig>,
    /// Set by [`Launcher::sharing_pod_watches`]: tasks follow their pods on one watch per
    /// namespace instead of one each.
    shared_watches: Option<SharedPodWatches>,
}

/// A cancellation token plus the reason, shared by the CLI's signal handler and the run.
#[derive(Debug, Clone, Default)]
pub struct Cancel {
    token: CancellationToken,
    reason: Arc<std::sync::OnceLock<CancelReason>>,
}

impl Cancel {
    /// A token nobody cancelled yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels every run using this token (first reason wins).
    pub fn cancel(&self, reason: CancelReason) {
        let _ = self.reason.set(reason);
        self.token.cancel();
    }

    /// Resolves when cancelled.
    pub async fn cancelled(&self) {
        self.token.cancelled().await;
    }

    /// Whether cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    fn signal(&self) -> &'static str {
        match self.reason.get() {
            Some(CancelReason::Interrupt) => "SIGINT",
            _ => "SIGTERM",
        }
    }
}

/// How the watched part of a run ended.
enum Stop {
    Finished,
    Failed(LaunchError),
}

impl Launcher {
    /// A launcher acting in `default_namespace` unless a task names another.
    pub fn new(
        client: kube::Client,
        default_namespace: impl Into<String>,
        config: LaunchConfig,
    ) -> Self {
        Self {
            client,
            default_namespace: default_namespace.into(),
            config: Arc::new(config),
            shared_watches: None,
        }
    }

    /// This launcher, for many tasks at once: its tasks follow their pods on one shared watch
    /// per namespace (podline's launch-id label) instead of one watch per pod, which spares the
    /// API server a watch, and an evaluation of every pod event, per task in flight. Tasks that
    /// reattach to an existing pod still watch it alone. [`crate::run_many`] uses this.
    pub fn sharing_pod_watches(&self) -> Self {
        Self {
            shared_watches: Some(SharedPodWatches::new(self.client.clone())),
            ..self.clone()
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &LaunchConfig {
        &self.config
    }

    /// Runs one task to the end and returns its result; never panics on API trouble. The
    /// result's `exit_code` is the process exit code (see [`crate::exit`]).
    pub async fn run(
        &self,
        spec: &TaskSpec,
        sink: Arc<dyn LogSink>,
        cancel: &Cancel,
    ) -> TaskResult {
        let mut result = TaskResult::default();
        // With an overall timeout, the server enforces it too (activeDeadlineSeconds), so the
        // pod stops even if podline is SIGKILLed before it can delete it.
        let mut spec = std::borrow::Cow::Borrowed(spec);
        if let (Some(timeout), None) = (self.config.timeout, spec.active_deadline) {
            // Saturating and within the API's range: the timeout may come from code, unbounded.
            spec.to_mut().active_deadline = Some(
                timeout
                    .saturating_add(Duration::from_secs(30))
                    .min(crate::spec::MAX_ACTIVE_DEADLINE),
            );
        }
        let spec = spec.as_ref();
        if cancel.is_cancelled() {
            return finish_early(
                result,
                LaunchError::Interrupted {
                    pod: String::new(),
                    signal: cancel.signal(),
                },
            );
        }
        let built = match spec.build_pod(&self.default_namespace) {
            Ok(built) => built,
            Err(err) => {
                result.exit_code = err.exit_code();
                result.error = Some(err.to_string());
                return result;
            }
        };
        result.pod = built.name.clone();
        result.namespace = built.namespace.clone();
        result.launch_id = built.launch_id.clone();
        result.main_container = built.main_container.clone();
        let span = tracing::info_span!("task", namespace = %built.namespace, pod = %built.name);
        self.run_built(built, spec, sink, cancel, result)
            .instrument(span)
            .await
    }

    async fn run_built(
        &self,
        mut built: BuiltPod,
        spec: &TaskSpec,
        sink: Arc<dyn LogSink>,
        cancel: &Cancel,
        mut result: TaskResult,
    ) -> TaskResult {
        let cfg = &self.config;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &built.namespace);
        let started = Instant::now();
        result.timings.clock_started = Some(started.into_std());
        let overall = cfg.timeout.map(|t| wait::deadline_after(started, t));

        // 1. Reattach or create.
        let mut reattached = None;
        if cfg.reattach
            && let Some(task_id) = &spec.task_id
        {
            match self.find_live(&api, task_id).await {
                Ok(found) => reattached = found,
                Err(err) => return finish_early(result, err),
            }
        }
        // Subscribed before the create, so the shared watch can't miss the pod's first event.
        let mut shared_state = match (&self.shared_watches, &reattached) {
            (Some(shared), None) => Some(shared.subscribe(&built.namespace, &built.name)),
            _ => None,
        };
        let created_pod = if let Some(pod) = reattached {
            built.name = pod.metadata.name.clone().unwrap_or_default();
            built.launch_id = pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LAUNCH_ID_LABEL).cloned())
                .unwrap_or_default();
            built.main_container = pod
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .map(|c| c.name.clone())
                .unwrap_or_default();
            result.pod = built.name.clone();
            result.launch_id = built.launch_id.clone();
            result.main_container = built.main_container.clone();
            result.reattached = true;
            tracing::info!(pod = %built.name, "reattached to the running pod of this task");
            pod
        } else {
            // Panic-guarded too: a create that panicked may still have created the pod.
            let create = catch_panic(create::create_idempotent(&api, &built, &cfg.create));
            tokio::select! {
                created = create => match created {
                    Ok(Ok(c)) => {
                        result.timings.time_to_created_ms =
                            Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
                        result.retries = c.attempts.saturating_sub(1);
                        result.adopted = c.adopted;
                        c.pod
                    }
                    Ok(Err(err)) => return finish_early(result, err),
                    Err(panic) => {
                        tracing::error!(pod = %built.name, panic = %panic, "the create panicked; cleaning up the pod");
                        result.deleted = self.delete_if_ours(&api, &built).await;
                        result.exit_code = exit::LOST;
                        result.error = Some(format!(
                            "internal error while creating pod {}: {panic} (a bug in podline)",
                            built.name
                        ));
                        return result;
                    }
                },
                () = cancel.cancelled() => {
                    // The create may have gone through: delete the pod if it is ours.
                    result.deleted = self.delete_if_ours(&api, &built).await;
                    let err = LaunchError::Interrupted { pod: built.name.clone(), signal: cancel.signal() };
                    return finish_early(result, err);
                }
            }
        };
        result.absorb_pod(&created_pod);

        // 2-5 run under a panic guard: a bug there must not skip step 6 and leave the pod
        // running with nobody watching it (a panic would otherwise unwind past the delete, or,
        // with many tasks, end the task's spawned future with its pod left behind).
        let mut state = shared_state
            .take()
            .unwrap_or_else(|| podwatch::spawn(self.client.clone(), &built.namespace, &built.name));
        let followed = self.follow(
            &built,
            &api,
            &created_pod,
            &mut state,
            sink,
            cancel,
            started,
            overall,
            &mut result,
        );
        if let Err(panic) = catch_panic(followed).await {
            tracing::error!(pod = %built.name, panic = %panic, "the launch panicked; cleaning up the pod");
            result.exit_code = exit::LOST;
            result.error = Some(format!(
                "internal error while following pod {}: {panic} (a bug in podline)",
                built.name
            ));
        }
        let succeeded = result.succeeded();

        // 6. Clean up.
        // A pod that is still pending or running (start failure, timeout, signal) is deleted
        // unless `keep`: a leftover would start or keep running with nobody watching.
        let still_live = !current_pod(&state).as_ref().is_some_and(wait::is_finished);
        let delete = if still_live {
            cfg.on_finish != OnFinish::Keep
        } else {
            cfg.on_finish.should_delete(succeeded)
        };
        if delete && !current_gone(&state) {
            result.deleted =
                cleanup::delete_pod(&api, &built.name, cfg.delete_grace, &cfg.calls).await;
        }
        result
    }

    /// Steps 2 to 5 of a run: await start, follow logs while awaiting completion, collect the
    /// logs, fill the report. Step 6 (the delete) is the caller's, so that it happens even if
    /// this panics.
    #[allow(clippy::too_many_arguments)]
    async fn follow(
        &self,
        built: &BuiltPod,
        api: &Api<Pod>,
        created_pod: &Pod,
        state: &mut watch::Receiver<PodState>,
        sink: Arc<dyn LogSink>,
        cancel: &Cancel,
        started: Instant,
        overall: Option<Instant>,
        result: &mut TaskResult,
    ) {
        let cfg = &self.config;
        // 2. Await start on the pod watch.
        let stop = self.await_start(built, state, cancel, overall).await;
        let mut log_tasks = Vec::new();
        let stop = match stop {
            Some(failure) => failure,
            None => {
                result.timings.time_to_running_ms =
                    Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
                // 3. Follow logs while awaiting completion.
                let containers: Vec<(String, Option<String>)> = match cfg.logs {
                    LogMode::None => vec![],
                    LogMode::Main => vec![(built.main_container.clone(), None)],
                    LogMode::AllContainers => current_pod(state)
                        .as_ref()
                        .or(Some(created_pod))
                        .and_then(|p| p.spec.as_ref())
                        .map(|s| {
                            s.containers
                                .iter()
                                .map(|c| (c.name.clone(), Some(c.name.clone())))
                                .collect()
                        })
                        .unwrap_or_default(),
                };
                for (container, prefix) in containers {
                    log_tasks.push(tokio::spawn(
                        logs::follow(
                            api.clone(),
                            built.name.clone(),
                            container,
                            prefix,
                            sink.clone(),
                            state.clone(),
                            cfg.log.clone(),
                        )
                        .in_current_span(),
                    ));
                }
                self.await_completion(built, state, cancel, overall).await
            }
        };

        // 4. Collect logs (bounded: the follower gives up after post_termination).
        let finished = matches!(stop, Stop::Finished);
        for task in log_tasks {
            if finished {
                if let Ok(n) = task.await {
                    result.log_reconnects += n;
                }
            } else {
                task.abort();
            }
        }

        // 5. Report.
        if let Some(pod) = current_pod(state) {
            result.absorb_pod(&pod);
        }
        match stop {
            Stop::Finished => match result.container_exit_code() {
                Some(code) => result.exit_code = exit::from_container(code),
                None if result.phase == "Succeeded" => result.exit_code = 0,
                None => {
                    result.exit_code = 1;
                    result.error = Some(format!(
                        "pod {} failed without a container exit code (phase {}, reason {})",
                        built.name,
                        result.phase,
                        result.reason.as_deref().unwrap_or("unknown")
                    ));
                }
            },
            Stop::Failed(err) => {
                result.exit_code = err.exit_code();
                result.error = Some(err.to_string());
            }
        }
        if !result.succeeded() {
            self.collect_warnings(built, result).await;
        }
    }

    /// Runs the start state machine on the pod watch. `None` = started.
    async fn await_start(
        &self,
        built: &BuiltPod,
        state: &mut watch::Receiver<PodState>,
        cancel: &Cancel,
        overall: Option<Instant>,
    ) -> Option<Stop> {
        let cfg = &self.config;
        let mut tracker = StartTracker::new(
            &built.name,
            &built.main_container,
            cfg.schedule_timeout,
            cfg.startup_timeout,
            Instant::now(),
        );
        loop {
            // The step reads the pod in place (no clone per event); the channel's read lock is
            // held only for this synchronous block.
            let step = {
                let s = state.borrow_and_update();
                if let Some(message) = &s.fatal {
                    return Some(Stop::Failed(LaunchError::Watch {
                        pod: built.name.clone(),
                        message: message.clone(),
                    }));
                }
                if s.gone {
                    return Some(Stop::Failed(LaunchError::PodGone {
                        pod: built.name.clone(),
                    }));
                }
                s.pod.as_ref().map(|pod| tracker.step(pod, Instant::now()))
            };
            match step {
                Some(StartStep::Started) => return None,
                Some(StartStep::Failed(err)) => return Some(Stop::Failed(err)),
                Some(StartStep::Wait { .. }) | None => {}
            }
            let deadline = tracker
                .deadline()
                .unwrap_or_else(|| wait::deadline_after(Instant::now(), cfg.startup_timeout));
            let deadline = overall.map_or(deadline, |o| o.min(deadline));
            tokio::select! {
                changed = state.changed() => {
                    if changed.is_err() {
                        return Some(Stop::Failed(LaunchError::Watch {
                            pod: built.name.clone(),
                            message: "the pod watch ended".into(),
                        }));
                    }
                }
                () = tokio::time::sleep_until(deadline) => {
                    return Some(Stop::Failed(tracker.timed_out()));
                }
                () = cancel.cancelled() => {
                    return Some(Stop::Failed(LaunchError::Interrupted {
                        pod: built.name.clone(),
                        signal: cancel.signal(),
                    }));
                }
            }
        }
    }

    /// Waits for a terminal phase.
    async fn await_completion(
        &self,
        built: &BuiltPod,
        state: &mut watch::Receiver<PodState>,
        cancel: &Cancel,
        overall: Option<Instant>,
    ) -> Stop {
        loop {
            {
                let s = state.borrow_and_update();
                if s.pod.as_ref().is_some_and(wait::is_finished) {
                    return Stop::Finished;
                }
                if s.gone {
                    return Stop::Failed(LaunchError::PodGone {
                        pod: built.name.clone(),
                    });
                }
                if let Some(message) = &s.fatal {
                    return Stop::Failed(LaunchError::Watch {
                        pod: built.name.clone(),
                        message: message.clone(),
                    });
                }
            }
            let timeout = async {
                match overall {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = state.changed() => {
                    if changed.is_err() {
                        return Stop::Failed(LaunchError::Watch {
                            pod: built.name.clone(),
                            message: "the pod watch ended".into(),
                        });
                    }
                }
                () = timeout => {
                    return Stop::Failed(LaunchError::StartupTimeout {
                        pod: built.name.clone(),
                        timeout: self.config.timeout.unwrap_or_default(),
                        detail: Some("the overall --timeout expired while the task ran".into()),
                    });
                }
                () = cancel.cancelled() => {
                    return Stop::Failed(LaunchError::Interrupted {
                        pod: built.name.clone(),
                        signal: cancel.signal(),
                    });
                }
            }
        }
    }

    /// Finds the live (not finished, not deleting) pod of `task_id`, if exactly one.
    async fn find_live(&self, api: &Api<Pod>, task_id: &str) -> Result<Option<Pod>, LaunchError> {
        let lp = ListParams::default().labels(&format!("{TASK_ID_LABEL}={task_id}"));
        let list =
            podline_client::retry::retry(&self.config.calls, "list task pods", || api.list(&lp))
                .await
                .map_err(|source| LaunchError::Api {
                    action: "listing pods of the task for --reattach",
                    source,
                })?;
        let mut live: Vec<Pod> = list
            .items
            .into_iter()
            .filter(|p| !wait::is_finished(p) && p.metadata.deletion_timestamp.is_none())
            .collect();
        match live.len() {
            0 => Ok(None),
            1 => Ok(live.pop()),
            count => Err(LaunchError::AmbiguousReattach {
                task_id: task_id.to_owned(),
                count,
            }),
        }
    }

    /// After a cancelled create: delete the pod only if it exists and carries our launch id.
    async fn delete_if_ours(&self, api: &Api<Pod>, built: &BuiltPod) -> bool {
        let Ok(Some(pod)) = api.get_opt(&built.name).await else {
            return false;
        };
        let ours = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LAUNCH_ID_LABEL))
            .is_some_and(|id| id == &built.launch_id);
        if !ours || self.config.on_finish == OnFinish::Keep {
            return false;
        }
        cleanup::delete_pod(
            api,
            &built.name,
            self.config.delete_grace,
            &self.config.calls,
        )
        .await
    }

    /// Reads the pod's Warning events into the result (best effort).
    async fn collect_warnings(&self, built: &BuiltPod, result: &mut TaskResult) {
        let events: Api<Event> = Api::namespaced(self.client.clone(), &built.namespace);
        let lp = ListParams::default().fields(&format!("involvedObject.name={}", built.name));
        match tokio::time::timeout(Duration::from_secs(10), events.list(&lp)).await {
            Ok(Ok(list)) => result.absorb_events(&list.items, self.config.warning_events),
            Ok(Err(err)) => tracing::debug!(error = %err, "could not read the pod's events"),
            Err(_) => tracing::debug!("reading the pod's events timed out"),
        }
    }
}

/// Awaits `fut`, turning a panic inside it into `Err(message)` instead of unwinding, so the
/// caller can still clean up. This needs `panic = "unwind"` (Rust's default, which the workspace
/// keeps: no profile sets `panic = "abort"`); under abort the process would die at once and
/// `activeDeadlineSeconds` would be the only backstop.
async fn catch_panic<T>(fut: impl Future<Output = T>) -> Result<T, String> {
    use futures::FutureExt as _;
    std::panic::AssertUnwindSafe(fut)
        .catch_unwind()
        .await
        .map_err(|payload| {
            payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panicked".to_owned())
        })
}

/// A failure before the pod existed (or with nothing to watch).
fn finish_early(mut result: TaskResult, err: LaunchError) -> TaskResult {
    result.exit_code = err.exit_code();
    result.error = Some(err.to_string());
    result
}

fn current_pod(state: &watch::Receiver<PodState>) -> Option<Pod> {
    state.borrow().pod.clone()
}

fn current_gone(state: &watch::Receiver<PodState>) -> bool {
    state.borrow().gone
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guard around steps 2-5 turns a panic into an error, so step 6 (the delete) still runs.
    #[tokio::test]
    async fn a_panic_in_the_guarded_steps_should_come_back_as_an_error() {
        assert_eq!(catch_panic(async { 5 }).await, Ok(5));
        let n = 3;
        let formatted = catch_panic(async move {
            if n == 3 {
                panic!("step {n} broke");
            }
        })
        .await;
        assert_eq!(formatted, Err("step 3 broke".to_owned()));
        let literal = catch_panic(async {
            tokio::task::yield_now().await;
            panic!("after an await")
        })
        .await;
        assert_eq!(literal, Err::<(), _>("after an await".to_owned()));
    }
}
