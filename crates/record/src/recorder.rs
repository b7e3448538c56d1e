//! The recorder: watch → coalescing queue → batched store transactions.
//!
//! Two tasks, so the watch never waits on the disk:
//! - the **watch task** reads [`podline_client::watch`] (list+watch that resumes, relists on 410,
//!   bounds every wait by the client timeout), maps each pod with [`observe`] and
//!   pushes it into the queue (`queue.rs`; coalesced per pod: see there for the backpressure
//!   choice); it also tells the queue how far the watch got (event and bookmark resourceVersions);
//! - the **writer task** drains the queue every `linger` (10 ms, or as soon as `max_batch` pods are
//!   pending) and applies one [`Batch`] per drain: the ops *and* the resume point they reach, in
//!   one transaction. A restart (even `kill -9`) therefore resumes exactly where the stored data
//!   ends: no gap, no duplicate.
//!
//! Resume point rules (the subtle part):
//! - while a relist is in progress (`Init` .. `InitDone`) the resume point does not move: a
//!   half-stored list is not a position to resume from;
//! - at `InitDone` the queue gets the set of uids the list returned; the writer compares it with
//!   the store's live pods ([`reconcile`]) and writes the `Vanished` ops in the
//!   same transaction that moves the resume point to the list's resourceVersion (announced by the
//!   `Connected` event of the watch that follows).
//!
//! Failures: a retryable store error puts the batch back into the queue (merged with what arrived
//! since) and retries after a full-jitter backoff; a batch the store refuses outright is split so
//! that only the pods that cannot be written are affected: such a pod change is written again
//! without its free text (messages, reasons, labels, annotations; the store escapes every text it
//! is given, so this is a last resort against a store that still refuses some, e.g. a PostgreSQL
//! database in a non-UTF-8 encoding), keeping its phase, exit codes, times and deletion, and only
//! if even that is refused it is dropped (logged by namespace/name, counted). An undecodable pod
//! object is logged and skipped. A store whose disk is full keeps failing retryably: the writer
//! keeps the changes queued (coalesced per pod) and `/readyz` reports the store not writable until
//! a write succeeds again. Only what no retry can fix (401, 403, a missing
//! namespace) ends [`Recorder::run`] with an error.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use kube::Api;
use kube::api::{ApiResource, DynamicObject};
use podline_client::backoff::FullJitter;
use podline_client::timeouts::WatchTimeouts;
use podline_client::watch::{Event, Skipped, WatchConfig, WatchError, elide_values, watch};
use podline_daemon::{Health, Metrics};
use podline_store::{Batch, LiveScope, ResumePoint, StoreOp, StoreWrite};
use serde::Deserialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::RecordError;
use crate::finalize::{Finalize, FinalizeConfig, Ticket};
use crate::lifecycle::{LifecycleConfig, observe, parse_resource_version};
use crate::metrics::RecorderMetrics;
use crate::queue::{Drained, Pushed, Queue};
use crate::reconcile;
use crate::selector::LabelSelector;

/// How a recorder watches and writes. Build with [`RecorderConfig::new`] and adjust fields.
#[derive(Debug, Clone)]
pub struct RecorderConfig {
    /// Identifies the cluster in the stored resume point (e.g. the API server URL), so two
    /// clusters recorded into one store never share a position.
    pub cluster: String,
    /// Namespace to watch; `None` watches all namespaces.
    pub namespace: Option<String>,
    /// Only pods matching this label selector (also restricts reconcile to them).
    pub selector: Option<LabelSelector>,
    /// Server-side and client-side watch timeouts (validated).
    pub timeouts: WatchTimeouts,
    /// Run label and the rest of the pod mapping.
    pub lifecycle: LifecycleConfig,
    /// Soft bound of the queue, in distinct pods with unwritten changes (default 10,000).
    pub queue_capacity: usize,
    /// A drain is written at once when this many pods are pending (default 500).
    pub max_batch: usize,
    /// How long the writer gathers changes before a transaction (default 10 ms): bursts become
    /// one transaction, and a change waits at most this long before its commit starts (the
    /// event-to-commit target is 50 ms at p99).
    pub linger: Duration,
    /// Delays between retries of a failed store write (default 100 ms doubling to 10 s).
    pub store_backoff: FullJitter,
    /// Delays between failed watch attempts; `None` keeps the watch's default (200 ms .. 30 s).
    pub watch_backoff: Option<FullJitter>,
    /// On shutdown, how long the writer may keep retrying to flush (default 10 s). Whatever is
    /// left is not lost: its resume point was not stored, so the next start reads it again.
    pub flush_timeout: Duration,
    /// While nothing is written, how often the store is probed for `/readyz` (default 10 s).
    pub store_probe_interval: Duration,
    /// Hold recorded pods with a finalizer until their final state is committed (see
    /// [`finalize`](crate::finalize)); `None` (the default) sends no patch at all.
    pub finalize: Option<FinalizeConfig>,
}

