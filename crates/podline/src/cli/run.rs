//! `podline run`: run a command as a Kubernetes pod, stream its logs, exit with its exit code.
//!
//! Flags build a [`TaskSpec`]; the knobs build a [`LaunchConfig`]; [`podline_launch::Launcher`]
//! does the work. SIGINT/SIGTERM cancel the run: the pod is deleted and podline exits 130/143.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use podline_launch::{
    Cancel, CancelReason, ErrorKind, LaunchConfig, Launcher, LogConfig, LogMode, LogSink, OnFinish,
    PullPolicy, StdoutSink, TaskResult, TaskSpec, spec,
};

use crate::cli::duration;
use crate::cli::exit::{self, usage};
use crate::cli::result_file::ResultFile;
use crate::cli::run_logs::{JsonLinesSink, LogFormat};
use crate::cli::signal::Signal;
use crate::cli::{ClusterFlags, NamespaceFlag, Output, OutputFlag};

/// `run --help`'s epilogue: examples, the exit codes ([`crate::cli::exit::run_codes`]) and the
/// duration grammar.
fn after_help() -> String {
    format!("{EXAMPLES}{}\n\n{DURATIONS}", crate::cli::exit::run_codes())
}

const EXAMPLES: &str = "\
Examples:
  podline run --image busybox:1.36 -- sh -c 'echo hello; exit 3'
  podline run --image python:3.12 --env MODE=fast --requests cpu=500m,memory=256Mi -- python -c 'print(1)'
  podline run --pod-template pod.yaml --task-id nightly-etl --reattach
  podline run --image busybox --count 1000 --parallel 50 -- true
  podline run -f tasks.yaml --parallel 20

";

