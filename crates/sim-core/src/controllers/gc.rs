//! The garbage collector: kube-controller-manager's job, in the sim's process as the kubelet is.
//!
//! Why it exists: clients rely on ownerReferences for cleanup they cannot do themselves (podline
//! marks its pods as owned by its launcher's Lease, so that a launcher killed with `kill -9`
//! leaves nothing behind once its Lease is deleted). Like the real one it
//! - deletes a dependent (pod or Lease) whose owners are all gone, or all being deleted in the
//!   foreground; an owner that never existed (an unknown uid) counts as gone;
//! - removes the references to absent owners from a dependent that still has a live owner;
//! - for an owner deleted with `propagationPolicy: Orphan` (finalizer `orphan`), removes the
//!   references to it from its dependents, then the finalizer;
//! - for an owner deleted with `propagationPolicy: Foreground` (finalizer `foregroundDeletion`),
//!   deletes its dependents and removes the finalizer once no dependent with
//!   `blockOwnerDeletion: true` is left.
//!
//! It follows the pod and lease tables' change streams and keeps only objects that have
//! ownerReferences or a collector finalizer, so a cluster without any costs it next to nothing.
//! Owners may be pods, Leases, Namespaces, Nodes, Events or WorkflowTaskResults; a reference to any
//! other kind is left alone (the real collector could resolve it; the sim serves no such kind).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    DeleteOptions, ObjectMeta, OwnerReference, Preconditions,
};
use serde::Deserialize;
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};
use tokio::task::JoinHandle;

use crate::cluster::{ChangeKind, Cluster, Kind, WatchEvent, WatchFrom, WeakCluster, Write};
use crate::delete::{
    FOREGROUND_FINALIZER, ORPHAN_FINALIZER, arrange_removal, delete_object, update_write,
};
use crate::kinds::ApiKind;

/// How often the collector looks again while it tracks objects (a dependent whose deletion did
/// not go through, an owner waiting for dependents that are being deleted gracefully).
const RESWEEP: Duration = Duration::from_secs(1);

/// The kinds whose objects can be dependents (and owners being deleted with a collector
/// finalizer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Dependent {
    Pod,
    Lease,
}

/// One stored object, by identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ObjKey {
    kind: Dependent,
    namespace: String,
    name: String,
    uid: String,
}

/// The metadata the collector reads from an object's JSON (the rest is skipped).
#[derive(Debug, Default, Deserialize)]
struct Doc {
    #[serde(default)]
    metadata: Meta,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    owner_references: Vec<OwnerReference>,
    #[serde(default)]
    finalizers: Vec<String>,
    #[serde(default)]
    deletion_timestamp: Option<String>,
}

/// An owner being deleted with a collector finalizer.
#[derive(Debug, Clone, Copy, Default)]
struct Pending {
    foreground: bool,
    orphan: bool,
}

/// What an ownerReference points at.
enum Owner {
    /// No object of that kind, name and uid: it is gone (or never was).
    Absent,
    /// The owner exists; `waiting` when it is being deleted in the foreground.
    Present { waiting: bool },
    /// A kind the sim does not serve: left alone.
    Unknown,
}

struct Collector {
    cluster: WeakCluster,
    dependents: HashMap<ObjKey, Vec<OwnerReference>>,
    pending: HashMap<ObjKey, Pending>,
    /// Entries of `dependents` and `pending`, per [`Dependent`] kind (indexed by its
    /// discriminant): whether a change of an untracked kind must be parsed at all.
    tracked: [usize; 2],
    dirty: bool,
}

