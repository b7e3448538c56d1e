//! Exec-mode containers ([`KubeletConfig::exec`](crate::KubeletConfig::exec)): the container's command and args as a local child process.
//!
//! The child gets a clean environment (`PATH` and `HOSTNAME` from the node, then the
//! container's environment as the kubelet resolves it, `refs.rs`) and its volumes at their
//! `mountPath`s (`sandbox.rs`; as root only), its stdout and stderr become the container log line by
//! line (timestamped when read), and its exit status becomes the exit code (a signal `n` gives
//! `128 + n`, as a container runtime reports it). Deleting the pod or its deadline kills the
//! child (SIGKILL, so 137). Env values are never logged.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Container;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot};

use super::pod::ExecExit;
use crate::logs::LogStore;

/// How long to keep reading output after the child exited (a grandchild may hold the pipes).
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// What to run for one container.
#[derive(Clone, Debug)]
pub(crate) struct ExecSpec {
    pub(crate) uid: Arc<str>,
    pub(crate) idx: usize,
    pub(crate) run: u32,
    pub(crate) container: String,
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
    /// The resolved environment (`refs::container_env`).
    pub(crate) env: Vec<(String, String)>,
    /// The container's volumes (`volumes::container_mounts`).
    pub(crate) mounts: Vec<super::volumes::Mount>,
    pub(crate) working_dir: Option<String>,
    pub(crate) hostname: String,
}

impl ExecSpec {
    /// Reads the command line of `container` with its resolved `env` and `mounts`; `None` if it
    /// has neither command nor args.
    pub(crate) fn from_container(
        uid: Arc<str>,
        idx: usize,
        run: u32,
        hostname: &str,
        container: &Container,
        env: Vec<(String, String)>,
        mounts: Vec<super::volumes::Mount>,
    ) -> Option<ExecSpec> {
        let mut argv: Vec<String> = container.command.clone().unwrap_or_default();
        argv.extend(container.args.clone().unwrap_or_default());
        if argv.is_empty() {
            return None;
        }
        let program = argv.remove(0);
        Some(ExecSpec {
            uid,
            idx,
            run,
            container: container.name.clone(),
            program,
            args: argv,
            env,
            mounts,
            working_dir: container.working_dir.clone(),
            hostname: hostname.to_owned(),
        })
    }
}

/// An exec child ended (reported to the kubelet driver).
#[derive(Debug)]
pub(crate) struct ExecReport {
    pub(crate) uid: Arc<str>,
    pub(crate) idx: usize,
    pub(crate) run: u32,
    pub(crate) exit: ExecExit,
}

/// Runs `spec` to completion (or until `kill` fires or is dropped), logging into `logs`, and
/// reports the exit on `done`.
pub(crate) async fn run<L>(
    spec: ExecSpec,
    logs: L,
    kill: oneshot::Receiver<()>,
    done: mpsc::UnboundedSender<ExecReport>,
) where
    L: AsRef<LogStore> + Clone + Send + 'static,
{
    let exit = run_child(&spec, logs, kill).await;
    let _ = done.send(ExecReport {
        uid: spec.uid,
        idx: spec.idx,
        run: spec.run,
        exit,
    });
}

async fn run_child<L>(spec: &ExecSpec, logs: L, mut kill: oneshot::Receiver<()>) -> ExecExit
where
    L: AsRef<LogStore> + Clone + Send + 'static,
{
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    cmd.env("HOSTNAME", &spec.hostname);
    for (name, value) in &spec.env {
        cmd.env(name, value);
    }
    if let Some(dir) = &spec.working_dir {
        cmd.current_dir(dir);
    }
    if let Err(e) = super::sandbox::isolate(&mut cmd, &spec.mounts) {
        return ExecExit {
            exit_code: 128,
            reason: "StartError",
            message: Some(format!("failed to prepare the container's mounts: {e}")),
            signal: None,
        };
    }
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            tracing::debug!(container = %spec.container, program = %spec.program, error = %e, "exec container failed to start");
            return ExecExit {
                exit_code: 128,
                reason: "StartError",
                message: Some(format!(
                    "failed to create containerd task: failed to create shim task: OCI runtime create failed: \
                     runc create failed: unable to start container process: exec: \"{}\": {e}: unknown",
                    spec.program
                )),
                signal: None,
            };
        }
    };
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let (uid, container) = (spec.uid.to_string(), spec.container.clone());
    let mut pumps = tokio::spawn(async move {
        tokio::join!(
            pump(stdout, logs.clone(), &uid, &container),
            pump(stderr, logs, &uid, &container)
        );
    });
    let status = tokio::select! {
        status = child.wait() => status,
        _ = &mut kill => {
            let _ = child.start_kill();
            child.wait().await
        }
    };
    if tokio::time::timeout(DRAIN_GRACE, &mut pumps).await.is_err() {
        pumps.abort();
    }
    match status {
        Ok(status) => exit_from_status(status),
        Err(e) => ExecExit {
            exit_code: 128,
            reason: "Error",
            message: Some(format!("waiting for the process failed: {e}")),
            signal: None,
        },
    }
}

fn exit_from_status(status: std::process::ExitStatus) -> ExecExit {
    use std::os::unix::process::ExitStatusExt as _;
    let exit_code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(128);
    ExecExit {
        exit_code,
        reason: if exit_code == 0 { "Completed" } else { "Error" },
        message: None,
        signal: None,
    }
}

/// Copies one output pipe into the log, a line at a time.
async fn pump<R, L>(pipe: Option<R>, logs: L, uid: &str, container: &str)
where
    R: AsyncRead + Unpin,
    L: AsRef<LogStore>,
{
    let Some(pipe) = pipe else { return };
    let mut reader = BufReader::new(pipe);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if buf.last() == Some(&b'\n') {
                    buf.pop();
                }
                // As the container wrote it: the log API passes invalid UTF-8 through.
                logs.as_ref()
                    .append_bytes(uid, container, &buf, Timestamp::now());
            }
        }
    }
}