const DURATIONS: &str = "\
Durations accept 90 (seconds), 90s, 2m, 500ms, 1h, up to 365 days; --active-deadline takes
whole seconds from 1 to 2147483647 (the API's range), --delete-grace whole seconds.
With -o json|yaml the result document goes to stdout and the container's logs to stderr.";

/// Run a command in a new pod, follow its logs and exit with its exit code.
#[derive(Debug, Clone, clap::Args)]
#[command(after_long_help = after_help())]
pub struct RunArgs {
    #[command(flatten)]
    pub namespace: NamespaceFlag,
    #[command(flatten)]
    pub output: OutputFlag,
    /// Image of the main container.
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Base pod name; a random 8-character suffix is added unless --exact-name.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Use --name as is (fails if the name is taken by another pod).
    #[arg(long, requires = "name")]
    pub exact_name: bool,
    /// Environment variable for the main container (repeatable). Values are never logged, but
    /// a command line is visible to every local user (`ps`, /proc) for the whole run: pass
    /// secret values with --env-file, --env-from-secret or a --pod-template instead.
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE", value_parser = parse_env)]
    pub env: Vec<(String, String)>,
    /// Read environment variables for the main container from FILE (`-`: standard input), one
    /// KEY=VALUE a line, as `docker run --env-file` and `kubectl create configmap
    /// --from-env-file` read them: the value is the rest of the line, verbatim (no quotes
    /// removed); blank lines and lines starting with # are skipped. Repeatable; --env wins over
    /// a file. Keeps values off the command line.
    #[arg(long = "env-file", value_name = "FILE")]
    pub env_file: Vec<PathBuf>,
    /// Import every key of this Secret as environment variables (repeatable).
    #[arg(long = "env-from-secret", value_name = "SECRET")]
    pub env_from_secret: Vec<String>,
    /// Extra pod label (repeatable).
    #[arg(long = "label", short = 'l', value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// Extra pod annotation (repeatable).
    #[arg(long = "annotation", value_name = "KEY=VALUE", value_parser = parse_annotation)]
    pub annotations: Vec<(String, String)>,
    /// Service account of the pod.
    #[arg(long, value_name = "NAME")]
    pub service_account: Option<String>,
    /// Node selector entry (repeatable).
    #[arg(long = "node-selector", value_name = "KEY=VALUE", value_parser = parse_node_selector)]
    pub node_selector: Vec<(String, String)>,
    /// Resource requests of the main container.
    #[arg(long, value_name = "cpu=500m,memory=1Gi", value_parser = parse_requests)]
    pub requests: Option<BTreeMap<String, String>>,
    /// Resource limits of the main container.
    #[arg(long, value_name = "cpu=1,memory=2Gi", value_parser = parse_limits)]
    pub limits: Option<BTreeMap<String, String>>,
    /// activeDeadlineSeconds: the server stops the pod after this long even if podline dies.
    #[arg(long, value_name = "DURATION", env = "PODLINE_ACTIVE_DEADLINE", value_parser = parse_active_deadline)]
    pub active_deadline: Option<Duration>,
    /// Image pull policy of the main container: Always, IfNotPresent or Never.
    #[arg(long, value_name = "POLICY", value_parser = parse_pull_policy)]
    pub image_pull_policy: Option<PullPolicy>,
    /// Base pod manifest (YAML or JSON; `-`: standard input); flags override its fields. The
    /// way to pass a whole pod, env values included, without a command line.
    #[arg(long, value_name = "FILE")]
    pub pod_template: Option<PathBuf>,
    /// What to do with the pod at the end: delete, delete-succeeded or keep. A pod still
    /// pending or running after a failure, timeout or signal is deleted unless keep.
    #[arg(help_heading = "Lifecycle", long, value_name = "ACTION", env = "PODLINE_ON_FINISH", default_value = "delete", value_parser = parse_on_finish)]
    pub on_finish: OnFinish,
    /// Task id, stored as the podline.io/task-id label; used by --reattach.
    #[arg(
        help_heading = "Lifecycle",
        long,
        value_name = "ID",
        env = "PODLINE_TASK_ID"
    )]
    pub task_id: Option<String>,
    /// Attach to the running pod of the same --task-id instead of creating a second one.
    #[arg(help_heading = "Lifecycle", long, requires = "task_id")]
    pub reattach: bool,
    /// Follow the logs of every container, each line prefixed with [container].
    #[arg(help_heading = "Lifecycle", long)]
    pub all_containers: bool,
    #[command(flatten)]
    pub log_flags: crate::cli::run_logs::LogFlags,
    /// Duration of this run's liveness Lease (whole seconds, 1s to 1h): if podline dies and
    /// stops renewing it, a reaper (`podline gc`, `podline record --reap`) deletes its pods once
    /// it is this old plus the reaper's grace.
    #[arg(help_heading = "Lifecycle", long, value_name = "DURATION", default_value = "10s", value_parser = duration::positive)]
    pub lease_duration: Duration,
    /// How often the liveness Lease is renewed (100ms to half --lease-duration).
    #[arg(help_heading = "Lifecycle", long, value_name = "DURATION", default_value = "3s", value_parser = duration::positive)]
    pub lease_renew_every: Duration,
    /// If podline dies, keep its pods this long past its Lease's expiry (0s to 24h, whole
    /// seconds) for a retry of the task to reattach to them (--reattach, same --task-id), which
    /// moves them to its own Lease. Written on the Lease as podline.io/keep-for-retry; 0s: the
    /// reaper deletes them at expiry. The Airflow operator sets it when the task will be retried.
    #[arg(help_heading = "Lifecycle", long, value_name = "DURATION", default_value = "0s", value_parser = crate::cli::reaper_flags::parse_keep_for_retry)]
    pub keep_for_retry: Duration,
    /// Create each pod with the finalizer podline.io/record, so that a pod deleted while no
    /// recorder runs waits in Terminating, with its final state, until `podline record
    /// --finalize` has recorded it (nothing is lost however long the recorder was down). Opt-in:
    /// without such a recorder, deleted pods stay Terminating until `podline gc --finalizers`.
    /// This run never waits for that: it exits with the task's code once the pod is deleted.
    /// Also PODLINE_FINALIZER=true.
    #[arg(help_heading = "Lifecycle", long, env = "PODLINE_FINALIZER")]
    pub finalizer: bool,
    /// Write the result as JSON to FILE: first the pod's name before it is created, then the
    /// whole result (phase, exit codes, Warning events, failure report). For wrappers such as
    /// the Airflow operator; stdout keeps the container's logs. Single tasks only.
    #[arg(help_heading = "Lifecycle", long, value_name = "FILE", conflicts_with_all = ["count", "file"])]
    pub result_file: Option<PathBuf>,
    /// Run the task N times (summary instead of logs), 1 to 100000.
    #[arg(help_heading = "Many tasks", long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=MAX_TASKS as i64))]
    pub count: u32,
    /// How many tasks run at once with --count or -f, 1 to 1000.
    #[arg(help_heading = "Many tasks", long, value_name = "M", env = "PODLINE_PARALLEL", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=MAX_PARALLEL as i64))]
    pub parallel: u32,
    /// A YAML or JSON list of tasks to run (fields: image, command, env, labels, taskId...);
    /// `-`: standard input. At most 100000 tasks.
    #[arg(
        help_heading = "Many tasks",
        short = 'f',
        long = "filename",
        value_name = "FILE",
        conflicts_with = "count"
    )]
    pub file: Option<PathBuf>,
    /// Total create attempts (first included) for 409 Conflict, 429, 5xx and network errors.
    #[arg(help_heading = "Retries and timeouts", long, value_name = "N", env = "PODLINE_CREATE_ATTEMPTS", default_value_t = podline_launch::create::DEFAULT_CREATE_ATTEMPTS, value_parser = clap::value_parser!(u32).range(1..))]
    pub create_attempts: u32,
    /// First backoff window between create attempts (full jitter, doubling).
    #[arg(help_heading = "Retries and timeouts", long, value_name = "DURATION", env = "PODLINE_CREATE_BACKOFF_BASE", default_value = "100ms", value_parser = duration::positive)]
    pub create_backoff_base: Duration,
    /// Largest backoff window between create attempts.
    #[arg(help_heading = "Retries and timeouts", long, value_name = "DURATION", env = "PODLINE_CREATE_BACKOFF_CAP", default_value = "15s", value_parser = duration::positive)]
    pub create_backoff_cap: Duration,
    /// Overall time budget for the create, responses included.
    #[arg(help_heading = "Retries and timeouts", long, value_name = "DURATION", env = "PODLINE_CREATE_DEADLINE", default_value = "2m", value_parser = duration::positive)]
    pub create_deadline: Duration,
    /// Limit for the pod to be scheduled.
    #[arg(help_heading = "Retries and timeouts", long, value_name = "DURATION", env = "PODLINE_SCHEDULE_TIMEOUT", default_value = "120s", value_parser = duration::positive)]
    pub schedule_timeout: Duration,
    /// Limit for the containers to start once the pod is scheduled.
    #[arg(help_heading = "Retries and timeouts", long, value_name = "DURATION", env = "PODLINE_STARTUP_TIMEOUT", default_value = "120s", value_parser = duration::positive)]
    pub startup_timeout: Duration,
    /// Overall limit for the run; the pod is deleted when it expires (exit 4 if it had not
    /// started, 124 if it was running).
    #[arg(help_heading = "Retries and timeouts", long, value_name = "DURATION", env = "PODLINE_TIMEOUT", value_parser = duration::positive)]
    pub timeout: Option<Duration>,
    /// Reconnect the log stream when no line arrived for this long.
    #[arg(help_heading = "Retries and timeouts", long, value_name = "DURATION", env = "PODLINE_LOG_STALL_TIMEOUT", default_value = "60s", value_parser = duration::positive)]
    pub log_stall_timeout: Duration,
    /// Grace period when podline deletes the pod (default: the pod's own).
    #[arg(help_heading = "Retries and timeouts", long, value_name = "DURATION", env = "PODLINE_DELETE_GRACE", value_parser = parse_delete_grace)]
    pub delete_grace: Option<Duration>,
    #[command(flatten)]
    pub cluster: ClusterFlags,
    /// The command and its arguments (replaces the image's entrypoint).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// The most tasks one `run` takes (`--count`, `-f`): a bound on every user-given number. The
