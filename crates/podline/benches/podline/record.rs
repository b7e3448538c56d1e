//! Recorder benchmarks (issue 4), all through the whole pipeline (sim -> watch -> recorder ->
//! SQLite):
//! - **throughput**: a backlog of pod events (pods run through their lifecycle while no recorder
//!   runs) replayed by a recorder resuming from its stored position, timed until the stored
//!   resume point covers the last event;
//! - **event-to-commit p99 at 1,000 events/s**: pods created at 1,000/s (one ADDED event each),
//!   each timed from the moment its create was sent until the recorder's transaction holding it
//!   committed (a store wrapper notes the commit);
//! - **RSS** of a `podline record` child process while it watches 10k and then 100k pods, and
//!   its **idle CPU** once it has caught up;
//! - **stall recovery**: the time from a watch going silent until a pod created meanwhile is
//!   stored, against the client timeout plus one backoff step.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, PostParams};
use podline_client::connect::{ConfigSource, ConnectOptions, connect_with_kubeconfig};
use podline_client::timeouts::WatchTimeouts;
use podline_record::{CancellationToken, Metrics, RecordError, Recorder, RecorderConfig};
use podline_sim::{FaultAction, FaultRule, FaultVerb, Sim, SimConfig};
use podline_store::{
    ApplyReport, Batch, LivePod, LiveScope, MigrationReport, PodKey, PodRecord, ResumePoint, Store,
    StoreError, StoreOp, StoreWrite,
};
use tokio::task::JoinHandle;

use super::report::Row;
use super::{Sizes, child, scripted_pod};

const AREA: &str = "record";
const NS: &str = "bench-record";

/// Runs every recorder benchmark and returns its rows.
pub async fn run(sizes: &Sizes) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    eprintln!("  record: throughput");
    rows.push(throughput(sizes.record_backlog_pods).await?);
    eprintln!("  record: event-to-commit latency at 1,000 events/s");
    rows.push(latency(sizes.record_latency_seconds).await?);
    eprintln!("  record: memory and idle CPU of a recorder process");
    rows.extend(memory_and_idle_cpu(sizes).await?);
    eprintln!("  record: stall recovery");
    rows.push(stall_recovery().await?);
    Ok(rows)
}

/// A recorder running in this process.
struct Running {
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), RecordError>>,
    metrics: Arc<Metrics>,
    key: String,
}

impl Running {
    async fn start(
        sim: &Sim,
        store: Arc<dyn StoreWrite>,
        configure: impl FnOnce(&mut RecorderConfig),
    ) -> anyhow::Result<Running> {
        let mut config = RecorderConfig::new(sim.url(), Some(NS.to_owned()));
        configure(&mut config);
        let client = recorder_client(sim, config.timeouts.client).await?;
        let key = config.watch_key();
        let recorder = Recorder::new(client, store, config);
        let metrics = recorder.metrics();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(recorder.run(shutdown.clone()));
        Ok(Running {
            shutdown,
            task,
            metrics,
            key,
        })
    }

    async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.task
            .await
            .context("the recorder panicked")?
            .context("the recorder failed")
    }
}

/// A client as `podline record` builds it (client timeout on every request).
async fn recorder_client(sim: &Sim, client_timeout: Duration) -> anyhow::Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml())
        .context("parsing the sim's kubeconfig")?;
    let options = ConnectOptions {
        client_timeout,
        ..ConnectOptions::default()
    };
    let connected =
        connect_with_kubeconfig(kubeconfig, ConfigSource::Flag("<sim>".into()), &options)
            .await
            .context("connecting to the sim")?;
    Ok(connected.client)
}

