//! The demo's `podline record -A --reap`: the recorder and the reaper in this process, started
//! and stopped together like the one process they are in a cluster.

use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use podline_launch::reaper::Reaper;
use podline_record::{Metrics, RecordError, Recorder, RecorderConfig};
use podline_store::Store;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The reaper's grace on top of a Lease's duration in the demo (the default is 9 s).
pub const REAP_GRACE: Duration = Duration::from_secs(1);
/// The time between two reaper passes in the demo (the default is 5 s).
pub const REAP_EVERY: Duration = Duration::from_millis(500);

/// What a recorder needs to start, kept to start it again after a stop.
pub struct RecorderSetup {
    /// The recorder's own client (its own connection, as its own process would have).
    pub client: kube::Client,
    /// The store it writes.
    pub store: Arc<dyn Store>,
    /// Its configuration.
    pub config: RecorderConfig,
}

/// A running recorder with its reaper.
pub struct Recording {
    shutdown: CancellationToken,
    recorder: JoinHandle<Result<(), RecordError>>,
    reaper: JoinHandle<()>,
    metrics: Arc<Metrics>,
}

impl Recording {
    /// Starts the recorder (all namespaces) and the continuous reaper.
    pub fn start(setup: &RecorderSetup) -> Self {
        let recorder = Recorder::new(
            setup.client.clone(),
            setup.store.clone(),
            setup.config.clone(),
        );
        let metrics = recorder.metrics();
        let shutdown = CancellationToken::new();
        let reaper = Reaper::new(setup.client.clone(), None, REAP_GRACE);
        let stop = shutdown.clone();
        Recording {
            recorder: tokio::spawn(recorder.run(shutdown.clone())),
            reaper: tokio::spawn(async move { reaper.run(REAP_EVERY, stop).await }),
            shutdown,
            metrics,
        }
    }

    /// Stops both as SIGTERM would (the recorder flushes its queue first); returns the
    /// recorder's metrics for the summary.
    pub async fn stop(self) -> anyhow::Result<Arc<Metrics>> {
        self.shutdown.cancel();
        if let Err(err) = self.reaper.await {
            bail!("the reaper task panicked: {err}");
        }
        match self.recorder.await {
            Ok(Ok(())) => Ok(self.metrics),
            Ok(Err(err)) => bail!("the recorder failed: {err}"),
            Err(err) => bail!("the recorder task panicked: {err}"),
        }
    }
}
