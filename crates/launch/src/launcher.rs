//! [`Launcher`]: one task from spec to exit code — create, await start, follow logs, await
//! completion, report, clean up — with cancellation (SIGINT/SIGTERM) and an overall timeout.

use podline_phase::Phase;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::ListParams;
use podline_client::list::Pages;
use podline_client::retry::RetryPolicy;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::cleanup::{self, OnFinish};
use crate::create;
use crate::error::{ErrorKind, LaunchError};
use crate::exit;
use crate::liveness::{LAUNCHER_LABEL, Liveness, ON_FINISH_ANNOTATION};
use crate::logs::{self, LogConfig, LogSink};
use crate::podwatch::{self, PodState, SharedPodWatches};
use crate::report::TaskResult;
use crate::selection::{self, Lifecycle, LogSelection};
use crate::spec::{BuiltPod, LAUNCH_ID_LABEL, TASK_ID_LABEL, TaskSpec};
use crate::wait::{self, StartStep, StartTracker};
use crate::xcom;

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

pub use crate::cancel::CancelReason;

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
    /// With [`LogMode::Main`] or [`LogMode::AllContainers`]: follow these containers instead
    /// (chosen by name, init containers first; see [`crate::selection`]). `None`: as the mode
    /// says.
    pub log_selection: Option<LogSelection>,
    /// With a task id: attach to its live pod instead of creating a second one.
    pub reattach: bool,
    /// How many Warning events a failure report shows.
    pub warning_events: usize,
    /// A finalizer every pod gets at its create (`None`: none), so the API server keeps the
    /// deleted pod until a recorder has committed its final state and removed it
    /// ([`podline_client::finalizer::RECORD_FINALIZER`]). The launcher never waits for that: its
    /// delete returns as soon as the pod is marked for deletion.
    pub finalizer: Option<String>,
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
            log_selection: None,
            reattach: false,
            warning_events: 5,
            finalizer: None,
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
    /// Set by [`Launcher::with_liveness`]: the Lease that owns this launcher's pods.
    liveness: Option<Arc<Liveness>>,
    /// Set by [`Launcher::with_exec_client`]: the client for `pods/exec` (WebSocket upgrades
    /// need HTTP/1.1); without it, `client`.
    exec_client: Option<kube::Client>,
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

    /// Why it was cancelled (None: not cancelled). The first reason given wins.
    pub fn reason(&self) -> Option<CancelReason> {
        self.reason.get().copied()
    }

    /// The reason an interrupted run reports: the one given, SIGTERM if none was.
    fn reason_or_terminate(&self) -> CancelReason {
        self.reason().unwrap_or(CancelReason::Terminate)
    }
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
            liveness: None,
            exec_client: None,
        }
    }

    /// This launcher, making its `pods/exec` calls (the XCom sidecar's read, [`crate::xcom`])
    /// with `client`: an API server upgrades only HTTP/1.1 requests to WebSocket, so a launcher
    /// whose main client speaks HTTP/2 needs an HTTP/1.1 one for them.
    pub fn with_exec_client(&self, client: kube::Client) -> Self {
        Self {
            exec_client: Some(client),
            ..self.clone()
        }
    }

    /// This launcher, with its pods owned by `liveness`'s Lease (label, annotation and
    /// `ownerReference`, see [`crate::liveness`]), so that a reaper deletes them if this process
    /// dies without cleaning up. A reattached pod is re-pointed at this Lease.
    pub fn with_liveness(&self, liveness: Arc<Liveness>) -> Self {
        Self {
            liveness: Some(liveness),
            ..self.clone()
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
                    reason: cancel.reason_or_terminate(),
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

    /// A launch as a sequence of stages, each a method with one job:
    ///
    /// 1. [`Self::obtain_pod`]: reattach to the task's live pod, or create one (subscribed to
    ///    the shared watch first, when there is one);
    /// 2. [`Self::follow`]: await the start, follow the logs while awaiting the completion,
    ///    report; under a panic guard, so that
    /// 3. [`Self::clean_up`]: the delete runs whatever happened in 2.
    async fn run_built(
        &self,
        mut built: BuiltPod,
        spec: &TaskSpec,
        sink: Arc<dyn LogSink>,
        cancel: &Cancel,
        mut result: TaskResult,
    ) -> TaskResult {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &built.namespace);
        let started = Instant::now();
        result.timings.clock_started = Some(started.into_std());
        let overall = self.config.timeout.map(|timeout| Overall {
            at: wait::deadline_after(started, timeout),
            timeout,
        });

        let Some((pod, subscribed)) = self
            .obtain_pod(&api, &mut built, spec, cancel, started, &mut result)
            .await
        else {
            return result;
        };
        let event = if result.reattached {
            Lifecycle::Reattached
        } else {
            Lifecycle::Created
        };
        sink.lifecycle(event, Some(&pod));
        let mut state = subscribed
            .unwrap_or_else(|| podwatch::spawn(self.client.clone(), &built.namespace, &built.name));

        // A bug in `follow` must not skip the clean-up and leave the pod running with nobody
        // watching it (a panic would otherwise unwind past the delete, or, with many tasks, end
        // the task's spawned future with its pod left behind).
        let run = Run {
            built: &built,
            api: &api,
            started,
            overall,
        };
        let followed = self.follow(&run, &pod, &mut state, sink.clone(), cancel, &mut result);
        if let Err(panic) = catch_panic(followed).await {
            tracing::error!(pod = %built.name, panic = %panic, "the launch panicked; cleaning up the pod");
            result.exit_code = exit::LOST;
            result.error = Some(format!(
                "internal error while following pod {}: {panic} (a bug in podline)",
                built.name
            ));
        }
        sink.lifecycle(Lifecycle::Teardown, current_pod(&state).as_ref());
        self.clean_up(&run, &state, &mut result).await;
        sink.lifecycle(Lifecycle::Cleanup, current_pod(&state).as_ref());
        result
    }

    /// Stage 1: the pod to follow, reattached or created, and (with shared watches) its state
    /// channel, subscribed before the create so the shared watch cannot miss the pod's first
    /// event. `None` when the run ends here; `result` then says why.
    async fn obtain_pod(
        &self,
        api: &Api<Pod>,
        built: &mut BuiltPod,
        spec: &TaskSpec,
        cancel: &Cancel,
        started: Instant,
        result: &mut TaskResult,
    ) -> Option<(Pod, Option<watch::Receiver<PodState>>)> {
        // Every stage before the create is raced with the cancel too (issue 27): a SIGTERM while
        // the API server holds or refuses the lookup or the Lease's create ends the run at once,
        // with nothing created yet.
        let reattached = match (self.config.reattach, &spec.task_id) {
            (true, Some(task_id)) => {
                let found = tokio::select! {
                    found = self.find_live(api, task_id) => found,
                    () = cancel.cancelled() => Err(interrupted(&built.name, cancel)),
                };
                match found {
                    Ok(found) => found,
                    Err(err) => {
                        fail(result, err);
                        return None;
                    }
                }
            }
            _ => None,
        };
        if let Some(mut pod) = reattached {
            if let Err(err) = self.repoint(api, &mut pod).await {
                fail(result, err);
                return None;
            }
            adopt_reattached(built, &pod, result);
            result.absorb_pod(&pod);
            // Watched alone (see `sharing_pod_watches`).
            return Some((pod, None));
        }
        let name = built.name.clone();
        let marked = tokio::select! {
            marked = self.mark(built) => marked,
            () = cancel.cancelled() => Err(interrupted(&name, cancel)),
        };
        if let Err(err) = marked {
            fail(result, err);
            return None;
        }
        let subscribed = self
            .shared_watches
            .as_ref()
            .map(|shared| shared.subscribe(&built.namespace, &built.name));
        let pod = self.create(api, built, cancel, started, result).await?;
        result.absorb_pod(&pod);
        Some((pod, subscribed))
    }

    /// Creates the pod (idempotent, retried). On a cancel or a panic during the create, the
    /// pod is deleted if it is ours, as the create may have gone through.
    async fn create(
        &self,
        api: &Api<Pod>,
        built: &BuiltPod,
        cancel: &Cancel,
        started: Instant,
        result: &mut TaskResult,
    ) -> Option<Pod> {
        // Panic-guarded too: a create that panicked may still have created the pod.
        let create = catch_panic(create::create_idempotent(api, built, &self.config.create));
        tokio::select! {
            created = create => match created {
                Ok(Ok(c)) => {
                    result.timings.time_to_created_ms = Some(elapsed_ms(started));
                    result.retries = c.attempts.saturating_sub(1);
                    result.adopted = c.adopted;
                    Some(c.pod)
                }
                Ok(Err(err)) => {
                    fail(result, err);
                    None
                }
                Err(panic) => {
                    tracing::error!(pod = %built.name, panic = %panic, "the create panicked; cleaning up the pod");
                    result.deleted = self.delete_if_ours(api, built).await;
                    result.exit_code = exit::LOST;
                    result.error = Some(format!(
                        "internal error while creating pod {}: {panic} (a bug in podline)",
                        built.name
                    ));
                    None
                }
            },
            () = cancel.cancelled() => {
                result.deleted = self.delete_if_ours(api, built).await;
                let err = interrupted(&built.name, cancel);
                fail(result, err);
                None
            }
        }
    }

    /// Stage 2: await the start, follow the logs while awaiting the completion, collect the
    /// logs, fill the report. The delete is the caller's ([`Self::clean_up`]), so that it
    /// happens even if this panics.
    async fn follow(
        &self,
        run: &Run<'_>,
        pod: &Pod,
        state: &mut watch::Receiver<PodState>,
        sink: Arc<dyn LogSink>,
        cancel: &Cancel,
        result: &mut TaskResult,
    ) {
        let built = run.built;
        let mut starting = AwaitStart {
            pod: &built.name,
            tracker: StartTracker::new(
                &built.name,
                &built.main_container,
                self.config.schedule_timeout,
                self.config.startup_timeout,
                Instant::now(),
            ),
            overall: run.overall,
        };
        let mut outcome = await_stage(&mut starting, &built.name, state, cancel).await;
        if outcome.is_ok() {
            result.timings.time_to_running_ms = Some(elapsed_ms(run.started));
            sink.lifecycle(
                Lifecycle::Started,
                current_pod(state).as_ref().or(Some(pod)),
            );
            let followers = self
                .follow_logs(run, pod, state, sink.clone(), cancel)
                .await;
            let mut running = AwaitCompletion {
                pod: &built.name,
                main: &built.main_container,
                overall: run.overall,
            };
            outcome = await_stage(&mut running, &built.name, state, cancel).await;
            if outcome.is_ok() {
                sink.lifecycle(Lifecycle::Completed, current_pod(state).as_ref());
                if xcom::has_sidecar(pod) {
                    self.read_xcom(run, state, result).await;
                }
                settle(&built.name, state, cancel).await;
            }
            result.log_reconnects += collect_logs(followers, state, outcome.is_ok()).await;
        }
        self.report(built, state, outcome, result).await;
    }

    /// Reads KubernetesPodOperator's XCom value through the pod's sidecar into the result
    /// ([`crate::xcom::extract`], which then stops the sidecar), once the main container has
    /// terminated; a sidecar that already terminated has nothing to read (KPO fails then too).
    async fn read_xcom(
        &self,
        run: &Run<'_>,
        state: &watch::Receiver<PodState>,
        result: &mut TaskResult,
    ) {
        let name = &run.built.name;
        let sidecar_gone = current_pod(state).is_some_and(|p| {
            !wait::container_running(&p, xcom::SIDECAR_CONTAINER)
                && wait::container_terminated(&p, xcom::SIDECAR_CONTAINER)
        });
        if sidecar_gone {
            result.xcom_error = Some(format!(
                "the XCom sidecar {} of pod {name} terminated before its value was read",
                xcom::SIDECAR_CONTAINER
            ));
            return;
        }
        let client = self
            .exec_client
            .clone()
            .unwrap_or_else(|| self.client.clone());
        let api: Api<Pod> = Api::namespaced(client, &run.built.namespace);
        match xcom::extract(&api, name).await {
            Ok(value) => result.xcom = value,
            Err(err) => {
                tracing::warn!(pod = %name, error = %err, "could not read the XCom value");
                result.xcom_error = Some(err.to_string());
            }
        }
    }

    /// Starts one log follower per container the [`LogMode`] (or the configured
    /// [`LogSelection`]) asks for; with init containers chosen, first reads their logs whole,
    /// one after the other (they have all terminated once the pod started), so they come
    /// before the others'. A cancel ends that read early; the caller's next stage sees it.
    async fn follow_logs(
        &self,
        run: &Run<'_>,
        pod: &Pod,
        state: &watch::Receiver<PodState>,
        sink: Arc<dyn LogSink>,
        cancel: &Cancel,
    ) -> Vec<(String, JoinHandle<u32>)> {
        let built = run.built;
        let selection = match (self.config.logs, &self.config.log_selection) {
            (LogMode::None, _) => return vec![],
            (_, Some(selection)) => selection.clone(),
            (LogMode::Main, None) => LogSelection::default(),
            (LogMode::AllContainers, None) => LogSelection {
                containers: selection::Containers::All,
                init_containers: selection::Containers::None,
            },
        };
        let latest = current_pod(state);
        let plan = selection::plan(
            &selection,
            latest.as_ref().unwrap_or(pod),
            &built.main_container,
        );
        for name in &plan.missing {
            tracing::warn!(pod = %built.name, container = %name, "the pod has no container of this name; its logs are not followed");
        }
        let spawn = |container: &String| {
            let follower = tokio::spawn(
                logs::follow(
                    run.api.clone(),
                    built.name.clone(),
                    container.clone(),
                    plan.prefixed.then(|| container.clone()),
                    sink.clone(),
                    state.clone(),
                    self.config.log.clone(),
                )
                .in_current_span(),
            );
            (container.clone(), follower)
        };
        let seen = latest.as_ref().unwrap_or(pod);
        for container in &plan.init_first {
            // Once the pod has started, every init container that is not a sidecar has run to
            // its end; one without a terminated status has not run at all (nothing to read).
            if !init_terminated(seen, container) {
                tracing::warn!(pod = %built.name, container = %container, "the init container has no terminated status; its log is not read");
                continue;
            }
            let (_, mut follower) = spawn(container);
            tokio::select! {
                _ = &mut follower => {}
                () = cancel.cancelled() => {
                    follower.abort();
                    return vec![];
                }
            }
        }
        plan.concurrent.iter().map(spawn).collect()
    }

    /// Fills the result from the pod's last state and how the run ended: the main container's
    /// exit code after a completion, the error's code otherwise; Warning events on failure.
    async fn report(
        &self,
        built: &BuiltPod,
        state: &watch::Receiver<PodState>,
        outcome: Result<(), LaunchError>,
        result: &mut TaskResult,
    ) {
        if let Some(pod) = current_pod(state) {
            result.absorb_pod(&pod);
        }
        let outcome_kind = outcome.as_ref().err().map(LaunchError::kind);
        match outcome {
            Ok(()) => match result.container_exit_code() {
                Some(code) => result.exit_code = exit::from_container(code),
                None if result.phase == Phase::Succeeded.as_str() => result.exit_code = 0,
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
            Err(err) => {
                result.exit_code = err.exit_code();
                result.error = Some(err.to_string());
            }
        }
        if !result.succeeded()
            && let Some(lease) = self.lease_lost(built, state, &outcome_kind).await
        {
            let err = LaunchError::LeaseLost {
                pod: built.name.clone(),
                lease,
            };
            result.exit_code = err.exit_code();
            result.error_kind = Some(err.kind());
            result.error = Some(err.to_string());
        }
        if !result.succeeded() {
            self.collect_warnings(built, result).await;
        }
    }

    /// The Lease (`namespace/name`) whose loss explains a failed run: the pod vanished
    /// ([`ErrorKind::PodGone`]) or ended while being deleted (killed by its deletion, e.g.
    /// exit code 137), and this launcher's Lease in the pod's namespace is gone (a reaper
    /// deleted it, as it does before the pods). Nothing for other failures, for a cancelled
    /// run, or without a Lease.
    async fn lease_lost(
        &self,
        built: &BuiltPod,
        state: &watch::Receiver<PodState>,
        outcome: &Option<ErrorKind>,
    ) -> Option<String> {
        let liveness = self.liveness.as_ref()?;
        let deleted_under_us = match outcome {
            Some(ErrorKind::PodGone) => true,
            None => current_pod(state).is_some_and(|p| p.metadata.deletion_timestamp.is_some()),
            Some(_) => false,
        };
        if !deleted_under_us {
            return None;
        }
        liveness.lost_in(&built.namespace).await
    }

    /// Stage 3: a pod that is still pending or running (start failure, timeout, signal, a
    /// panic) is deleted unless `keep`, as a leftover would start or keep running with nobody
    /// watching; a finished one as `on_finish` says.
    async fn clean_up(
        &self,
        run: &Run<'_>,
        state: &watch::Receiver<PodState>,
        result: &mut TaskResult,
    ) {
        let cfg = &self.config;
        let main = &run.built.main_container;
        let still_live = !current_pod(state)
            .as_ref()
            .is_some_and(|p| wait::main_terminated(p, main));
        let delete = if still_live {
            cfg.on_finish != OnFinish::Keep
        } else {
            cfg.on_finish.should_delete(result.succeeded())
        };
        if delete && !current_gone(state) {
            result.deleted =
                cleanup::delete_pod(run.api, &run.built.name, cfg.delete_grace, &cfg.calls).await;
        } else if !delete && !current_gone(state) {
            self.disown(run.api, current_pod(state).as_ref()).await;
        }
    }

    /// Before the create: the pod gets the configured finalizer, this launcher's label and,
    /// unless the task keeps its pod whatever happens (`keep`, also said by an annotation the
    /// reaper reads), an `ownerReference` to the Lease (created here on the namespace's first
    /// pod).
    async fn mark(&self, built: &mut BuiltPod) -> Result<(), LaunchError> {
        if let Some(finalizer) = &self.config.finalizer {
            let finalizers = built.pod.metadata.finalizers.get_or_insert_default();
            if !finalizers.contains(finalizer) {
                finalizers.push(finalizer.clone());
            }
        }
        let Some(liveness) = &self.liveness else {
            return Ok(());
        };
        let meta = &mut built.pod.metadata;
        meta.labels
            .get_or_insert_default()
            .insert(LAUNCHER_LABEL.to_owned(), liveness.name().to_owned());
        if self.config.on_finish == OnFinish::Keep {
            meta.annotations
                .get_or_insert_default()
                .insert(ON_FINISH_ANNOTATION.to_owned(), "keep".to_owned());
            return Ok(());
        }
        let owner = liveness.owner_in(&built.namespace).await?;
        built
            .pod
            .metadata
            .owner_references
            .get_or_insert_default()
            .push(owner);
        Ok(())
    }

    /// After a reattach: the pod's label and `ownerReference` are moved from the dead
    /// launcher's Lease to this one's, so the reaper of the old Lease leaves the pod alone.
    async fn repoint(&self, api: &Api<Pod>, pod: &mut Pod) -> Result<(), LaunchError> {
        let Some(liveness) = &self.liveness else {
            return Ok(());
        };
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let mut owners = foreign_owners(pod);
        if self.config.on_finish != OnFinish::Keep {
            owners.push(liveness.owner_in(&namespace).await?);
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let patch = serde_json::json!({
            "metadata": {
                "labels": { LAUNCHER_LABEL: liveness.name() },
                "ownerReferences": owners,
            }
        });
        let (params, patch) = (
            kube::api::PatchParams::default(),
            kube::api::Patch::Merge(&patch),
        );
        // On the way to the pod, like the create: the create's budget (issue 27).
        let patched = podline_client::retry::retry(&self.config.create, "re-own the pod", || {
            api.patch(&name, &params, &patch)
        })
        .await
        .map_err(|source| LaunchError::Api {
            action: "moving the reattached pod to this launcher's Lease",
            source,
        })?;
        *pod = patched;
        Ok(())
    }

    /// A pod kept at the end loses its reference to the Lease, so that deleting the Lease does
    /// not collect it. Best effort: on failure the pod is collected (and a warning says so).
    async fn disown(&self, api: &Api<Pod>, pod: Option<&Pod>) {
        let (Some(liveness), Some(pod)) = (&self.liveness, pod) else {
            return;
        };
        let owned = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "Lease" && o.name == liveness.name());
        if !owned {
            return;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let patch = serde_json::json!({ "metadata": { "ownerReferences": foreign_owners(pod) } });
        let (params, patch) = (
            kube::api::PatchParams::default(),
            kube::api::Patch::Merge(&patch),
        );
        let patched = podline_client::retry::retry(&self.config.calls, "disown the pod", || {
            api.patch(&name, &params, &patch)
        })
        .await;
        if let Err(err) = patched {
            tracing::warn!(pod = %name, error = %err, "could not detach the kept pod from the launcher's Lease; it will be deleted with the Lease");
        }
    }

    /// Finds the live (not finished, not deleting) pod of `task_id`, if exactly one. The lookup
    /// stands in for the create (it decides whether one happens), so it retries on the create's
    /// budget: with the API answering 503, a task must not give up sooner because it reattaches
    /// (issue 27: the unary calls' budget gave up after about 3.5 s, the create's after 40).
    async fn find_live(&self, api: &Api<Pod>, task_id: &str) -> Result<Option<Pod>, LaunchError> {
        find_live_task_pod(api, task_id, &self.config.create).await
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
        let once = RetryPolicy::default().with_max_attempts(1);
        let list = Pages::objects(&events, lp).all(&once, "list the pod's events");
        match tokio::time::timeout(Duration::from_secs(10), list).await {
            Ok(Ok(list)) => result.absorb_events(&list.items, self.config.warning_events),
            Ok(Err(err)) => tracing::debug!(error = %err, "could not read the pod's events"),
            Err(_) => tracing::debug!("reading the pod's events timed out"),
        }
    }
}

/// What every stage of one launch refers to once the pod is known.
struct Run<'a> {
    built: &'a BuiltPod,
    api: &'a Api<Pod>,
    /// When the launch began (the timings count from here).
    started: Instant,
    /// The overall timeout, if any.
    overall: Option<Overall>,
}

/// A run's overall timeout and the instant it expires.
#[derive(Debug, Clone, Copy)]
struct Overall {
    at: Instant,
    timeout: Duration,
}

/// A stage that waits on the pod's state channel; [`await_stage`] drives it.
trait Awaited {
    /// What the latest state means: `None` to keep waiting, else how the stage ended.
    fn judge(&mut self, state: &PodState) -> Option<Result<(), LaunchError>>;
    /// When waiting gives up (None: never).
    fn deadline(&self) -> Option<Instant>;
    /// The failure once [`Awaited::deadline`] passed.
    fn expired(&self) -> LaunchError;
}

/// Waiting for the pod to start: the [`StartTracker`] under the run's overall timeout.
struct AwaitStart<'a> {
    pod: &'a str,
    tracker: StartTracker,
    overall: Option<Overall>,
}