/// Waits until `cond` holds, polling every 5 ms; fails after `within`.
async fn wait_for<F, Fut>(within: Duration, what: &str, mut cond: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !cond().await {
        if Instant::now() > deadline {
            bail!("timed out after {within:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// Creates `count` scripted pods named `{prefix}-{i}` in [`NS`] from 16 concurrent clients.
async fn create_pods(sim: &Sim, prefix: &str, count: usize, duration: &str) -> anyhow::Result<()> {
    let client = super::kube_client(&sim.kubeconfig_yaml()).await?;
    let api: Api<Pod> = Api::namespaced(client, NS);
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            let pod = scripted_pod(&format!("{prefix}-{i}"), duration);
            async move { api.create(&PostParams::default(), &pod).await.map(|_| ()) }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<()>, _>>()
        .context("creating pods")?;
    Ok(())
}

/// The sum of the samples of a counter family (`name{...} value` lines) in a metrics text.
fn counter_sum(text: &str, name: &str, labels: &[&str]) -> u64 {
    text.lines()
        .filter(|line| line.starts_with(name))
        .filter(|line| labels.is_empty() || labels.iter().any(|l| line.contains(l)))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Events per second recorded end to end, replaying a backlog of `pods` pods' lifecycles.
async fn throughput(pods: usize) -> anyhow::Result<Row> {
    // Long history: the backlog must still be there when the recorder comes back.
    let sim = Sim::start(
        SimConfig::default()
            .tls(false)
            .history_window(Duration::from_secs(1800)),
    )
    .await
    .context("starting the sim")?;
    super::sim::ensure_namespace(&super::kube_client(&sim.kubeconfig_yaml()).await?, NS).await?;
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let store = podline_store::open(&dir.path().join("record.db").to_string_lossy())
        .await
        .context("opening SQLite")?;

    // A first run stores the resume point (an empty namespace), then the recorder stops.
    let first = Running::start(&sim, store.clone(), |_| {}).await?;
    let key = first.key.clone();
    wait_for(
        Duration::from_secs(30),
        "the first resume point",
        || async { matches!(store.resume_point(&key).await, Ok(Some(_))) },
    )
    .await?;
    first.stop().await?;

    // The backlog: every pod runs its whole lifecycle while nobody records.
    create_pods(&sim, "tp", pods, "10ms").await?;
    let api: Api<Pod> = Api::namespaced(super::kube_client(&sim.kubeconfig_yaml()).await?, NS);
    let deadline = Instant::now() + Duration::from_secs(600);
    let last_rv = loop {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the backlog pods did not finish within 600 s"
        );
        let list = api
            .list(&ListParams::default())
            .await
            .context("listing the backlog pods")?;
        let done = list.items.len() == pods
            && list.items.iter().all(|pod| {
                matches!(
                    pod.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Succeeded" | "Failed")
                )
            });
        if done {
            break list
                .items
                .iter()
                .filter_map(|p| p.metadata.resource_version.as_deref()?.parse::<u64>().ok())
                .max()
                .unwrap_or(0);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };

    let started = Instant::now();
    let replay = Running::start(&sim, store.clone(), |_| {}).await?;
    wait_for(
        Duration::from_secs(300),
        "the replay to catch up",
        || async {
            matches!(store.resume_point(&key).await, Ok(Some(p)) if p.resource_version >= last_rv)
        },
    )
    .await?;
    let elapsed = started.elapsed();
    let text = replay.metrics.render();
    replay.stop().await?;
    sim.shutdown().await;
    let events = counter_sum(
        &text,
        "podline_record_watch_events_total",
        &["\"apply\"", "\"delete\""],
    );
    let counts = store.counts().await.context("counting stored pods")?;
    anyhow::ensure!(
        counts.pods as usize == pods,
        "the replay stored {} of {pods} pods",
        counts.pods
    );
    Ok(Row::at_least(
        AREA,
        format!(
            "pod events/s recorded end to end into SQLite, replaying a backlog \
             ({events} events of {pods} pods, {} transitions stored)",
            counts.transitions
        ),
        events as f64 / elapsed.as_secs_f64(),
        20_000.0,
        "/s",
    ))
}

/// A store that notes when each pod's first upsert commits, for end-to-end latency.
struct TimedStore {
    inner: Arc<dyn Store>,
    /// Pod name -> when its create was sent; removed when its upsert commits.
    sent: Mutex<HashMap<String, Instant>>,
    /// Create-to-commit latencies.
    latencies: Mutex<Vec<Duration>>,
}

impl TimedStore {
    fn note_sent(&self, name: &str) {
        if let Ok(mut sent) = self.sent.lock() {
            sent.insert(name.to_owned(), Instant::now());
        }
    }

    fn pending(&self) -> usize {
        self.sent.lock().map(|sent| sent.len()).unwrap_or(0)
    }
}

impl StoreWrite for TimedStore {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn migrate(&self) -> BoxFuture<'_, Result<MigrationReport, StoreError>> {
        self.inner.migrate()
    }
    fn apply<'a>(&'a self, batch: &'a Batch) -> BoxFuture<'a, Result<ApplyReport, StoreError>> {
        Box::pin(async move {
            let report = self.inner.apply(batch).await?;
            let committed = Instant::now();
            if let (Ok(mut sent), Ok(mut latencies)) = (self.sent.lock(), self.latencies.lock()) {
                for op in &batch.ops {
                    if let StoreOp::Upsert(obs) = op
                        && let Some(at) = sent.remove(&obs.name)
                    {
                        latencies.push(committed - at);
                    }
                }
            }
            Ok(report)
        })
    }
    fn resume_point<'a>(
        &'a self,
        watch_key: &'a str,
    ) -> BoxFuture<'a, Result<Option<ResumePoint>, StoreError>> {
        self.inner.resume_point(watch_key)
    }
    fn live_pods<'a>(
        &'a self,
        scope: &'a LiveScope,
    ) -> BoxFuture<'a, Result<Vec<LivePod>, StoreError>> {
        self.inner.live_pods(scope)
    }
    fn last_recorded<'a>(
        &'a self,
        uid: &'a str,
    ) -> BoxFuture<'a, Result<Option<PodRecord>, StoreError>> {
        self.inner.last_recorded(uid)
    }
    fn health(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        self.inner.health()
    }
}

