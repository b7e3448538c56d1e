//! Many tasks at once: `--count N --parallel M` and `-f tasks.yaml`, with a client-side
//! concurrency limit, an optional progress bar, and a summary (succeeded / failed / retries /
//! p50 and p99 time to running).

use std::io::IsTerminal;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::SpecError;
use crate::launcher::{Cancel, Launcher};
use crate::logs::{LogSink, NullSink};
use crate::report::TaskResult;
use crate::spec::TaskSpec;

/// The outcome of a many-task run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Tasks whose main container exited 0.
    pub succeeded: usize,
    /// All other tasks.
    pub failed: usize,
    /// Create retries summed over all tasks.
    pub retries: u64,
    /// Median time from first create attempt to running, ms.
    pub p50_time_to_running_ms: Option<u64>,
    /// 99th percentile of the same, ms.
    pub p99_time_to_running_ms: Option<u64>,
    /// Wall time of the whole run, ms.
    pub elapsed_ms: u64,
    /// Every task's result, in input order.
    pub results: Vec<TaskResult>,
}

impl Summary {
    /// Builds the summary from results in input order.
    pub fn from_results(results: Vec<TaskResult>, elapsed: std::time::Duration) -> Self {
        let succeeded = results.iter().filter(|r| r.succeeded()).count();
        let mut ttr: Vec<u64> = results
            .iter()
            .filter_map(|r| r.timings.time_to_running_ms)
            .collect();
        ttr.sort_unstable();
        Self {
            succeeded,
            failed: results.len() - succeeded,
            retries: results.iter().map(|r| u64::from(r.retries)).sum(),
            p50_time_to_running_ms: percentile(&ttr, 50),
            p99_time_to_running_ms: percentile(&ttr, 99),
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            results,
        }
    }

    /// The summary table printed at the end of `--count` / `-f` runs.
    pub fn table(&self) -> String {
        let ms = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v} ms"));
        let mut out = String::new();
        out.push_str(&format!(
            "{:<10} {:<8} {:<8} {:<14} {:<14} {}\n",
            "SUCCEEDED", "FAILED", "RETRIES", "P50 TO RUN", "P99 TO RUN", "ELAPSED"
        ));
        out.push_str(&format!(
            "{:<10} {:<8} {:<8} {:<14} {:<14} {:.1} s\n",
            self.succeeded,
            self.failed,
            self.retries,
            ms(self.p50_time_to_running_ms),
            ms(self.p99_time_to_running_ms),
            self.elapsed_ms as f64 / 1000.0
        ));
        for r in self.results.iter().filter(|r| !r.succeeded()) {
            out.push_str(&format!(
                "  failed: {} exit {}: {}\n",
                if r.pod.is_empty() { "(no pod)" } else { &r.pod },
                r.exit_code,
                r.error.as_deref().unwrap_or("container failed")
            ));
        }
        out
    }
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[u64], p: usize) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

/// Parses a tasks file's text (YAML or JSON) into specs: a list of tasks, or `{tasks: [...]}`;
/// fields are those of [`TaskSpec`] in camelCase (`image`, `command`, `env` as `[[K, V]]`,
/// `labels`, `taskId`...).
///
/// The whole file is checked before it is returned, every task as [`TaskSpec::build_pod`] would
/// check it, so a bad third task fails the run before the first one is created. An error names
/// the task (index from 1, and its name or task id), the field and what was expected
/// ([`SpecError::Task`]). Each task is read on its own (not through an untagged enum, whose error
/// would only say that the data matched no variant).
pub fn parse_tasks(path: &str, text: &str) -> Result<Vec<TaskSpec>, SpecError> {
    let file_error = |message: String| SpecError::TasksFile {
        path: path.to_owned(),
        message,
    };
    let document: serde_json::Value = serde_saphyr::from_str(text)
        .map_err(|e| file_error(format!("not a list of tasks: {e}")))?;
    let tasks = match document {
        serde_json::Value::Array(tasks) => tasks,
        serde_json::Value::Object(mut map) if map.len() == 1 && map.contains_key("tasks") => {
            match map.remove("tasks") {
                Some(serde_json::Value::Array(tasks)) => tasks,
                _ => return Err(file_error("`tasks:` must be a list of tasks".into())),
            }
        }
        serde_json::Value::Null => Vec::new(),
        other => {
            return Err(file_error(format!(
                "not a list of tasks: expected a list of tasks or `tasks: [...]`, got {}",
                json_kind(&other)
            )));
        }
    };
    if tasks.is_empty() {
        return Err(file_error(
            "no tasks in the file (expected a list of tasks)".into(),
        ));
    }
    tasks
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            let name = ["name", "taskId"]
                .iter()
                .find_map(|k| value.get(k).and_then(|v| v.as_str()).map(str::to_owned));
            read_task(value).map_err(|(field, message)| SpecError::Task {
                path: path.to_owned(),
                index: i + 1,
                name,
                field,
                message,
            })
        })
        .collect()
}