impl Awaited for AwaitStart<'_> {
    fn judge(&mut self, state: &PodState) -> Option<Result<(), LaunchError>> {
        if let Some(err) = lost(self.pod, state) {
            return Some(Err(err));
        }
        match self.tracker.step(state.pod.as_ref()?, Instant::now()) {
            StartStep::Started => Some(Ok(())),
            StartStep::Failed(err) => Some(Err(err)),
            StartStep::Wait { .. } => None,
        }
    }

    fn deadline(&self) -> Option<Instant> {
        earliest(self.tracker.deadline(), self.overall.map(|o| o.at))
    }

    fn expired(&self) -> LaunchError {
        match self.overall {
            Some(o) if self.tracker.deadline().is_none_or(|d| o.at <= d) => {
                LaunchError::TimeoutBeforeStart {
                    pod: self.pod.to_owned(),
                    timeout: o.timeout,
                    detail: self.tracker.detail().map(str::to_owned),
                }
            }
            _ => self.tracker.timed_out(),
        }
    }
}

/// Waiting for a started pod's main container to terminate (as KubernetesPodOperator judges a
/// task: [`wait::main_terminated`]), under the run's overall timeout.
struct AwaitCompletion<'a> {
    pod: &'a str,
    main: &'a str,
    overall: Option<Overall>,
}

