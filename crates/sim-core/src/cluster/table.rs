//! [`Table`]: one resource's objects, its bounded watch history and its live event fan-out.
//!
//! Every write happens under the table's lock: it takes the next resourceVersion from the shared
//! clock, serializes the object ONCE into a complete watch-event line (`{"type":..,"object":..}\n`),
//! stores the object as its JSON (a slice of that line) plus the few [`Facts`] selectors need,
//! appends the change to the history and broadcasts the event. Watchers and LISTs then only copy
//! reference-counted bytes. Decoded objects are not kept: at 100k pods they would cost several
//! times their JSON; the rare write that needs the current object decodes it
//! ([`Stored::decode`]). Because resource versions are taken under the lock, a table's events are
//! strictly ordered by resourceVersion, and a snapshot taken under the lock plus a broadcast
//! subscription is gap-free.
//!
//! Kinds with a [`Kind::dictionary`] (Events) are stored compressed instead, in the table and in
//! the history alike; live watchers still get the line serialized before compression, and a
//! resume from the history rebuilds the lines it replays.
//!
//! Kinds that [`Kind::PACK_IDLE`] (pods) are stored plain while they are written, and compressed
//! once idle ([`Table::pack_idle`]): when the history lets go of an object's current version,
//! nothing but the table holds its JSON, and most of it is what every object of the kind shares.
//! The dictionary is the JSON of the first objects that went idle (the table's own objects, so it
//! fits whatever shape they have), made once per table; writes never pay for compression.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::facts::Facts;
use super::kind::Kind;
use super::packed::Dictionary;

/// (namespace, name); the namespace is empty for cluster-scoped kinds. Ordered like etcd keys, so
/// LIST order and continue tokens are stable.
pub type Key = (String, String);

/// What happened to an object (watch event types other than BOOKMARK and ERROR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// The object was created.
    Added,
    /// The object changed.
    Modified,
    /// The object was removed from the store.
    Deleted,
}

impl ChangeKind {
    /// The watch event `type` string.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "ADDED",
            ChangeKind::Modified => "MODIFIED",
            ChangeKind::Deleted => "DELETED",
        }
    }
}

/// A stored object: its JSON (exactly as sent to clients, never re-serialized) and the facts
/// selectors need. The decoded object is not kept (it costs several times its JSON): a write that
/// needs it decodes it with [`Stored::decode`].
#[derive(Debug)]
pub struct Stored<K> {
    body: Body,
    /// What LIST/WATCH filtering needs (namespace, labels, selectable fields).
    pub facts: Facts,
    kind: PhantomData<fn() -> K>,
}

/// How a stored object's JSON is kept.
#[derive(Debug, Clone)]
enum Body {
    /// As sent to clients (a slice of the watch line it was written with).
    Plain(Bytes),
    /// Compressed with the kind's [`Kind::dictionary`].
    Packed(Bytes),
    /// Compressed once idle, with its table's dictionary (see [`Table::pack_idle`]).
    Idle(Bytes, Arc<Dictionary>),
}

impl<K> Clone for Stored<K> {
    fn clone(&self) -> Self {
        Stored {
            body: self.body.clone(),
            facts: self.facts.clone(),
            kind: PhantomData,
        }
    }
}

impl<K: Kind> Stored<K> {
    /// The stored form of `obj`, whose serialization is `json`: compressed if the kind has a
    /// dictionary.
    pub fn new(obj: &K, json: Bytes) -> Self {
        let body = match K::dictionary().and_then(|dictionary| dictionary.pack(&json)) {
            Some(packed) => Body::Packed(packed),
            None => Body::Plain(json),
        };
        Stored {
            body,
            facts: Facts::of(obj),
            kind: PhantomData,
        }
    }

    /// The object's JSON, exactly as sent to clients (uncompressed here if stored compressed).
    pub fn json(&self) -> Bytes {
        match &self.body {
            Body::Plain(json) => json.clone(),
            Body::Packed(packed) => K::dictionary()
                // Invariant: only kinds with a dictionary store `Packed` bodies (`new`).
                .expect("a compressed object's kind has a dictionary")
                .unpack(packed),
            Body::Idle(packed, dictionary) => dictionary.unpack(packed),
        }
    }

    /// Bytes the object's JSON takes in the store (compressed, if it is).
    pub fn stored_len(&self) -> usize {
        match &self.body {
            Body::Plain(bytes) | Body::Packed(bytes) | Body::Idle(bytes, _) => bytes.len(),
        }
    }