/// One task of a tasks file, read and checked; the error is (field, what is wrong).
fn read_task(value: serde_json::Value) -> Result<TaskSpec, (String, String)> {
    let serde_json::Value::Object(fields) = value else {
        return Err((
            "(task)".into(),
            format!(
                "expected a mapping of task fields (image, command, ...), got {}",
                json_kind(&value)
            ),
        ));
    };
    let spec = match serde_json::from_value::<TaskSpec>(serde_json::Value::Object(fields.clone())) {
        Ok(spec) => spec,
        Err(whole) => {
            // Find the field at fault: read each field alone (the others default).
            for (key, field_value) in fields {
                let one = serde_json::Map::from_iter([(key.clone(), field_value)]);
                if let Err(err) = serde_json::from_value::<TaskSpec>(serde_json::Value::Object(one))
                {
                    return Err((key, explain_serde(&err.to_string())));
                }
            }
            return Err(("(task)".into(), explain_serde(&whole.to_string())));
        }
    };
    match spec.build_pod("default") {
        Ok(_) => Ok(spec),
        Err(err) => Err(file_field_error(&err)),
    }
}

/// serde's message, with a hint for the common YAML trap: an unquoted `true`, `5` or `null`
/// where a string is expected (`command: [true]`).
fn explain_serde(message: &str) -> String {
    if message.contains("invalid type") && message.contains("expected a string") {
        format!(
            "{message} (quote it, e.g. \"true\" or \"5\": YAML reads unquoted true, 5 or null as a boolean, number or null)"
        )
    } else {
        message.to_owned()
    }
}

/// A [`TaskSpec::build_pod`] error, told in the file's terms: the field as spelled in the file
/// and what was expected (the flag-oriented wording would point at flags the file doesn't use).
fn file_field_error(err: &SpecError) -> (String, String) {
    let field = |flag: &str| {
        match flag {
            "--label" => "labels",
            "--annotation" => "annotations",
            "--node-selector" => "nodeSelector",
            "--task-id" => "taskId",
            "--run" => "run",
            "--requests" => "requests",
            "--limits" => "limits",
            "--name" => "name",
            "activeDeadlineSeconds" => "activeDeadline",
            other => other,
        }
        .to_owned()
    };
    match err {
        SpecError::MissingImage => (
            "image".into(),
            "missing: every task needs an image (e.g. `image: busybox:1.36`)".into(),
        ),
        SpecError::InvalidLabel {
            flag,
            what,
            value,
            why,
        } => (field(flag), format!("{what} {value:?} is invalid: {why}")),
        SpecError::InvalidQuantity { flag, value } => (
            field(flag),
            format!(
                "{value:?} is not a Kubernetes quantity (expected e.g. cpu: 500m, memory: 1Gi)"
            ),
        ),
        SpecError::InvalidName { value, why } => (
            "name".into(),
            format!(
                "{value:?} is not a valid pod name: {why} (expected lower-case a-z, 0-9, '-' and '.', starting and ending alphanumeric)"
            ),
        ),
        SpecError::OutOfRange { flag, message } => (field(flag), message.clone()),
        other => ("(task)".into(), other.to_string()),
    }
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "nothing (null)",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "a mapping",
    }
}

