//! KFP mode benchmarks (issue 5): pods/s recorded into the real ML Metadata store (the
//! `ml-metadata` package behind `crates/mlmd/tests/mlmd_server.py`) by the whole KFP pipeline:
//! the pod watch on the sim, the keyed work queue, the MLMD workers and the pod patches.
//!
//! A pod counts as recorded when it carries `metadata_written` (the last thing the writer does,
//! after its outputs and final state are in MLMD). Kubeflow's own writer manages about 10 pods/s
//! against the same server (issue 5).

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

use super::report::Row;

const AREA: &str = "mlmd";
const NS: &str = "default";
/// The target.
const TARGET: f64 = 200.0;

/// Why the part was skipped, when the MLMD test server cannot run here.
pub fn unavailable() -> Option<String> {
    test_server::available().err().map(|e| e.to_string())
}

/// Runs the live, catch-up and durable-store loads with `pods` pods each.
pub async fn run_all(pods: usize) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (mode, durable) in [
        (Mode::Live, false),
        (Mode::CatchUp, false),
        (Mode::Live, true),
    ] {
        let dir = tempfile::tempdir().context("creating a temporary directory")?;
        let db = dir.path().join("mlmd.db");
        let server = MlmdTestServer::start(durable.then_some(db.as_path()), 0, &[])
            .context("starting the MLMD test server")?;
        let result = measure(&server, pods, mode).await?;
        let store = if durable {
            "MLMD on a SQLite file (WAL, a sync per commit on this disk)"
        } else {
            "MLMD in memory"
        };
        let what = match mode {
            Mode::Live => "pods/s recorded live (Pending, Running, Succeeded)",
            Mode::CatchUp => "pods/s caught up after a restart (relist of finished pods)",
        };
        rows.push(Row::at_least(
            AREA,
            format!(
                "{what}, {store} ({pods} pods, {:.1} MLMD calls and {:.1} pod patches per pod)",
                result.calls_per_pod, result.patches_per_pod
            ),
            result.pods_per_sec,
            TARGET,
            "/s",
        ));
    }
    Ok(rows)
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
