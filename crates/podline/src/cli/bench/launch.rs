//! Launcher benchmarks (issue 3): pods launched per second through the sim, with and without
//! 30% 409 Conflicts on creates, and the launcher's time to running.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use podline_launch::{Cancel, LaunchConfig, Launcher, LogMode, TaskSpec};
use podline_sim::{FaultAction, FaultPlan, FaultRule, FaultVerb, Sim, SimConfig};

use super::child;
use super::report::Row;

const AREA: &str = "launch";

/// Launches `pods` pods 200 at a time, without faults and with 30% 409s on creates.
pub async fn run(pods: usize) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for conflicts in [false, true] {
        let mut plan = FaultPlan::default();
        if conflicts {
            plan.rules.push(
                FaultRule::new(FaultAction::status(409))
                    .verb(FaultVerb::Create)
                    .resource("pods")
                    .probability(0.3),
            );
        }
        let sim = Sim::start(SimConfig::default().tls(false).faults(plan))
            .await
            .context("starting the sim")?;
        let client = super::kube_client(&sim.kubeconfig_yaml()).await?;
        let config = LaunchConfig {
            logs: LogMode::None,
            ..LaunchConfig::default()
        };
        let launcher = Launcher::new(client, "default", config);
        let specs: Vec<TaskSpec> = (0..pods)
            .map(|i| TaskSpec {
                name: Some(format!("bench-{i}")),
                image: Some("busybox:1.36".into()),
                command: vec!["true".into()],
                annotations: [("sim.podline.io/duration".to_string(), "50ms".to_string())].into(),
                ..TaskSpec::default()
            })
            .collect();
        let started = Instant::now();
        let summary =
            podline_launch::run_many(&launcher, specs, 200, None, false, &Cancel::new()).await;
        let rate = pods as f64 / started.elapsed().as_secs_f64();
        sim.shutdown().await;
        anyhow::ensure!(
            summary.failed == 0,
            "{} of {pods} launches failed",
            summary.failed
        );
        let label = if conflicts {
            "with 30% 409 on creates"
        } else {
            "no faults"
        };
        rows.push(Row::at_least(
            AREA,
            format!(
                "pods launched to completion, 200 at a time, {label} ({pods} pods, {} retries)",
                summary.retries
            ),
            rate,
            200.0,
            "/s",
        ));
        if !conflicts {
            let p99 = summary.p99_time_to_running_ms.unwrap_or_default();
            rows.push(Row::at_most(
                AREA,
                format!("p99 time to running incl. the sim's 10+10 ms schedule/pull ({pods} pods, 200 at a time)"),
                p99 as f64,
                20.0 + 20.0,
                "ms",
            ));
        }
    }
    Ok(rows)
}

/// Peak resident memory of `podline run --count {pods} --parallel 200` as the user runs it: its
/// own process, against a `podline sim` process over HTTPS.
pub async fn peak_rss_of_run(pods: usize) -> anyhow::Result<Row> {
    let sim = child::SimProcess::start_tls(&[]).await?;
    let count = pods.to_string();
    let mut run = child::podline()?
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["run", "--count", &count, "--parallel", "200"])
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
