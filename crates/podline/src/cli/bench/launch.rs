//! Launcher benchmarks (issue 3): pods launched per second through the sim, with and without
//! 30% 409 Conflicts on creates, and the launcher's time to running.

use std::time::Instant;

use anyhow::Context as _;
use podline_launch::{Cancel, LaunchConfig, Launcher, LogMode, TaskSpec};
use podline_sim::{FaultAction, FaultPlan, FaultRule, FaultVerb, Sim, SimConfig};

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
