//! Launcher benchmarks (issue 3): pods launched per second through the sim, with and without
//! 30% 409 Conflicts on creates, and podline's own overhead on time to running.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use podline_launch::{Cancel, LaunchConfig, Launcher, LogMode, TaskSpec};
use podline_sim::cluster::{ChangeKind, Kind, WatchFrom};
use podline_sim::{FaultAction, FaultPlan, FaultRule, FaultVerb, Sim, SimConfig};
use tokio::sync::broadcast::error::RecvError;

use super::child;
use super::report::Row;

const AREA: &str = "launch";

/// One launch run of the benchmark.
struct Case {
    /// 30% of creates answered 409.
    conflicts: bool,
    /// Tasks in flight at once.
    parallel: usize,
    /// Report the rate (else only the overhead).
    rate: bool,
}

/// Launches `pods` pods 200 at a time, without faults and with 30% 409s on creates (rates), and
/// measures podline's own overhead on time to running at 200 and at 50 in flight (the field's
/// "50 pods launched at once").
pub async fn run(pods: usize) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let cases = [
        Case {
            conflicts: false,
            parallel: 200,
            rate: true,
        },
        Case {
            conflicts: true,
            parallel: 200,
            rate: true,
        },
        Case {
            conflicts: false,
            parallel: 50,
            rate: false,
        },
    ];
    for Case {
        conflicts,
        parallel,
        rate,
    } in cases
    {
        let mut plan = FaultPlan::default();
        if conflicts {
            plan.rules.push(
                FaultRule::new(FaultAction::status(409))
                    .verb(FaultVerb::Create)
                    .resource("pods")
                    .probability(0.3),
            );
        }
        // HTTPS, and podline's own client stack (HTTP/2 with PING), as `podline run` uses them.
        let sim = SeparateSim::start(SimConfig::default().faults(plan)).await?;
        let client = podline_client_for(&sim.kubeconfig_yaml()).await?;
        let config = LaunchConfig {
            logs: LogMode::None,
            ..LaunchConfig::default()
        };
        let launcher = Launcher::new(client, "default", config);
        // Warm up (connection, TLS, first allocations) with one round, as a launcher that has
        // been running a while is; not measured.
        let warm_up = bench_tasks("warm-up", parallel);
        let summary =
            podline_launch::run_many(&launcher, warm_up, parallel, None, false, &Cancel::new())
                .await;
        anyhow::ensure!(
            summary.failed == 0,
            "{} warm-up launches failed",
            summary.failed
        );
        let commits = CommitTimes::start(&sim)?;
        let specs = bench_tasks("bench", pods);
        let started = Instant::now();
        let summary =
            podline_launch::run_many(&launcher, specs, parallel, None, false, &Cancel::new()).await;
        let elapsed = started.elapsed();
        let commits = commits.finish().await?;
        sim.shutdown().await?;
        anyhow::ensure!(
            summary.failed == 0,
            "{} of {pods} launches failed",
            summary.failed
        );
        if rate {
            let label = if conflicts {
                "with 30% 409 on creates"
            } else {
                "no faults"
            };
            // The rate until 99% of the pods are done: with 30% 409s a few pods meet 7 or more
            // 409s in a row and sit in their create backoff for seconds, which would make a
            // whole-batch rate one straggler's luck. The whole batch's time is shown beside it.
            let (done_99, rate_99) = commits.rate_until_99_percent_done(&summary, started)?;
            rows.push(Row::at_least(
                AREA,
                format!(
                    "pods launched to completion, {parallel} at a time, {label} ({pods} pods, {} \
                     retries; rate until 99% were done, after {:.1} s; all done after {:.1} s)",
                    summary.retries,
                    done_99.as_secs_f64(),
                    elapsed.as_secs_f64()
                ),
                rate_99,
                200.0,
                "/s",
            ));
        }
        if !conflicts {
            let p99 = commits.p99_overhead_ms(&summary)?;
            let p99_in_the_sim = commits.p99_in_the_sim_ms(&summary)?;
            let (p99_to_the_api, p99_to_seen) = commits.p99_overhead_parts_ms(&summary)?;
            let mut created: Vec<u64> = summary
                .results
                .iter()
                .filter_map(|r| r.timings.time_to_created_ms)
                .collect();
            rows.push(Row::at_most(
                AREA,
                format!(
                    "podline's own p99 overhead on time to running (launch to create received \
                     + Running committed to seen), {parallel} at a time ({pods} pods; p99 of \
                     each part {p99_to_the_api} ms + {p99_to_seen} ms; p99 time \
                     to running {} ms, of which in the sim {p99_in_the_sim} ms; p99 create \
                     answered {} ms, of which in the sim {} ms)",
                    summary.p99_time_to_running_ms.unwrap_or_default(),
                    p99_of(&mut created),
                    commits.p99_create_handling_ms()
                ),
                p99 as f64,
                // Issue 32: 20 ms at 200 in flight, 10 ms at 50.
                if parallel >= 200 { 20.0 } else { 10.0 },
                "ms",
            ));
        }
    }
    Ok(rows)
}