impl Awaited for AwaitCompletion<'_> {
    fn judge(&mut self, state: &PodState) -> Option<Result<(), LaunchError>> {
        if state
            .pod
            .as_ref()
            .is_some_and(|p| wait::main_terminated(p, self.main))
        {
            return Some(Ok(()));
        }
        lost(self.pod, state).map(Err)
    }

    fn deadline(&self) -> Option<Instant> {
        self.overall.map(|o| o.at)
    }

    fn expired(&self) -> LaunchError {
        LaunchError::TimeoutWhileRunning {
            pod: self.pod.to_owned(),
            timeout: self.overall.map(|o| o.timeout).unwrap_or_default(),
        }
    }
}

/// How long, once the main container has terminated, the launcher waits for the pod itself to
/// finish (its other containers ending, an XCom sidecar stopped) so that the report shows the
/// pod's final phase; a sidecar that outlives it does not hold the task.
const SETTLE: Duration = Duration::from_secs(5);

/// Waiting, briefly, for the pod to reach a final phase after its main container terminated.
struct AwaitSettled<'a> {
    pod: &'a str,
    until: Instant,
}

impl Awaited for AwaitSettled<'_> {
    fn judge(&mut self, state: &PodState) -> Option<Result<(), LaunchError>> {
        if state.pod.as_ref().is_some_and(wait::is_finished) {
            return Some(Ok(()));
        }
        lost(self.pod, state).map(Err)
    }

    fn deadline(&self) -> Option<Instant> {
        Some(self.until)
    }

    fn expired(&self) -> LaunchError {
        // Not a failure: the caller ignores how this stage ended.
        LaunchError::Watch {
            pod: self.pod.to_owned(),
            message: "the pod did not finish after its main container".into(),
        }
    }
}