/// memory of a run does not grow with it (tasks are made as slots free, results are tallied and
/// only [`MAX_KEPT_FAILURES`] failed ones kept), but a `-f` file is read whole. More tasks: run
/// several `podline run`s (each its own run label and summary).
pub const MAX_TASKS: u32 = 100_000;

/// Failed tasks whose result a `--count`/`-f` summary keeps (the first to fail); the rest are
/// counted in it.
pub const MAX_KEPT_FAILURES: usize = 1_000;

/// The most tasks in flight at once (`--parallel`): each holds a pod watch entry, a log-free
/// task and its API calls; a thousand already exceeds what one API server client should ask.
pub const MAX_PARALLEL: u32 = 1_000;

/// Where a `-` file argument reads: standard input, once per run.
const STDIN: &str = "-";

fn spec_err(e: podline_launch::SpecError) -> String {
    e.to_string()
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    spec::parse_key_value("--env", "KEY=VALUE", s).map_err(spec_err)
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    let (k, v) = spec::parse_key_value("--label", "team=data", s).map_err(spec_err)?;
    spec::validate_label_key("--label", &k).map_err(spec_err)?;
    spec::validate_label_value("--label", &v).map_err(spec_err)?;
    Ok((k, v))
}

fn parse_annotation(s: &str) -> Result<(String, String), String> {
    let (k, v) = spec::parse_key_value("--annotation", "note=text", s).map_err(spec_err)?;
    spec::validate_label_key("--annotation", &k).map_err(spec_err)?;
    Ok((k, v))
}

fn parse_node_selector(s: &str) -> Result<(String, String), String> {
    spec::parse_key_value("--node-selector", "disk=ssd", s).map_err(spec_err)
}

fn parse_requests(s: &str) -> Result<BTreeMap<String, String>, String> {
    spec::parse_resources("--requests", s).map_err(spec_err)
}

fn parse_limits(s: &str) -> Result<BTreeMap<String, String>, String> {
    spec::parse_resources("--limits", s).map_err(spec_err)
}

fn parse_pull_policy(s: &str) -> Result<PullPolicy, String> {
    PullPolicy::parse(s).map_err(spec_err)
}

fn parse_on_finish(s: &str) -> Result<OnFinish, String> {
    OnFinish::parse(s).map_err(spec_err)
}

/// `--active-deadline`: sent as `activeDeadlineSeconds`, which the API server accepts from 1 to
/// 2147483647 whole seconds; anything else is refused here, before a pod is created.
fn parse_active_deadline(s: &str) -> Result<Duration, String> {
    let range = "activeDeadlineSeconds takes whole seconds from 1 to 2147483647";
    let max = podline_launch::spec::MAX_ACTIVE_DEADLINE;
    let d = podline_client::timeouts::parse_duration_at_most(s, max)
        .map_err(|e| format!("{s:?}: {e} ({range})"))?;
    if d.is_zero() || d.subsec_nanos() != 0 {
        return Err(format!("{s:?} is out of range: {range}"));
    }
    Ok(d)
}

/// `--delete-grace`: sent as `gracePeriodSeconds`, whole seconds (a rounded `500ms` would be 0, a
/// forced immediate delete), at most the parser's 365 days.
fn parse_delete_grace(s: &str) -> Result<Duration, String> {
    let d = duration::positive(s)?;
    if d.subsec_nanos() != 0 {
        return Err(format!(
            "{s:?} must be a whole number of seconds (it is sent as gracePeriodSeconds)"
        ));
    }
    Ok(d)
}

