//! The demo's SIGKILL round: `podline run --count N --parallel N`, started as a child process of
//! this very binary, is killed with SIGKILL while all its pods run. Nothing of it can clean up;
//! its liveness Lease stops being renewed, and the demo's reaper (the `--reap` of its recorder)
//! must delete every one of its pods. The round measures how long that took against the
//! documented bound, and counts as orphans only pods still there well past it: on a loaded
//! machine the reaper's timing slips by a fraction of a second, an orphan never goes.

use podline_phase::Phase;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use tokio::time::Instant;

use super::create::DEMO_CREATE_ATTEMPTS;
use super::recording::{REAP_EVERY, REAP_GRACE};

/// The label that tells this round's pods (`podline run` names their run itself).
const ROUND_LABEL: &str = "demo.podline.io/round";
/// The killed launcher's liveness Lease: short, so the round is short (the default is 10 s).
const LEASE_DURATION: Duration = Duration::from_secs(2);
/// How often it renews the Lease (the default is 3 s).
const LEASE_RENEW_EVERY: Duration = Duration::from_millis(500);
/// Room on top of the bound for the pods' own graceful stop, the recorder's release of their
/// finalizer and this round's polling.
const STOP_ALLOWANCE: Duration = Duration::from_secs(1);
/// How long past the bound (and its allowance) the round waits for the last pod before it calls
/// the pods still there orphans: far more than a busy machine's slip, so a pod still in the API
/// then is one the reaper will not delete.
const ORPHAN_AFTER: Duration = Duration::from_secs(15);
/// How long the launcher may take to have all its pods running (a create storm is on).
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the round lists the launcher's pods while it waits.
const POLL_EVERY: Duration = Duration::from_millis(100);

/// What the round measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillFigures {
    /// Pods running when the launcher was killed.
    pub pods: usize,
    /// Of those, pods the API no longer had by the round's last look (bound + allowance +
    /// [`ORPHAN_AFTER`] at the latest).
    pub deleted: usize,
    /// From the kill to the last pod gone (or to that last look).
    pub took: Duration,
    /// The documented bound: Lease duration + grace + the reaper's passes (see [`bound`]).
    pub bound: Duration,
}

impl KillFigures {
    /// Pods still in the API long past the bound: they outlived their launcher.
    pub fn orphans(&self) -> usize {
        self.pods - self.deleted
    }

    /// Whether every pod was gone within the bound and the allowance for their stop.
    pub fn met_bound(&self) -> bool {
        self.orphans() == 0 && self.took <= self.bound + STOP_ALLOWANCE
    }
}

/// The bound within which the reaper deletes a SIGKILLed launcher's pods, counted from the
/// kill: the Lease's duration and the reaper's grace after the last renewal the reaper saw
/// (which it sees up to one pass after it happened), then the next pass.
pub fn bound() -> Duration {
    LEASE_DURATION + REAP_GRACE + 2 * REAP_EVERY
}

/// Runs the round: launches `pods` pods from a child `podline run`, SIGKILLs it once they all
/// run, and measures how long the reaper takes to delete them.
pub async fn run(
    client: &kube::Client,
    kubeconfig: &Path,
    round: usize,
    pods: usize,
) -> anyhow::Result<KillFigures> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let selector = ListParams::default().labels(&format!("{ROUND_LABEL}={round}"));
    let log = tempfile::NamedTempFile::new().context("creating the launcher's log file")?;
    let mut child = launcher(kubeconfig, round, pods, log.as_file())?
        .spawn()
        .context("starting the launcher (podline run) as a child process")?;

    let started = Instant::now();
    loop {
        if let Some(list) = list(&api, &selector).await?
            && list.len() == pods
            && list.iter().all(is_running)
        {
            break;
        }
        if let Some(status) = child.try_wait().context("checking on the launcher")? {
            let output = std::fs::read_to_string(log.path()).unwrap_or_default();
            bail!("the launcher exited ({status}) before its pods all ran:\n{output}");
        }
        if started.elapsed() > START_TIMEOUT {
            bail!(
                "the launcher's {pods} pods did not all run within {} s",
                START_TIMEOUT.as_secs()
            );
        }
        tokio::time::sleep(POLL_EVERY).await;
    }

    // SIGKILL: no signal handler, no clean-up, no Lease release.
    child.start_kill().context("killing the launcher")?;
    child
        .wait()
        .await
        .context("waiting for the killed launcher")?;
    let killed = Instant::now();
    let deadline = killed + bound() + STOP_ALLOWANCE + ORPHAN_AFTER;
    let left = loop {
        let left = list(&api, &selector).await?.map(|pods| pods.len());
        if left == Some(0) || Instant::now() >= deadline {
            break left.unwrap_or(pods);
        }
        tokio::time::sleep(POLL_EVERY).await;
    };
    Ok(KillFigures {
        pods,
        deleted: pods.saturating_sub(left),
        took: killed.elapsed(),
        bound: bound(),
    })
}

