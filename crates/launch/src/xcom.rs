//! KubernetesPodOperator's XCom contract: the task's main container writes
//! `/airflow/xcom/return.json` on an `emptyDir` it shares with the sidecar KPO adds
//! (`airflow-xcom-sidecar`, which only sleeps); once the main container has terminated, the
//! value is read through `pods/exec` in the sidecar, and then the sidecar is stopped.
//!
//! Why here: a pod built for KPO (`do_xcom_push=True`) carries that sidecar, and an image written
//! for KPO reports its result only through that file. The sequence follows the provider's
//! `PodManager.extract_xcom` (apache-airflow-providers-cncf-kubernetes 10.x,
//! `utils/pod_manager.py` `extract_xcom`, `extract_xcom_json`, `extract_xcom_kill`; the sidecar
//! of `utils/xcom_sidecar.py`): `sh -c` the read script in the sidecar (stderr output or a value
//! that is not JSON fails it), then, whatever the read gave, a shell with the kill line on its
//! stdin (SIGINT to the sidecar's `sh`, whose `trap "exit 0" INT` ends it; the provider's
//! fallback through /proc if that wrote to stderr). The exec is kube's own WebSocket client
//! ([`kube::Api::exec`]).
//!
//! Reusable on its own (a deferrable mode reads the value the same way): [`has_sidecar`],
//! [`extract`].

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::AttachParams;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The name of KPO's XCom sidecar container (`PodDefaults.SIDECAR_CONTAINER_NAME`).
pub const SIDECAR_CONTAINER: &str = "airflow-xcom-sidecar";
/// Where the sidecar and the main container share the value (`PodDefaults.XCOM_MOUNT_PATH`).
pub const XCOM_MOUNT_PATH: &str = "/airflow/xcom";
/// What the read script prints when `return.json` is missing or empty (the provider's
/// `EMPTY_XCOM_RESULT`): the task's return value is then None.
pub const EMPTY_RESULT: &str = "__airflow_xcom_result_empty__";
/// The script the sidecar's shell runs to read the value (the provider's, as `sh -c`).
const READ_SCRIPT: &str = "if [ -s /airflow/xcom/return.json ]; then cat /airflow/xcom/return.json; else echo __airflow_xcom_result_empty__; fi";
/// The line written to a shell in the sidecar to stop it: SIGINT to its `sh` processes (the
/// sidecar's loop traps INT and exits 0); the provider's primary kill command.
const KILL_SCRIPT: &str = "kill -2 $(pgrep -u $(id -u) -f 'sh')";
/// The provider's fallback for images without `pgrep -u`: the same signal, found through /proc.
const KILL_FALLBACK: &str = "for f in /proc/[0-9]*/comm; do [ -O $f ] && read c < $f && [ \"$c\" = \"sh\" ] && pid=${f%/comm} && kill -2 ${pid##*/}; done";
/// Attempts at the read (the provider retries it 5 times).
const READ_ATTEMPTS: u32 = 5;
/// The first pause between read attempts, doubled after each (capped at [`MAX_PAUSE`]).
const FIRST_PAUSE: Duration = Duration::from_secs(1);
/// The longest pause between read attempts.
const MAX_PAUSE: Duration = Duration::from_secs(8);
/// Bounds one exec (connect, command, output): a sidecar that hangs must not hold the task.
const EXEC_TIMEOUT: Duration = Duration::from_secs(60);
/// Once an exec's outcome is known, how long its output still buffered is read.
const DRAIN: Duration = Duration::from_secs(2);
/// The most of `return.json` podline reads (beyond it the read fails): an XCom lives in
/// Airflow's database, and a runaway file must not fill the launcher's memory.
pub const MAX_XCOM_BYTES: usize = 16 * 1024 * 1024;

