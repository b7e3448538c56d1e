//! The demo's recorder outage round: the recorder stops while the round's pods run and stays
//! down longer than the API server's watch history while they finish and are deleted. Each pod
//! carries the recorder's finalizer from its create, so a deleted pod waits in Terminating with
//! its final state intact. When the recorder starts again its resume point is older than the
//! history (410 Expired): it re-lists, records every final state, and takes the finalizers off.
//! Without the finalizer those pods would be recorded as vanished (deleted, final state
//! unknown).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use podline_store::{PodFilter, Store};
use tokio::time::Instant;

use super::recording::Recording;
use super::schedule::run_name;

/// The demo sim's watch history (kube-apiserver keeps about 75 s): short, so that an outage
/// longer than it stays short too.
pub const HISTORY: Duration = Duration::from_secs(5);
/// How long the recorder stays down: longer than the history.
pub const DOWN_FOR: Duration = Duration::from_secs(6);
/// When the recorder stops, after the round's first creates.
const STOP_AFTER: Duration = Duration::from_millis(300);
/// How long the restarted recorder may take to record and release the round's pods.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the round looks at the API and the store while it waits.
const POLL_EVERY: Duration = Duration::from_millis(100);

/// What the outage itself did.
#[derive(Debug, Clone, Copy)]
pub struct Outage {
    /// How long the recorder was down.
    pub down: Duration,
    /// The round's pods waiting in Terminating when it came back.
    pub held: usize,
    /// When it came back.
    pub restarted: Instant,
}

/// What the round measured once its pods were gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutageFigures {
    /// The round's pods.
    pub pods: usize,
    /// Of those, recorded deleted with their final state.
    pub recorded: usize,
    /// Of those, recorded deleted with their final state unknown.
    pub vanished: usize,
    /// From the restart to the last of the round's pods gone from the API.
    pub released_in: Duration,
}

/// The outage, played while the round's pods are launched: stop the recorder, wait past the
/// history, count the pods held in Terminating, start the recorder again.
pub async fn timeline(
    recording: &mut Recording,
    client: &kube::Client,
    round: usize,
) -> anyhow::Result<Outage> {
    tokio::time::sleep(STOP_AFTER).await;
    recording.stop().await?;
    let stopped = Instant::now();
    tokio::time::sleep(DOWN_FOR).await;
    let held = round_pods(client, round)
        .await?
        .iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_some())
        .count();
    recording.restart();
    Ok(Outage {
        down: stopped.elapsed(),
        held,
        restarted: Instant::now(),
    })
}

/// After the round's launches: waits until its pods are gone from the API and recorded, and
/// counts how they were recorded.
pub async fn settle(
    client: &kube::Client,
    store: &Arc<dyn Store>,
    round: usize,
    pods: usize,
    outage: &Outage,
) -> anyhow::Result<OutageFigures> {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    let mut released_in = None;
    loop {
        if released_in.is_none() && round_pods(client, round).await?.is_empty() {
            released_in = Some(outage.restarted.elapsed());
        }
        let records = store
            .pods(&PodFilter {
                run: Some(run_name(round)),
                namespace: Some("default".to_owned()),
                ..PodFilter::default()
            })
            .await
            .context("reading the round's pods from the store")?;
        let deleted = |observed: bool| {
            records
                .iter()
                .filter(|p| p.deleted_at.is_some() && p.final_state_observed == observed)
                .count()
        };
        let figures = OutageFigures {
            pods,
            recorded: deleted(true),
            vanished: deleted(false),
            released_in: released_in.unwrap_or_else(|| outage.restarted.elapsed()),
        };
        let settled = released_in.is_some() && figures.recorded + figures.vanished >= pods;
        if settled || Instant::now() >= deadline {
            return Ok(figures);
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// The round's pods in the API (Terminating ones included); retried on errors worth it.
async fn round_pods(client: &kube::Client, round: usize) -> anyhow::Result<Vec<Pod>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let selector = ListParams::default().labels(&format!(
        "{}={}",
        podline_launch::RUN_LABEL,
        run_name(round)
    ));
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    loop {
        match api.list(&selector).await {
            Ok(list) => return Ok(list.items),
            Err(err)
                if podline_client::retry::classify(&err).is_retryable()
                    && Instant::now() < deadline =>
            {
                tokio::time::sleep(POLL_EVERY).await;
            }
            Err(err) => bail!("listing the round's pods: {err}"),
        }
    }
}