/// Waits up to [`SETTLE`] for the pod to finish once its main container has; the task's
/// outcome is already decided (the main container's), so how this ends does not matter.
async fn settle(pod: &str, state: &mut watch::Receiver<PodState>, cancel: &Cancel) {
    let mut settling = AwaitSettled {
        pod,
        until: Instant::now() + SETTLE,
    };
    if await_stage(&mut settling, pod, state, cancel)
        .await
        .is_err()
    {
        tracing::debug!(
            pod,
            "the main container terminated; other containers are still running"
        );
    }
}

/// The one wait loop of a launch: judges each new state of the pod until the stage ends, its
/// deadline passes, the watch ends or the run is cancelled.
async fn await_stage(
    stage: &mut impl Awaited,
    pod: &str,
    state: &mut watch::Receiver<PodState>,
    cancel: &Cancel,
) -> Result<(), LaunchError> {
    loop {
        // The stage reads the pod in place (no clone per event); the channel's read lock is
        // held only for this synchronous call.
        if let Some(ended) = stage.judge(&state.borrow_and_update()) {
            return ended;
        }
        let deadline = stage.deadline();
        let expiry = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = state.changed() => {
                if changed.is_err() {
                    return Err(LaunchError::Watch {
                        pod: pod.to_owned(),
                        message: "the pod watch ended".into(),
                    });
                }
            }
            () = expiry => return Err(stage.expired()),
            () = cancel.cancelled() => return Err(interrupted(pod, cancel)),
        }
    }
}

