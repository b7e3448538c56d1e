//! KFP mode benchmarks (issue 5): pods/s recorded into the real ML Metadata store (the
//! `ml-metadata` package behind `crates/mlmd/tests/mlmd_server.py`) by the whole KFP pipeline:
//! the pod watch on the sim, the keyed work queue, the MLMD workers and the pod patches.
//!
//! A pod counts as recorded when it carries `metadata_written` (the last thing the writer does,
//! after its outputs and final state are in MLMD). Kubeflow's own writer manages about 10 pods/s
//! against the same server (issue 5).
//!
//! Issue 20 adds: a 2,000-pod backlog into MLMD on a SQLite file on tmpfs (`/dev/shm`: the
//! disk's sync out of the way, so the figure is podline's and MLMD's), MLMD write transactions
//! per pod (each `Put*` RPC is one transaction in MLMD; counted by the client), and the resident
//! set of a `podline record --kfp` child process with 10,000 finished pods listed at start.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use podline_mlmd::MlmdClient;
use podline_mlmd::kfp::fixture::{Step, component_spec};
use podline_mlmd::kfp::keys::WRITTEN_LABEL;
use podline_mlmd::kfp::{KfpSink, KfpWriter, PipelineConfig, SinkConfig, run};
use podline_mlmd::test_server::{self, MlmdTestServer};
use podline_sim::{Sim, SimConfig};
use tokio_util::sync::CancellationToken;

use super::Sizes;
use super::child;
use super::report::Row;

const AREA: &str = "mlmd";
const NS: &str = "default";
/// The target.
const TARGET: f64 = 200.0;
/// Issue 20's targets: write transactions per pod, and the RSS with 10,000 pods listed at start.
const WRITES_TARGET: f64 = 2.0;
const RSS_TARGET_MIB: f64 = 60.0;

/// Why the part was skipped, when the MLMD test server cannot run here.
pub fn unavailable() -> Option<String> {
    test_server::available().err().map(|e| e.to_string())
}

/// Runs the live, catch-up, durable-store and tmpfs-backlog loads with `sizes.mlmd_pods` pods
/// each, then the RSS of a KFP mode child with `sizes.mlmd_rss_pods` finished pods.
pub async fn run_all(sizes: &Sizes) -> anyhow::Result<Vec<Row>> {
    let pods = sizes.mlmd_pods;
    let mut rows = Vec::new();
    for (mode, store) in [
        (Mode::Live, Store::Memory),
        (Mode::CatchUp, Store::Memory),
        (Mode::Live, Store::Disk),
        (Mode::CatchUp, Store::Tmpfs),
    ] {
        let dir = match store {
            Store::Tmpfs => tempfile::tempdir_in("/dev/shm"),
            Store::Memory | Store::Disk => tempfile::tempdir(),
        }
        .context("creating a temporary directory")?;
        let db = dir.path().join("mlmd.db");
        let file = (store != Store::Memory).then_some(db.as_path());
        let server =
            MlmdTestServer::start(file, 0, &[]).context("starting the MLMD test server")?;
        let result = measure(&server, pods, mode).await?;
        let store_name = match store {
            Store::Memory => "MLMD in memory",
            Store::Disk => "MLMD on a SQLite file (WAL, a sync per commit on this disk)",
            Store::Tmpfs => "MLMD on a SQLite file on tmpfs (/dev/shm)",
        };
        let what = match mode {
            Mode::Live => "pods/s recorded live (Pending, Running, Succeeded)",
            Mode::CatchUp => "pods/s caught up after a restart (relist of finished pods)",
        };
        rows.push(Row::at_least(
            AREA,
            format!(
                "{what}, {store_name} ({pods} pods, {:.1} MLMD calls, {:.2} write transactions \
                 and {:.1} pod patches per pod)",
                result.calls_per_pod, result.writes_per_pod, result.patches_per_pod
            ),
            result.pods_per_sec,
            TARGET,
            "/s",
        ));
        let lifecycle = match (mode, store) {
            (Mode::Live, Store::Memory) => Some("a whole lifecycle seen live"),
            (Mode::CatchUp, Store::Tmpfs) => Some("a backlog of finished pods"),
            _ => None,
        };
        if let Some(lifecycle) = lifecycle {
            rows.push(Row::at_most(
                AREA,
                format!(
                    "MLMD write transactions per pod, {lifecycle} ({pods} pods, 10 per workflow; \
                     types and contexts included)"
                ),
                result.writes_per_pod,
                WRITES_TARGET,
                "",
            ));
        }
    }
    rows.push(rss_with_backlog(sizes.mlmd_rss_pods).await?);
    Ok(rows)
}

/// Where the MLMD test server keeps its store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    Memory,
    /// A SQLite file in the system's temporary directory.
    Disk,
    /// A SQLite file on tmpfs.
    Tmpfs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Pods are created and finish while the writer runs.
    Live,
    /// Finished pods exist before the writer starts (a restart or an outage).
    CatchUp,
}

struct Measured {
    pods_per_sec: f64,
    calls_per_pod: f64,
    writes_per_pod: f64,
    patches_per_pod: f64,
}