impl RunArgs {
    /// The task described by the flags (template loaded, not yet validated as a pod).
    fn task_spec(&self) -> anyhow::Result<TaskSpec> {
        let template = match &self.pod_template {
            // The library's message starts with the path; the flag is named here.
            Some(path) if is_stdin(path) => {
                let text = read_stdin("--pod-template")?;
                Some(
                    spec::parse_template("(standard input)", &text)
                        .map_err(|e| anyhow::anyhow!("--pod-template {e}"))?,
                )
            }
            Some(path) => {
                Some(spec::load_template(path).map_err(|e| anyhow::anyhow!("--pod-template {e}"))?)
            }
            None => None,
        };
        let mut env = Vec::new();
        for path in &self.env_file {
            env.extend(read_env_file(path)?);
        }
        env.extend(self.env.iter().cloned());
        Ok(TaskSpec {
            name: self.name.clone(),
            exact_name: self.exact_name,
            namespace: self.namespace.namespace.clone(),
            image: self.image.clone(),
            command: self.command.clone(),
            env,
            env_from_secrets: self.env_from_secret.clone(),
            labels: self.labels.iter().cloned().collect(),
            annotations: self.annotations.iter().cloned().collect(),
            service_account: self.service_account.clone(),
            node_selector: self.node_selector.iter().cloned().collect(),
            requests: self.requests.clone().unwrap_or_default(),
            limits: self.limits.clone().unwrap_or_default(),
            active_deadline: self.active_deadline,
            image_pull_policy: self.image_pull_policy,
            template,
            task_id: self.task_id.clone(),
            run: None,
        })
    }

    /// At most one of --pod-template, -f and --env-file reads standard input (it can be read
    /// once), and with --count/-f no --label names the run label podline sets itself.
    fn check_inputs(&self, many: bool) -> anyhow::Result<()> {
        let readers: Vec<&str> = [
            (
                "--pod-template",
                self.pod_template.iter().any(|p| is_stdin(p)),
            ),
            ("-f", self.file.iter().any(|p| is_stdin(p))),
            ("--env-file", self.env_file.iter().any(|p| is_stdin(p))),
        ]
        .into_iter()
        .filter_map(|(flag, reads)| reads.then_some(flag))
        .collect();
        if readers.len() > 1 || self.env_file.iter().filter(|p| is_stdin(p)).count() > 1 {
            anyhow::bail!(
                "{} read standard input (`-`), which can be read once: give at most one of them `-`, the others files",
                readers.join(" and ")
            );
        }
        if many && self.labels.iter().any(|(k, _)| k == spec::RUN_LABEL) {
            anyhow::bail!("{}", run_label_refused("--label"));
        }
        Ok(())
    }

    /// The launcher configuration from the knobs.
    fn launch_config(&self, many: bool) -> anyhow::Result<LaunchConfig> {
        if self.create_backoff_cap < self.create_backoff_base {
            anyhow::bail!(
                "--create-backoff-cap ({:?}) must be at least --create-backoff-base ({:?})",
                self.create_backoff_cap,
                self.create_backoff_base
            );
        }
        let create = podline_launch::create::create_policy(
            self.create_attempts,
            self.create_backoff_base,
            self.create_backoff_cap,
            self.create_deadline,
        )
        .map_err(|err| anyhow::anyhow!("--create-backoff-base/--create-backoff-cap: {err}"))?;
        let logs = if many {
            LogMode::None
        } else if self.all_containers {
            LogMode::AllContainers
        } else {
            LogMode::Main
        };
        Ok(LaunchConfig {
            create,
            schedule_timeout: self.schedule_timeout,
            startup_timeout: self.startup_timeout,
            timeout: self.timeout,
            on_finish: self.on_finish,
            delete_grace: self.delete_grace,
            logs,
            log_selection: self.log_flags.selection(self.all_containers)?,
            log: LogConfig {
                stall_timeout: self.log_stall_timeout,
                ..LogConfig::default()
            },
            reattach: self.reattach,
            finalizer: self
                .finalizer
                .then(|| podline_client::finalizer::RECORD_FINALIZER.to_owned()),
            ..LaunchConfig::default()
        })
    }
}

/// Why a run label of the user's cannot be kept with --count/-f: podline labels every pod of
/// the invocation with its own run id, printed in the summary, which `podline runs` groups by.
fn run_label_refused(what: &str) -> String {
    format!(
        "{what} {}=... cannot be used with --count or -f: podline sets this label to the run id of the invocation (it groups the pods for `podline runs` and the summary); use another label key for your own grouping",
        spec::RUN_LABEL
    )
}

fn is_stdin(path: &std::path::Path) -> bool {
    path.as_os_str() == STDIN
}

/// All of standard input, for the one flag given `-`.
fn read_stdin(flag: &str) -> anyhow::Result<String> {
    use std::io::Read as _;
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| anyhow::anyhow!("{flag} -: cannot read standard input: {e}"))?;
    Ok(text)
}

/// `--env-file`: KEY=VALUE lines (see the flag's help). An error names the file and the line
/// number, never the line: it may hold a secret.
fn read_env_file(path: &std::path::Path) -> anyhow::Result<Vec<(String, String)>> {
    let (shown, text) = if is_stdin(path) {
        ("-".to_owned(), read_stdin("--env-file")?)
    } else {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("--env-file {}: cannot read: {e}", path.display()))?;
        (path.display().to_string(), text)
    };
    parse_env_file(&text).map_err(|e| anyhow::anyhow!("--env-file {shown}: {e}"))
}

/// The entries of an env file's text (see [`read_env_file`]).
fn parse_env_file(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut env = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let line = line.strip_suffix('\r').unwrap_or(line);
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let Some((key, value)) = trimmed.split_once('=') else {
            return Err(format!(
                "line {number} is not KEY=VALUE (the line is not shown: it may hold a secret)"
            ));
        };
        let key = key.trim_end();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(format!(
                "line {number}: the name before = is empty or has spaces (expected KEY=VALUE; the line is not shown: it may hold a secret)"
            ));
        }
        env.push((key.to_owned(), value.to_owned()));
    }
    Ok(env)
}