    /// Decodes the object.
    pub fn decode(&self) -> K {
        decode(&self.json())
    }

    fn is_plain(&self) -> bool {
        matches!(self.body, Body::Plain(_))
    }

    /// Whether the object is stored as exactly these bytes (not a copy: the same allocation).
    fn is_stored_as(&self, json: &Bytes) -> bool {
        matches!(&self.body, Body::Plain(plain) if plain.as_ptr() == json.as_ptr() && plain.len() == json.len())
    }
}

/// Decodes JSON the store produced itself.
fn decode<K: Kind>(json: &[u8]) -> K {
    // Invariant: `json` is `serde_json`'s serialization of a `K` (see `event_line`), and the
    // stored kinds round-trip through their own serialization.
    serde_json::from_slice(json).expect("stored JSON decodes into its kind")
}

/// One committed change, as broadcast to watchers (and rebuilt from the history for a resume).
/// It holds JSON and facts only (no decoded object).
#[derive(Debug)]
pub struct WatchEvent<K> {
    /// The resourceVersion this change produced.
    pub rv: u64,
    /// What happened.
    pub kind: ChangeKind,
    /// Facts of the object after the change (for DELETED: its last state).
    pub facts: Facts,
    /// The object before the change (MODIFIED and DELETED), for selector-filtered watches.
    pub prev: Option<Stored<K>>,
    /// The complete watch line, `{"type":"...","object":{...}}\n`.
    pub line: Bytes,
    /// The object's JSON (a slice of `line`).
    pub json: Bytes,
    /// When it was committed (for the history window).
    pub at: Instant,
}

/// One committed change as the history keeps it.
#[derive(Debug, Clone)]
enum Recorded<K> {
    /// Plain kinds: the event as broadcast (its JSON is a slice of its line, so keeping the line
    /// costs nothing extra).
    Live(Arc<WatchEvent<K>>),
    /// Compressed kinds: the change with the object as the table stores it and no line, which a
    /// replay rebuilds.
    Packed {
        rv: u64,
        kind: ChangeKind,
        object: Stored<K>,
        prev: Option<Stored<K>>,
        at: Instant,
    },
}

impl<K: Kind> Recorded<K> {
    /// How the history keeps `event`, whose object the table stores as `object`.
    fn of(event: &Arc<WatchEvent<K>>, object: &Stored<K>) -> Self {
        if object.is_plain() {
            return Recorded::Live(event.clone());
        }
        Recorded::Packed {
            rv: event.rv,
            kind: event.kind,
            object: object.clone(),
            prev: event.prev.clone(),
            at: event.at,
        }
    }

    fn rv(&self) -> u64 {
        match self {
            Recorded::Live(event) => event.rv,
            Recorded::Packed { rv, .. } => *rv,
        }
    }

    fn at(&self) -> Instant {
        match self {
            Recorded::Live(event) => event.at,
            Recorded::Packed { at, .. } => *at,
        }
    }

    /// The change as a watch event, its line rebuilt if it was not kept.
    fn event(&self) -> Arc<WatchEvent<K>> {
        match self {
            Recorded::Live(event) => event.clone(),
            Recorded::Packed {
                rv,
                kind,
                object,
                prev,
                at,
            } => {
                let (line, json) = watch_line(kind.as_str(), &object.json());
                Arc::new(WatchEvent {
                    rv: *rv,
                    kind: *kind,
                    facts: object.facts.clone(),
                    prev: prev.clone(),
                    line,
                    json,
                    at: *at,
                })
            }
        }
    }
}

/// A committed write: its event, and the object as written (for the writer's own use; the store
/// keeps only its JSON).
#[derive(Debug)]
pub struct Commit<K> {
    /// The event the write produced.
    pub event: Arc<WatchEvent<K>>,
    /// The object as written, with its new resourceVersion.
    pub obj: Arc<K>,
}

/// What a write returns: the commit (None for [`Write::Unchanged`]) and the write closure's
/// extra value.
pub type Committed<K, T> = (Option<Commit<K>>, T);

/// What a write closure decides to do with the current object.
#[derive(Debug)]
pub enum Write<K> {
    /// Store this new object (the key must be free).
    Create(K),
    /// Replace the current object with this one.
    Replace(K),
    /// Remove the object; the given value is its final state (sent in the DELETED event).
    Delete(K),
    /// Change nothing (a no-op update keeps its resourceVersion, like the real server).
    Unchanged,
}

