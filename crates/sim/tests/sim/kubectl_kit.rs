//! Running the real kubectl against a sim, shared by the kubectl tests (pods, the new kinds,
//! exec): one way to build the command, one bound on how long it may take, one way to read
//! its outcome.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use tokio::process::Command;

/// How long one kubectl command may take before the test fails.
pub const KUBECTL_TIMEOUT: Duration = Duration::from_secs(30);

/// `kubectl --kubeconfig KUBECONFIG ARGS...`, with no stdin, killed when dropped.
pub fn kubectl_cmd(kubeconfig: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("kubectl");
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// Runs kubectl to its end (within [`KUBECTL_TIMEOUT`]) and returns what it printed.
pub async fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    let mut cmd = kubectl_cmd(kubeconfig, args);
    tokio::time::timeout(KUBECTL_TIMEOUT, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("kubectl {args:?} timed out"))
        .expect("kubectl runs")
}

/// The stdout of a kubectl that succeeded (the test fails with both outputs otherwise).
pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "kubectl failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The stderr of a kubectl that failed (the test fails if it succeeded).
pub fn failed(out: &Output) -> String {
    assert!(!out.status.success(), "kubectl should have failed");
    String::from_utf8_lossy(&out.stderr).into_owned()
}