/// Builds a client like kubectl (the client crate's `connect`): --kubeconfig, KUBECONFIG,
/// ~/.kube/config, in-cluster; --context and -n as given. Returns the client, the namespace and
/// the HTTP/1.1 client for `pods/exec` (the XCom sidecar's read).
async fn connect(
    options: &podline_client::connect::ConnectOptions,
) -> anyhow::Result<(kube::Client, String, kube::Client)> {
    let connected = crate::cli::cluster::connect(options).await?;
    tracing::debug!(source = %connected.source, namespace = %connected.namespace, "connected");
    Ok((
        connected.client,
        connected.namespace,
        connected.upgrade_client,
    ))
}

/// Cancels `cancel` on the first SIGINT or SIGTERM (the shared handler, `cli/signal.rs`): the
/// launcher deletes the pod(s) and the run exits 130 or 143.
fn watch_signals(cancel: Cancel) {
    // Installed here, not in the task: a signal between this call and the task's first poll
    // must cancel the run, not kill the process.
    let listener = crate::cli::signal::Listener::install();
    tokio::spawn(async move {
        let signal = listener.wait().await;
        tracing::warn!(signal = signal.name(), "signal received: deleting the pod");
        cancel.cancel(cancel_reason(signal));
    });
}

/// The launcher's name for the signal that stopped the run.
fn cancel_reason(signal: Signal) -> CancelReason {
    match signal {
        Signal::Interrupt => CancelReason::Interrupt,
        Signal::Terminate => CancelReason::Terminate,
    }
}

/// Logs to stderr when stdout carries a result document.
struct StderrSink;

impl LogSink for StderrSink {
    fn write_line(&self, line: &[u8]) {
        use std::io::Write as _;
        let _ = std::io::stderr().lock().write_all(line);
    }
}

/// The tasks of a run: those of a `-f` file, or one spec `--count` times.
enum Specs {
    File(Vec<TaskSpec>),
    Repeated(Box<TaskSpec>, usize),
}

impl Specs {
    /// The specs, each labelled with `run` unless it names its own run. An iterator, so that
    /// `--count N` holds one spec rather than N copies made up front.
    fn with_run(self, run: &str) -> Box<dyn ExactSizeIterator<Item = TaskSpec> + Send + '_> {
        let label = move |mut spec: TaskSpec| {
            spec.run = spec.run.or_else(|| Some(run.to_owned()));
            spec
        };
        match self {
            Specs::File(specs) => Box::new(specs.into_iter().map(label)),
            Specs::Repeated(spec, count) => Box::new(std::iter::repeat_n(label(*spec), count)),
        }
    }

    /// The one task of a single run.
    fn first(self) -> TaskSpec {
        match self {
            Specs::File(specs) => specs.into_iter().next().unwrap_or_default(),
            Specs::Repeated(spec, _) => *spec,
        }
    }
}

/// Runs `podline run`.
pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // First of all: from here a SIGINT/SIGTERM at any stage (reading input, connecting, an exec
    // credential plugin, the Lease, the creates, the waits) ends the run with 130/143 and its
    // pods deleted, never by the signal's default action.
    let cancel = Cancel::new();
    watch_signals(cancel.clone());
    let many = args.count > 1 || args.file.is_some();
    let config = match args
        .check_inputs(many)
        .and_then(|()| args.launch_config(many))
    {
        Ok(c) => c,
        Err(err) => return Err(usage(err)),
    };
    let specs = if let Some(path) = &args.file {
        let (shown, read) = if is_stdin(path) {
            ("(standard input)".to_owned(), read_stdin("-f"))
        } else {
            (
                path.display().to_string(),
                std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("-f {}: cannot read: {e}", path.display())),
            )
        };
        let text = match read {
            Ok(t) => t,
            Err(e) => return Err(usage(e)),
        };
        match podline_launch::spec::parse_tasks(&shown, &text) {
            Ok(specs) if specs.len() > MAX_TASKS as usize => {
                return Err(usage(anyhow::anyhow!(
                    "-f {shown}: {} tasks, more than the {MAX_TASKS} one run takes; split the file and run each part with its own `podline run -f`",
                    specs.len()
                )));
            }
            Ok(specs) if specs.iter().any(|s| s.labels.contains_key(spec::RUN_LABEL)) => {
                return Err(usage(anyhow::anyhow!(
                    "-f {shown}: {}",
                    run_label_refused("a task's labels")
                )));
            }
            Ok(mut specs) => {
                let base = match args.task_spec() {
                    Ok(base) => base,
                    Err(err) => return Err(usage(err)),
                };
                for s in &mut specs {
                    s.namespace = s.namespace.clone().or(base.namespace.clone());
                }
                Specs::File(specs)
            }
            // The library's message starts with the path; the flag is named here.
            Err(err) => return Err(usage(anyhow::anyhow!("-f {err}"))),
        }
    } else {
        let spec = match args.task_spec() {
            Ok(s) => s,
            Err(err) => return Err(usage(err)),
        };
        Specs::Repeated(Box::new(spec), args.count as usize)
    };
    let connect_options = match args.cluster.connect_options(
        args.namespace.namespace.clone(),
        podline_client::timeouts::DEFAULT_CLIENT_TIMEOUT,
    ) {
        Ok(mut options) => {
            // An exec credential plugin gets no longer than the create was given.
            options.exec_timeout = Some(
                args.create_deadline
                    .min(podline_client::timeouts::DEFAULT_CLIENT_TIMEOUT),
            );
            options
        }
        Err(err) => return Err(usage(err)),
    };
    let liveness_config =
        match podline_launch::LivenessConfig::new(args.lease_duration, args.lease_renew_every)
            .and_then(|c| c.with_keep_for_retry(args.keep_for_retry))
        {
            Ok(c) => c,
            Err(err) => {
                return Err(usage(anyhow::anyhow!(
                    "--lease-duration/--lease-renew-every/--keep-for-retry: {err}"
                )));
            }
        };
    let (calls, create) = (config.calls.clone(), config.create.clone());
    let (client, namespace, exec_client) = tokio::select! {
        connected = connect(&connect_options) => connected?,
        () = cancel.cancelled() => return Ok(interrupted(&cancel)),
    };
    let run_id = spec::new_launch_id()[..12].to_owned();
    // The run's proof of life: its pods are owned by this Lease, deleted by a reaper if the
    // process dies without cleaning up (SIGKILL, host lost), released below on a clean exit.
    let liveness = podline_launch::Liveness::start(
        client.clone(),
        &run_id,
        podline_launch::liveness::holder_identity("podline-run"),
        liveness_config,
        calls,
        create,
    );
    let launcher = Launcher::new(client.clone(), namespace.clone(), config)
        .with_liveness(liveness.clone())
        .with_exec_client(exec_client);
    let code = run_tasks(
        &args, many, specs, &client, &namespace, &launcher, &run_id, &cancel,
    )
    .await;
    liveness.release().await;
    code
}

