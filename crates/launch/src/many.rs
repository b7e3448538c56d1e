//! Many tasks at once (one task repeated N times, or a tasks file), at most M of them in flight
//! (a client-side concurrency limit), an optional progress bar, and a summary (succeeded / failed / retries /
//! p50 and p99 time to running).

use std::io::IsTerminal;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

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

    /// The summary table printed at the end of a many-task run.
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

/// Runs `specs` with at most `parallel` at a time. Logs are discarded unless `sink` is given.
/// A progress bar is drawn on stderr when `progress` is set and stdout is a terminal.
///
/// `specs` is taken as an iterator, so that a task run N times can be handed over as one spec
/// repeated rather than N copies made up front.
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
/// ten thousand tasks would hold ten thousand of them while waiting, and memory would grow with
/// the number of tasks instead of with `limit`. Here a future is made only when a slot is free.
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