/// Why the pod can no longer be followed, if it can't: the watch failed for good, or the pod is
/// gone.
fn lost(pod: &str, state: &PodState) -> Option<LaunchError> {
    if let Some(message) = &state.fatal {
        return Some(LaunchError::Watch {
            pod: pod.to_owned(),
            message: message.clone(),
        });
    }
    state.gone.then(|| LaunchError::PodGone {
        pod: pod.to_owned(),
    })
}

/// The earlier of two optional instants.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn interrupted(pod: &str, cancel: &Cancel) -> LaunchError {
    LaunchError::Interrupted {
        pod: pod.to_owned(),
        reason: cancel.reason_or_terminate(),
    }
}

/// Milliseconds since `started`, for the timings.
fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Takes the reattached pod's name, launch id and main container as this run's.
fn adopt_reattached(built: &mut BuiltPod, pod: &Pod, result: &mut TaskResult) {
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
}

/// Whether `pod`'s init container `name` has terminated (a status says so).
fn init_terminated(pod: &Pod, name: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.init_container_statuses.as_ref())
        .into_iter()
        .flatten()
        .any(|cs| cs.name == name && cs.state.as_ref().is_some_and(|s| s.terminated.is_some()))
}

/// Waits for the log followers of terminated containers after a completion (bounded: a
/// follower gives up after `post_termination`), and stops the others (a sidecar still running
/// once the main container is done) and every follower after a failure; returns their
/// reconnects.
async fn collect_logs(
    followers: Vec<(String, JoinHandle<u32>)>,
    state: &watch::Receiver<PodState>,
    finished: bool,
) -> u32 {
    let pod = current_pod(state);
    let mut reconnects = 0;
    for (container, follower) in followers {
        let done = pod
            .as_ref()
            .is_some_and(|p| wait::container_terminated(p, &container));
        if finished && done {
            if let Ok(n) = follower.await {
                reconnects += n;
            }
        } else {
            follower.abort();
        }
    }
    reconnects
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
    fail(&mut result, err);
    result
}