/// Runs `specs` with at most `parallel` at a time. Logs are discarded unless `sink` is given.
/// A progress bar is drawn on stderr when `progress` is set and stdout is a terminal.
///
/// `specs` is taken as an iterator, so that `--count N` can hand over one spec repeated rather
/// than N copies made up front.
pub async fn run_many(
    launcher: &Launcher,
    specs: impl IntoIterator<Item = TaskSpec, IntoIter: ExactSizeIterator>,
    parallel: usize,
    sink: Option<Arc<dyn LogSink>>,
    progress: bool,
    cancel: &Cancel,
) -> Summary {
    let started = std::time::Instant::now();
    let specs = specs.into_iter();
    let total = specs.len();
    let sink: Arc<dyn LogSink> = sink.unwrap_or_else(|| Arc::new(NullSink));
    let bar = (progress && std::io::stdout().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(total as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} tasks ({per_sec}, eta {eta}) {msg}",
        ) {
            bar.set_style(style);
        }
        bar
    });
    // One pod watch per namespace for all tasks, not one per task in flight.
    let launcher = launcher.sharing_pod_watches();
    let mut results: Vec<Option<TaskResult>> = vec![None; total];
    let mut failed = 0usize;
    let tasks = specs.enumerate().map(|(index, spec)| {
        let launcher = launcher.clone();
        let sink = sink.clone();
        let cancel = cancel.clone();
        async move { (index, launcher.run(&spec, sink, &cancel).await) }
    });
    at_most_in_flight(tasks, parallel, |joined| {
        match joined {
            Ok((index, result)) => {
                if !result.succeeded() {
                    failed += 1;
                }
                if let Some(slot) = results.get_mut(index) {
                    *slot = Some(result);
                }
            }
            Err(err) => {
                failed += 1;
                tracing::error!(error = %err, "a task panicked");
            }
        }
        if let Some(bar) = &bar {
            bar.inc(1);
            if failed > 0 {
                bar.set_message(format!("{failed} failed"));
            }
        }
    })
    .await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let results = results
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| TaskResult {
                exit_code: crate::exit::LOST,
                error: Some("the task panicked".into()),
                ..TaskResult::default()
            })
        })
        .collect();
    Summary::from_results(results, started.elapsed())
}

