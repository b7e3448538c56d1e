//! [`Cluster`]: the sim's object store (namespaces, pods, events, leases, nodes, disruption
//! budgets, workflowtaskresults), shared by the HTTP API and the simulated kubelet. Cheap to
//! clone (an `Arc` inside).
//!
//! All kinds share one resourceVersion clock. Pod writes, whoever makes them (a client's PUT, a
//! status patch, the kubelet), go through one path that also notifies the kubelet
//! ([`Cluster::subscribe_pods`]) and updates the ground truth ([`Cluster::ground_truth`]).

mod events;
mod facts;
mod kind;
mod packed;
mod table;
mod truth;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Event, Namespace, NamespaceStatus, Node, PersistentVolumeClaim, Pod, Secret,
    ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use tokio::sync::broadcast;

use crate::logs::LogStore;

pub(crate) use events::DEFAULT_NODE_NAME;
use events::{AggregationKey, event_name, pod_event};
pub use events::{EventSubject, PodEventSpec};
pub use facts::Facts;
pub use kind::{GenericObject, Kind, WorkflowTaskResult};
pub use packed::Dictionary;
pub use table::{
    ChangeKind, Commit, Committed, HistoryLimits, Key, RvClock, Stored, Table, TooOld, WatchEvent,
    WatchFrom, WatchStart, Write, event_line, watch_line,
};
use truth::GroundTruth;
pub use truth::PodHistory;

/// A change to a pod, as the kubelet sees it: the few fields it acts on rather than the pod, so
/// that the change channel does not pin thousands of decoded pods during a burst.
#[derive(Debug, Clone)]
pub struct PodChange {
    /// What happened.
    pub kind: ChangeKind,
    /// The pod after the change (for Deleted: its last state).
    pub pod: Arc<PodRef>,
}

/// One version of a pod, by reference: what the kubelet needs to follow it (it reads the pod
/// itself from the store when it adopts it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodRef {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The pod's uid.
    pub uid: String,
    /// This version's resourceVersion.
    pub resource_version: Option<String>,
    /// The node the pod is bound to, if it is.
    pub node_name: Option<String>,
    /// The grace period of a requested deletion (None: not being deleted).
    pub deletion_grace_seconds: Option<i64>,
}

impl PodRef {
    /// The reference of `pod`.
    pub fn of(pod: &Pod) -> PodRef {
        let meta = &pod.metadata;
        PodRef {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            resource_version: meta.resource_version.clone(),
            node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            // The real kubelet's default when the pod does not say.
            deletion_grace_seconds: meta
                .deletion_timestamp
                .as_ref()
                .map(|_| meta.deletion_grace_period_seconds.unwrap_or(30)),
        }
    }
}

/// Default of `podline-sim`'s `SimConfig::watch_buffer`: kube-apiserver's per-watcher buffers
/// hold 10 to 1000 events and a full one may block dispatch for a short budget before the
/// watcher is closed; the sim has no budget, so it takes the largest buffer.
pub const DEFAULT_WATCH_BUFFER: usize = 1000;

/// Namespaces every cluster starts with.
pub const INITIAL_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// Capacity of the kubelet's pod-change channel; a lagging kubelet resyncs from [`Cluster::pods`].
/// Every slot pins a pod version in memory, so the ring is kept small.
const POD_CHANGE_CAPACITY: usize = 1 << 13;

/// Live-channel capacity of each table. Every slot pins one event (object and JSON line) in
/// memory until overwritten, so the rings are small: a watcher that falls behind by more resumes
/// from the history instead (see `api::watch`), which is bounded by the history window.
const POD_RING: usize = 1 << 12;
/// See [`POD_RING`].
const SMALL_RING: usize = 1 << 10;

/// The object store. See the module docs.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

/// A handle on a [`Cluster`] that does not keep it alive, for background tasks (the garbage
/// collector, the namespace controller) that must end with the sim.
#[derive(Clone)]
pub struct WeakCluster(std::sync::Weak<Inner>);