/// The watch history could not serve a resume: the asked version is older than what is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooOld {
    /// The resourceVersion the client asked for.
    pub asked: u64,
    /// The oldest resourceVersion a resume may still name.
    pub oldest: u64,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchFrom {
    /// rv absent or "0": synthetic ADDED events for the current state, then live events.
    Now,
    /// Events strictly after this resourceVersion.
    After(u64),
}

/// A started watch: what to send first, and the live subscription (gap-free with the former).
#[derive(Debug)]
pub struct WatchStart<K> {
    /// Current objects to send as synthetic ADDED events (for [`WatchFrom::Now`]).
    pub initial: Vec<Stored<K>>,
    /// History events after the asked resourceVersion (for [`WatchFrom::After`]).
    pub backlog: Vec<Arc<WatchEvent<K>>>,
    /// The resourceVersion the watch is at once `initial`/`backlog` are sent.
    pub rv: u64,
    /// The clock's resourceVersion when `rx` subscribed: every event of this table up to it is in
    /// `initial`/`backlog` (or was asked to be skipped), every later one arrives on `rx`. A watcher
    /// whose `rx` lags resumes from history after the last resourceVersion it received.
    pub subscribed_rv: u64,
    /// Live events committed after this start.
    pub rx: broadcast::Receiver<Arc<WatchEvent<K>>>,
}

/// Limits of the watch history.
#[derive(Debug, Clone, Copy)]
pub struct HistoryLimits {
    /// Events older than this are dropped.
    pub window: Duration,
    /// At most this many events are kept.
    pub max_events: usize,
}

/// The shared resourceVersion counter: one per cluster, strictly increasing across all kinds.
#[derive(Debug, Default)]
pub struct RvClock(AtomicU64);

impl RvClock {
    /// Takes the next resourceVersion.
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
    /// The latest resourceVersion handed out.
    pub fn current(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A [`Key`] as the table stores it: `namespace NUL name` in one allocation (half the memory of
/// two `String`s, for 100k pods and their Events). It orders like the `(namespace, name)` tuple,
/// since NUL sorts first and never occurs in a namespace (a DNS label).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct PackedKey(Box<str>);

impl PackedKey {
    fn new(namespace: &str, name: &str) -> PackedKey {
        PackedKey([namespace, name].join("\0").into())
    }

    fn namespace(&self) -> &str {
        self.0.split_once('\0').map_or(&*self.0, |(ns, _)| ns)
    }
}

struct State<K> {
    objects: BTreeMap<PackedKey, Stored<K>>,
    history: VecDeque<Recorded<K>>,
    /// Resumes from a resourceVersion below this answer 410 (everything after it is kept).
    compacted_rv: u64,
    /// resourceVersion of this table's latest event.
    last_rv: u64,
    /// Events the history let go of whose object may now be idle, for [`Table::pack_idle`]
    /// (kinds that [`Kind::PACK_IDLE`] only).
    retired: Vec<Arc<WatchEvent<K>>>,
}

/// One resource's objects, history and live fan-out. See the module docs.
pub struct Table<K: Kind> {
    state: Mutex<State<K>>,
    tx: broadcast::Sender<Arc<WatchEvent<K>>>,
    clock: Arc<RvClock>,
    limits: HistoryLimits,
    /// The dictionary idle objects are packed with, made from the first ones (see the module
    /// docs).
    idle_dictionary: OnceLock<Arc<Dictionary>>,
}

/// At most this many bytes of idle objects' JSON make a table's dictionary: a few objects, which
/// is what zstd needs to find an object's common parts.
const IDLE_DICTIONARY_BYTES: usize = 16 * 1024;

/// At most this many retired events wait for [`Table::pack_idle`] (the sim's history pruner
/// calls it every second): a table nobody prunes keeps the rest of its objects plain rather than
/// pinning every version the history let go of.
const MAX_RETIRED: usize = 1 << 16;

impl<K: Kind> std::fmt::Debug for Table<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("resource", &K::RESOURCE)
            .finish()
    }
}

/// Serializes `obj` into a watch line of the given type; returns the line and the object's JSON.
pub fn event_line<K: Kind>(kind: &str, obj: &K) -> (Bytes, Bytes) {
    build_line(kind, 1024, |buf| obj.write_json(buf))
}

/// A watch line of the given type around an object's `json`; returns the line and the JSON (a
/// slice of the line).
pub fn watch_line(kind: &str, json: &[u8]) -> (Bytes, Bytes) {
    build_line(kind, json.len() + 32, |buf| buf.extend_from_slice(json))
}

/// `{"type":"<kind>","object":<what write_object writes>}\n`, and the object's part of it.
fn build_line(
    kind: &str,
    capacity: usize,
    write_object: impl FnOnce(&mut Vec<u8>),
) -> (Bytes, Bytes) {
    let mut buf = Vec::with_capacity(capacity);
    buf.extend_from_slice(b"{\"type\":\"");
    buf.extend_from_slice(kind.as_bytes());
    buf.extend_from_slice(b"\",\"object\":");
    let start = buf.len();
    write_object(&mut buf);
    let end = buf.len();
    buf.extend_from_slice(b"}\n");
    // The line may live as long as the object (and its history entry): don't keep the growth
    // slack.
    if buf.capacity() - buf.len() > buf.len() / 8 {
        buf.shrink_to_fit();
    }
    let line = Bytes::from(buf);
    let json = line.slice(start..end);
    (line, json)
}

impl<K: Kind> Table<K> {
    /// An empty table sharing `clock`, with a live channel of `capacity` events.
    pub fn new(clock: Arc<RvClock>, limits: HistoryLimits, capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(16));
        Self {
            state: Mutex::new(State {
                objects: BTreeMap::new(),
                history: VecDeque::new(),
                compacted_rv: 0,
                last_rv: 0,
                retired: Vec::new(),
            }),
            tx,
            clock,
            limits,
            idle_dictionary: OnceLock::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // A panic while holding the lock cannot leave the maps half-updated in a way that matters
        // more than stopping the whole sim would, so recover from poisoning.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The current object at `key`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Stored<K>> {
        let state = self.lock();
        state.objects.get(&PackedKey::new(namespace, name)).cloned()
    }