/// `podline run --count N --parallel N` for this round: long-running pods (they must outlive
/// the launcher), the demo's short Lease, output into `log`. PODLINE_* variables of the demo's
/// own environment (e.g. PODLINE_ON_FINISH=keep) are not passed on: the round decides its flags.
fn launcher(
    kubeconfig: &Path,
    round: usize,
    pods: usize,
    log: &std::fs::File,
) -> anyhow::Result<tokio::process::Command> {
    let exe = std::env::current_exe().context("finding the podline binary")?;
    let mut cmd = tokio::process::Command::new(exe);
    let count = pods.to_string();
    let ms = |d: Duration| format!("{}ms", d.as_millis());
    cmd.args(["run", "--kubeconfig"])
        .arg(kubeconfig)
        .args(["--namespace", "default", "--image", "busybox:1.36"])
        .args(["--count", &count, "--parallel", &count])
        .args(["--lease-duration", &ms(LEASE_DURATION)])
        .args(["--lease-renew-every", &ms(LEASE_RENEW_EVERY)])
        // As every demo pod: held for the recorder until their final state is recorded.
        .arg("--finalizer")
        .args(["--create-attempts", &DEMO_CREATE_ATTEMPTS.to_string()])
        .args([
            "--create-backoff-base",
            "50ms",
            "--create-backoff-cap",
            "2s",
        ])
        .args(["--label", &format!("{ROUND_LABEL}={round}")])
        .args(["--annotation", "sim.podline.io/duration=300s"])
        .args(["--annotation", "sim.podline.io/log-lines=3"])
        .args(["--", "sleep", "300"])
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::from(
            log.try_clone().context("sharing the log file")?,
        ))
        .stderr(Stdio::from(
            log.try_clone().context("sharing the log file")?,
        ))
        .kill_on_drop(true);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PODLINE_") {
            cmd.env_remove(key);
        }
    }
    Ok(cmd)
}

/// The launcher's pods; `None` when the API answered with an error worth trying again (the
/// demo's faults include a 503 on a LIST).
async fn list(api: &Api<Pod>, selector: &ListParams) -> anyhow::Result<Option<Vec<Pod>>> {
    match api.list(selector).await {
        Ok(list) => Ok(Some(list.items)),
        Err(err) if podline_client::retry::classify(&err).is_retryable() => Ok(None),
        Err(err) => Err(err).context("listing the launcher's pods"),
    }
}

fn is_running(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(Phase::Running.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_lease_the_grace_and_two_passes() {
        assert_eq!(bound(), Duration::from_secs(4));
        let figures = KillFigures {
            pods: 10,
            deleted: 8,
            took: Duration::from_secs(5),
            bound: bound(),
        };
        assert_eq!(figures.orphans(), 2);
        assert!(!figures.met_bound());
        let all = |took| KillFigures {
            pods: 10,
            deleted: 10,
            took,
            bound: bound(),
        };
        assert_eq!(all(Duration::from_secs(6)).orphans(), 0);
        assert!(all(Duration::from_millis(4900)).met_bound());
        assert!(!all(Duration::from_millis(5200)).met_bound(), "late");
    }
}