impl WeakCluster {
    /// The cluster, unless it was dropped.
    pub fn upgrade(&self) -> Option<Cluster> {
        self.0.upgrade().map(|inner| Cluster { inner })
    }
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("resource_version", &self.inner.clock.current())
            .finish()
    }
}

struct Inner {
    clock: Arc<RvClock>,
    pods: Table<Pod>,
    namespaces: Table<Namespace>,
    events: Table<Event>,
    leases: Table<Lease>,
    nodes: Table<Node>,
    disruption_budgets: Table<PodDisruptionBudget>,
    workflow_task_results: Table<WorkflowTaskResult>,
    secrets: Table<Secret>,
    config_maps: Table<ConfigMap>,
    service_accounts: Table<ServiceAccount>,
    priority_classes: Table<PriorityClass>,
    volume_claims: Table<PersistentVolumeClaim>,
    storage_classes: Table<StorageClass>,
    pod_changes: broadcast::Sender<PodChange>,
    truth: Mutex<GroundTruth>,
    logs: LogStore,
    /// Hash of a pod event's [`AggregationKey`] -> the name suffix of the Event object (it lives
    /// in the pod's namespace, named `<pod>.<suffix as 16 hex digits>`), so repeats bump `count`
    /// like the real event recorder does. Four Events per pod make this index big at 100k pods,
    /// hence the hashes (a hit is checked against the Event itself).
    event_index: Mutex<HashMap<u64, u64>>,
    kubelet_enabled: AtomicBool,
    /// See [`Cluster::set_watch_buffer`].
    watch_buffer: AtomicUsize,
    /// See [`Cluster::set_root_ca`].
    root_ca: std::sync::OnceLock<String>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Recover from poisoning: the guarded data stays usable (see Table::lock).
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The current time as a k8s `Time`.
pub fn now_time() -> Time {
    Time(Timestamp::now())
}

impl Cluster {
    /// An empty cluster (with the initial namespaces) keeping `history` worth of watch events.
    pub fn new(history: HistoryLimits) -> Self {
        let clock = Arc::new(RvClock::default());
        let (pod_changes, _) = broadcast::channel(POD_CHANGE_CAPACITY);
        let cluster = Self {
            inner: Arc::new(Inner {
                pods: Table::new(clock.clone(), history, POD_RING),
                namespaces: Table::new(clock.clone(), history, SMALL_RING),
                events: Table::new(clock.clone(), history, POD_RING),
                leases: Table::new(clock.clone(), history, SMALL_RING),
                nodes: Table::new(clock.clone(), history, SMALL_RING),
                disruption_budgets: Table::new(clock.clone(), history, SMALL_RING),
                workflow_task_results: Table::new(clock.clone(), history, SMALL_RING),
                secrets: Table::new(clock.clone(), history, SMALL_RING),
                config_maps: Table::new(clock.clone(), history, SMALL_RING),
                service_accounts: Table::new(clock.clone(), history, SMALL_RING),
                priority_classes: Table::new(clock.clone(), history, SMALL_RING),
                volume_claims: Table::new(clock.clone(), history, SMALL_RING),
                storage_classes: Table::new(clock.clone(), history, SMALL_RING),
                clock,
                pod_changes,
                truth: Mutex::new(GroundTruth::default()),
                logs: LogStore::new(),
                event_index: Mutex::new(HashMap::new()),
                kubelet_enabled: AtomicBool::new(false),
                watch_buffer: AtomicUsize::new(DEFAULT_WATCH_BUFFER),
                root_ca: std::sync::OnceLock::new(),
            }),
        };
        for ns in INITIAL_NAMESPACES {
            // Invariant: a fresh cluster has none of these, so creating them cannot fail.
            let _ = cluster.create_namespace(ns);
        }
        // Like a watch cache that starts from a LIST: the history begins now, so a resume from
        // a resourceVersion before the sim's start (say, one a client kept from another sim) is
        // 410 Expired, not a replay of the initial namespaces.
        cluster.compact();
        cluster
    }