/// Starts the garbage collector of `cluster`. It ends by itself when the cluster is dropped.
pub fn spawn(cluster: &Cluster) -> JoinHandle<()> {
    // A watch "from now" never fails.
    let pods = cluster.pod_table().start_watch(WatchFrom::Now);
    let leases = cluster.lease_table().start_watch(WatchFrom::Now);
    let mut collector = Collector {
        cluster: cluster.downgrade(),
        dependents: HashMap::new(),
        pending: HashMap::new(),
        tracked: [0; 2],
        dirty: false,
    };
    tokio::spawn(async move {
        let (Ok(pods), Ok(leases)) = (pods, leases) else {
            return;
        };
        for stored in &pods.initial {
            collector.observe(Dependent::Pod, ChangeKind::Added, &stored.json());
        }
        for stored in &leases.initial {
            collector.observe(Dependent::Lease, ChangeKind::Added, &stored.json());
        }
        let (mut pod_rx, mut lease_rx) = (pods.rx, leases.rx);
        let mut tick = tokio::time::interval(RESWEEP);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let alive = tokio::select! {
                got = pod_rx.recv() => collector.receive(Dependent::Pod, got),
                got = lease_rx.recv() => collector.receive(Dependent::Lease, got),
                _ = tick.tick() => {
                    collector.dirty |= !collector.is_idle();
                    true
                }
            };
            if !alive {
                return;
            }
            // Take what else is queued before sweeping once for all of it.
            if !(collector.drain(Dependent::Pod, &mut pod_rx)
                && collector.drain(Dependent::Lease, &mut lease_rx))
            {
                return;
            }
            if collector.dirty && !collector.sweep() {
                return;
            }
        }
    })
}

impl Collector {
    fn is_idle(&self) -> bool {
        self.dependents.is_empty() && self.pending.is_empty()
    }

    /// Whether any object of `kind` is tracked.
    fn tracks_any(&self, kind: Dependent) -> bool {
        self.tracked[kind as usize] > 0
    }

    /// Takes one received change; false when the cluster is gone.
    fn receive<K: ApiKind>(
        &mut self,
        kind: Dependent,
        got: Result<Arc<WatchEvent<K>>, RecvError>,
    ) -> bool {
        match got {
            Ok(event) => {
                self.observe(kind, event.kind, &event.json);
                true
            }
            Err(RecvError::Lagged(_)) => self.resync(),
            Err(RecvError::Closed) => false,
        }
    }

    fn drain<K: ApiKind>(
        &mut self,
        kind: Dependent,
        rx: &mut broadcast::Receiver<Arc<WatchEvent<K>>>,
    ) -> bool {
        loop {
            match rx.try_recv() {
                Ok(event) => self.observe(kind, event.kind, &event.json),
                Err(TryRecvError::Empty) => return true,
                Err(TryRecvError::Lagged(_)) => {
                    if !self.resync() {
                        return false;
                    }
                }
                Err(TryRecvError::Closed) => return false,
            }
        }
    }

    /// Follows one change of an object.
    fn observe(&mut self, kind: Dependent, change: ChangeKind, json: &Bytes) {
        // Objects without references or finalizers matter only if they are tracked already,
        // or, once deleted, as owners of what is tracked. (The node's Lease, owned by its Node,
        // is tracked for as long as a kubelet runs: pods stay cheap while no pod is tracked.)
        let untracked = self.is_idle() || (change != ChangeKind::Deleted && !self.tracks_any(kind));
        if untracked
            && !mentions(json, b"\"ownerReferences\"")
            && !mentions(json, b"\"finalizers\"")
        {
            return;
        }
        let Ok(doc) = serde_json::from_slice::<Doc>(json) else {
            return;
        };
        let meta = doc.metadata;
        let key = ObjKey {
            kind,
            namespace: meta.namespace,
            name: meta.name,
            uid: meta.uid,
        };
        if change == ChangeKind::Deleted {
            let tracked = self.set_dependent(&key, None) | self.set_pending(&key, None);
            // An owner went: its dependents may be collectable now.
            self.dirty |= tracked || !self.dependents.is_empty();
            return;
        }
        if meta.owner_references.is_empty() {
            self.set_dependent(&key, None);
        } else {
            self.set_dependent(&key, Some(meta.owner_references));
            self.dirty = true;
        }
        let pending = Pending {
            foreground: meta.finalizers.iter().any(|f| f == FOREGROUND_FINALIZER),
            orphan: meta.finalizers.iter().any(|f| f == ORPHAN_FINALIZER),
        };
        if meta.deletion_timestamp.is_some() && (pending.foreground || pending.orphan) {
            self.set_pending(&key, Some(pending));
            self.dirty = true;
        } else {
            self.set_pending(&key, None);
        }
    }

