//! Many tasks at once (one task repeated N times, or a tasks file), at most M of them in flight
//! (a client-side concurrency limit), an optional progress bar, and a summary (succeeded / failed / retries /
//! p50 and p99 time to running).
//!
//! Memory: tasks are made one at a time as a slot frees ([`at_most_in_flight`]), and with
//! [`Keep::Failures`] the results are folded into a [`Tally`] whose state does not grow with the
//! number of tasks (counts, a bounded histogram of times to running, at most N failed results):
//! a run of a million tasks holds what a run of a thousand does.

use std::collections::BTreeMap;

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
    /// Every task's result, in input order; with [`Keep::Failures`], only the failed tasks'
    /// (at most the bound, the first to fail), in input order.
    pub results: Vec<TaskResult>,
    /// Failed tasks whose result was not kept ([`Keep::Failures`]' bound): counted in `failed`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted_results: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Which results a many-task run keeps for its [`Summary`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Every task's result (memory grows with the number of tasks: for a library caller that
    /// reads each result, on runs of known size).
    All,
    /// Only failed tasks' results, at most this many (the first to fail); the rest are counted.
    /// What the summary holds is then independent of the number of tasks.
    Failures(usize),
}

/// Values below this are kept exactly in the histogram; above, to 10 significant bits (an
/// error below 0.1%), so it has at most about 28,000 buckets whatever it is fed.
const EXACT_BELOW: u64 = 1 << 10;

/// A summary folded result by result, holding state bounded by its [`Keep`] alone.
#[derive(Debug)]
pub struct Tally {
    keep: Keep,
    succeeded: usize,
    failed: usize,
    retries: u64,
    /// Times to running (ms), bucketed ([`EXACT_BELOW`]): bucket -> how many.
    time_to_running: BTreeMap<u64, u64>,
    /// The kept results, by input index.
    kept: BTreeMap<usize, TaskResult>,
    omitted: usize,
}

impl Tally {
    /// An empty tally keeping `keep`.
    pub fn new(keep: Keep) -> Self {
        Tally {
            keep,
            succeeded: 0,
            failed: 0,
            retries: 0,
            time_to_running: BTreeMap::new(),
            kept: BTreeMap::new(),
            omitted: 0,
        }
    }

    /// Folds in the result of the task at input position `index`.
    pub fn add(&mut self, index: usize, result: TaskResult) {
        let succeeded = result.succeeded();
        if succeeded {
            self.succeeded += 1;
        } else {
            self.failed += 1;
        }
        self.retries += u64::from(result.retries);
        if let Some(ms) = result.timings.time_to_running_ms {
            *self.time_to_running.entry(bucket(ms)).or_default() += 1;
        }
        match self.keep {
            Keep::All => {
                self.kept.insert(index, result);
            }
            Keep::Failures(most) if !succeeded && self.kept.len() < most => {
                self.kept.insert(index, result);
            }
            Keep::Failures(_) if !succeeded => self.omitted += 1,
            Keep::Failures(_) => {}
        }
    }

    /// Entries held (kept results and histogram buckets): what grows with the run, for tests.
    pub fn held(&self) -> usize {
        self.kept.len() + self.time_to_running.len()
    }

    /// The summary of what was folded in.
    pub fn finish(self, elapsed: std::time::Duration) -> Summary {
        let count: u64 = self.time_to_running.values().sum();
        let nearest_rank = |p: u64| -> Option<u64> {
            let rank = (p * count).div_ceil(100).max(1);
            let mut seen = 0;
            self.time_to_running.iter().find_map(|(value, n)| {
                seen += n;
                (seen >= rank).then_some(*value)
            })
        };
        Summary {
            succeeded: self.succeeded,
            failed: self.failed,
            retries: self.retries,
            p50_time_to_running_ms: nearest_rank(50),
            p99_time_to_running_ms: nearest_rank(99),
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            results: self.kept.into_values().collect(),
            omitted_results: self.omitted,
        }
    }
}

/// The histogram bucket of `ms`: itself below [`EXACT_BELOW`], else `ms` with all but its 10
/// highest bits cleared.
fn bucket(ms: u64) -> u64 {
    if ms < EXACT_BELOW {
        return ms;
    }
    let drop = (64 - ms.leading_zeros()).saturating_sub(10);
    (ms >> drop) << drop
}

