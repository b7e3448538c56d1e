//! The recorder's side of the finalizer while it runs: per observed pod, the decision, the
//! safety valve's timers, and the committed tickets handed to the worker.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kube::core::ObjectMeta;
use podline_client::finalizer::has_finalizer;
use podline_store::PodObservation;
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::FinalizeConfig;
use super::decide::{PodFacts, Verdict, decide};
use super::worker::Finalizers;
use crate::metrics::RecorderMetrics;
use crate::queue::Queue;
use crate::ticket::{ReleaseReason, Ticket};

/// The recorder's side of the finalizer while it runs: decides per observed pod, arms the safety
/// valve's timers, and hands committed tickets to the worker.
pub(crate) struct Finalize {
    config: FinalizeConfig,
    queue: Arc<Queue>,
    worker: Arc<Finalizers>,
    /// Safety-valve timers by pod uid.
    rechecks: Mutex<HashMap<String, AbortHandle>>,
}

impl Finalize {
    /// The glue for one run of the recorder; the worker runs until `stop`.
    pub fn start(
        client: kube::Client,
        config: FinalizeConfig,
        queue: Arc<Queue>,
        metrics: Arc<RecorderMetrics>,
        stop: CancellationToken,
    ) -> (Arc<Self>, tokio::task::JoinHandle<()>) {
        let worker = Arc::new(Finalizers::new(
            client,
            config.finalizer.clone(),
            config.adopt.clone(),
            metrics,
            config.backoff.clone(),
            config.workers,
        ));
        let running = tokio::spawn(worker.clone().run(stop));
        let this = Arc::new(Self {
            config,
            queue,
            worker,
            rechecks: Mutex::new(HashMap::new()),
        });
        (this, running)
    }

    fn rechecks(&self) -> MutexGuard<'_, HashMap<String, AbortHandle>> {
        self.rechecks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The settings: the own finalizer and the adopted one (for the sweep's sorting).
    pub fn config(&self) -> &FinalizeConfig {
        &self.config
    }

    /// The worker (for the sweep).
    pub fn worker(&self) -> &Finalizers {
        &self.worker
    }

    /// A pod the watch (or the sweep) observed, already queued as `obs`: asks for the add, arms
    /// the valve, or queues the release ticket behind the observation.
    pub fn observed(&self, meta: &ObjectMeta, obs: &PodObservation) {
        let facts = PodFacts {
            carries_finalizer: has_finalizer(meta, &self.config.finalizer),
            carries_adopted: self
                .config
                .adopt
                .as_deref()
                .is_some_and(|adopted| has_finalizer(meta, adopted)),
            deletion_timestamp: meta.deletion_timestamp.as_ref().map(|t| t.0),
            deletion_grace_seconds: meta.deletion_grace_period_seconds,
            phase: &obs.phase,
            bound: obs.node.is_some(),
        };
        match decide(&facts, jiff::Timestamp::now(), self.config.margin) {
            Verdict::Add => self.worker.add(meta),
            Verdict::Keep => {}
            Verdict::ReleaseAfterCommit(reason) => {
                self.queue.release(Ticket::new(meta, reason));
            }
            Verdict::RecheckAt(at) => self.recheck_at(meta, at),
        }
    }

    /// A DELETED event. Its object lists the finalizer only when the pod left the watch's
    /// selector (a real deletion waits for the finalizers): then the own finalizer is released
    /// after the commit (an adopted one stays for the scope the pod moved to).
    pub fn deleted(&self, meta: &ObjectMeta) {
        let uid = meta.uid.as_deref().unwrap_or_default();
        if let Some(timer) = self.rechecks().remove(uid) {
            timer.abort();
        }
        if has_finalizer(meta, &self.config.finalizer) {
            self.queue
                .release(Ticket::new(meta, ReleaseReason::OutOfScope));
        } else {
            self.worker.forget(uid);
        }
    }

    /// The store committed the observations these tickets follow: release the pods.
    pub fn committed(&self, tickets: Vec<Ticket>) {
        if tickets.is_empty() {
            return;
        }
        {
            let mut rechecks = self.rechecks();
            for ticket in &tickets {
                if let Some(timer) = rechecks.remove(ticket.uid()) {
                    timer.abort();
                }
            }
        }
        for ticket in tickets {
            self.worker.remove(ticket);
        }
    }

    /// After the writer stopped: lets the removals already handed over finish, up to `deadline`.
    pub async fn drain(&self, deadline: Instant) -> bool {
        for (_, timer) in self.rechecks().drain() {
            timer.abort();
        }
        self.worker.drained(deadline).await
    }

    /// Arms the valve for a pod being deleted without a final state: at `at`, its ticket goes
    /// into the queue (so it is released after the next commit, with what was recorded).
    fn recheck_at(&self, meta: &ObjectMeta, at: jiff::Timestamp) {
        let Some(uid) = meta.uid.clone() else { return };
        let mut rechecks = self.rechecks();
        if rechecks.contains_key(&uid) {
            return;
        }
        let left = at.duration_since(jiff::Timestamp::now());
        let wait = if left.is_negative() {
            Duration::ZERO
        } else {
            left.unsigned_abs().min(Duration::from_secs(24 * 3600))
        };
        let queue = self.queue.clone();
        let ticket = Ticket::new(meta, ReleaseReason::Overdue);
        let timer = tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            tracing::warn!(
                namespace = ticket.meta.namespace.as_deref().unwrap_or_default(),
                pod = ticket.meta.name.as_deref().unwrap_or_default(),
                "pod deleted but never reached a final state within its grace period and the \
                 margin: releasing it with what was recorded"
            );
            queue.release(ticket);
        });
        rechecks.insert(uid, timer.abort_handle());
    }
}

impl std::fmt::Debug for Finalize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Finalize")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}
