//! A `podline` child process for memory measurements: the benchmark starts our own binary so
//! its resident set is the product's, not the benchmark's.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::process::{Child, Command};

/// The file the sim child writes its kubeconfig to, in its temporary directory.
const KUBECONFIG_FILE: &str = "sim.kubeconfig";

/// A command that runs the `podline` binary Cargo built with this benchmark as a quiet child (no
/// stdin, output discarded), killed if the benchmark drops it.
pub fn podline() -> anyhow::Result<Command> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_podline"));
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    Ok(command)
}

/// `podline sim` running as a child process on a free port (plain HTTP or HTTPS).
pub struct SimProcess {
    child: Child,
    dir: tempfile::TempDir,
    /// The kubeconfig the child wrote.
    pub kubeconfig_yaml: String,
}

impl SimProcess {
    /// Starts `podline sim` over plain HTTP with `extra` flags and waits until its kubeconfig is
    /// written.
    pub async fn start(extra: &[&str]) -> anyhow::Result<SimProcess> {
        Self::start_with(true, extra).await
    }

    /// Starts `podline sim` over HTTPS (with its generated CA, as a user would run it) with
    /// `extra` flags and waits until its kubeconfig is written.
    pub async fn start_tls(extra: &[&str]) -> anyhow::Result<SimProcess> {
        Self::start_with(false, extra).await
    }

    /// The kubeconfig's path, for child processes that take `--kubeconfig`.
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.dir.path().join(KUBECONFIG_FILE)
    }

    async fn start_with(plain_http: bool, extra: &[&str]) -> anyhow::Result<SimProcess> {
        let dir = tempfile::tempdir().context("creating a temporary directory")?;
        let kubeconfig: PathBuf = dir.path().join(KUBECONFIG_FILE);
        let child = podline()?
            .arg("sim")
            .args(plain_http.then_some("--plain-http"))
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .args(extra)
            .spawn()
            .context("starting `podline sim`")?;
        for _ in 0..200 {
            if let Ok(text) = std::fs::read_to_string(&kubeconfig)
                && text.contains("server:")
            {
                return Ok(SimProcess {
                    child,
                    dir,
                    kubeconfig_yaml: text,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("`podline sim` did not write its kubeconfig within 10 s")
    }

    /// The child's current resident set size in MiB (VmRSS).
    pub fn rss_mib(&self) -> anyhow::Result<f64> {
        let pid = self.child.id().context("the sim child has exited")?;
        rss_mib(pid)
    }
}

/// Peak resident set size of a process in MiB so far (VmHWM), from /proc.
pub fn peak_rss_mib(pid: u32) -> anyhow::Result<f64> {
    status_kib(pid, "VmHWM:").map(|kib| kib / 1024.0)
}

/// Resident set size of a process in MiB, from /proc.
pub fn rss_mib(pid: u32) -> anyhow::Result<f64> {
    status_kib(pid, "VmRSS:").map(|kib| kib / 1024.0)
}

/// A `kB` field of /proc/<pid>/status.
fn status_kib(pid: u32, field: &str) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .context("reading /proc/<pid>/status")?;
    status
        .lines()
        .find(|line| line.starts_with(field))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|value| value.parse::<f64>().ok())
        .with_context(|| format!("no {field} in /proc/<pid>/status"))
}