/// Why the value could not be read.
#[derive(Debug, thiserror::Error)]
pub enum XcomError {
    /// The exec request failed (refused, not running, transport).
    #[error("exec into {container} failed: {source}")]
    Exec {
        /// The container.
        container: String,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
    /// The stream broke or the command ended with a failure.
    #[error("the command in {container} failed: {message}")]
    Command {
        /// The container.
        container: String,
        /// What went wrong (the exec's Status message, stderr's first line, or the stream's error).
        message: String,
    },
    /// The exec took longer than its bound.
    #[error("the command in {container} did not finish within {}s", EXEC_TIMEOUT.as_secs())]
    Timeout {
        /// The container.
        container: String,
    },
    /// `return.json` is not JSON (KPO's value is JSON; the provider refuses it too).
    #[error("the XCom value in /airflow/xcom/return.json is not JSON: {0}")]
    NotJson(String),
    /// `return.json` is larger than [`MAX_XCOM_BYTES`].
    #[error("the XCom value is larger than {MAX_XCOM_BYTES} bytes")]
    TooLarge,
}

/// Whether `pod` carries KPO's XCom sidecar (its value is to be read with [`extract`]).
pub fn has_sidecar(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .is_some_and(|s| s.containers.iter().any(|c| c.name == SIDECAR_CONTAINER))
}

/// Reads the XCom value of the pod `name` through its sidecar, then stops the sidecar (also
/// when the read failed, as KPO does). `Ok(None)`: the main container wrote no value (the file
/// is missing or empty); `Ok(Some(text))`: the file's content as written (the caller parses
/// it: KPO's value is JSON). The read is retried ([`READ_ATTEMPTS`] attempts, exponential
/// pauses); the kill is tried once, and its failure is only logged.
pub async fn extract(api: &Api<Pod>, name: &str) -> Result<Option<String>, XcomError> {
    let value = read_with_retries(api, name).await;
    if let Err(err) = kill(api, name).await {
        tracing::warn!(pod = %name, error = %err, "could not stop the XCom sidecar, leaving it running (the pod's deletion or deadline stops it)");
    }
    value
}

/// Stops the sidecar as the provider does: the kill line on a shell's stdin, then the
/// fallback if the first wrote to stderr. The shell itself may die of the signal (a non-zero
/// exit is expected), so only stderr output counts as a failure.
async fn kill(api: &Api<Pod>, name: &str) -> Result<(), XcomError> {
    let mut last = Ok(());
    for line in [KILL_SCRIPT, KILL_FALLBACK] {
        let out = exec(api, name, &["/bin/sh"], Some(line)).await?;
        if out.stderr.trim().is_empty() {
            return Ok(());
        }
        last = Err(XcomError::Command {
            container: SIDECAR_CONTAINER.to_owned(),
            message: first_line(&out.stderr),
        });
    }
    last
}

async fn read_with_retries(api: &Api<Pod>, name: &str) -> Result<Option<String>, XcomError> {
    let mut pause = FIRST_PAUSE;
    let mut attempt = 1;
    loop {
        match read(api, name).await {
            Ok(value) => return Ok(value),
            Err(err @ (XcomError::TooLarge | XcomError::NotJson(_))) => return Err(err),
            Err(err) if attempt >= READ_ATTEMPTS => return Err(err),
            Err(err) => {
                tracing::info!(pod = %name, attempt, error = %err, "reading the XCom value failed; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
                attempt += 1;
            }
        }
    }
}

/// One read: `sh -c READ_SCRIPT` in the sidecar; stderr output is a failure (it is the
/// provider's), and a value must be JSON (the provider checks it before returning it).
async fn read(api: &Api<Pod>, name: &str) -> Result<Option<String>, XcomError> {
    let out = exec(api, name, &["/bin/sh", "-c", READ_SCRIPT], None).await?;
    if !out.stderr.trim().is_empty() {
        return Err(XcomError::Command {
            container: SIDECAR_CONTAINER.to_owned(),
            message: first_line(&out.stderr),
        });
    }
    if let Some(status) = out.failure {
        return Err(XcomError::Command {
            container: SIDECAR_CONTAINER.to_owned(),
            message: status,
        });
    }
    let value = interpret(out.stdout);
    if let Some(text) = &value
        && let Err(err) = serde_json::from_str::<serde_json::Value>(text)
    {
        return Err(XcomError::NotJson(err.to_string()));
    }
    Ok(value)
}

fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect()
}

/// The read's output as a value: `None` for the empty marker.
fn interpret(out: String) -> Option<String> {
    (out.trim_end() != EMPTY_RESULT).then_some(out)
}

/// What one exec gave.
struct Output {
    stdout: String,
    stderr: String,
    /// The Status message of a command that did not succeed.
    failure: Option<String>,
}

/// Runs `command` in the sidecar, writing `stdin` (and then its end) if given; returns its
/// output once it ended (bounded by [`EXEC_TIMEOUT`]).
async fn exec(
    api: &Api<Pod>,
    name: &str,
    command: &[&str],
    stdin: Option<&str>,
) -> Result<Output, XcomError> {
    tracing::debug!(pod = %name, ?command, "exec into the XCom sidecar");
    let ended = tokio::time::timeout(EXEC_TIMEOUT, exec_unbounded(api, name, command, stdin)).await;
    tracing::debug!(pod = %name, ?command, ok = ended.as_ref().is_ok_and(Result::is_ok), "exec ended");
    ended.unwrap_or_else(|_| {
        Err(XcomError::Timeout {
            container: SIDECAR_CONTAINER.to_owned(),
        })
    })
}

async fn exec_unbounded(
    api: &Api<Pod>,
    name: &str,
    command: &[&str],
    input: Option<&str>,
) -> Result<Output, XcomError> {
    let container = SIDECAR_CONTAINER;
    let command_failed = |message: String| XcomError::Command {
        container: container.to_owned(),
        message,
    };
    let params = AttachParams::default()
        .container(container)
        .stdin(input.is_some())
        .stdout(true)
        .stderr(true);
    let mut process = api
        .exec(name, command.iter().copied(), &params)
        .await
        .map_err(|source| XcomError::Exec {
            container: container.to_owned(),
            source,
        })?;
    let (Some(stdout), Some(stderr), Some(status)) =
        (process.stdout(), process.stderr(), process.take_status())
    else {
        // Invariant: both streams were asked for above, and each is taken once.
        return Err(command_failed(
            "the exec stream has no stdout/stderr".into(),
        ));
    };
    let stdin = process.stdin();
    let status_seen;
    let write = async {
        if let (Some(mut stdin), Some(line)) = (stdin, input) {
            stdin.write_all(line.as_bytes()).await?;
            stdin.write_all(b"\n").await?;
            stdin.shutdown().await?;
        }
        Ok::<(), std::io::Error>(())
    };
    let limit = u64::try_from(MAX_XCOM_BYTES).unwrap_or(u64::MAX) + 1;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let (mut stdout, mut stderr) = (stdout.take(limit), stderr.take(64 * 1024));
    let (read_out, read_err) = {
        let reading =
            async { tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err)) };
        let finishing = async { tokio::join!(write, status) };
        tokio::pin!(reading, finishing);
        // kube ends the streams when the command's Status arrives; but when its message loop
        // ends on an error (a stdin write after the server closed), the readers never see
        // their end: once the outcome is known, what is buffered is read for a moment only.
        let (read, (written, status)) = tokio::select! {
            read = &mut reading => (Some(read), (&mut finishing).await),
            finished = &mut finishing => {
                (tokio::time::timeout(DRAIN, &mut reading).await.ok(), finished)
            }
        };
        // The command may end before reading its stdin (the shell killed by its own kill
        // line): a write that failed after the stream closed is not the command's failure.
        if let Err(e) = written {
            tracing::debug!(error = %e, "writing to the sidecar's shell");
        }
        status_seen = status;
        match read {
            Some((o, e)) => (o.map(|_| ()), e.map(|_| ())),
            None => (Ok(()), Ok(())),
        }
    };
    let status = status_seen;
    read_out.map_err(|e| command_failed(e.to_string()))?;
    read_err.map_err(|e| command_failed(e.to_string()))?;
    if out.len() > MAX_XCOM_BYTES {
        return Err(XcomError::TooLarge);
    }
    if let Err(join) = process.join().await {
        tracing::debug!(error = %join, "the exec stream ended with an error");
    }
    let failure = match status {
        Some(s) if s.status.as_deref() == Some("Success") => None,
        Some(s) => Some(s.message.unwrap_or_else(|| "failed".into())),
        None => Some("the stream ended without the command's status".into()),
    };
    Ok(Output {
        stdout: String::from_utf8(out)
            .map_err(|_| command_failed("the value is not UTF-8".into()))?,
        stderr: String::from_utf8_lossy(&err).into_owned(),
        failure,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The empty marker (with the newline `echo` adds) means no value; anything else is the
    /// value as written.
    #[test]
    fn the_empty_marker_should_mean_no_value() {
        assert_eq!(interpret(format!("{EMPTY_RESULT}\n")), None);
        assert_eq!(interpret("[1,2]\n".into()), Some("[1,2]\n".into()));
    }

    /// Only KPO's sidecar, by name, makes a pod an XCom pod.
    #[test]
    fn a_pod_with_the_sidecar_should_be_an_xcom_pod() {
        let pod = |names: &[&str]| Pod {
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                containers: names
                    .iter()
                    .map(|n| k8s_openapi::api::core::v1::Container {
                        name: (*n).into(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(has_sidecar(&pod(&["base", SIDECAR_CONTAINER])));
        assert!(!has_sidecar(&pod(&["base", "other"])));
    }
}