    /// Records the CA bundle the root-ca-cert-publisher publishes (the first one stays), so
    /// that a namespace's `kube-root-ca.crt` can be made as the namespace is created.
    pub fn set_root_ca(&self, ca: &str) {
        let _ = self.inner.root_ca.set(ca.to_owned());
    }

    /// The CA bundle recorded by [`Cluster::set_root_ca`], if any.
    pub fn root_ca(&self) -> Option<String> {
        self.inner.root_ca.get().cloned()
    }

    /// A handle that does not keep the cluster alive (see [`WeakCluster`]).
    pub fn downgrade(&self) -> WeakCluster {
        WeakCluster(Arc::downgrade(&self.inner))
    }

    /// Creates a namespace (status Active); false if it exists.
    pub fn create_namespace(&self, name: &str) -> bool {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                uid: Some(uuid::Uuid::new_v4().to_string()),
                creation_timestamp: Some(now_time()),
                labels: Some(BTreeMap::from([(
                    "kubernetes.io/metadata.name".to_owned(),
                    name.to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(k8s_openapi::api::core::v1::NamespaceSpec {
                finalizers: Some(vec!["kubernetes".to_owned()]),
            }),
            status: Some(NamespaceStatus {
                phase: Some("Active".to_owned()),
                ..NamespaceStatus::default()
            }),
        };
        self.inner
            .namespaces
            .write(
                (String::new(), name.to_owned()),
                |current| match current {
                    Some(_) => Err(()),
                    None => Ok((Write::Create(ns), ())),
                },
                |_, _| {},
            )
            .is_ok()
    }

    /// Whether the namespace exists.
    pub fn namespace_exists(&self, name: &str) -> bool {
        self.inner.namespaces.get("", name).is_some()
    }

    /// Tells the store whether a kubelet handles graceful pod deletion (else the store removes
    /// pods itself when their grace period ends).
    pub fn set_kubelet_enabled(&self, enabled: bool) {
        self.inner.kubelet_enabled.store(enabled, Ordering::SeqCst);
    }

    /// Whether a kubelet runs.
    pub fn kubelet_enabled(&self) -> bool {
        self.inner.kubelet_enabled.load(Ordering::SeqCst)
    }

    /// Sets how many committed events a watcher may leave untaken before its watch is closed
    /// (0: never; a lagging watcher then catches up from the history).
    pub fn set_watch_buffer(&self, events: usize) {
        self.inner.watch_buffer.store(events, Ordering::Relaxed);
    }

    /// See [`Cluster::set_watch_buffer`].
    pub fn watch_buffer(&self) -> usize {
        self.inner.watch_buffer.load(Ordering::Relaxed)
    }

    /// The shared resourceVersion clock.
    pub fn clock(&self) -> &RvClock {
        &self.inner.clock
    }

    /// The pods table.
    pub fn pod_table(&self) -> &Table<Pod> {
        &self.inner.pods
    }
    /// The namespaces table.
    pub fn namespace_table(&self) -> &Table<Namespace> {
        &self.inner.namespaces
    }
    /// The events table.
    pub fn event_table(&self) -> &Table<Event> {
        &self.inner.events
    }
    /// The leases table.
    pub fn lease_table(&self) -> &Table<Lease> {
        &self.inner.leases
    }
    /// The nodes table (the simulated kubelet registers its node there).
    pub fn node_table(&self) -> &Table<Node> {
        &self.inner.nodes
    }
    /// The poddisruptionbudgets table.
    pub fn disruption_budget_table(&self) -> &Table<PodDisruptionBudget> {
        &self.inner.disruption_budgets
    }
    /// The workflowtaskresults table.
    pub fn workflow_task_result_table(&self) -> &Table<WorkflowTaskResult> {
        &self.inner.workflow_task_results
    }
    /// The secrets table.
    pub fn secret_table(&self) -> &Table<Secret> {
        &self.inner.secrets
    }
    /// The configmaps table.
    pub fn config_map_table(&self) -> &Table<ConfigMap> {
        &self.inner.config_maps
    }
    /// The serviceaccounts table.
    pub fn service_account_table(&self) -> &Table<ServiceAccount> {
        &self.inner.service_accounts
    }
    /// The priorityclasses table.
    pub fn priority_class_table(&self) -> &Table<PriorityClass> {
        &self.inner.priority_classes
    }
    /// The persistentvolumeclaims table.
    pub fn volume_claim_table(&self) -> &Table<PersistentVolumeClaim> {
        &self.inner.volume_claims
    }
    /// The storageclasses table.
    pub fn storage_class_table(&self) -> &Table<StorageClass> {
        &self.inner.storage_classes
    }

    /// Drops watch history older than the window, for every kind.
    pub fn prune_history(&self) {
        self.inner.pods.prune_history();
        self.inner.namespaces.prune_history();
        self.inner.events.prune_history();
        self.inner.leases.prune_history();
        self.inner.nodes.prune_history();
        self.inner.disruption_budgets.prune_history();
        self.inner.workflow_task_results.prune_history();
        self.inner.secrets.prune_history();
        self.inner.config_maps.prune_history();
        self.inner.service_accounts.prune_history();
        self.inner.priority_classes.prune_history();
        self.inner.volume_claims.prune_history();
        self.inner.storage_classes.prune_history();
    }

    /// Prunes expired watch history every `every` until the last handle to this cluster is
    /// dropped, so a sim that goes quiet after a burst gives the burst's history back.
    pub fn spawn_history_pruner(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(inner) = weak.upgrade() else { break };
                Cluster { inner }.prune_history();
            }
        })
    }