/// A sim on its own async runtime (two worker threads), as a separate API server process would
/// be, while its commit instants stay readable in-process.
///
/// Why: on the benchmark's own runtime the sim's kubelet and API handlers and the launcher's
/// tasks share one task queue, so a launcher task waits behind whatever sim work its worker
/// polls (the kubelet steps hundreds of pods in one poll), and that wait would be counted as
/// podline's overhead. On separate runtimes the OS shares the cores between the two, as it does
/// between `podline run` and a real API server on one machine.
struct SeparateSim {
    runtime: tokio::runtime::Runtime,
    sim: Sim,
}

impl std::ops::Deref for SeparateSim {
    type Target = Sim;
    fn deref(&self) -> &Sim {
        &self.sim
    }
}

impl SeparateSim {
    async fn start(config: SimConfig) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sim")
            .enable_all()
            .build()
            .context("starting the sim's runtime")?;
        let sim = runtime
            .spawn(Sim::start(config))
            .await
            .context("starting the sim")?
            .context("starting the sim")?;
        Ok(Self { runtime, sim })
    }

    async fn shutdown(self) -> anyhow::Result<()> {
        let Self { runtime, sim } = self;
        runtime
            .spawn(sim.shutdown())
            .await
            .context("stopping the sim")?;
        // Dropping a runtime may block, which an async context must not do.
        runtime.shutdown_background();
        Ok(())
    }
}

/// `count` tasks named `{prefix}-{i}` whose pods run 50 ms in the sim.
fn bench_tasks(prefix: &str, count: usize) -> Vec<TaskSpec> {
    (0..count)
        .map(|i| TaskSpec {
            name: Some(format!("{prefix}-{i}")),
            image: Some("busybox:1.36".into()),
            command: vec!["true".into()],
            annotations: [("sim.podline.io/duration".to_string(), "50ms".to_string())].into(),
            ..TaskSpec::default()
        })
        .collect()
}