impl RecorderConfig {
    /// Defaults for a recorder of `cluster`, watching `namespace` (`None`: all namespaces).
    pub fn new(cluster: impl Into<String>, namespace: Option<String>) -> Self {
        let store_backoff =
            const { FullJitter::doubling(Duration::from_millis(100), Duration::from_secs(10)) };
        Self {
            cluster: cluster.into(),
            namespace,
            selector: None,
            timeouts: WatchTimeouts::default(),
            lifecycle: LifecycleConfig::default(),
            queue_capacity: 10_000,
            max_batch: 500,
            linger: Duration::from_millis(10),
            store_backoff,
            watch_backoff: None,
            flush_timeout: Duration::from_secs(10),
            store_probe_interval: Duration::from_secs(10),
            finalize: None,
        }
    }

    /// The key under which this watch's resume point is stored: cluster, namespace and selector,
    /// because a resourceVersion is only a position within that exact scope.
    pub fn watch_key(&self) -> String {
        format!(
            "{}|pods|ns={}|l={}",
            self.cluster,
            self.namespace.as_deref().unwrap_or("*"),
            self.selector.as_ref().map_or("", |s| s.as_str())
        )
    }
}

/// While the watch keeps failing, at most one warning per this long (the first one at once).
const OUTAGE_WARN_EVERY: Duration = Duration::from_secs(10);

/// A recorder bound to a cluster and a store. Create with [`Recorder::new`], serve
/// [`Recorder::health`] over HTTP, then [`Recorder::run`] until shutdown.
pub struct Recorder {
    client: kube::Client,
    store: Arc<dyn StoreWrite>,
    config: RecorderConfig,
    metrics: Arc<Metrics>,
    /// The counters only this recorder has, registered in `metrics`.
    own_metrics: Arc<RecorderMetrics>,
    health: Arc<Health>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("store", &self.store.backend())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder writing pods seen through `client` into `store`.
    pub fn new(client: kube::Client, store: Arc<dyn StoreWrite>, config: RecorderConfig) -> Self {
        let own_metrics = Arc::new(RecorderMetrics::default());
        let metrics = Arc::new(Metrics::with_extra(|r| own_metrics.register(r)));
        // A healthy idle watch reconnects every client timeout; twice that without any progress
        // means it is stuck.
        let health = Arc::new(Health::new(metrics.clone(), config.timeouts.client * 2));
        Self {
            client,
            store,
            config,
            metrics,
            own_metrics,
            health,
        }
    }

    /// The metrics, to serve or read in tests.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// The health state behind `/readyz`, to serve with [`podline_daemon::serve`].
    pub fn health(&self) -> Arc<Health> {
        self.health.clone()
    }