    /// Drops the watch history of every kind: resumes from older resourceVersions answer 410.
    pub fn compact(&self) {
        self.inner.pods.compact();
        self.inner.namespaces.compact();
        self.inner.events.compact();
        self.inner.leases.compact();
        self.inner.nodes.compact();
        self.inner.disruption_budgets.compact();
        self.inner.workflow_task_results.compact();
        self.inner.secrets.compact();
        self.inner.config_maps.compact();
        self.inner.service_accounts.compact();
        self.inner.priority_classes.compact();
        self.inner.volume_claims.compact();
        self.inner.storage_classes.compact();
    }

    /// Writes a pod through the one path that also feeds the kubelet and the ground truth.
    pub fn write_pod<T, E>(
        &self,
        namespace: &str,
        name: &str,
        decide: impl FnOnce(Option<&Stored<Pod>>) -> Result<(Write<Pod>, T), E>,
    ) -> Result<Committed<Pod, T>, E> {
        let inner = &self.inner;
        inner.pods.write(
            (namespace.to_owned(), name.to_owned()),
            decide,
            |event, pod| {
                {
                    let mut truth = lock(&inner.truth);
                    truth.observe(pod);
                    if event.kind == ChangeKind::Deleted
                        && let Some(uid) = pod.metadata.uid.as_deref()
                    {
                        truth.removed(uid, Timestamp::now());
                    }
                }
                // No kubelet subscribed is fine.
                let _ = inner.pod_changes.send(PodChange {
                    kind: event.kind,
                    pod: Arc::new(PodRef::of(pod)),
                });
            },
        )
    }

    // ---- The kubelet-facing API -------------------------------------------------------------

    /// Live pod changes (the kubelet's feed). On `Lagged`, resync from [`Cluster::pods`].
    pub fn subscribe_pods(&self) -> broadcast::Receiver<PodChange> {
        self.inner.pod_changes.subscribe()
    }