/// p99 (and p50) of create-to-commit at 1,000 pod creates per second for `seconds`.
async fn latency(seconds: u64) -> anyhow::Result<Row> {
    const RATE: u64 = 1000;
    const PRODUCERS: u64 = 4;
    // No kubelet: each create is exactly one event, so the rate is the event rate.
    let sim = Sim::start(SimConfig::default().tls(false).kubelet_enabled(false))
        .await
        .context("starting the sim")?;
    let client = super::kube_client(&sim.kubeconfig_yaml()).await?;
    super::sim::ensure_namespace(&client, NS).await?;
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let inner = podline_store::open(&dir.path().join("latency.db").to_string_lossy())
        .await
        .context("opening SQLite")?;
    let timed = Arc::new(TimedStore {
        inner,
        sent: Mutex::new(HashMap::new()),
        latencies: Mutex::new(Vec::new()),
    });
    let recorder = Running::start(&sim, timed.clone(), |_| {}).await?;
    let key = recorder.key.clone();
    wait_for(Duration::from_secs(30), "the recorder to start", || async {
        matches!(timed.resume_point(&key).await, Ok(Some(_)))
    })
    .await?;

    let total = RATE * seconds;
    let started = tokio::time::Instant::now();
    let mut producers = Vec::new();
    for producer in 0..PRODUCERS {
        let api: Api<Pod> = Api::namespaced(super::kube_client(&sim.kubeconfig_yaml()).await?, NS);
        let timed = timed.clone();
        producers.push(tokio::spawn(async move {
            for i in (producer..total).step_by(PRODUCERS as usize) {
                // An absolute schedule: pod i is due at i ms, whatever the previous create took.
                tokio::time::sleep_until(started + Duration::from_micros(i * 1_000_000 / RATE))
                    .await;
                let name = format!("lat-{i}");
                timed.note_sent(&name);
                api.create(&PostParams::default(), &scripted_pod(&name, "1s"))
                    .await?;
            }
            Ok::<_, kube::Error>(())
        }));
    }
    for producer in producers {
        producer
            .await
            .context("producer panicked")?
            .context("producer create failed")?;
    }
    let produce_secs = started.elapsed().as_secs_f64();
    wait_for(
        Duration::from_secs(30),
        "every create to commit",
        || async { timed.pending() == 0 },
    )
    .await?;
    recorder.stop().await?;
    sim.shutdown().await;
    let mut latencies = timed
        .latencies
        .lock()
        .map_err(|_| anyhow::anyhow!("latency samples poisoned"))?
        .clone();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    anyhow::ensure!(!latencies.is_empty(), "no latency samples");
    let (p50, p99) = (at(0.50), at(0.99));
    Ok(Row::at_most(
        AREA,
        format!(
            "event-to-commit p99 at {:.0} events/s, create sent -> transaction committed \
             ({} events, p50 {:.1} ms)",
            total as f64 / produce_secs,
            latencies.len(),
            p50.as_secs_f64() * 1000.0
        ),
        p99.as_secs_f64() * 1000.0,
        50.0,
        "ms",
    ))
}