    /// Records until `shutdown` is cancelled (then flushes and returns `Ok`) or until the watch
    /// fails in a way no retry can fix (returns the error; the process should exit non-zero).
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), RecordError> {
        let key = self.config.watch_key();
        let Some(resume) = self.resume_point(&key, &shutdown).await? else {
            return Ok(()); // shut down while waiting for the store
        };
        self.health
            .set_store_writable(self.store.health().await.is_ok());
        let stop_probe = CancellationToken::new();
        let probe = tokio::spawn(crate::health::probe_store(
            self.store.clone(),
            self.health.clone(),
            self.config.store_probe_interval,
            stop_probe.clone(),
        ));

        let queue = Arc::new(Queue::new(
            self.config.queue_capacity,
            self.config.timeouts.client / 4,
        ));
        let stop_finalizers = CancellationToken::new();
        let finalize = self.config.finalize.clone().map(|config| {
            Finalize::start(
                self.client.clone(),
                config,
                queue.clone(),
                self.own_metrics.clone(),
                stop_finalizers.clone(),
            )
        });
        let (finalize, finalizer_task) = match finalize {
            Some((finalize, task)) => (Some(finalize), Some(task)),
            None => (None, None),
        };
        let sweep = finalize.clone().map(|finalize| {
            let (client, queue) = (self.client.clone(), queue.clone());
            let (namespace, selector) =
                (self.config.namespace.clone(), self.config.selector.clone());
            let lifecycle = self.config.lifecycle.clone();
            let metrics = self.own_metrics.clone();
            tokio::spawn(async move {
                let report = crate::finalize::sweep(
                    &client,
                    namespace.as_deref(),
                    selector.as_ref(),
                    &finalize,
                    &queue,
                    &lifecycle,
                )
                .await;
                tracing::info!(
                    pods = report.pods,
                    adding = report.adds,
                    releasing_out_of_scope = report.out_of_scope,
                    terminating = report.terminating,
                    overlapping = report.overlapping,
                    undecodable = report.undecodable,
                    "finalizer sweep done"
                );
                metrics.finalizer_sweep_done(report.overlapping);
                if report.out_of_scope > 0 {
                    tracing::warn!(
                        pods = report.out_of_scope,
                        finalizer = %finalize.config().finalizer,
                        "finalizer sweep: pods carrying this recorder's finalizer are outside its \
                         scope (its selector or their labels changed; or another recorder runs \
                         with the same shard name and another selector): releasing them"
                    );
                }
                if report.overlapping > 0 {
                    tracing::warn!(
                        pods = report.overlapping,
                        "finalizer sweep: pods of this recorder's scope also carry another \
                         recorder's finalizer: another recorder's scope overlaps this one (or \
                         their labels changed); both record them, each releases only its own"
                    );
                }
                report
            })
        });
        let abandon = CancellationToken::new();
        let writer = Writer {
            queue: queue.clone(),
            store: self.store.clone(),
            key: key.clone(),
            scope: LiveScope {
                namespace: self.config.namespace.clone(),
            },
            selector: self.config.selector.clone(),
            metrics: self.metrics.clone(),
            health: self.health.clone(),
            linger: self.config.linger,
            max_batch: self.config.max_batch,
            backoff: self.config.store_backoff.clone(),
            abandon: abandon.clone(),
            finalize: finalize.clone(),
        };
        let writer = tokio::spawn(writer.run());

        let outcome = self
            .watch_loop(resume, &queue, finalize.as_deref(), &shutdown)
            .await;
        if let Some(sweep) = sweep {
            sweep.abort();
        }
        stop_probe.cancel();
        let _ = probe.await;

        self.health.set_watch_established(false);
        queue.close();
        let mut writer = writer;
        tokio::select! {
            _ = &mut writer => {}
            () = tokio::time::sleep(self.config.flush_timeout) => {
                abandon.cancel();
                let _ = writer.await;
            }
        }
        let pending = queue.depth();
        if pending > 0 {
            tracing::warn!(
                pending,
                "shutdown: the store did not accept the last changes in time; they will be read \
                 again from the watch on the next start"
            );
        }
        if let Some(finalize) = &finalize {
            // Removals already committed get what is left of the flush time; any not done are
            // found again by the next start's sweep.
            let deadline = Instant::now() + self.config.flush_timeout / 2;
            if !finalize.drain(deadline).await {
                tracing::info!(
                    "shutdown: some finalizer removals were not done; the next start finishes them"
                );
            }
        }
        stop_finalizers.cancel();
        if let Some(task) = finalizer_task {
            let _ = task.await;
        }
        outcome
    }

    /// Reads the stored resume point, retrying while the store is unavailable.
    async fn resume_point(
        &self,
        key: &str,
        shutdown: &CancellationToken,
    ) -> Result<Option<Option<u64>>, RecordError> {
        let mut delays = backon::BackoffBuilder::build(self.config.store_backoff.clone());
        loop {
            match self.store.resume_point(key).await {
                Ok(point) => {
                    let rv = point.map(|p| p.resource_version);
                    match rv {
                        Some(rv) => tracing::info!(resource_version = rv, "resuming the watch"),
                        None => tracing::info!("no resume point stored: starting with a LIST"),
                    }
                    return Ok(Some(rv));
                }
                Err(err) if err.is_retryable() => {
                    self.metrics.store_error("retryable");
                    let delay = delays.next().unwrap_or(Duration::from_secs(10));
                    tracing::warn!(error = %err, retry_in = ?delay, "store unavailable at startup");
                    tokio::select! {
                        () = shutdown.cancelled() => return Ok(None),
                        () = tokio::time::sleep(delay) => {}
                    }
                }
                Err(err) => return Err(RecordError::Store(err)),
            }
        }
    }

    async fn watch_loop(
        &self,
        resume: Option<u64>,
        queue: &Queue,
        finalize: Option<&Finalize>,
        shutdown: &CancellationToken,
    ) -> Result<(), RecordError> {
        let resource = ApiResource::erase::<Pod>(&());
        // Watched as DynamicObject so that a pod the typed model cannot decode is one skipped
        // object (logged by name), not a broken stream that would replay it forever.
        let api: Api<DynamicObject> = match &self.config.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        };
        let mut config = WatchConfig::default()
            .timeouts(self.config.timeouts)
            .resume_from(resume.map(|rv| rv.to_string()));
        if let Some(selector) = &self.config.selector {
            config = config.labels(selector.as_str());
        }
        if let Some(backoff) = &self.config.watch_backoff {
            config = config.backoff(backoff.clone());
        }
        let mut events = std::pin::pin!(watch(api, config));
        let mut state = WatchState::default();
        let mut outage = podline_client::watch::OutageLog::new(OUTAGE_WARN_EVERY);
        loop {
            let item = tokio::select! {
                biased;
                () = shutdown.cancelled() => {
                    tracing::info!("shutting down: flushing the queue");
                    return Ok(());
                }
                item = events.next() => item,
            };
            match item {
                Some(Ok(event)) => {
                    // Init only announces a LIST; any other event means the server answered.
                    if !matches!(event, Event::Init)
                        && let Some(failures) = outage.succeeded()
                    {
                        tracing::info!(cluster = %self.config.cluster, failures, "watching pods again");
                    }
                    self.health.progress();
                    self.handle(event, queue, finalize, &mut state).await;
                    self.metrics.queue_depth(queue.depth());
                }
                Some(Err(err)) if err.is_fatal() => return Err(RecordError::Watch(err)),
                Some(Err(err)) => {
                    if let Some(report) = outage.failed() {
                        tracing::warn!(
                            cluster = %self.config.cluster,
                            failures = report.failures,
                            reason = err.reason().as_str(),
                            "cannot watch pods{}, retrying with backoff: {err}",
                            if report.since_start { " since start" } else { "" },
                        );
                    }
                    self.routine_error(&err);
                }
                None => return Err(RecordError::WatchEnded),
            }
        }
    }

    /// Logs a non-fatal watch error at debug (outages are warned about by the caller).
    fn routine_error(&self, err: &WatchError) {
        self.health.set_watch_established(false);
        if err.is_gone() {
            tracing::info!(
                reason = err.reason().as_str(),
                "watch history expired, re-listing: {err}"
            );
        } else {
            tracing::debug!(
                reason = err.reason().as_str(),
                "watch interrupted, resuming: {err}"
            );
        }
    }

    async fn handle(
        &self,
        event: Event<DynamicObject>,
        queue: &Queue,
        finalize: Option<&Finalize>,
        state: &mut WatchState,
    ) {
        match event {
            Event::Init => {
                self.metrics.event("init");
                self.metrics.relist();
                state.relisting = true;
                state.seen.clear();
                state.unidentified = false;
            }
            Event::InitApply(obj) => {
                self.metrics.event("init_apply");
                if let Some(uid) = obj.metadata.uid.clone() {
                    state.seen.insert(uid);
                }
                self.upsert(obj, queue, finalize, state).await;
            }
            Event::InitDone => {
                self.metrics.event("init_done");
                state.relisting = false;
                let seen = std::mem::take(&mut state.seen);
                if std::mem::take(&mut state.unidentified) {
                    // A listed pod that could not be decoded had no readable uid: any pod of the
                    // store may be that one, so none is judged vanished by this list (the next
                    // list that reads every uid does it).
                    tracing::warn!(
                        pods = seen.len(),
                        "list complete, but a listed pod object had no readable uid: not \
                         marking any pod vanished after this list"
                    );
                    return;
                }
                tracing::info!(
                    pods = seen.len(),
                    "list complete: reconciling with the store"
                );
                queue.reconcile(seen, jiff::Timestamp::now());
            }
            Event::Skipped(skipped) => self.skipped(skipped, queue, state).await,
            Event::Apply(obj) => {
                self.metrics.event("apply");
                self.upsert(obj, queue, finalize, state).await;
            }
            Event::Delete(obj) => {
                self.metrics.event("delete");
                self.delete(obj, queue, finalize, state).await;
            }
            Event::Bookmark(rv) => {
                self.metrics.event("bookmark");
                if let Some(rv) = parse_resource_version(Some(&rv)) {
                    self.advance(rv, queue, state);
                }
            }
            Event::Connected {
                reason,
                resource_version,
            } => {
                self.health.set_watch_established(true);
                if !reason.is_first_connect() {
                    self.metrics.reconnect(reason.as_str());
                }
                tracing::debug!(
                    reason = reason.as_str(),
                    resource_version,
                    "watch connected"
                );
                if let Some(rv) = parse_resource_version(Some(&resource_version)) {
                    self.advance(rv, queue, state);
                }
            }
        }
    }

    /// A watch line or listed pod the watch could not decode: logged by name (never the object:
    /// its values may be secrets), counted, and otherwise treated as far as its readable identity
    /// allows. A listed one exists, so it is not vanished at `InitDone`; a deleted one is recorded
    /// deleted with its final state unknown; its resourceVersion is a resume point like any
    /// event's, so a restart resumes after it, not into it.
    async fn skipped(&self, skipped: Skipped, queue: &Queue, state: &mut WatchState) {
        self.metrics.skipped(skipped.kind.as_str());
        tracing::warn!(
            cluster = %self.config.cluster,
            object = %skipped.object_name(),
            uid = skipped.uid.as_deref().unwrap_or(""),
            resource_version = skipped.resource_version.as_deref().unwrap_or(""),
            kind = skipped.kind.as_str(),
            "skipped: {skipped}"
        );
        let rv = parse_resource_version(skipped.resource_version.as_deref());
        if skipped.is_listed() {
            match skipped.uid {
                Some(uid) => {
                    state.seen.insert(uid);
                }
                None => state.unidentified = true,
            }
        } else if skipped.is_deletion()
            && let (Some(uid), Some(namespace), Some(name), Some(rv)) =
                (skipped.uid, skipped.namespace, skipped.name, rv)
        {
            let deleted = StoreOp::Deleted {
                uid,
                namespace,
                name,
                resource_version: rv,
                at: jiff::Timestamp::now(),
                final_state_observed: false,
            };
            self.count(queue.delete(None, deleted).await);
        }
        if let Some(rv) = rv {
            self.advance(rv, queue, state);
        }
    }

    fn advance(&self, rv: u64, queue: &Queue, state: &WatchState) {
        if !state.relisting {
            queue.advance(rv);
        }
    }

    async fn upsert(
        &self,
        obj: DynamicObject,
        queue: &Queue,
        finalize: Option<&Finalize>,
        state: &WatchState,
    ) {
        let rv = parse_resource_version(obj.metadata.resource_version.as_deref());
        // Only with finalizers is the metadata kept past the mapping (for the add or removal).
        let meta = finalize.map(|_| crate::finalize::slim(&obj.metadata));
        if let Some(obs) = self.observe(obj) {
            match (finalize, meta) {
                (Some(finalize), Some(meta)) => {
                    // The observation first: a release ticket is queued behind it.
                    self.count(queue.upsert(obs.clone()).await);
                    finalize.observed(&meta, &obs);
                }
                _ => self.count(queue.upsert(obs).await),
            }
        }
        if let Some(rv) = rv {
            self.advance(rv, queue, state);
        }
    }

    async fn delete(
        &self,
        obj: DynamicObject,
        queue: &Queue,
        finalize: Option<&Finalize>,
        state: &WatchState,
    ) {
        let rv = parse_resource_version(obj.metadata.resource_version.as_deref());
        let meta = finalize.map(|_| crate::finalize::slim(&obj.metadata));
        if let Some(obs) = self.observe(obj) {
            let deleted = StoreOp::Deleted {
                uid: obs.uid.clone(),
                namespace: obs.namespace.clone(),
                name: obs.name.clone(),
                resource_version: obs.resource_version,
                at: jiff::Timestamp::now(),
                final_state_observed: true,
            };
            self.count(queue.delete(Some(obs), deleted).await);
        }
        if let (Some(finalize), Some(meta)) = (finalize, meta) {
            finalize.deleted(&meta);
        }
        if let Some(rv) = rv {
            self.advance(rv, queue, state);
        }
    }

    fn count(&self, pushed: Pushed) {
        if pushed == Pushed::Overflowed {
            self.metrics.queue_overflow();
        }
    }

    /// Decodes and maps one object; logs and counts it if that is impossible.
    fn observe(&self, obj: DynamicObject) -> Option<podline_store::PodObservation> {
        let namespace = obj.metadata.namespace.clone().unwrap_or_default();
        let name = obj.metadata.name.clone().unwrap_or_default();
        let result = to_pod(obj)
            .and_then(|pod| observe(&pod, &self.config.lifecycle).map_err(|err| err.to_string()));
        match result {
            Ok(obs) => Some(obs),
            Err(error) => {
                self.own_metrics.skipped_object();
                tracing::warn!(%namespace, pod = %name, %error, "cannot record this pod object; skipped");
                None
            }
        }
    }
}

