//! `podline run --result-file FILE`: a machine-readable account of the run for a wrapper that
//! cannot read podline's stdout as a document (stdout carries the container's log lines).
//!
//! The file is written twice, each time whole (a temporary file renamed over it, so a reader
//! never sees half a document):
//! 1. before the pod is created, `{"stage": "started", "pod": ..., "namespace": ...}`: the pod's
//!    name is fixed up front (the random suffix chosen here, then used as an exact name) or, with
//!    `--reattach`, is the name of the live pod of the task. Airflow's operator pushes it to XCom
//!    while the task runs.
//! 2. at the end, `{"stage": "finished", ...}` with every field of `-o json`'s result (phase,
//!    reason, per-container exit codes and termination messages, Warning events, pod name) plus
//!    `failureReport`, the text podline prints on failure.

use podline_phase::Phase;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use podline_launch::{TASK_ID_LABEL, TaskResult, TaskSpec};
use serde::Serialize;

/// Where the run's result documents go.
#[derive(Debug, Clone)]
pub struct ResultFile {
    path: PathBuf,
}

/// The first document: which pod this run is about.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Started<'a> {
    stage: &'static str,
    pod: &'a str,
    namespace: &'a str,
    /// True when `--reattach` found a live pod of the task (the run follows it, creates none).
    reattach: bool,
}

/// The last document: the result of `-o json` plus the failure report.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Finished<'a> {
    stage: &'static str,
    #[serde(flatten)]
    result: &'a TaskResult,
    succeeded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure_report: Option<String>,
}

impl ResultFile {
    /// A result file at `path` (nothing is written yet).
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
        }
    }

    /// Fixes the pod's name in `spec` (so it is known before the create) and writes the
    /// `started` document. With `reattach`, a single live pod of the task is named instead: the
    /// launcher will find the same one. A spec that does not build is left alone (the launcher
    /// reports it) and nothing is written.
    pub async fn announce(
        &self,
        client: &kube::Client,
        default_namespace: &str,
        spec: &mut TaskSpec,
        reattach: bool,
    ) -> anyhow::Result<()> {
        let Ok(built) = spec.build_pod(default_namespace) else {
            return Ok(());
        };
        spec.name = Some(built.name.clone());
        spec.exact_name = true;
        let mut pod = built.name;
        let mut reattaching = false;
        if reattach
            && let Some(task_id) = &spec.task_id
            && let Some(live) = live_pod(client, &built.namespace, task_id).await
        {
            pod = live;
            reattaching = true;
        }
        self.write(&Started {
            stage: "started",
            pod: &pod,
            namespace: &built.namespace,
            reattach: reattaching,
        })
    }

    /// Writes the `finished` document.
    pub fn finish(&self, result: &TaskResult) -> anyhow::Result<()> {
        let succeeded = result.succeeded();
        self.write(&Finished {
            stage: "finished",
            result,
            succeeded,
            failure_report: (!succeeded).then(|| result.failure_report()),
        })
    }

    fn write(&self, doc: &impl Serialize) -> anyhow::Result<()> {
        let mut text = serde_json::to_string(doc)?;
        text.push('\n');
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        write_exclusively(&tmp, text.as_bytes())
            .with_context(|| format!("--result-file: cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, &self.path)
            .with_context(|| format!("--result-file: cannot write {}", self.path.display()))?;
        Ok(())
    }
}

/// Writes `text` to a new file at `path`, created exclusively (`O_CREAT|O_EXCL`, which never
/// follows a symbolic link: a link planted at `path` makes this fail instead of writing through
/// it) and readable by the owner only. A leftover of an earlier run (a plain file, or a link) is
/// unlinked first; unlinking removes a link itself, never its target.
fn write_exclusively(path: &Path, text: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text)?;
    file.sync_all()
}

/// The name of the one live (not finished, not being deleted) pod labelled with `task_id`, if
/// exactly one exists. A failed list gives `None`: the launcher's own lookup, which retries,
/// reports the trouble.
async fn live_pod(client: &kube::Client, namespace: &str, task_id: &str) -> Option<String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let lp = ListParams::default().labels(&format!("{TASK_ID_LABEL}={task_id}"));
    // Item by item: a pod of the task that does not decode is skipped (logged), not a failure.
    let once = podline_client::retry::RetryPolicy::default().with_max_attempts(1);
    let list = podline_client::list::Pages::objects(&api, lp)
        .all(&once, "list task pods")
        .await
        .ok()?;
    let mut live = list.items.into_iter().filter(|p| {
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        !phase.is_some_and(Phase::is_terminal_str) && p.metadata.deletion_timestamp.is_none()
    });
    let first = live.next()?;
    if live.next().is_some() {
        return None;
    }
    first.metadata.name
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod write_tests {
    use super::*;

    /// A link planted at `FILE.tmp` (e.g. by another user of a shared directory) is not
    /// followed: its target keeps its content, the result lands in FILE.
    #[test]
    fn a_link_at_the_temporary_name_should_not_be_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let path = dir.path().join("result.json");
        std::os::unix::fs::symlink(&victim, dir.path().join("result.json.tmp")).unwrap();
        let file = ResultFile::new(&path);
        file.write(&serde_json::json!({"stage": "started"}))
            .unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(std::fs::read_to_string(&path).unwrap().contains("started"));
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
    }
}