/// Where a child recorder writes and serves: its database and its metrics port.
struct ChildRecorder {
    child: tokio::process::Child,
    db: std::path::PathBuf,
}

impl ChildRecorder {
    fn start(kubeconfig: &Path, dir: &Path) -> anyhow::Result<ChildRecorder> {
        let db = dir.join("rss.db");
        let child = child::podline()?
            .arg("record")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["-n", NS, "--listen", "127.0.0.1:0", "--db"])
            .arg(&db)
            .env_remove("KUBECONFIG")
            .env_remove("PODLINE_DB")
            .spawn()
            .context("starting `podline record`")?;
        Ok(ChildRecorder { child, db })
    }

    fn pid(&self) -> anyhow::Result<u32> {
        self.child.id().context("the recorder child has exited")
    }

    /// Waits until the child's store holds `pods` pods.
    async fn wait_recorded(&self, pods: u64) -> anyhow::Result<()> {
        let mut store: Option<Arc<dyn Store>> = None;
        let db = self.db.to_string_lossy().into_owned();
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            if store.is_none() && self.db.exists() {
                store = podline_store::open(&db).await.ok();
            }
            if let Some(store) = &store
                && store.counts().await.is_ok_and(|c| c.pods >= pods)
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the recorder child did not record {pods} pods within 600 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// CPU time (user + system) a process used so far, from /proc/<pid>/stat.
fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let stat =
        std::fs::read_to_string(format!("/proc/{pid}/stat")).context("reading /proc/<pid>/stat")?;
    // Fields after the command (which may contain spaces) start after the last ')'.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("unexpected /proc/<pid>/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, i.e. 12 and 13 after the ')'.
    let ticks: u64 = fields
        .get(11..13)
        .context("unexpected /proc/<pid>/stat")?
        .iter()
        .map(|v| v.parse::<u64>().unwrap_or(0))
        .sum();
    // Linux reports in USER_HZ, 100 on every mainstream architecture.
    Ok(Duration::from_millis(ticks * 10))
}