/// What the watch task tracks between events.
#[derive(Debug, Default)]
struct WatchState {
    /// Between `Init` and `InitDone`.
    relisting: bool,
    /// Uids returned by the relist in progress.
    seen: HashSet<String>,
    /// The relist in progress returned a pod that did not decode and whose uid was unreadable.
    unidentified: bool,
}

/// The typed pod out of a dynamic object, without re-serialising the metadata. The error names
/// the part that does not decode (`spec` or `status`) and what serde expected there, with the
/// values serde quotes elided (an env value may be a secret).
fn to_pod(obj: DynamicObject) -> Result<Pod, String> {
    let spec = obj
        .data
        .get("spec")
        .map(PodSpec::deserialize)
        .transpose()
        .map_err(|err| {
            format!(
                "pod spec does not decode: {}",
                elide_values(&err.to_string())
            )
        })?;
    let status = obj
        .data
        .get("status")
        .map(PodStatus::deserialize)
        .transpose()
        .map_err(|err| {
            format!(
                "pod status does not decode: {}",
                elide_values(&err.to_string())
            )
        })?;
    Ok(Pod {
        metadata: obj.metadata,
        spec,
        status,
    })
}

/// The writer task: queue → one transaction per drain, with retries.
struct Writer {
    queue: Arc<Queue>,
    store: Arc<dyn StoreWrite>,
    key: String,
    scope: LiveScope,
    selector: Option<LabelSelector>,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    linger: Duration,
    max_batch: usize,
    backoff: FullJitter,
    abandon: CancellationToken,
    /// With finalizers: committed release tickets go here, and reconcile settles pods whose
    /// final state was recorded.
    finalize: Option<Arc<Finalize>>,
}