impl Summary {
    /// Builds the summary from results in input order.
    pub fn from_results(results: Vec<TaskResult>, elapsed: std::time::Duration) -> Self {
        let mut tally = Tally::new(Keep::All);
        for (index, result) in results.into_iter().enumerate() {
            tally.add(index, result);
        }
        tally.finish(elapsed)
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
        if self.omitted_results > 0 {
            out.push_str(&format!(
                "  ... and {} more failed task(s), not kept\n",
                self.omitted_results
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

/// Runs `specs` with at most `parallel` at a time, keeping every result ([`Keep::All`]; see
/// [`run_many_kept`]). Logs are discarded unless `sink` is given. A progress bar is drawn on
/// stderr when `progress` is set and stdout is a terminal.
pub async fn run_many(
    launcher: &Launcher,
    specs: impl IntoIterator<Item = TaskSpec, IntoIter: ExactSizeIterator>,
    parallel: usize,
    sink: Option<Arc<dyn LogSink>>,
    progress: bool,
    cancel: &Cancel,
) -> Summary {
    run_many_kept(launcher, specs, parallel, sink, progress, cancel, Keep::All).await
}

/// [`run_many`], keeping the results `keep` says.
///
/// `specs` is taken as an iterator, so that a task run N times can be handed over as one spec
/// repeated rather than N copies made up front; each task is made only when a slot is free.
pub async fn run_many_kept(
    launcher: &Launcher,
    specs: impl IntoIterator<Item = TaskSpec, IntoIter: ExactSizeIterator>,
    parallel: usize,
    sink: Option<Arc<dyn LogSink>>,
    progress: bool,
    cancel: &Cancel,
    keep: Keep,
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
    let mut tally = Tally::new(keep);
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
                tally.add(index, result);
            }
            Err(err) => {
                failed += 1;
                tracing::error!(error = %err, "a task panicked");
                // Its index went with it: counted as failed, kept as a lost task.
                tally.add(
                    usize::MAX,
                    TaskResult {
                        exit_code: crate::exit::LOST,
                        error: Some("the task panicked".into()),
                        ..TaskResult::default()
                    },
                );
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
    tally.finish(started.elapsed())
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

    /// Issue 27: a run of a million tasks held 435 bytes per task. A tally keeping failures
    /// holds the same state after a million results as after ten thousand (counted, not
    /// timed): the failures it keeps are bounded, the histogram's buckets too.
    #[test]
    fn a_tally_keeping_failures_should_hold_state_independent_of_the_count() {
        let result = |i: usize| TaskResult {
            exit_code: u8::from(i.is_multiple_of(3)),
            retries: 1,
            timings: crate::Timings {
                time_to_running_ms: Some((i as u64 % 1000) * 600),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut tally = Tally::new(Keep::Failures(50));
        let mut held_at = Vec::new();
        for i in 0..1_000_000 {
            tally.add(i, result(i));
            if i + 1 == 10_000 || i + 1 == 1_000_000 {
                held_at.push(tally.held());
            }
        }
        // 50 failures and at most 1,000 buckets (a thousand distinct times): the same at 10,000
        // results and at a million.
        assert!(held_at[1] <= 50 + 1_000, "{held_at:?}");
        assert_eq!(held_at[0], held_at[1], "held state grew with the count");
        let summary = tally.finish(std::time::Duration::from_secs(1));
        assert_eq!((summary.succeeded, summary.failed), (666_666, 333_334));
        assert_eq!(summary.retries, 1_000_000);
        assert_eq!(summary.results.len(), 50);
        assert_eq!(summary.omitted_results, 333_334 - 50);
        assert!(summary.table().contains("and 333284 more failed task(s)"));
        // Percentiles within the histogram's 0.1%.
        let p50 = summary.p50_time_to_running_ms.unwrap() as f64;
        assert!((p50 - 299_400.0).abs() < 299_400.0 * 0.002, "{p50}");
    }

    #[test]
    fn buckets_should_be_exact_below_1024_and_within_a_tenth_of_a_percent_above() {
        for ms in [0, 1, 1023] {
            assert_eq!(bucket(ms), ms);
        }
        for ms in [1024, 1025, 4095, 123_456, u64::MAX] {
            let b = bucket(ms);
            assert!(
                b <= ms && (ms - b) as f64 <= ms as f64 / 512.0,
                "{ms} -> {b}"
            );
        }
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