/// RSS of a `podline record` child watching `record_rss_small` pods (its initial LIST), then
/// `record_rss_large` (the rest created while it watches), and its CPU use once idle.
async fn memory_and_idle_cpu(sizes: &Sizes) -> anyhow::Result<Vec<Row>> {
    // No kubelet: pods stay Pending, so the recorder watches a steady set.
    let sim = Sim::start(SimConfig::default().tls(false).kubelet_enabled(false))
        .await
        .context("starting the sim")?;
    super::sim::ensure_namespace(&super::kube_client(&sim.kubeconfig_yaml()).await?, NS).await?;
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let kubeconfig = dir.path().join("sim.kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig_yaml()).context("writing the kubeconfig")?;
    let small = sizes.record_rss_small;
    let large = sizes.record_rss_large;
    let mut rows = Vec::new();

    create_pods(&sim, "rss-a", small, "1h").await?;
    let recorder = ChildRecorder::start(&kubeconfig, dir.path())?;
    let pid = recorder.pid()?;
    recorder.wait_recorded(small as u64).await?;
    tokio::time::sleep(Duration::from_secs(2)).await; // let the last batch settle
    rows.push(Row::at_most(
        AREA,
        format!(
            "RSS of `podline record` watching {small} pods (listed at start; peak {:.0} MiB)",
            child::peak_rss_mib(pid)?
        ),
        child::rss_mib(pid)?,
        40.0,
        "MiB",
    ));

    create_pods(&sim, "rss-b", large - small, "1h").await?;
    recorder.wait_recorded(large as u64).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    rows.push(Row::at_most(
        AREA,
        format!(
            "RSS of `podline record` watching {large} pods ({} more arrived through the watch; \
             peak {:.0} MiB)",
            large - small,
            child::peak_rss_mib(pid)?
        ),
        child::rss_mib(pid)?,
        150.0,
        "MiB",
    ));

    let idle = Duration::from_secs(sizes.record_idle_seconds);
    let before = cpu_time(pid)?;
    let started = Instant::now();
    tokio::time::sleep(idle).await;
    let used = cpu_time(pid)? - before;
    let percent = used.as_secs_f64() / started.elapsed().as_secs_f64() * 100.0;
    rows.push(Row::at_most(
        AREA,
        format!(
            "idle CPU of `podline record` watching {large} pods, no changes ({}s, % of one core)",
            idle.as_secs()
        ),
        percent,
        1.0,
        "%",
    ));
    drop(recorder);
    sim.shutdown().await;
    Ok(rows)
}

/// Time from a watch going silent to a pod created meanwhile being stored, with a 1 s client
/// timeout and the default backoff (first step at most 200 ms).
async fn stall_recovery() -> anyhow::Result<Row> {
    let client_timeout = Duration::from_secs(1);
    let backoff_step = Duration::from_millis(200);
    let sim = Sim::start(SimConfig::default().tls(false).kubelet_enabled(false))
        .await
        .context("starting the sim")?;
    super::sim::ensure_namespace(&super::kube_client(&sim.kubeconfig_yaml()).await?, NS).await?;
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let store = podline_store::open(&dir.path().join("stall.db").to_string_lossy())
        .await
        .context("opening SQLite")?;
    let timeouts = WatchTimeouts::try_new(Duration::from_secs(60), client_timeout)
        .context("stall benchmark timeouts")?;
    let recorder = Running::start(&sim, store.clone(), |config| config.timeouts = timeouts).await?;
    create_pods(&sim, "warm", 1, "1h").await?;
    let warm = PodKey::parse("warm-0", NS);
    wait_for(Duration::from_secs(30), "the warm-up pod", || async {
        matches!(store.pod(&warm).await, Ok(Some(_)))
    })
    .await?;

    let watches = sim.counts().get("watch", "pods");
    sim.faults().push(
        FaultRule::new(FaultAction::Stall { after_events: 0 })
            .verb(FaultVerb::Watch)
            .resource("pods")
            .times(1),
    );
    sim.restart(Duration::ZERO).await; // drop the current watch: the next one stalls
    wait_for(Duration::from_secs(10), "the stalled re-watch", || async {
        sim.counts().get("watch", "pods") > watches
    })
    .await?;
    let stalled = Instant::now();
    create_pods(&sim, "after-stall", 1, "1h").await?;
    let key = PodKey::parse("after-stall-0", NS);
    wait_for(
        Duration::from_secs(30),
        "the pod created during the stall",
        || async { matches!(store.pod(&key).await, Ok(Some(_))) },
    )
    .await?;
    let recovered = stalled.elapsed();
    recorder.stop().await?;
    sim.shutdown().await;
    let bound = client_timeout + backoff_step;
    Ok(Row::at_most(
        AREA,
        format!(
            "stall -> pod created meanwhile stored (client timeout {} ms + one backoff step {} ms)",
            client_timeout.as_millis(),
            backoff_step.as_millis()
        ),
        recovered.as_secs_f64() * 1000.0,
        bound.as_secs_f64() * 1000.0,
        "ms",
    ))
}