/// What became of one drain the writer wrote: committed, or put back into the queue, after which
/// the writer backs off before the next try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
enum Written {
    /// In the store (with any pods that could not be stored reported and dropped).
    Committed,
    /// Back in the queue: the store failed in a way a retry may fix.
    Requeued,
}

impl Writer {
    async fn run(self) {
        let mut delays = backon::BackoffBuilder::build(self.backoff.clone());
        loop {
            let next = tokio::select! {
                () = self.abandon.cancelled() => return,
                next = self.queue.next_batch(self.linger, self.max_batch) => next,
            };
            let Some(drained) = next else { return };
            self.metrics.queue_depth(self.queue.depth());
            match self.write(drained).await {
                Written::Committed => delays = backon::BackoffBuilder::build(self.backoff.clone()),
                Written::Requeued => {
                    let delay = delays.next().unwrap_or(self.backoff.cap());
                    tokio::select! {
                        () = self.abandon.cancelled() => return,
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }

    /// Writes one drain, then hands its release tickets to the finalizer worker (on failure they
    /// go back into the queue with the rest). A pod released for its grace-0 deletion is
    /// committed deleted in the same transaction ([`reconcile::stopped_deletions`]).
    /// [`Written::Requeued`] means it was put back and the caller should back off.
    async fn write(&self, mut drained: Drained) -> Written {
        let releases: Vec<Ticket> = std::mem::take(&mut drained.releases);
        if self.finalize.is_some() {
            reconcile::stopped_deletions(&mut drained.ops, &releases, jiff::Timestamp::now());
        }
        let written = self.write_ops(drained).await;
        match (&self.finalize, written) {
            (Some(finalize), Written::Committed) => finalize.committed(releases),
            (_, Written::Requeued) if !releases.is_empty() => self.queue.requeue(Drained {
                releases,
                ..Drained::default()
            }),
            _ => {}
        }
        written
    }

    /// Writes the ops and resume point of one drain (see [`Writer::write`]).
    async fn write_ops(&self, mut drained: Drained) -> Written {
        let seen = drained.reconcile.take();
        let mut ops = std::mem::take(&mut drained.ops);
        if let Some(seen_set) = &seen {
            match self.store.live_pods(&self.scope).await {
                Ok(live) => {
                    let in_batch: HashSet<&str> = ops.iter().map(StoreOp::uid).collect();
                    let vanished = reconcile::vanished(
                        &live,
                        seen_set,
                        &in_batch,
                        self.selector.as_ref(),
                        jiff::Timestamp::now(),
                    );
                    let vanished = match self.settle(vanished).await {
                        Ok(settled) => settled,
                        Err(err) => {
                            self.failed(&err);
                            drained.ops = ops;
                            drained.reconcile = seen;
                            self.queue.requeue(drained);
                            return Written::Requeued;
                        }
                    };
                    let unknown = vanished
                        .iter()
                        .filter(|op| matches!(op, StoreOp::Vanished { .. }))
                        .count();
                    if unknown > 0 {
                        tracing::info!(
                            pods = unknown,
                            "pods deleted while not watching: marked vanished (final state unknown)"
                        );
                    }
                    if vanished.len() > unknown {
                        tracing::info!(
                            pods = vanished.len() - unknown,
                            "pods whose final state was recorded were deleted while not watching: \
                             marked deleted"
                        );
                    }
                    ops.extend(vanished);
                }
                Err(err) => {
                    self.failed(&err);
                    drained.ops = ops;
                    drained.reconcile = seen;
                    self.queue.requeue(drained);
                    return Written::Requeued;
                }
            }
        }
        if self.finalize.is_some() {
            settle_in_batch(&mut ops);
        }
        let batch = Batch {
            ops,
            resume: drained.resume.map(|rv| ResumePoint {
                watch_key: self.key.clone(),
                resource_version: rv,
            }),
        };
        let started = Instant::now();
        match self.store.apply(&batch).await {
            Ok(report) => {
                self.committed(started, &batch, drained.oldest);
                for rejected in &report.rejected {
                    self.metrics.store_error("rejected");
                    tracing::warn!(uid = %rejected.uid, reason = %rejected.reason, "store refused a pod change; skipped");
                }
                Written::Committed
            }
            Err(err) if err.is_retryable() => {
                self.failed(&err);
                drained.ops = batch.ops;
                drained.reconcile = seen;
                self.queue.requeue(drained);
                Written::Requeued
            }
            Err(err) => {
                self.metrics.store_error("rejected");
                tracing::warn!(error = %err, ops = batch.ops.len(), "store refused a batch: writing its pods one by one");
                self.isolate(batch, drained.oldest).await
            }
        }
    }

    /// With finalizers: the pods reconcile found missing whose recorded state is final and being
    /// deleted are marked deleted with that state ([`reconcile::settle`]); the others vanish.
    async fn settle(
        &self,
        vanished: Vec<StoreOp>,
    ) -> Result<Vec<StoreOp>, podline_store::StoreError> {
        if self.finalize.is_none() {
            return Ok(vanished);
        }
        let mut settled = Vec::with_capacity(vanished.len());
        for op in vanished {
            let StoreOp::Vanished { uid, at } = &op else {
                settled.push(op);
                continue;
            };
            let record = self.store.last_recorded(uid).await?;
            settled.push(match record {
                Some(record) => reconcile::settle(
                    &reconcile::LastState {
                        uid,
                        namespace: &record.namespace,
                        name: &record.name,
                        resource_version: record.resource_version,
                        deletion_requested_at: record.deletion_requested_at,
                        phase: record.phase.as_deref().unwrap_or_default(),
                        bound: record.node.is_some(),
                    },
                    *at,
                ),
                None => op,
            });
        }
        Ok(settled)
    }

    /// Puts the ops not yet written (`first`, then `rest`, in order) back into the queue with the
    /// batch's resume point, so the next drain retries them from where this one stopped.
    fn requeue_unwritten(
        &self,
        first: Vec<StoreOp>,
        rest: impl Iterator<Item = StoreOp>,
        resume: Option<u64>,
        oldest: Option<Instant>,
    ) {
        let mut ops = first;
        ops.extend(rest);
        self.queue.requeue(Drained {
            ops,
            resume,
            reconcile: None,
            oldest,
            releases: Vec::new(),
        });
    }

    /// Applies the ops of a refused batch one by one, drops the ones that can never be written,
    /// then commits the resume point.
    async fn isolate(&self, batch: Batch, oldest: Option<Instant>) -> Written {
        let mut ops = batch.ops.into_iter();
        while let Some(op) = ops.next() {
            let single = Batch::new(vec![op]);
            match self.store.apply(&single).await {
                Ok(_) => {}
                Err(err) if err.is_retryable() => {
                    self.failed(&err);
                    let resume = batch.resume.map(|r| r.resource_version);
                    self.requeue_unwritten(single.ops, ops, resume, oldest);
                    return Written::Requeued;
                }
                Err(err) => {
                    self.metrics.store_error("rejected");
                    let Some(plain) = without_free_text(&single.ops[0]) else {
                        describe_dropped(&single.ops[0], &err);
                        continue;
                    };
                    // The lifecycle (phase, exit codes, times, deletion) matters more than the
                    // text the store refused: keep the change, without its free text.
                    match self.store.apply(&Batch::new(vec![plain])).await {
                        Ok(_) => describe_stripped(&single.ops[0], &err),
                        Err(again) if again.is_retryable() => {
                            self.failed(&again);
                            let resume = batch.resume.map(|r| r.resource_version);
                            self.requeue_unwritten(single.ops, ops, resume, oldest);
                            return Written::Requeued;
                        }
                        Err(again) => describe_dropped(&single.ops[0], &again),
                    }
                }
            }
        }
        let resume_only = Batch {
            ops: Vec::new(),
            resume: batch.resume,
        };
        let started = Instant::now();
        match self.store.apply(&resume_only).await {
            Ok(_) => {
                self.committed(started, &resume_only, oldest);
                Written::Committed
            }
            Err(err) => {
                self.failed(&err);
                self.queue.requeue(Drained {
                    ops: Vec::new(),
                    resume: resume_only.resume.map(|r| r.resource_version),
                    reconcile: None,
                    oldest,
                    releases: Vec::new(),
                });
                Written::Requeued
            }
        }
    }

    fn committed(&self, started: Instant, batch: &Batch, oldest: Option<Instant>) {
        self.metrics.write(
            started.elapsed().as_secs_f64(),
            batch.ops.len(),
            oldest.map(|at| at.elapsed().as_secs_f64()),
        );
        self.health.set_store_writable(true);
    }

    fn failed(&self, err: &podline_store::StoreError) {
        self.metrics.store_error(if err.is_retryable() {
            "retryable"
        } else {
            "rejected"
        });
        self.health.set_store_writable(false);
        tracing::warn!(error = %err, reason = err.reason(), "store write failed; will retry");
    }
}

/// With finalizers: a `Vanished` op the queue added for a pod whose upsert in the same batch
/// shows a final state being deleted becomes a deletion with that state observed.
fn settle_in_batch(ops: &mut [StoreOp]) {
    let last: std::collections::HashMap<String, StoreOp> = ops
        .iter()
        .filter_map(|op| match op {
            StoreOp::Upsert(obs) => Some((
                obs.uid.clone(),
                reconcile::settle(
                    &reconcile::LastState {
                        uid: &obs.uid,
                        namespace: &obs.namespace,
                        name: &obs.name,
                        resource_version: obs.resource_version,
                        deletion_requested_at: obs.deletion_requested_at,
                        phase: &obs.phase,
                        bound: obs.node.is_some(),
                    },
                    jiff::Timestamp::now(),
                ),
            )),
            _ => None,
        })
        .collect();
    for op in ops.iter_mut() {
        if let StoreOp::Vanished { uid, at } = op
            && let Some(StoreOp::Deleted {
                uid,
                namespace,
                name,
                resource_version,
                final_state_observed,
                ..
            }) = last.get(uid.as_str())
        {
            *op = StoreOp::Deleted {
                uid: uid.clone(),
                namespace: namespace.clone(),
                name: name.clone(),
                resource_version: *resource_version,
                at: *at,
                final_state_observed: *final_state_observed,
            };
        }
    }
}

/// What replaces free text the store refused, so a reader sees that something was there.
const REFUSED_TEXT: &str = "[podline: the store refused this pod's text; see the recorder log]";

/// `op` with every free-text field a container or a user controls (messages, reasons,
/// annotations, labels other than the run, image ids) replaced or dropped, for a second try
/// after the store refused `op` for its content. `None` for ops that carry no such text.
fn without_free_text(op: &StoreOp) -> Option<StoreOp> {
    let StoreOp::Upsert(obs) = op else {
        return None;
    };
    let mut plain = obs.clone();
    plain.labels.clear();
    plain.annotations.clear();
    plain.owner = None;
    plain.reason = plain.reason.as_ref().map(|_| REFUSED_TEXT.to_owned());
    plain.message = plain.message.as_ref().map(|_| REFUSED_TEXT.to_owned());
    for c in &mut plain.containers {
        c.image_id = None;
        c.reason = c.reason.as_ref().map(|_| REFUSED_TEXT.to_owned());
        c.message = c.message.as_ref().map(|_| REFUSED_TEXT.to_owned());
    }
    Some(StoreOp::Upsert(plain))
}

fn describe_stripped(op: &StoreOp, err: &podline_store::StoreError) {
    if let StoreOp::Upsert(obs) = op {
        tracing::error!(
            namespace = %obs.namespace, pod = %obs.name, uid = %obs.uid, error = %err,
            "the store refused this pod change for its text: stored without its messages, \
             reasons, labels and annotations"
        );
    }
}

fn describe_dropped(op: &StoreOp, err: &podline_store::StoreError) {
    match op {
        StoreOp::Upsert(obs) => tracing::error!(
            namespace = %obs.namespace, pod = %obs.name, uid = %obs.uid, error = %err,
            "cannot store this pod change; dropped"
        ),
        StoreOp::Deleted {
            namespace,
            name,
            uid,
            ..
        } => tracing::error!(
            %namespace, pod = %name, %uid, error = %err,
            "cannot store this pod deletion; dropped"
        ),
        StoreOp::Vanished { uid, .. } => {
            tracing::error!(%uid, error = %err, "cannot mark this pod vanished; dropped");
        }
    }
}