    /// Every pod currently stored (decoded: for resyncs, not for hot paths).
    pub fn pods(&self) -> Vec<Arc<Pod>> {
        let (items, _) = self.inner.pods.snapshot(None, None);
        items.into_iter().map(|s| Arc::new(s.decode())).collect()
    }

    /// One pod (decoded).
    pub fn get_pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.inner
            .pods
            .get(namespace, name)
            .map(|s| Arc::new(s.decode()))
    }

    /// The node a stored pod is bound to ("" when unbound), from its selector facts (no decode):
    /// the kubelet's scheduler checks it before binding, as a pod may have been bound through
    /// the API (`pods/binding`) meanwhile. None if there is no such pod.
    pub fn pod_node_name(&self, namespace: &str, name: &str) -> Option<String> {
        let index = <Pod as Kind>::FIELDS
            .iter()
            .position(|f| *f == "spec.nodeName")?;
        let stored = self.inner.pods.get(namespace, name)?;
        Some(stored.facts.field(index).to_owned())
    }

    /// Kubelet-side write: applies `f` to the current pod if it still exists with this uid; bumps
    /// the resourceVersion, emits MODIFIED and updates the ground truth. None if the pod is gone or
    /// its uid differs. A change that leaves the pod equal is not written (no new version).
    pub fn mutate_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        f: impl FnOnce(&mut Pod),
    ) -> Option<Arc<Pod>> {
        let (commit, current) = self
            .write_pod(namespace, name, |current| {
                let Some(current) = current else {
                    return Err(());
                };
                let current = current.decode();
                if current.metadata.uid.as_deref() != Some(uid) {
                    return Err(());
                }
                let mut pod = current.clone();
                f(&mut pod);
                if pod == current {
                    Ok((Write::Unchanged, Some(Arc::new(current))))
                } else {
                    Ok((Write::Replace(pod), None))
                }
            })
            .ok()?;
        commit.map(|c| c.obj).or(current)
    }

    /// Final removal after termination: the kubelet's delete with grace 0, as the registry
    /// carries it out. A pod whose deletion still has a grace period is first written with
    /// `deletionGracePeriodSeconds: 0` and its deletionTimestamp moved back to the time the
    /// deletion was asked for (one MODIFIED), then removed (DELETED, ground-truth `deleted_at`);
    /// one already at grace 0 is only removed. A pod with finalizers stays after the first
    /// write, until they are removed. False if the pod is gone or its uid differs.
    pub fn remove_pod(&self, namespace: &str, name: &str, uid: &str) -> bool {
        let shortened = self.write_pod(namespace, name, |current| {
            let current = current.map(Stored::decode);
            match current {
                Some(current) if current.metadata.uid.as_deref() == Some(uid) => {
                    let meta = &current.metadata;
                    if meta.deletion_timestamp.is_some()
                        && meta.deletion_grace_period_seconds == Some(0)
                    {
                        return Ok((Write::Unchanged, ()));
                    }
                    let mut pod = current.clone();
                    // The deletion's request time: the stamp was that plus the old grace period.
                    let now = Timestamp::now();
                    let requested =
                        match (&meta.deletion_timestamp, meta.deletion_grace_period_seconds) {
                            (Some(ts), Some(grace)) => {
                                crate::go_time::go_add_seconds(ts.0, grace.wrapping_neg())
                            }
                            _ => now,
                        };
                    pod.metadata.deletion_timestamp = Some(Time(requested.min(now)));
                    pod.metadata.deletion_grace_period_seconds = Some(0);
                    Ok((Write::Replace(pod), ()))
                }
                _ => Err(()),
            }
        });
        if shortened.is_err() {
            return false;
        }
        // Finalizers keep it (their last removal deletes it); otherwise it goes now.
        let _ = self.write_pod(namespace, name, |current| {
            match current.map(Stored::decode) {
                Some(current)
                    if current.metadata.uid.as_deref() == Some(uid)
                        && current
                            .metadata
                            .finalizers
                            .as_ref()
                            .is_none_or(Vec::is_empty) =>
                {
                    Ok((Write::Delete(current), ()))
                }
                _ => Err(()),
            }
        });
        true
    }

    /// Records a core/v1 Event about `pod`, aggregating repeats (same reason, message, type and
    /// source) into one Event with a growing `count`, like the real event recorder.
    pub fn record_event(
        &self,
        pod: &Pod,
        event_type: &str,
        reason: &str,
        message: &str,
        component: &str,
    ) {
        let subject = EventSubject {
            namespace: pod.metadata.namespace.as_deref().unwrap_or_default(),
            name: pod.metadata.name.as_deref().unwrap_or_default(),
            uid: pod.metadata.uid.as_deref().unwrap_or_default(),
            resource_version: pod.metadata.resource_version.as_deref(),
            node_name: pod.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        };
        self.record_pod_event(
            &subject,
            &PodEventSpec {
                event_type,
                reason,
                message,
                component,
                field_path: None,
            },
        );
    }

    /// [`Cluster::record_event`] for a pod known by reference (the kubelet keeps no decoded pods).
    pub fn record_pod_event(&self, pod: &EventSubject<'_>, spec: &PodEventSpec<'_>) {
        let agg = AggregationKey { uid: pod.uid, spec };
        let now = Timestamp::now();
        let existing = lock(&self.inner.event_index).get(&agg.hash()).copied();
        if let Some(suffix) = existing {
            let bumped = self.inner.events.write(
                (pod.namespace.to_owned(), event_name(pod.name, suffix)),
                |current| {
                    let Some(current) = current else {
                        return Err(());
                    };
                    let mut event = current.decode();
                    // The index is keyed by a hash: check it is really the same event.
                    if !agg.matches(&event) {
                        return Err(());
                    }
                    event.count = Some(event.count.unwrap_or(1) + 1);
                    event.last_timestamp = Some(Time(now));
                    Ok((Write::Replace(event), ()))
                },
                |_, _| {},
            );
            if bumped.is_ok() {
                return;
            }
        }
        let namespace = pod.namespace.to_owned();
        // The real recorder's name: the object's name and the time in hex nanoseconds.
        let suffix = now.as_nanosecond() as u64;
        let name = event_name(pod.name, suffix);
        let event = pod_event(pod, &name, spec, now);
        let created = self.inner.events.write(
            (namespace.clone(), name.clone()),
            |current| match current {
                Some(_) => Err(()),
                None => Ok((Write::Create(event), ())),
            },
            |_, _| {},
        );
        if created.is_ok() {
            lock(&self.inner.event_index).insert(agg.hash(), suffix);
        }
    }

    /// The per-container log store (written by the kubelet, read by the log endpoint).
    pub fn logs(&self) -> &LogStore {
        &self.inner.logs
    }

    /// Every pod ever created, with its transitions, exit codes and removal time.
    pub fn ground_truth(&self) -> Vec<PodHistory> {
        lock(&self.inner.truth).snapshot()
    }

    /// Removes the pod after `grace` unless something else (a kubelet, a forced delete) did.
    /// A grace period of any length (up to 2^63-1 s) waits as a chain of yearly sleeps: tokio's
    /// timer wheel does not take a single delay past about two years.
    pub fn remove_after(&self, namespace: String, name: String, uid: String, grace: Duration) {
        const HOP: Duration = Duration::from_secs(365 * 24 * 3600);
        let cluster = self.clone();
        tokio::spawn(async move {
            let mut left = grace;
            while !left.is_zero() {
                let hop = left.min(HOP);
                tokio::time::sleep(hop).await;
                left = left.saturating_sub(hop);
            }
            cluster.remove_pod(&namespace, &name, &uid);
        });
    }
}
