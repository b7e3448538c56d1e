//! The demo's `podline record -A --reap --finalize`: the recorder and the reaper in this
//! process, started and stopped together like the one process they are in a cluster, and
//! started again after a stop (the recorder outage round).

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
struct Running {
    shutdown: CancellationToken,
    recorder: JoinHandle<Result<(), RecordError>>,
    reaper: JoinHandle<()>,
    metrics: Arc<Metrics>,
}

/// The demo's recorder process: at most one running at a time, and the metrics of every one
/// that ran (the summary adds them up).
pub struct Recording {
    setup: RecorderSetup,
    running: Option<Running>,
    stopped: Vec<Arc<Metrics>>,
}

impl Recording {
    /// Starts the recorder (all namespaces) and the continuous reaper.
    pub fn start(setup: RecorderSetup) -> Self {
        let mut recording = Recording {
            setup,
            running: None,
            stopped: Vec::new(),
        };
        recording.restart();
        recording
    }

    /// Starts a recorder again (after [`Recording::stop`]); it resumes from the store's resume
    /// point. Does nothing if one runs.
    pub fn restart(&mut self) {
        if self.running.is_some() {
            return;
        }
        let setup = &self.setup;
        let recorder = Recorder::new(
            setup.client.clone(),
            setup.store.clone(),
            setup.config.clone(),
        );
        let metrics = recorder.metrics();
        let shutdown = CancellationToken::new();
        let reaper = Reaper::new(setup.client.clone(), None, REAP_GRACE);
        let stop = shutdown.clone();
        self.running = Some(Running {
            recorder: tokio::spawn(recorder.run(shutdown.clone())),
            reaper: tokio::spawn(async move { reaper.run(REAP_EVERY, stop).await }),
            shutdown,
            metrics,
        });
    }

    /// Stops the recorder and its reaper as SIGTERM would (the recorder flushes its queue
    /// first). Does nothing if none runs.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        let Some(running) = self.running.take() else {
            return Ok(());
        };
        running.shutdown.cancel();
        self.stopped.push(running.metrics);
        if let Err(err) = running.reaper.await {
            bail!("the reaper task panicked: {err}");
        }
        match running.recorder.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => bail!("the recorder failed: {err}"),
            Err(err) => bail!("the recorder task panicked: {err}"),
        }
    }

    /// Stops the recorder for good; returns every recorder's rendered metrics.
    pub async fn finish(mut self) -> anyhow::Result<Vec<String>> {
        self.stop().await?;
        Ok(self.stopped.iter().map(|m| m.render()).collect())
    }
}