/// The exit code of a run stopped by a signal before it launched anything (130 or 143).
fn interrupted(cancel: &Cancel) -> ExitCode {
    let reason = cancel.reason().unwrap_or(CancelReason::Terminate);
    eprintln!("podline: stopped by a signal before any pod was created");
    ExitCode::from(reason.exit_code())
}

/// The tasks themselves, once connected; the caller releases the liveness Lease after.
#[allow(clippy::too_many_arguments)]
async fn run_tasks(
    args: &RunArgs,
    many: bool,
    specs: Specs,
    client: &kube::Client,
    namespace: &str,
    launcher: &Launcher,
    run_id: &str,
    cancel: &Cancel,
) -> anyhow::Result<ExitCode> {
    if many {
        let summary = podline_launch::run_many_kept(
            launcher,
            specs.with_run(run_id),
            args.parallel as usize,
            None,
            true,
            cancel,
            podline_launch::Keep::Failures(MAX_KEPT_FAILURES),
        )
        .await;
        match args.output.output {
            Output::Json => println!("{}", serde_json::to_string_pretty(&summary)?),
            Output::Yaml => print!("{}", serde_saphyr::to_string(&summary)?),
            Output::Table | Output::Wide => print!("{}", summary.table()),
        }
        // The signal decides the code: SIGINT 130, SIGTERM 143 (the pods are deleted either way).
        if let Some(reason) = cancel.reason() {
            return Ok(ExitCode::from(reason.exit_code()));
        }
        return Ok(if summary.failed == 0 {
            ExitCode::SUCCESS
        } else {
            exit::code(exit::FAILED)
        });
    }

    let structured = matches!(args.output.output, Output::Json | Output::Yaml);
    let sink: Arc<dyn LogSink> = if args.log_flags.log_format == LogFormat::Json {
        if structured {
            return Err(usage(anyhow::anyhow!(
                "--log-format json writes to stdout, where -o json|yaml writes the result: use --result-file for the result"
            )));
        }
        Arc::new(JsonLinesSink)
    } else if structured {
        Arc::new(StderrSink)
    } else {
        Arc::new(StdoutSink)
    };
    let mut spec = specs.first();
    let result_file = args.result_file.as_deref().map(ResultFile::new);
    if let Some(file) = &result_file
        && let Err(err) = file
            .announce(client, namespace, &mut spec, args.reattach)
            .await
    {
        return Err(usage(err));
    }
    let mut result = launcher.run(&spec, sink, cancel).await;
    word_failure(&mut result);
    if let Some(file) = &result_file
        && let Err(err) = file.finish(&result)
    {
        eprintln!("error: {err:#}");
    }
    print_result(&result, args.output.output)?;
    Ok(ExitCode::from(result.exit_code))
}

/// The launcher's messages name no flag; where the remedy for a failure is one of `run`'s flags,
/// they are added here, before the result is printed or written (stderr, `-o json|yaml`,
/// `--result-file`), so every channel reads the same. (With --count/-f, `run_many` builds the
/// summary itself and it keeps the launcher's words: a tasks file names its pods by its own
/// fields, not by these flags.)
fn word_failure(result: &mut TaskResult) {
    let Some(error) = result.error.take() else {
        return;
    };
    result.error = Some(match result.error_kind {
        Some(ErrorKind::ForeignPod) => {
            format!("{error}. Choose another --name or drop --exact-name")
        }
        Some(ErrorKind::AmbiguousReattach) => format!("--reattach: {error}"),
        _ => error,
    });
}