/// Peak resident memory of `podline run --count {pods} --parallel 200` as the user runs it: its
/// own process, against a `podline sim` process over HTTPS.
pub async fn peak_rss_of_run(pods: usize) -> anyhow::Result<Row> {
    let sim = child::SimProcess::start_tls(&[]).await?;
    let count = pods.to_string();
    let mut run = child::podline()?
        .arg("run")
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["--count", &count, "--parallel", "200"])
        .args(["--image", "busybox:1.36", "--", "sh", "-c", "echo hello"])
        .env_remove("KUBECONFIG")
        .spawn()
        .context("starting `podline run`")?;
    let pid = run.id().context("`podline run` exited at once")?;
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut peak = 0.0_f64;
    let status = loop {
        // VmHWM only grows; once the process has exited /proc no longer reports it, so the last
        // reading taken while it ran is the figure (it is read every 10 ms).
        if let Ok(mib) = child::peak_rss_mib(pid) {
            peak = peak.max(mib);
        }
        if let Some(status) = run.try_wait().context("waiting for `podline run`")? {
            break status;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "`podline run --count {pods}` did not finish within 5 minutes"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    anyhow::ensure!(
        status.success(),
        "`podline run --count {pods}` failed: {status}"
    );
    Ok(Row::at_most(
        AREA,
        format!("max RSS of `podline run --count {pods} --parallel 200` (its own process, HTTPS)"),
        peak,
        60.0,
        "MiB",
    ))
}

/// When the sim received each pod's create request (its audit stream), committed the pod's
/// first Running status, and removed it (the pod table's own commit instants, not when this task
/// got to see them), so that what the API server and its kubelet spend on a pod can be told
/// apart from what the launcher adds.
struct CommitTimes {
    task: tokio::task::JoinHandle<anyhow::Result<SimTimes>>,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl CommitTimes {
    fn start(sim: &Sim) -> anyhow::Result<Self> {
        let field = |name: &str| {
            k8s_openapi::api::core::v1::Pod::FIELDS
                .iter()
                .position(|field| *field == name)
                .with_context(|| format!("pods have a {name} field"))
        };
        let (name, phase) = (field("metadata.name")?, field("status.phase")?);
        let mut commits = sim
            .cluster()
            .pod_table()
            .start_watch(WatchFrom::Now)
            .map_err(|too_old| anyhow::anyhow!("watching the sim's pods: {too_old:?}"))?
            .rx;
        let mut audit = sim.audit();
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut times = SimTimes::default();
            let lagged =
                |n| anyhow::anyhow!("missed {n} sim records: the measurement is incomplete");
            loop {
                tokio::select! {
                    biased;
                    entry = audit.recv() => match entry {
                        Ok(entry) if entry.verb == podline_sim::Verb::Create && entry.resource == "pods" && entry.code == 201 => {
                            times.received.insert(entry.name.clone(), entry.received.into_std());
                            times.create_handling.push(entry.answered.duration_since(entry.received));
                        }
                        Ok(_) => {}
                        Err(RecvError::Closed) => break,
                        Err(RecvError::Lagged(n)) => return Err(lagged(n)),
                    },
                    event = commits.recv() => match event {
                        Ok(event) => {
                            let key = event.facts.field(name).to_owned();
                            let at = event.at.into_std();
                            match event.kind {
                                ChangeKind::Modified if event.facts.field(phase) == "Running" => {
                                    times.running.entry(key).or_insert(at);
                                }
                                ChangeKind::Deleted => {
                                    times.removed.insert(key, at);
                                }
                                ChangeKind::Added | ChangeKind::Modified => {}
                            }
                        }
                        Err(RecvError::Closed) => break,
                        Err(RecvError::Lagged(n)) => return Err(lagged(n)),
                    },
                    _ = &mut stopped => break,
                }
            }
            Ok(times)
        });
        Ok(CommitTimes { task, stop })
    }

    async fn finish(self) -> anyhow::Result<SimTimes> {
        let _ = self.stop.send(());
        self.task.await.context("the commit recorder")?
    }
}

/// What the sim received and committed during a run, per pod name.
#[derive(Default)]
struct SimTimes {
    /// When the API received the create request that stored the pod.
    received: HashMap<String, Instant>,
    /// How long the API took over each successful create, from receiving it to answering.
    create_handling: Vec<Duration>,
    /// When the pod's first Running status was committed.
    running: HashMap<String, Instant>,
    /// When each pod was removed (the launcher deletes a pod once its task is done).
    removed: HashMap<String, Instant>,
}

impl SimTimes {
    /// How long after `started` 99% of the run's pods were removed, and the rate until then.
    fn rate_until_99_percent_done(
        &self,
        summary: &podline_launch::Summary,
        started: Instant,
    ) -> anyhow::Result<(Duration, f64)> {
        let mut removed: Vec<Instant> = summary
            .results
            .iter()
            .filter_map(|result| self.removed.get(&result.pod).copied())
            .collect();
        anyhow::ensure!(
            removed.len() == summary.results.len(),
            "{} of {} pods were not seen removed",
            summary.results.len() - removed.len(),
            summary.results.len()
        );
        removed.sort_unstable();
        let count = (removed.len() * 99).div_ceil(100);
        let last = removed
            .get(count.saturating_sub(1))
            .context("no pod was removed")?;
        let took = last.saturating_duration_since(started);
        Ok((took, count as f64 / took.as_secs_f64().max(1e-3)))
    }