/// Records `err` as how the run ended.
fn fail(result: &mut TaskResult, err: LaunchError) {
    result.exit_code = err.exit_code();
    result.error_kind = Some(err.kind());
    result.error = Some(err.to_string());
}

/// The pod's owner references that are not podline launcher Leases.
fn foreign_owners(
    pod: &Pod,
) -> Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|o| {
            !(o.kind == "Lease"
                && o.api_version == "coordination.k8s.io/v1"
                && o.name.starts_with("podline-launcher-"))
        })
        .cloned()
        .collect()
}

fn current_pod(state: &watch::Receiver<PodState>) -> Option<Pod> {
    state.borrow().pod.clone()
}

fn current_gone(state: &watch::Receiver<PodState>) -> bool {
    state.borrow().gone
}

/// The task's one live (not finished, not deleting) pod, if any, found by its task-id label: what
/// a reattach takes over. Item by item (a pod of the task that does not decode is logged and
/// skipped, since nothing of it could be followed), retried on `policy`; two live pods are
/// [`LaunchError::AmbiguousReattach`]. Shared by the launcher and Airflow's deferred start.
pub async fn find_live_task_pod(
    api: &Api<Pod>,
    task_id: &str,
    policy: &RetryPolicy,
) -> Result<Option<Pod>, LaunchError> {
    let lp = ListParams::default().labels(&format!("{TASK_ID_LABEL}={task_id}"));
    // A pod of the task that does not decode is logged and skipped, not the lookup's failure:
    // it cannot be reattached to (nothing of it could be followed) and is left alone.
    let list = Pages::objects(api, lp)
        .all(policy, "list task pods")
        .await
        .map_err(|source| LaunchError::Api {
            action: "listing pods of the task to reattach to",
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The guard around `follow` turns a panic into an error, so `clean_up` still runs.
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

    fn pod(phase: &str) -> Pod {
        Pod {
            status: Some(k8s_openapi::api::core::v1::PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A pod's state channel; the test keeps the sender open, as the feed does while the pod
    /// is followed.
    fn channel(phase: &str) -> (watch::Sender<PodState>, watch::Receiver<PodState>) {
        watch::channel(PodState {
            pod: Some(pod(phase)),
            ..PodState::default()
        })
    }

    fn starting(schedule: u64, overall: Option<u64>) -> AwaitStart<'static> {
        let now = Instant::now();
        AwaitStart {
            pod: "p",
            tracker: StartTracker::new(
                "p",
                "task",
                Duration::from_secs(schedule),
                Duration::from_secs(schedule),
                now,
            ),
            overall: overall.map(|secs| Overall {
                at: now + Duration::from_secs(secs),
                timeout: Duration::from_secs(secs),
            }),
        }
    }

    fn running(overall: u64) -> AwaitCompletion<'static> {
        AwaitCompletion {
            pod: "p",
            main: "task",
            overall: Some(Overall {
                at: Instant::now() + Duration::from_secs(overall),
                timeout: Duration::from_secs(overall),
            }),
        }
    }

    /// The overall timeout passing while the pod is pending is a start failure that names the
    /// overall timeout, not the schedule timeout it did not reach.
    #[tokio::test(start_paused = true)]
    async fn an_overall_timeout_before_the_start_should_say_the_pod_did_not_start() {
        let t0 = Instant::now();
        let (_tx, mut state) = channel("Pending");
        let ended = await_stage(&mut starting(60, Some(5)), "p", &mut state, &Cancel::new()).await;
        assert_eq!(Instant::now() - t0, Duration::from_secs(5));
        let err = ended.unwrap_err();
        assert!(
            matches!(err, LaunchError::TimeoutBeforeStart { .. }),
            "{err:?}"
        );
        assert_eq!(err.exit_code(), exit::START_FAILED);
    }

    /// A schedule timeout shorter than the overall one is still the schedule timeout.
    #[tokio::test(start_paused = true)]
    async fn the_start_stages_own_timeout_should_win_when_it_comes_first() {
        let (_tx, mut state) = channel("Pending");
        let ended = await_stage(&mut starting(2, Some(60)), "p", &mut state, &Cancel::new()).await;
        let err = ended.unwrap_err();
        assert!(
            matches!(err, LaunchError::ScheduleTimeout { .. }),
            "{err:?}"
        );
    }

    /// The overall timeout passing while the pod runs is a timeout of the run (exit 124), not a
    /// start failure.
    #[tokio::test(start_paused = true)]
    async fn an_overall_timeout_after_the_start_should_be_a_timeout_while_running() {
        let t0 = Instant::now();
        let (_tx, mut state) = channel("Running");
        let cancel = Cancel::new();
        assert!(
            await_stage(&mut starting(60, Some(5)), "p", &mut state, &cancel)
                .await
                .is_ok()
        );
        let err = await_stage(&mut running(5), "p", &mut state, &cancel)
            .await
            .unwrap_err();
        assert_eq!(Instant::now() - t0, Duration::from_secs(5));
        assert!(
            matches!(err, LaunchError::TimeoutWhileRunning { .. }),
            "{err:?}"
        );
        assert_eq!(err.exit_code(), exit::TIMED_OUT);
        assert!(err.to_string().contains("still running"), "{err}");
    }

    /// A finished pod ends the completion stage at once; a cancel ends it with the signal's code.
    #[tokio::test(start_paused = true)]
    async fn the_completion_stage_should_end_on_a_finished_pod_or_a_cancel() {
        let cancel = Cancel::new();
        let (_done, mut done) = channel("Succeeded");
        assert!(
            await_stage(&mut running(5), "p", &mut done, &cancel)
                .await
                .is_ok()
        );
        cancel.cancel(CancelReason::Interrupt);
        cancel.cancel(CancelReason::Terminate);
        assert_eq!(
            cancel.reason(),
            Some(CancelReason::Interrupt),
            "the first reason wins"
        );
        let (_live, mut live) = channel("Running");
        let err = await_stage(&mut running(5), "p", &mut live, &cancel)
            .await
            .unwrap_err();
        assert_eq!(err.exit_code(), exit::SIGINT);
        assert_eq!(CancelReason::Terminate.exit_code(), exit::SIGTERM);
    }
}