/// Spawns the futures of `tasks` one by one, with at most `limit` of them alive at once, and hands
/// each outcome to `done` as it finishes (in completion order).
///
/// Why not spawn them all and let a semaphore hold them back: a task's future exists from its
/// spawn, and a launch's future is large (it holds every stage of a task, tens of KiB), so
/// `--count 10000` would hold ten thousand of them while waiting, and memory would grow with the
/// count instead of with `--parallel`. Here a future is made only when a slot is free.
async fn at_most_in_flight<F, T>(
    tasks: impl IntoIterator<Item = F>,
    limit: usize,
    mut done: impl FnMut(Result<T, tokio::task::JoinError>),
) where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let limit = limit.max(1);
    let mut set = JoinSet::new();
    let mut tasks = tasks.into_iter();
    loop {
        // Free a slot before taking the next task: taking it makes its future.
        while set.len() >= limit {
            if let Some(joined) = set.join_next().await {
                done(joined);
            }
        }
        let Some(task) = tasks.next() else { break };
        set.spawn(task);
    }
    while let Some(joined) = set.join_next().await {
        done(joined);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn at_most_limit_task_futures_should_exist_at_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        // Counts futures that were made and not yet dropped: a future made while waiting for a
        // slot counts too, which is what holds memory.
        struct Alive(Arc<AtomicUsize>);
        impl Alive {
            fn new(alive: &Arc<AtomicUsize>, most: &AtomicUsize) -> Self {
                let now = alive.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                Alive(alive.clone())
            }
        }
        impl Drop for Alive {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let (alive, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let tasks = (0..100).map(|i| {
            let guard = Alive::new(&alive, &most);
            async move {
                tokio::task::yield_now().await;
                drop(guard);
                i
            }
        });
        let mut finished = Vec::new();
        at_most_in_flight(tasks, 3, |joined| finished.push(joined.unwrap())).await;
        finished.sort_unstable();
        assert_eq!(finished, (0..100).collect::<Vec<_>>());
        assert_eq!(most.load(Ordering::SeqCst), 3, "futures alive at once");
        assert_eq!(alive.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn percentiles_should_use_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50), Some(50));
        assert_eq!(percentile(&v, 99), Some(99));
        assert_eq!(percentile(&[7], 99), Some(7));
        assert_eq!(percentile(&[], 50), None);
    }

    #[test]
    fn tasks_file_should_parse_list_and_wrapped_forms() {
        let list = parse_tasks(
            "t.yaml",
            "- image: busybox\n  command: [sh, -c, 'exit 0']\n  taskId: a\n- image: alpine\n",
        )
        .unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].task_id.as_deref(), Some("a"));
        assert_eq!(list[1].image.as_deref(), Some("alpine"));
        let wrapped =
            parse_tasks("t.json", r#"{"tasks":[{"image":"x","activeDeadline":30}]}"#).unwrap();
        assert_eq!(
            wrapped[0].active_deadline,
            Some(std::time::Duration::from_secs(30))
        );
        let err = parse_tasks("t.yaml", "- imgae: typo\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("t.yaml") && err.contains("task 1") && err.contains("imgae"),
            "{err}"
        );
    }

    #[test]
    fn every_task_should_be_checked_before_any_runs() {
        let text = "- image: busybox\n- name: second\n  command: [echo, hi]\n- image: alpine\n";
        let err = parse_tasks("t.yaml", text).unwrap_err();
        assert!(
            matches!(&err, SpecError::Task { index: 2, field, .. } if field == "image"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "-f t.yaml: task 2 (\"second\"): image: missing: every task needs an image (e.g. `image: busybox:1.36`)"
        );
        for (text, index, field, want) in [
            (
                "- image: a\n- image: b\n  command: [true]\n",
                2,
                "command",
                "expected a string",
            ),
            (
                "tasks:\n- image: a\n  taskId: t1\n  labels: {\"bad key\": v}\n",
                1,
                "labels",
                "bad key",
            ),
            (
                "- image: a\n  activeDeadline: 18446744073709551615\n",
                1,
                "activeDeadline",
                "1 to 2147483647",
            ),
            (
                "- image: a\n  activeDeadline: 0\n",
                1,
                "activeDeadline",
                "1 to",
            ),
            (
                "- image: a\n  requests: {cpu: lots}\n",
                1,
                "requests",
                "quantity",
            ),
            ("- image: a\n- just a string\n", 2, "(task)", "a string"),
        ] {
            let err = parse_tasks("t.yaml", text).unwrap_err();
            let shown = err.to_string();
            match &err {
                SpecError::Task {
                    index: i, field: f, ..
                } => assert_eq!((*i, f.as_str()), (index, field), "{shown}"),
                other => panic!("{other:?}"),
            }
            assert!(shown.contains(want), "{text:?}: {shown}");
            assert!(!shown.contains("untagged"), "{shown}");
        }
        assert!(parse_tasks("t.yaml", "").is_err());
        assert!(parse_tasks("t.yaml", "[]").is_err());
        assert!(parse_tasks("t.yaml", "image: a\n").is_err());
    }

    #[test]
    fn summary_should_count_and_tabulate() {
        let ok = TaskResult {
            retries: 2,
            timings: crate::Timings {
                time_to_running_ms: Some(10),
                ..Default::default()
            },
            ..Default::default()
        };
        let bad = TaskResult {
            pod: "p".into(),
            exit_code: 1,
            ..Default::default()
        };
        let s = Summary::from_results(vec![ok.clone(), ok, bad], std::time::Duration::from_secs(1));
        assert_eq!((s.succeeded, s.failed, s.retries), (2, 1, 4));
        assert_eq!(s.p50_time_to_running_ms, Some(10));
        let table = s.table();
        assert!(
            table.contains("SUCCEEDED") && table.contains("failed: p exit 1"),
            "{table}"
        );
    }
}