async fn measure(server: &MlmdTestServer, pods: usize, mode: Mode) -> anyhow::Result<Measured> {
    let sim = Sim::start(SimConfig::default().tls(false).kubelet_enabled(false))
        .await
        .context("starting the sim")?;
    let kube = super::kube_client(&sim.kubeconfig_yaml()).await?;
    let api: Api<Pod> = Api::namespaced(kube.clone(), NS);
    if mode == Mode::CatchUp {
        drive(&api, pods).await?;
    }
    let client = MlmdClient::new(&server.config()).context("MLMD client")?;
    let writer = KfpWriter::new(client.clone(), pods.max(1000), 1000);
    let sink = Arc::new(KfpSink::new(writer, kube.clone(), SinkConfig::default()));
    let stop = CancellationToken::new();
    let started = Instant::now();
    let pipeline = tokio::spawn(run(
        sink.clone(),
        api.clone(),
        PipelineConfig::new(Some(NS.to_owned())),
        stop.clone(),
    ));
    if mode == Mode::Live {
        drive(&api, pods).await?;
    }
    let deadline = started + Duration::from_secs(600);
    let written = ListParams::default().labels(&format!("{WRITTEN_LABEL}=true"));
    loop {
        let done = api.list_metadata(&written).await?.items.len();
        if done >= pods {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {done} of {pods} pods recorded after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    stop.cancel();
    pipeline
        .await
        .context("the KFP pipeline task")?
        .context("the KFP pipeline")?;
    sim.shutdown().await;
    anyhow::ensure!(
        sink.stats().failed.get() == 0,
        "MLMD rejected {} pod events",
        sink.stats().failed.get()
    );
    Ok(Measured {
        pods_per_sec: pods as f64 / secs,
        calls_per_pod: client.calls() as f64 / pods as f64,
        writes_per_pod: client.writes() as f64 / pods as f64,
        patches_per_pod: sink.stats().patches.get() as f64 / pods as f64,
    })
}

/// Runs `pods` KFP steps, 32 at a time: created Pending, then Running, then Succeeded with an
/// output on the pod; every step but the first of each 10-step run consumes the previous one's
/// output (so inputs are linked by URI, as in KFP).
async fn drive(api: &Api<Pod>, pods: usize) -> anyhow::Result<()> {
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(0..pods)
        .map(|i| async move {
            let step = step(i);
            api.create(&PostParams::default(), &step.pod(None))
                .await
                .with_context(|| format!("creating {}", step.pod_name))?;
            for phase in ["Running", "Succeeded"] {
                api.patch_status(
                    &step.pod_name,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({"status": {"phase": phase}})),
                )
                .await
                .with_context(|| format!("moving {} to {phase}", step.pod_name))?;
            }
            Ok(())
        })
        .buffer_unordered(32)
        .collect()
        .await;
    results.into_iter().collect()
}

fn step(i: usize) -> Step {
    let workflow = format!("bench-wf-{}", i / 10);
    let mut step = Step::new(NS, &workflow, &format!("s{i}"));
    step.component_spec = Some(component_spec("Step", &[("out", "Dataset")]));
    if !i.is_multiple_of(10) {
        let previous = Step::new(NS, &workflow, &format!("s{}", i - 1));
        step.inputs = vec![("in".into(), previous.key("out"))];
    }
    step.outputs_on_pod = Some(vec![("out".into(), step.key("out"))]);
    step
}

/// Peak RSS of a `podline record --kfp` child process (default flags, 8 workers) that finds
/// `pods` finished, unrecorded KFP pods at start (its first LIST) and records them all into an
/// in-memory MLMD. Its queue holds what the writer needs of each pod, not the pod.
async fn rss_with_backlog(pods: usize) -> anyhow::Result<Row> {
    let sim = Sim::start(SimConfig::default().tls(false).kubelet_enabled(false))
        .await
        .context("starting the sim")?;
    let kube = super::kube_client(&sim.kubeconfig_yaml()).await?;
    let api: Api<Pod> = Api::namespaced(kube.clone(), NS);
    finish_pods(&api, pods).await?;
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let kubeconfig = dir.path().join("sim.kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig_yaml()).context("writing the kubeconfig")?;
    let server = MlmdTestServer::start(None, 0, &[]).context("starting the MLMD test server")?;
    let writer = child::podline()?
        .arg("record")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--kfp", "--mlmd-address", &server.address()])
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("KUBECONFIG")
        .env("NAMESPACE_TO_WATCH", NS)
        .spawn()
        .context("starting `podline record --kfp`")?;
    let pid = writer.id().context("the KFP child has exited")?;
    let started = Instant::now();
    let written = ListParams::default().labels(&format!("{WRITTEN_LABEL}=true"));
    let mut peak = 0.0_f64;
    loop {
        peak = peak.max(child::peak_rss_mib(pid)?);
        let done = api.list_metadata(&written).await?.items.len();
        if done >= pods {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(900),
            "the KFP child recorded only {done} of {pods} pods in 15 minutes"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    peak = peak.max(child::peak_rss_mib(pid)?);
    let now = child::rss_mib(pid)?;
    drop(writer);
    sim.shutdown().await;
    Ok(Row::at_most(
        AREA,
        format!(
            "peak RSS of `podline record --kfp` with {pods} finished pods listed at start, until \
             all are recorded ({:.0} pods/s into MLMD in memory; {now:.0} MiB after)",
            pods as f64 / secs
        ),
        peak,
        RSS_TARGET_MIB,
        "MiB",
    ))
}

/// Creates `pods` finished KFP steps (Succeeded, outputs on the pod), 32 at a time, numbered and
/// chained as [`drive`]'s.
async fn finish_pods(api: &Api<Pod>, pods: usize) -> anyhow::Result<()> {
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(0..pods)
        .map(|i| async move {
            let step = step(i);
            api.create(&PostParams::default(), &step.pod(None))
                .await
                .with_context(|| format!("creating {}", step.pod_name))?;
            api.patch_status(
                &step.pod_name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"status": {"phase": "Succeeded"}})),
            )
            .await
            .with_context(|| format!("finishing {}", step.pod_name))?;
            Ok(())
        })
        .buffer_unordered(32)
        .collect()
        .await;
    results.into_iter().collect()
}