fn print_result(result: &TaskResult, output: Output) -> anyhow::Result<()> {
    match output {
        Output::Json => println!("{}", serde_json::to_string_pretty(result)?),
        Output::Yaml => print!("{}", serde_saphyr::to_string(result)?),
        Output::Table | Output::Wide => {
            if !result.succeeded() {
                eprint!("{}", result.failure_report());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, String> {
        let mut argv = vec!["podline-run"];
        argv.extend_from_slice(args);
        Wrapper::try_parse_from(argv)
            .map(|w| w.run)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn flags_should_parse_into_a_spec() {
        let a = parse(&[
            "-n",
            "ns",
            "--image",
            "busybox",
            "--name",
            "job",
            "--env",
            "A=1",
            "-e",
            "B=x=y",
            "--label",
            "team=data",
            "--requests",
            "cpu=500m,memory=1Gi",
            "--active-deadline",
            "10m",
            "--image-pull-policy",
            "never",
            "--on-finish",
            "keep",
            "--",
            "sh",
            "-c",
            "exit 3",
        ])
        .unwrap();
        assert_eq!(a.command, ["sh", "-c", "exit 3"]);
        assert_eq!(
            a.env,
            [("A".into(), "1".into()), ("B".into(), "x=y".into())]
        );
        assert_eq!(a.active_deadline, Some(Duration::from_secs(600)));
        assert_eq!(a.on_finish, OnFinish::Keep);
        assert_eq!(a.image_pull_policy, Some(PullPolicy::Never));
        assert_eq!(a.create_attempts, 12);
        assert_eq!(a.create_backoff_cap, Duration::from_secs(15));
        // The CLI's defaults are the library's, so a Launcher built in code tries as hard.
        assert_eq!(
            a.create_backoff_base,
            podline_launch::create::DEFAULT_CREATE_BACKOFF_BASE
        );
        assert_eq!(
            a.create_backoff_cap,
            podline_launch::create::DEFAULT_CREATE_BACKOFF_CAP
        );
        assert_eq!(
            a.create_deadline,
            podline_launch::create::DEFAULT_CREATE_DEADLINE
        );
        assert_eq!(a.schedule_timeout, Duration::from_secs(120));
        let spec = a.task_spec().unwrap();
        let built = spec.build_pod("default").unwrap();
        assert_eq!(built.namespace, "ns");
        assert!(built.name.starts_with("job-"));
    }

    #[test]
    fn bad_values_should_name_the_flag_and_the_form() {
        for (args, want) in [
            (vec!["--env", "NOEQUALS"], "--env"),
            (vec!["--requests", "cpu=lots"], "--requests"),
            (vec!["--label", "bad key=v"], "--label"),
            (vec!["--on-finish", "later"], "--on-finish"),
            (vec!["--image-pull-policy", "maybe"], "--image-pull-policy"),
            (vec!["--schedule-timeout", "0"], "greater than zero"),
            (vec!["--startup-timeout", "soon"], "not a duration"),
            (vec!["--create-backoff-cap", "5x"], "not a duration"),
            (vec!["--count", "0"], "--count"),
        ] {
            let err = parse(&args).unwrap_err();
            assert!(err.contains(want), "{args:?}: {err}");
        }
        assert!(parse(&["--reattach"]).unwrap_err().contains("--task-id"));
        assert!(parse(&["--exact-name"]).unwrap_err().contains("--name"));
    }

    /// The shared handler's signals cancel the run with the shell's codes: 128 + the number.
    #[test]
    fn signals_should_cancel_with_the_shells_exit_codes() {
        assert_eq!(cancel_reason(Signal::Interrupt).exit_code(), 128 + 2);
        assert_eq!(cancel_reason(Signal::Terminate).exit_code(), 128 + 15);
    }

    /// The example after "expected e.g." names the flag once (it read `--env --env KEY=VALUE`).
    #[test]
    fn a_bad_key_value_should_name_its_flag_once_in_the_example() {
        for (flag, example) in [
            ("--env", "KEY=VALUE"),
            ("--label", "team=data"),
            ("--annotation", "note=text"),
            ("--node-selector", "disk=ssd"),
        ] {
            let err = parse(&[flag, "NOEQUALS"]).unwrap_err();
            assert!(
                err.contains(&format!(
                    "\"NOEQUALS\" is not KEY=VALUE (expected e.g. {flag} {example})"
                )),
                "{flag}: {err}"
            );
            assert!(!err.contains(&format!("{flag} {flag}")), "{flag}: {err}");
        }
    }

    /// `--env-file`: KEY=VALUE lines, the value verbatim; an error names the line by number,
    /// never its text (it may hold a secret).
    #[test]
    fn env_files_should_parse_and_never_quote_a_line() {
        let env = parse_env_file("# comment\n\nA=1\r\nB= x=y \"q\"\n  C=\nD=Zq9\n").unwrap();
        assert_eq!(
            env,
            [
                ("A".into(), "1".into()),
                ("B".into(), " x=y \"q\"".into()),
                ("C".into(), String::new()),
                ("D".into(), "Zq9".into()),
            ]
        );
        for bad in ["A=1\nZq9Secret\n", "=Zq9Secret\n", "A B=Zq9Secret\n"] {
            let err = parse_env_file(bad).unwrap_err();
            assert!(!err.contains("Zq9Secret") && err.contains("line "), "{err}");
        }
        // --env wins over a file, as in docker.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("env");
        std::fs::write(&file, "A=from-file\nB=2\n").unwrap();
        let file = file.display().to_string();
        let a = parse(&["--image", "i", "--env-file", &file, "--env", "A=flag"]).unwrap();
        let spec = a.task_spec().unwrap();
        let built = spec.build_pod("default").unwrap();
        let env: Vec<(String, Option<String>)> = built.pod.spec.unwrap().containers[0]
            .env
            .clone()
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.value))
            .collect();
        assert!(env.contains(&("A".into(), Some("flag".into()))), "{env:?}");
        assert!(env.contains(&("B".into(), Some("2".into()))), "{env:?}");
        assert!(
            !env.contains(&("A".into(), Some("from-file".into()))),
            "{env:?}"
        );
    }

    /// `--count` and `--parallel` are bounded at parse time, the error naming the range.
    #[test]
    fn count_and_parallel_should_be_bounded_at_parse_time() {
        assert_eq!(parse(&["--count", "100000"]).unwrap().count, MAX_TASKS);
        assert_eq!(
            parse(&["--parallel", "1000"]).unwrap().parallel,
            MAX_PARALLEL
        );
        for (flag, value) in [
            ("--count", "100001"),
            ("--count", "4294967295"),
            ("--parallel", "1001"),
            ("--parallel", "4294967295"),
        ] {
            let err = parse(&[flag, value]).unwrap_err();
            assert!(
                err.contains(flag) && err.contains("1..="),
                "{flag} {value}: {err}"
            );
        }
    }

    /// Standard input can be read once; the run label is podline's with --count.
    #[test]
    fn inputs_should_be_checked_before_anything_runs() {
        let a = parse(&["--pod-template", "-", "--env-file", "-"]).unwrap();
        let err = a.check_inputs(false).unwrap_err().to_string();
        assert!(err.contains("--pod-template and --env-file"), "{err}");
        let a = parse(&["-f", "-", "--env-file", "e"]).unwrap();
        a.check_inputs(true).unwrap();
        let a = parse(&["--count", "2", "--label", "podline.io/run=x"]).unwrap();
        let err = a.check_inputs(true).unwrap_err().to_string();
        assert!(
            err.contains("podline.io/run") && err.contains("--count"),
            "{err}"
        );
        // One task keeps the user's run label.
        let a = parse(&["--image", "i", "--label", "podline.io/run=x"]).unwrap();
        a.check_inputs(false).unwrap();
        let built = a.task_spec().unwrap().build_pod("default").unwrap();
        let labels = built.pod.metadata.labels.unwrap();
        assert_eq!(labels.get("podline.io/run").map(String::as_str), Some("x"));
    }

    /// `--help` says what `--env` costs.
    #[test]
    fn env_help_should_say_argv_is_visible_to_local_users() {
        let err = parse(&["--help"]).unwrap_err();
        assert!(err.contains("visible to every local user"), "{err}");
        assert!(err.contains("--env-file"), "{err}");
    }

    #[test]
    fn durations_should_parse_strictly() {
        assert_eq!(duration::positive("90").unwrap(), Duration::from_secs(90));
        assert_eq!(duration::positive("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(duration::positive("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(
            duration::positive("500ms").unwrap(),
            Duration::from_millis(500)
        );
        assert!(duration::positive("").is_err());
        assert!(duration::positive("-1s").is_err());
        assert!(duration::positive("1.5s").is_err());
        assert!(duration::positive("0s").is_err());
    }

    #[test]
    fn durations_should_be_bounded_with_a_message_naming_the_value_and_range() {
        assert_eq!(
            duration::positive("8760h").unwrap(),
            Duration::from_secs(365 * 24 * 3600)
        );
        for huge in ["18446744073709551615", "8761h", "99999999999999999999ms"] {
            let err = duration::positive(huge).unwrap_err();
            assert!(
                err.contains(huge) && err.contains("at most 365 days"),
                "{err}"
            );
        }
        for flag in [
            "--startup-timeout",
            "--schedule-timeout",
            "--timeout",
            "--create-deadline",
            "--create-backoff-cap",
            "--log-stall-timeout",
            "--delete-grace",
        ] {
            let err = parse(&[flag, "18446744073709551615"]).unwrap_err();
            assert!(
                err.contains(flag) && err.contains("at most 365 days"),
                "{flag}: {err}"
            );
        }
    }

    #[test]
    fn active_deadline_should_be_within_the_apis_range() {
        assert_eq!(
            parse_active_deadline("2147483647").unwrap(),
            Duration::from_secs(2_147_483_647)
        );
        assert_eq!(parse_active_deadline("1").unwrap(), Duration::from_secs(1));
        for bad in ["18446744073709551615", "2147483648", "0", "1500ms"] {
            let err = parse_active_deadline(bad).unwrap_err();
            assert!(
                err.contains(bad) && err.contains("1 to 2147483647"),
                "{bad}: {err}"
            );
        }
        let err = parse(&["--active-deadline", "2147483648"]).unwrap_err();
        assert!(err.contains("--active-deadline"), "{err}");
    }

    #[test]
    fn delete_grace_should_be_whole_seconds() {
        assert_eq!(parse_delete_grace("30").unwrap(), Duration::from_secs(30));
        assert!(
            parse_delete_grace("500ms")
                .unwrap_err()
                .contains("gracePeriodSeconds")
        );
        assert!(parse_delete_grace("0").is_err());
    }

    #[test]
    fn backoff_cap_below_base_should_be_rejected() {
        let a = parse(&["--create-backoff-base", "10s", "--create-backoff-cap", "1s"]).unwrap();
        let err = a.launch_config(false).unwrap_err().to_string();
        assert!(err.contains("--create-backoff-cap"), "{err}");
    }
}
