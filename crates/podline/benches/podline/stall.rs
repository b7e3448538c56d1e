//! Frozen-connection benchmark (issue 7): how long a quiet watch whose connection freezes (a
//! frozen proxy: nothing in or out, never closed) takes to notice it and resume, over HTTP/2 with
//! PING health checks and over HTTP/1.1 (a server that does not offer h2), with podline's default
//! settings: client timeout 60 s, PING after 5 s of silence with 10 s to answer.
//!
//! Both run at once against two TLS sims; the figure is from the moment the sim froze the
//! connection to the moment the watch was open again on a new one.

use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use podline_client::connect::{ConfigSource, ConnectOptions, connect_with_kubeconfig};
use podline_client::watch::{Event, WatchConfig, watch};
use podline_sim::{FaultAction, FaultRule, FaultVerb, Sim, SimConfig};
use tokio::time::Instant;

use super::report::Row;

const AREA: &str = "stall";

/// The server keeps about 75 s of watch history: noticing later means a re-list.
const HISTORY: f64 = 75.0;

/// Measures both protocols (about a minute: the HTTP/1.1 figure waits for the client timeout).
pub async fn run() -> anyhow::Result<Vec<Row>> {
    let (h2, h1) = tokio::join!(detection(false), detection(true));
    let (h2, h1) = (h2.context("HTTP/2")?, h1.context("HTTP/1.1")?);
    let ping = podline_client::ping::Http2Ping::default();
    Ok(vec![
        Row::at_most(
            AREA,
            format!(
                "frozen quiet watch noticed and resumed, HTTP/2 (PING {}s + {}s, defaults)",
                ping.interval.as_secs(),
                ping.timeout.as_secs()
            ),
            h2.as_secs_f64(),
            ping.detection().as_secs_f64(),
            "s",
        ),
        Row::at_most(
            AREA,
            "frozen quiet watch noticed and resumed, HTTP/1.1 fallback (client timeout 60 s); target: inside the 75 s watch history",
            h1.as_secs_f64(),
            HISTORY,
            "s",
        ),
    ])
}

/// One sim, one quiet watch, one freeze: the time from freeze to the watch's resume.
async fn detection(http1_only: bool) -> anyhow::Result<Duration> {
    let sim = Sim::start(
        SimConfig::default()
            .kubelet_enabled(false)
            .bookmark_interval(Duration::from_secs(3600))
            .http1_only(http1_only),
    )
    .await
    .context("starting the sim")?;
    let outcome = measure(&sim).await;
    sim.shutdown().await;
    outcome
}

async fn measure(sim: &Sim) -> anyhow::Result<Duration> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml())
        .context("parsing the sim's kubeconfig")?;
    let connected = connect_with_kubeconfig(
        kubeconfig,
        ConfigSource::InCluster,
        &ConnectOptions::default(),
    )
    .await
    .context("connecting")?;
    sim.faults().push(
        FaultRule::new(FaultAction::Freeze {
            after_ms: Some(500),
        })
        .verb(FaultVerb::Watch)
        .times(1),
    );
    let api: Api<Pod> = Api::namespaced(connected.client, "default");
    let mut events = std::pin::pin!(watch(api, WatchConfig::default()));
    let deadline = Instant::now() + Duration::from_secs(150);
    let mut frozen_at = None;
    loop {
        let next = tokio::time::timeout_at(deadline, async {
            // Poll the watch and the sim's frozen count together.
            loop {
                tokio::select! {
                    item = events.next() => return item,
                    () = tokio::time::sleep(Duration::from_millis(10)) => {
                        if frozen_at.is_none() && sim.frozen_connections() > 0 {
                            frozen_at = Some(Instant::now());
                        }
                    }
                }
            }
        })
        .await
        .context("the watch did not resume within 150 s")?;
        match next {
            Some(Ok(Event::Connected { reason, .. }))
                if reason != podline_client::watch::Reason::Initial =>
            {
                let frozen_at = frozen_at.context("resumed before any freeze")?;
                return Ok(frozen_at.elapsed());
            }
            Some(_) => {}
            None => anyhow::bail!("the watch ended"),
        }
    }
}
