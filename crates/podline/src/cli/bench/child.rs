//! A `podline` child process for memory measurements: the benchmark starts our own binary so
//! its resident set is the product's, not the benchmark's.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::process::{Child, Command};

/// `podline sim` running as a child process on a free port, plain HTTP.
pub struct SimProcess {
    child: Child,
    _dir: tempfile::TempDir,
    /// The kubeconfig the child wrote.
    pub kubeconfig_yaml: String,
}

impl SimProcess {
    /// Starts `podline sim` with `extra` flags and waits until its kubeconfig is written.
    pub async fn start(extra: &[&str]) -> anyhow::Result<SimProcess> {
        let dir = tempfile::tempdir().context("creating a temporary directory")?;
        let kubeconfig: PathBuf = dir.path().join("sim.kubeconfig");
        let exe = std::env::current_exe().context("locating the podline binary")?;
        let child = Command::new(exe)
            .arg("sim")
            .arg("--plain-http")
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting `podline sim`")?;
        for _ in 0..200 {
            if let Ok(text) = std::fs::read_to_string(&kubeconfig)
                && text.contains("server:")
            {
                return Ok(SimProcess {
                    child,
                    _dir: dir,
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

/// Resident set size of a process in MiB, from /proc.
pub fn rss_mib(pid: u32) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .context("reading /proc/<pid>/status")?;
    let kib = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|value| value.parse::<f64>().ok())
        .context("no VmRSS in /proc/<pid>/status")?;
    Ok(kib / 1024.0)
}