    /// Tracks `key` as a dependent with these owners, or stops tracking it (None). True when
    /// it was tracked before.
    fn set_dependent(&mut self, key: &ObjKey, owners: Option<Vec<OwnerReference>>) -> bool {
        let before = match owners {
            Some(owners) => self.dependents.insert(key.clone(), owners),
            None => self.dependents.remove(key),
        };
        self.count(
            key.kind,
            before.is_some(),
            self.dependents.contains_key(key),
        );
        before.is_some()
    }

    /// Tracks `key` as an owner being deleted with a collector finalizer, or stops (None).
    /// True when it was tracked before.
    fn set_pending(&mut self, key: &ObjKey, pending: Option<Pending>) -> bool {
        let before = match pending {
            Some(pending) => self.pending.insert(key.clone(), pending),
            None => self.pending.remove(key),
        };
        self.count(key.kind, before.is_some(), self.pending.contains_key(key));
        before.is_some()
    }

    /// Keeps [`Collector::tracked`] in step with one map entry that was (`before`) and is
    /// (`after`) present.
    fn count(&mut self, kind: Dependent, before: bool, after: bool) {
        let count = &mut self.tracked[kind as usize];
        match (before, after) {
            (false, true) => *count += 1,
            (true, false) => *count = count.saturating_sub(1),
            _ => {}
        }
    }

    /// Rebuilds what is tracked from the stores (after missing changes).
    fn resync(&mut self) -> bool {
        let Some(cluster) = self.cluster.upgrade() else {
            return false;
        };
        self.dependents.clear();
        self.pending.clear();
        self.tracked = [0; 2];
        let (pods, _) = cluster.pod_table().snapshot(None, None);
        for stored in &pods {
            self.observe(Dependent::Pod, ChangeKind::Added, &stored.json());
        }
        let (leases, _) = cluster.lease_table().snapshot(None, None);
        for stored in &leases {
            self.observe(Dependent::Lease, ChangeKind::Added, &stored.json());
        }
        self.dirty = true;
        true
    }

    /// One pass over what is tracked; false when the cluster is gone.
    fn sweep(&mut self) -> bool {
        let Some(cluster) = self.cluster.upgrade() else {
            return false;
        };
        self.dirty = false;
        // Orphaning first: the references go, so the dependents below keep living.
        for (owner, pending) in self.pending.clone() {
            if !pending.orphan {
                continue;
            }
            for (dependent, refs) in &self.dependents {
                if refs.iter().any(|r| r.uid == owner.uid) {
                    edit(&cluster, dependent, |meta| {
                        if let Some(refs) = meta.owner_references.as_mut() {
                            refs.retain(|r| r.uid != owner.uid);
                        }
                        if meta.owner_references.as_ref().is_some_and(Vec::is_empty) {
                            meta.owner_references = None;
                        }
                    });
                }
            }
            remove_finalizer(&cluster, &owner, ORPHAN_FINALIZER);
        }
        // Owners looked up once per pass, however many dependents name them.
        let mut owners: HashMap<(String, String, String, String, String), Owner> = HashMap::new();
        for (dependent, refs) in self.dependents.clone() {
            let orphaning = |r: &OwnerReference| {
                self.pending
                    .iter()
                    .any(|(owner, p)| p.orphan && owner.uid == r.uid)
            };
            let mut solid = false;
            let mut gone = Vec::new();
            for r in refs.iter().filter(|r| !orphaning(r)) {
                let key = (
                    dependent.namespace.clone(),
                    r.api_version.clone(),
                    r.kind.clone(),
                    r.name.clone(),
                    r.uid.clone(),
                );
                let owner = owners
                    .entry(key)
                    .or_insert_with(|| resolve(&cluster, &dependent.namespace, r));
                match owner {
                    Owner::Unknown | Owner::Present { waiting: false } => solid = true,
                    Owner::Present { waiting: true } => gone.push(r.uid.clone()),
                    Owner::Absent => gone.push(r.uid.clone()),
                }
            }
            if gone.is_empty() {
                continue;
            }
            if solid {
                edit(&cluster, &dependent, |meta| {
                    if let Some(refs) = meta.owner_references.as_mut() {
                        refs.retain(|r| !gone.contains(&r.uid));
                    }
                });
            } else {
                delete_dependent(&cluster, &dependent);
            }
        }
        for (owner, pending) in self.pending.clone() {
            if !pending.foreground {
                continue;
            }
            let blocked = self.dependents.values().any(|refs| {
                refs.iter()
                    .any(|r| r.uid == owner.uid && r.block_owner_deletion == Some(true))
            });
            if !blocked {
                remove_finalizer(&cluster, &owner, FOREGROUND_FINALIZER);
            }
        }
        true
    }
}