    /// Number of objects stored.
    pub fn len(&self) -> usize {
        self.lock().objects.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every object (in one namespace, or all), in key order, starting after `after` (exclusive),
    /// and the resourceVersion of that snapshot. Only reference counts are copied under the lock.
    pub fn snapshot(&self, namespace: Option<&str>, after: Option<&Key>) -> (Vec<Stored<K>>, u64) {
        let state = self.lock();
        let rv = self.clock.current();
        let lower = match after {
            Some((ns, name)) => Bound::Excluded(PackedKey::new(ns, name)),
            None => match namespace {
                Some(ns) => Bound::Included(PackedKey::new(ns, "")),
                None => Bound::Unbounded,
            },
        };
        let items = state
            .objects
            .range((lower, Bound::Unbounded))
            .take_while(|(key, _)| namespace.is_none_or(|want| want == key.namespace()))
            .map(|(_, stored)| stored.clone())
            .collect();
        (items, rv)
    }

    /// Like [`Table::snapshot`] after `after`, but the objects as they were at resourceVersion
    /// `rv` (a continued LIST serves its first page's snapshot): the current objects with every
    /// change after `rv` undone from the history. [`TooOld`] when the history no longer reaches
    /// back to `rv`.
    pub fn snapshot_at(
        &self,
        namespace: Option<&str>,
        after: &Key,
        rv: u64,
    ) -> Result<Vec<Stored<K>>, TooOld> {
        let state = self.lock();
        if rv < state.compacted_rv {
            return Err(TooOld {
                asked: rv,
                oldest: state.compacted_rv,
            });
        }
        let lower = PackedKey::new(&after.0, &after.1);
        let in_range =
            |key: &PackedKey| *key > lower && namespace.is_none_or(|want| want == key.namespace());
        let mut objects: BTreeMap<PackedKey, Stored<K>> = state
            .objects
            .range((
                Bound::Excluded(PackedKey::new(&after.0, &after.1)),
                Bound::Unbounded,
            ))
            .take_while(|(key, _)| namespace.is_none_or(|want| want == key.namespace()))
            .map(|(key, stored)| (key.clone(), stored.clone()))
            .collect();
        // The first change after `rv` of each key holds (as `prev`) its version at `rv`.
        let start = state.history.partition_point(|e| e.rv() <= rv);
        let mut undone: BTreeSet<PackedKey> = BTreeSet::new();
        for recorded in state.history.range(start..) {
            let (object_json, prev) = match recorded {
                Recorded::Live(event) => (event.json.clone(), event.prev.clone()),
                Recorded::Packed { object, prev, .. } => (object.json(), prev.clone()),
            };
            let obj: K = decode(&object_json);
            let key = PackedKey::new(
                obj.meta().namespace.as_deref().unwrap_or_default(),
                obj.meta().name.as_deref().unwrap_or_default(),
            );
            if !in_range(&key) || !undone.insert(key.clone()) {
                continue;
            }
            match prev {
                Some(prev) => {
                    objects.insert(key, prev);
                }
                None => {
                    objects.remove(&key);
                }
            }
        }
        Ok(objects.into_values().collect())
    }

    /// Applies `decide` to the current object at `key` and commits what it returns. `hook` runs
    /// under the lock with the committed event and the object as written (used for the pod side
    /// effects). Returns the commit (None for [`Write::Unchanged`]) and the closure's extra value.
    pub fn write<T, E>(
        &self,
        key: Key,
        decide: impl FnOnce(Option<&Stored<K>>) -> Result<(Write<K>, T), E>,
        hook: impl FnOnce(&WatchEvent<K>, &Arc<K>),
    ) -> Result<Committed<K, T>, E> {
        let mut state = self.lock();
        let key = PackedKey::new(&key.0, &key.1);
        let current = state.objects.get(&key);
        let (write, extra) = decide(current)?;
        let prev = current.cloned();
        let (kind, mut obj) = match write {
            Write::Unchanged => return Ok((None, extra)),
            Write::Create(obj) => (ChangeKind::Added, obj),
            Write::Replace(obj) => (ChangeKind::Modified, obj),
            Write::Delete(obj) => (ChangeKind::Deleted, obj),
        };
        let rv = self.clock.next();
        obj.meta_mut().resource_version = Some(rv.to_string());
        let (line, json) = event_line(kind.as_str(), &obj);
        let stored = Stored::new(&obj, json.clone());
        let obj = Arc::new(obj);
        let event = Arc::new(WatchEvent {
            rv,
            kind,
            facts: stored.facts.clone(),
            prev,
            line,
            json,
            at: Instant::now(),
        });
        let recorded = Recorded::of(&event, &stored);
        match kind {
            ChangeKind::Deleted => {
                state.objects.remove(&key);
            }
            ChangeKind::Added | ChangeKind::Modified => {
                state.objects.insert(key, stored);
            }
        }
        state.last_rv = rv;
        state.history.push_back(recorded);
        self.evict(&mut state);
        hook(&event, &obj);
        // No receiver is fine: nobody watches.
        let _ = self.tx.send(event.clone());
        Ok((Some(Commit { event, obj }), extra))
    }

    fn evict(&self, state: &mut State<K>) {
        let now = Instant::now();
        while let Some(front) = state.history.front() {
            let too_many = state.history.len() > self.limits.max_events;
            let too_old = now.saturating_duration_since(front.at()) > self.limits.window;
            if !(too_many || too_old) {
                break;
            }
            state.compacted_rv = front.rv();
            if let Some(Recorded::Live(event)) = state.history.pop_front()
                && K::PACK_IDLE
                && event.kind != ChangeKind::Deleted
                && state.retired.len() < MAX_RETIRED
            {
                state.retired.push(event);
            }
        }
    }

    /// Compresses the objects whose current version the history let go of since the last call
    /// (see the module docs), for kinds that [`Kind::PACK_IDLE`]. Compression runs without the
    /// lock; an object written meanwhile stays as written.
    pub fn pack_idle(&self) {
        let retired = std::mem::take(&mut self.lock().retired);
        if retired.is_empty() {
            return;
        }
        let Some(name_field) = K::FIELDS.iter().position(|f| *f == "metadata.name") else {
            return;
        };
        let dictionary = self.idle_dictionary.get_or_init(|| {
            let mut samples = Vec::with_capacity(IDLE_DICTIONARY_BYTES);
            for event in retired.iter().rev() {
                if samples.len() + event.json.len() > IDLE_DICTIONARY_BYTES {
                    break;
                }
                samples.extend_from_slice(&event.json);
            }
            Arc::new(Dictionary::new(&samples))
        });
        let packed: Vec<(PackedKey, &Bytes, Bytes)> = retired
            .iter()
            .filter_map(|event| {
                let key = PackedKey::new(event.facts.namespace(), event.facts.field(name_field));
                Some((key, &event.json, dictionary.pack(&event.json)?))
            })
            .collect();
        let mut state = self.lock();
        for (key, json, packed) in packed {
            if let Some(stored) = state.objects.get_mut(&key)
                && stored.is_stored_as(json)
            {
                stored.body = Body::Idle(packed, dictionary.clone());
            }
        }
    }

    /// Starts a watch: the initial state or the backlog, and a gap-free live subscription.
    pub fn start_watch(&self, from: WatchFrom) -> Result<WatchStart<K>, TooOld> {
        let mut state = self.lock();
        self.evict(&mut state);
        let rx = self.tx.subscribe();
        let current = self.clock.current();
        match from {
            WatchFrom::Now => Ok(WatchStart {
                initial: state.objects.values().cloned().collect(),
                backlog: Vec::new(),
                rv: current,
                subscribed_rv: current,
                rx,
            }),
            WatchFrom::After(asked) => {
                if asked < state.compacted_rv {
                    return Err(TooOld {
                        asked,
                        oldest: state.compacted_rv,
                    });
                }
                let start = state.history.partition_point(|e| e.rv() <= asked);
                let backlog: Vec<Recorded<K>> = state.history.range(start..).cloned().collect();
                // Rebuilding lines (and unpacking compressed kinds) needs no lock.
                drop(state);
                Ok(WatchStart {
                    initial: Vec::new(),
                    backlog: backlog.iter().map(Recorded::event).collect(),
                    rv: asked.max(current),
                    subscribed_rv: current,
                    rx,
                })
            }
        }
    }

    /// For bookmarks: if `rx` has nothing pending, the current resourceVersion (every event of
    /// this table up to it has been received); otherwise None (drain first). Also returns this
    /// table's latest event resourceVersion.
    pub fn bookmark_rv(&self, rx: &broadcast::Receiver<Arc<WatchEvent<K>>>) -> (Option<u64>, u64) {
        let state = self.lock();
        let rv = if rx.is_empty() {
            Some(self.clock.current())
        } else {
            None
        };
        (rv, state.last_rv)
    }

    /// Drops history events older than the window, so an idle sim frees memory too (writes and
    /// watch starts also evict; this is for the time in between).
    pub fn prune_history(&self) {
        {
            let mut state = self.lock();
            self.evict(&mut state);
            if state.history.capacity() > 4 * state.history.len().max(1024) {
                state.history.shrink_to_fit();
            }
        }
        self.pack_idle();
    }

    /// Drops the whole history: resumes from any resourceVersion before now answer 410.
    pub fn compact(&self) {
        let mut state = self.lock();
        let history = std::mem::take(&mut state.history);
        if K::PACK_IDLE {
            state
                .retired
                .extend(history.into_iter().filter_map(|recorded| match recorded {
                    Recorded::Live(event) if event.kind != ChangeKind::Deleted => Some(event),
                    _ => None,
                }));
        }
        state.compacted_rv = self.clock.current();
    }

    /// The oldest resourceVersion a resume may name.
    pub fn compacted_rv(&self) -> u64 {
        self.lock().compacted_rv
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    fn table() -> Table<Pod> {
        let limits = HistoryLimits {
            window: Duration::from_secs(75),
            max_events: 100,
        };
        Table::new(Arc::new(RvClock::default()), limits, 16)
    }

    fn pod(name: &str, app: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.to_owned());
        pod.metadata.namespace = Some("default".to_owned());
        pod.metadata.labels = Some([("app".to_owned(), app.to_owned())].into());
        pod
    }

    fn key(name: &str) -> Key {
        ("default".to_owned(), name.to_owned())
    }

    fn create(table: &Table<Pod>, pod: Pod) -> Commit<Pod> {
        let (commit, ()) = table
            .write(
                key(pod.metadata.name.as_deref().unwrap_or_default()),
                |_| Ok::<_, ()>((Write::Create(pod), ())),
                |_, _| {},
            )
            .expect("create");
        commit.expect("a create commits")
    }

    #[test]
    fn stored_objects_are_served_byte_identical_and_decode_to_what_was_written() {
        let table = table();
        let commit = create(&table, pod("a", "web"));
        let stored = table.get("default", "a").expect("stored");
        assert_eq!(
            stored.json(),
            commit.event.json,
            "GET serves the written bytes"
        );
        let (listed, _) = table.snapshot(Some("default"), None);
        assert_eq!(
            listed[0].json(),
            commit.event.json,
            "LIST serves the same bytes"
        );
        assert_eq!(
            stored.json(),
            serde_json::to_vec(&*commit.obj).expect("serialize"),
        );
        assert_eq!(stored.decode(), *commit.obj, "the JSON round-trips");
        assert_eq!(stored.facts.label("app"), Some("web"));
        assert!(commit.event.line.ends_with(b"}\n"));
    }

    #[test]
    fn a_write_decodes_the_stored_object_and_keeps_the_previous_version_for_watches() {
        let table = table();
        let first = create(&table, pod("a", "web"));
        let (commit, ()) = table
            .write(
                key("a"),
                |current| {
                    let mut pod = current.expect("exists").decode();
                    pod.metadata.labels = Some([("app".to_owned(), "db".to_owned())].into());
                    Ok::<_, ()>((Write::Replace(pod), ()))
                },
                |_, _| {},
            )
            .expect("replace");
        let commit = commit.expect("a change commits");
        let mut expected = (*first.obj).clone();
        expected.metadata.labels = Some([("app".to_owned(), "db".to_owned())].into());
        expected.metadata.resource_version = Some(commit.event.rv.to_string());
        assert_eq!(*commit.obj, expected, "only the label and version changed");
        assert_eq!(
            table.get("default", "a").expect("stored").decode(),
            expected
        );
        let prev = commit
            .event
            .prev
            .as_ref()
            .expect("MODIFIED keeps the old version");
        assert_eq!(prev.json(), first.event.json);
        assert_eq!(prev.facts.label("app"), Some("web"));
        assert_eq!(commit.event.facts.label("app"), Some("db"));
    }

    #[test]
    fn an_unchanged_write_commits_nothing() {
        let table = table();
        let first = create(&table, pod("a", "web"));
        let (commit, ()) = table
            .write(key("a"), |_| Ok::<_, ()>((Write::Unchanged, ())), |_, _| {})
            .expect("no-op");
        assert!(commit.is_none());
        let stored = table.get("default", "a").expect("stored");
        assert_eq!(stored.json(), first.event.json, "the version is kept");
    }

    #[test]
    fn keys_order_like_namespace_then_name() {
        let keys = [
            ("a", "z"),
            ("a-b", "a"),
            ("ab", ""),
            ("ab", "a"),
            ("b", "a"),
        ];
        for pair in keys.windows(2) {
            let (x, y) = (pair[0], pair[1]);
            assert!(
                PackedKey::new(x.0, x.1) < PackedKey::new(y.0, y.1),
                "{x:?} < {y:?}"
            );
        }
        assert_eq!(PackedKey::new("ab", "c").namespace(), "ab");
        let table = table();
        for (ns, name) in keys {
            let mut pod = pod(name, "web");
            pod.metadata.namespace = Some(ns.to_owned());
            let _ = table
                .write(
                    (ns.to_owned(), name.to_owned()),
                    |_| Ok::<_, ()>((Write::Create(pod), ())),
                    |_, _| {},
                )
                .expect("create");
        }
        let (in_ab, _) = table.snapshot(Some("ab"), None);
        assert_eq!(in_ab.len(), 2, "only namespace ab, not a or a-b");
        let after = ("ab".to_owned(), String::new());
        let (rest, _) = table.snapshot(None, Some(&after));
        let names: Vec<String> = rest
            .iter()
            .map(|s| s.decode().metadata.name.unwrap_or_default())
            .collect();
        assert_eq!(names, ["a", "a"], "continues after (ab, \"\")");
    }

    /// Events (a kind with a dictionary) are stored compressed, in the table and in the history,
    /// yet GET, LIST, a resume from the history and a decode see exactly what was written.
    #[test]
    fn a_kind_with_a_dictionary_is_stored_compressed_and_served_byte_identical() {
        use k8s_openapi::api::core::v1::Event;

        let limits = HistoryLimits {
            window: Duration::from_secs(75),
            max_events: 100,
        };
        let table: Table<Event> = Table::new(Arc::new(RvClock::default()), limits, 16);
        let subject = super::super::events::EventSubject {
            namespace: "default",
            name: "train-7-x2k9q",
            uid: "7d3f0a52-95a4-4a8e-b6a4-0c6f1d2e3b4a",
            resource_version: Some("4242"),
            node_name: Some("sim-node-1"),
        };
        let name = "train-7-x2k9q.18a2b3c4d5e6f708";
        let event = super::super::events::pod_event(
            &subject,
            name,
            &super::super::events::PodEventSpec {
                event_type: "Normal",
                reason: "Pulling",
                message: "Pulling image \"python:3.12-slim\"",
                component: "kubelet",
                field_path: Some("spec.containers{main}"),
            },
            // Whole seconds: Events' times are serialized to the second.
            jiff::Timestamp::from_second(1_764_561_600).expect("a valid time"),
        );
        let (commit, ()) = table
            .write(
                ("default".to_owned(), name.to_owned()),
                |_| Ok::<_, ()>((Write::Create(event), ())),
                |_, _| {},
            )
            .expect("create");
        let commit = commit.expect("a create commits");
        let stored = table.get("default", name).expect("stored");
        assert!(!stored.is_plain(), "Events are stored compressed");
        assert!(
            stored.stored_len() * 3 < commit.event.json.len(),
            "{} bytes stored for {} bytes of JSON",
            stored.stored_len(),
            commit.event.json.len()
        );
        assert_eq!(
            stored.json(),
            commit.event.json,
            "GET serves the written bytes"
        );
        assert_eq!(stored.decode(), *commit.obj, "the JSON round-trips");
        let (listed, _) = table.snapshot(None, None);
        assert_eq!(listed[0].json(), commit.event.json, "LIST too");
        let resumed = table.start_watch(WatchFrom::After(0)).expect("kept");
        assert_eq!(resumed.backlog.len(), 1);
        assert_eq!(resumed.backlog[0].line, commit.event.line, "a resume too");
        assert_eq!(resumed.backlog[0].json, commit.event.json);
        assert_eq!(
            stored.facts, commit.event.facts,
            "selectors see the same facts"
        );
    }

    /// Pods are stored plain while the history holds their current version, and compressed once
    /// it lets go of it, yet GET, LIST, a decode and a later write see exactly what was written.
    #[test]
    fn idle_pods_are_packed_once_the_history_lets_go_of_them_and_served_byte_identical() {
        let table = table();
        let mut written = Vec::new();
        for i in 0..150 {
            let mut pod = pod(&format!("p{i:03}"), "web");
            pod.metadata.annotations = Some([("note".to_owned(), "x".repeat(400))].into());
            written.push(create(&table, pod));
        }
        table.pack_idle();
        for (i, commit) in written.iter().enumerate() {
            let name = format!("p{i:03}");
            let stored = table.get("default", &name).expect("stored");
            // The history keeps the last 100 events: the first 50 pods are idle.
            assert_eq!(stored.is_plain(), i >= 50, "{name}");
            assert_eq!(
                stored.json(),
                commit.event.json,
                "{name} is served as written"
            );
            assert_eq!(stored.decode(), *commit.obj);
        }
        let idle = table.get("default", "p000").expect("stored");
        assert!(
            idle.stored_len() * 3 < written[0].event.json.len(),
            "{} bytes stored for {} bytes of JSON",
            idle.stored_len(),
            written[0].event.json.len()
        );
        let (listed, _) = table.snapshot(Some("default"), None);
        assert_eq!(listed[0].json(), written[0].event.json, "LIST too");
        let (commit, ()) = table
            .write(
                key("p000"),
                |current| {
                    let mut pod = current.expect("exists").decode();
                    pod.metadata.labels = Some([("app".to_owned(), "db".to_owned())].into());
                    Ok::<_, ()>((Write::Replace(pod), ()))
                },
                |_, _| {},
            )
            .expect("replace");
        let commit = commit.expect("a change commits");
        let prev = commit
            .event
            .prev
            .as_ref()
            .expect("MODIFIED keeps the old version");
        assert_eq!(
            prev.json(),
            written[0].event.json,
            "the packed version is the prev"
        );
        let stored = table.get("default", "p000").expect("stored");
        assert!(stored.is_plain(), "a written pod is plain again");
        assert_eq!(stored.json(), commit.event.json);
    }

    #[test]
    fn the_history_is_bounded_by_count_too() {
        let table = table();
        for i in 0..150 {
            create(&table, pod(&format!("p{i}"), "web"));
        }
        assert!(matches!(
            table.start_watch(WatchFrom::After(1)),
            Err(TooOld { oldest: 50, .. })
        ));
        let start = table.start_watch(WatchFrom::After(50)).expect("kept");
        assert_eq!(start.backlog.len(), 100);
    }
}