    /// p99 over the tasks of what podline added to each pod's time to running: what it
    /// measured minus the sim's own time from receiving the create request to committing
    /// Running. What remains is podline's time before its create request reached the API and
    /// from the Running commit until podline saw it (which still includes the sim encoding and
    /// sending the watch event, on the same 2 cores).
    fn p99_overhead_ms(&self, summary: &podline_launch::Summary) -> anyhow::Result<u64> {
        let mut overheads = Vec::with_capacity(summary.results.len());
        for result in &summary.results {
            let seen = result
                .timings
                .time_to_running_ms
                .with_context(|| format!("no time to running for {}", result.pod))?;
            let in_the_sim = self.in_the_sim(&result.pod)?;
            // Whole milliseconds, like `seen`; what podline added cannot be negative.
            overheads.push(seen.saturating_sub(in_the_sim.as_millis() as u64));
        }
        Ok(p99_of(&mut overheads))
    }

    /// p99 of each of the two parts of podline's overhead, in ms: from the task's clock start to
    /// the API receiving its create, and from the Running commit to podline seeing it.
    fn p99_overhead_parts_ms(
        &self,
        summary: &podline_launch::Summary,
    ) -> anyhow::Result<(u64, u64)> {
        let (mut to_the_api, mut to_seen) = (Vec::new(), Vec::new());
        for result in &summary.results {
            let started = result
                .timings
                .clock_started
                .with_context(|| format!("no clock start for {}", result.pod))?;
            let seen = started
                + Duration::from_millis(result.timings.time_to_running_ms.unwrap_or_default());
            let (received, running) = self.received_and_running(&result.pod)?;
            to_the_api.push(received.saturating_duration_since(started).as_millis() as u64);
            to_seen.push(seen.saturating_duration_since(running).as_millis() as u64);
        }
        Ok((p99_of(&mut to_the_api), p99_of(&mut to_seen)))
    }

    /// p99 of the sim's own time from receiving each create to committing the pod Running.
    fn p99_in_the_sim_ms(&self, summary: &podline_launch::Summary) -> anyhow::Result<u64> {
        let mut times = Vec::with_capacity(summary.results.len());
        for result in &summary.results {
            times.push(self.in_the_sim(&result.pod)?.as_millis() as u64);
        }
        Ok(p99_of(&mut times))
    }

    /// p99 of the API's time over a successful create, from receiving it to answering.
    fn p99_create_handling_ms(&self) -> u64 {
        let mut millis: Vec<u64> = self
            .create_handling
            .iter()
            .map(|d| d.as_millis() as u64)
            .collect();
        p99_of(&mut millis)
    }

    /// The sim's time on `pod`: from receiving its create request to committing it Running.
    fn in_the_sim(&self, pod: &str) -> anyhow::Result<Duration> {
        let (received, running) = self.received_and_running(pod)?;
        Ok(running.saturating_duration_since(received))
    }

    /// When the API received `pod`'s create request and when its Running status was committed.
    fn received_and_running(&self, pod: &str) -> anyhow::Result<(Instant, Instant)> {
        let received = self
            .received
            .get(pod)
            .with_context(|| format!("the sim never audited the create of {pod}"))?;
        let running = self
            .running
            .get(pod)
            .with_context(|| format!("the sim never ran {pod}"))?;
        Ok((*received, *running))
    }
}

/// The 99th percentile (nearest rank) of `values`; 0 for none.
fn p99_of(values: &mut [u64]) -> u64 {
    values.sort_unstable();
    let at = (values.len() * 99).div_ceil(100).saturating_sub(1);
    values.get(at).copied().unwrap_or_default()
}

/// The client `podline run` builds (podline's transport: HTTP/2 over TLS with PING health
/// checks, the default client timeout) for the sim's kubeconfig.
async fn podline_client_for(kubeconfig_yaml: &str) -> anyhow::Result<kube::Client> {
    podline_client::connect::client_from_config(
        super::kube_config(kubeconfig_yaml).await?,
        podline_client::timeouts::DEFAULT_CLIENT_TIMEOUT,
        podline_client::ping::Http2Ping::default(),
    )
    .context("building podline's client")
}