/// Whether `json` contains `needle` (a cheap filter before parsing: it runs on every pod
/// change, so it is memchr's vectorised substring search, not a comparison per byte offset).
fn mentions(json: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(json, needle).is_some()
}

/// Looks up the owner an ownerReference of an object in `namespace` names.
fn resolve(cluster: &Cluster, namespace: &str, r: &OwnerReference) -> Owner {
    let group = r
        .api_version
        .rsplit_once('/')
        .map_or("", |(group, _)| group);
    let meta = match (group, r.kind.as_str()) {
        ("", "Pod") => cluster
            .pod_table()
            .get(namespace, &r.name)
            .map(|s| s.decode().metadata),
        ("coordination.k8s.io", "Lease") => cluster
            .lease_table()
            .get(namespace, &r.name)
            .map(|s| s.decode().metadata),
        ("", "Namespace") => cluster
            .namespace_table()
            .get("", &r.name)
            .map(|s| s.decode().metadata),
        ("", "Node") => cluster
            .node_table()
            .get("", &r.name)
            .map(|s| s.decode().metadata),
        ("", "Event") => cluster
            .event_table()
            .get(namespace, &r.name)
            .map(|s| s.decode().meta().clone()),
        ("argoproj.io", "WorkflowTaskResult") => cluster
            .workflow_task_result_table()
            .get(namespace, &r.name)
            .map(|s| s.decode().meta().clone()),
        _ => return Owner::Unknown,
    };
    match meta {
        Some(meta) if meta.uid.as_deref() == Some(r.uid.as_str()) => Owner::Present {
            waiting: meta.deletion_timestamp.is_some()
                && meta
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == FOREGROUND_FINALIZER),
        },
        _ => Owner::Absent,
    }
}

/// Changes the metadata of `key` (if it is still that object); removes it when that leaves it
/// deleted with no finalizer.
fn edit(cluster: &Cluster, key: &ObjKey, f: impl FnOnce(&mut ObjectMeta)) {
    match key.kind {
        Dependent::Pod => edit_kind::<Pod>(cluster, key, f),
        Dependent::Lease => edit_kind::<Lease>(cluster, key, f),
    }
}

fn edit_kind<K: ApiKind>(cluster: &Cluster, key: &ObjKey, f: impl FnOnce(&mut ObjectMeta)) {
    let _ = K::commit(cluster, &key.namespace, &key.name, |current| {
        let Some(current) = current else {
            return Err(());
        };
        let mut obj = current.decode();
        if obj.meta().uid.as_deref() != Some(key.uid.as_str()) {
            return Err(());
        }
        let before = obj.meta().clone();
        f(obj.meta_mut());
        if *obj.meta() == before {
            return Ok((Write::Unchanged, ()));
        }
        Ok((update_write(obj), ()))
    });
}

fn remove_finalizer(cluster: &Cluster, key: &ObjKey, finalizer: &str) {
    edit(cluster, key, |meta| {
        if let Some(list) = meta.finalizers.as_mut() {
            list.retain(|f| f != finalizer);
        }
        if meta.finalizers.as_ref().is_some_and(Vec::is_empty) {
            meta.finalizers = None;
        }
    });
}

/// Deletes a dependent in the background (what the collector asks of the API server).
fn delete_dependent(cluster: &Cluster, key: &ObjKey) {
    let opts = DeleteOptions {
        preconditions: Some(Preconditions {
            uid: Some(key.uid.clone()),
            resource_version: None,
        }),
        propagation_policy: Some("Background".to_owned()),
        ..DeleteOptions::default()
    };
    let pending = match key.kind {
        Dependent::Pod => {
            delete_object::<Pod>(cluster, &key.namespace, &key.name, &opts).map(|(_, p)| p)
        }
        Dependent::Lease => {
            delete_object::<Lease>(cluster, &key.namespace, &key.name, &opts).map(|(_, p)| p)
        }
    };
    if let Ok(pending) = pending {
        arrange_removal(cluster, &key.namespace, &key.name, pending);
    }
}
