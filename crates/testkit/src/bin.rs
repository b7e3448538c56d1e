//! The one way the binary's tests start `podline` against a sim: each integration test of the
//! binary used to carry its own copy of this builder.

use std::path::Path;
use std::process::Stdio;

use tokio::process::Command;

/// `podline SUBCOMMAND --kubeconfig FILE` for the binary at `bin` (pass
/// `env!("CARGO_BIN_EXE_podline")`: only the binary's own tests know its path). The cluster flags
/// come after the subcommand; `KUBECONFIG` is removed so the flag is the only source; create
/// retries are fast (10 ms base, 200 ms cap) so fault tests stay short; stdout and stderr are
/// piped; the child is killed when the handle drops, so a failed test leaves no process behind.
pub fn podline(bin: &str, subcommand: &str, kubeconfig: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg(subcommand)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env_remove("KUBECONFIG")
        .env("PODLINE_CREATE_BACKOFF_BASE", "10ms")
        .env("PODLINE_CREATE_BACKOFF_CAP", "200ms")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}
