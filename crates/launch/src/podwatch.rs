//! The pod watch of a launch: one `Feed` loop turns a watch of pods into the latest
//! [`PodState`] of each pod a task follows, on a `tokio::sync::watch` channel per pod.
//!
//! Awaiting start, following logs and awaiting completion all read that one channel, so a task
//! costs no polling loop per stage. A feed watches either one pod ([`spawn`], field selector
//! `metadata.name=<pod>`) or every pod podline launched in a namespace, shared by many tasks
//! ([`SharedPodWatches`]); both route events with the same rules (`Subscribers::route`). The
//! watch re-lists and resumes by itself (with backoff) when the connection breaks; only a pod
//! that is really gone (deleted, or missing after a re-list) is reported as [`PodState::gone`].

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use podline_client::watch::{self, Event, WatchConfig};
use tracing::Instrument;

use crate::watched::WatchedPod;

/// The latest knowledge about the pod.
#[derive(Debug, Clone, Default)]
pub struct PodState {
    /// The newest version seen (None until the first event): metadata and status whole, and of
    /// the spec only the node name and the container names (see [`WatchedPod`]).
    pub pod: Option<Pod>,
    /// The pod was deleted or is no longer listed.
    pub gone: bool,
    /// Watch errors so far (each retried with backoff); for the report only.
    pub errors: u32,
    /// The watch failed with an error no retry can fix (e.g. 403), or the pod's object does not
    /// decode: the run cannot follow the pod any more.
    pub fatal: Option<String>,
}

/// Starts watching pod `namespace/name` alone, in the background. The feed ends when the
/// receiver (and every clone of it) is dropped, when the pod is gone, or when the watch fails
/// for good.
pub fn spawn(
    client: kube::Client,
    namespace: &str,
    name: &str,
) -> tokio::sync::watch::Receiver<PodState> {
    let api: Api<WatchedPod> = Api::namespaced(client, namespace);
    let mut subscribers = Subscribers::default();
    let (rx, tx) = subscribers.add(name);
    let feed = Feed {
        subscribers: Arc::new(Mutex::new(subscribers)),
        lifetime: Lifetime::WhileFollowed(tx),
    };
    let cfg = WatchConfig::default().fields(&format!("metadata.name={name}"));
    tokio::spawn(
        feed.run(api, cfg)
            .instrument(tracing::debug_span!("pod_watch", pod = %name)),
    );
    rx
}

/// One pod watch per namespace shared by many tasks (`run_many`), instead of one watch per task.
///
/// With 200 tasks in flight, one watch per pod means the API server evaluates every pod event
/// 200 times (once per watch) and holds 200 watches open; a shared watch on podline's launch-id
/// label costs it one. Each task subscribes by pod name *before* creating its pod, so its pod
/// arrives either in the watch's (re-)list or as an event after it (never seeded from the create's
/// answer: a list that began before the create would then report the pod gone), and gets the
/// same [`PodState`] channel a per-pod watch would give it.
#[derive(Clone)]
pub struct SharedPodWatches {
    client: kube::Client,
    hubs: Arc<Mutex<HashMap<String, Hub>>>,
}

impl std::fmt::Debug for SharedPodWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let namespaces: Vec<String> = lock(&self.hubs).keys().cloned().collect();
        f.debug_struct("SharedPodWatches")
            .field("namespaces", &namespaces)
            .finish_non_exhaustive()
    }
}

impl SharedPodWatches {
    /// No watch yet; each namespace's starts with its first subscriber.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            hubs: Arc::default(),
        }
    }

    /// The state channel of pod `namespace/name`, fed from now on.
    pub fn subscribe(&self, namespace: &str, name: &str) -> tokio::sync::watch::Receiver<PodState> {
        let hub = lock(&self.hubs)
            .entry(namespace.to_owned())
            .or_insert_with(|| Hub::start(Api::namespaced(self.client.clone(), namespace)))
            .clone();
        hub.subscribe(name)
    }
}

/// The pods one feed serves, and what it has learnt.
#[derive(Debug, Default)]
struct Subscribers {
    /// Per pod name, the channel its task reads.
    pods: HashMap<String, tokio::sync::watch::Sender<PodState>>,
    /// Names seen in the current (re-)list, to tell which pods vanished while unwatched.
    listed: HashSet<String>,
    /// The watch failed for good: every subscriber, present and future, is told so.
    fatal: Option<String>,
}

/// How long a [`Feed`] keeps watching.
enum Lifetime {
    /// One pod's feed: until nobody reads the pod's channel (this is a clone of its sender, to
    /// notice that while the watch is quiet) or the pod is gone.
    WhileFollowed(tokio::sync::watch::Sender<PodState>),
    /// A shared feed: until its task is aborted (the last [`Hub`] handle dropped); a moment
    /// with no subscriber does not end it.
    UntilAborted,
}

/// The one loop behind every pod watch of the launcher: reads the watch and routes each item to
/// the channel of the pod it concerns (`Subscribers::route`).
struct Feed {
    subscribers: Arc<Mutex<Subscribers>>,
    lifetime: Lifetime,
}

impl Feed {
    /// Watches until the watch fails for good or the [`Lifetime`] is over.
    async fn run(self, api: Api<WatchedPod>, cfg: WatchConfig) {
        let mut stream = std::pin::pin!(watch::watch(api, cfg));
        let unfollowed = async {
            match &self.lifetime {
                Lifetime::WhileFollowed(tx) => tx.closed().await,
                Lifetime::UntilAborted => std::future::pending().await,
            }
        };
        let mut unfollowed = std::pin::pin!(unfollowed);
        loop {
            let item = tokio::select! {
                item = stream.next() => item,
                () = &mut unfollowed => return,
            };
            let Some(item) = item else { return };
            let mut subscribers = lock(&self.subscribers);
            if subscribers.route(item) == Routed::Ended {
                return;
            }
            // Gone: `route` dropped the pod's channel.
            if matches!(self.lifetime, Lifetime::WhileFollowed(_)) && subscribers.pods.is_empty() {
                return;
            }
        }
    }
}

/// One namespace's shared feed; its task ends when the last handle is dropped.
#[derive(Debug, Clone)]
struct Hub {
    subscribers: Arc<Mutex<Subscribers>>,
    _task: Arc<AbortOnDrop>,
}

/// Aborts the feed's task when the last [`Hub`] handle goes.
#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic under this lock leaves at worst a stale channel map: keep serving.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Hub {
    fn start(api: Api<WatchedPod>) -> Self {
        let subscribers = Arc::new(Mutex::new(Subscribers::default()));
        let feed = Feed {
            subscribers: subscribers.clone(),
            lifetime: Lifetime::UntilAborted,
        };
        let cfg = WatchConfig::default().labels(crate::spec::LAUNCH_ID_LABEL);
        let task = tokio::spawn(
            feed.run(api, cfg)
                .instrument(tracing::debug_span!("shared_pod_watch")),
        );
        Hub {
            subscribers,
            _task: Arc::new(AbortOnDrop(task)),
        }
    }

    fn subscribe(&self, name: &str) -> tokio::sync::watch::Receiver<PodState> {
        let mut subs = lock(&self.subscribers);
        // Forget the pods whose tasks are done (their receivers are gone).
        subs.pods.retain(|_, tx| !tx.is_closed());
        subs.add(name).0
    }
}

/// Whether a watch still has work after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Routed {
    /// Keep watching.
    Continue,
    /// The watch failed for good; every subscriber was told.
    Ended,
}

impl Subscribers {
    /// The state channel of pod `name` (told at once if the watch already failed for good), and
    /// its sender.
    fn add(
        &mut self,
        name: &str,
    ) -> (
        tokio::sync::watch::Receiver<PodState>,
        tokio::sync::watch::Sender<PodState>,
    ) {
        let fatal = self.fatal.clone();
        let tx = self.pods.entry(name.to_owned()).or_insert_with(|| {
            tokio::sync::watch::channel(PodState {
                fatal,
                ..PodState::default()
            })
            .0
        });
        (tx.subscribe(), tx.clone())
    }
    /// Routes one watch item to the channel of the pod it concerns. A pod is gone on DELETED,
    /// or when a re-list no longer has a pod seen before; its channel is then dropped, so the
    /// channels left are the pods still followed.
    fn route(&mut self, item: Result<Event<WatchedPod>, watch::WatchError>) -> Routed {
        match item {
            Ok(Event::InitApply(pod)) => {
                let name = pod.metadata.name.clone().unwrap_or_default();
                if let Some(tx) = self.pods.get(&name) {
                    self.listed.insert(name);
                    tx.send_modify(|s| s.pod = Some(pod.into()));
                }
            }
            Ok(Event::Apply(pod)) => {
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                if let Some(tx) = self.pods.get(name) {
                    tx.send_modify(|s| s.pod = Some(pod.into()));
                }
            }
            Ok(Event::Init) => self.listed.clear(),
            Ok(Event::InitDone) => {
                for (name, tx) in &self.pods {
                    if !self.listed.contains(name) && tx.borrow().pod.is_some() {
                        tx.send_modify(|s| s.gone = true);
                    }
                }
                // Only a (re-)list needs the names; a long run must not keep every pod's.
                self.listed = HashSet::new();
                self.pods
                    .retain(|_, tx| !tx.borrow().gone && !tx.is_closed());
            }
            Ok(Event::Delete(pod)) => {
                let name = pod.metadata.name.clone().unwrap_or_default();
                if let Some(tx) = self.pods.remove(&name) {
                    tx.send_modify(|s| {
                        s.pod = Some(pod.into());
                        s.gone = true;
                    });
                }
            }
            Ok(Event::Skipped(skipped)) => self.skipped(&skipped),
            Ok(Event::Bookmark(_) | Event::Connected { .. }) => {}
            Err(err) if err.is_fatal() => {
                tracing::warn!(error = %err, "pod watch failed for good");
                self.fatal = Some(err.to_string());
                for tx in self.pods.values() {
                    tx.send_modify(|s| s.fatal = Some(err.to_string()));
                }
                self.pods.clear();
                return Routed::Ended;
            }
            Err(err) => {
                tracing::debug!(error = %err, reason = err.reason().as_str(), "pod watch interrupted; resuming");
                for tx in self.pods.values() {
                    tx.send_modify(|s| s.errors += 1);
                }
            }
        }
        Routed::Continue
    }

    /// A pod object the watch could not decode (the watch skipped it and goes on). Another
    /// pod's is none of this feed's business (logged at debug: a shared watch sees every task's
    /// pods). A followed pod's ends its run with a clear error naming what did not decode (the
    /// launcher cannot judge a pod it cannot read), unless it was a DELETED event (the pod is
    /// gone). A skip without a readable name concerns no followed pod that can be named: it is
    /// logged; a followed pod it hid is noticed by its later events or the next re-list.
    fn skipped(&mut self, skipped: &watch::Skipped) {
        let followed = skipped
            .name
            .as_deref()
            .and_then(|name| Some((name, self.pods.get(name)?)));
        let Some((name, tx)) = followed else {
            tracing::debug!(object = %skipped.object_name(), "pod watch skipped an object: {skipped}");
            return;
        };
        if skipped.is_deletion() {
            tx.send_modify(|s| s.gone = true);
        } else {
            tracing::warn!(pod = name, "cannot follow the pod: {skipped}");
            let message = format!(
                "the pod's object does not decode ({}): podline cannot follow it",
                skipped.error
            );
            tx.send_modify(|s| s.fatal = Some(message));
        }
        let name = name.to_owned();
        self.pods.remove(&name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched(name: &str) -> WatchedPod {
        let mut pod = WatchedPod::default();
        pod.metadata.name = Some(name.to_owned());
        pod
    }

    /// A re-list that no longer has a pod seen before reports it gone and drops its channel;
    /// a pod subscribed (before its create) but never seen is not gone, as its create may still
    /// be on the way.
    #[test]
    fn a_relist_should_report_only_pods_seen_before_and_missing_now_as_gone() {
        let mut subs = Subscribers::default();
        let (kept, _) = subs.add("kept");
        let (vanished, _) = subs.add("vanished");
        let (unborn, _) = subs.add("unborn");
        for name in ["kept", "vanished"] {
            assert_eq!(
                subs.route(Ok(Event::Apply(watched(name)))),
                Routed::Continue
            );
        }
        subs.route(Ok(Event::Init));
        subs.route(Ok(Event::InitApply(watched("kept"))));
        subs.route(Ok(Event::InitDone));
        assert!(!kept.borrow().gone && kept.borrow().pod.is_some());
        assert!(vanished.borrow().gone);
        assert!(!unborn.borrow().gone && unborn.borrow().pod.is_none());
        let mut followed: Vec<&str> = subs.pods.keys().map(String::as_str).collect();
        followed.sort_unstable();
        assert_eq!(followed, ["kept", "unborn"]);
        assert!(
            subs.listed.is_empty(),
            "the names of a list are not kept after it"
        );
    }

    fn skip(name: &str, source: watch::SkippedIn) -> watch::Skipped {
        watch::Skipped {
            source,
            kind: watch::SkipKind::Object,
            namespace: Some("ns".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("7".into()),
            error: "metadata.deletionTimestamp: premature end of input".into(),
        }
    }

    /// Issue 27: another pod that does not decode (in a list or an event) changes nothing for
    /// the followed ones, not even at the re-list's end; the followed pod's own undecodable
    /// object ends its run with an error naming what did not decode; a DELETED one is gone.
    #[test]
    fn an_undecodable_pod_should_end_only_its_own_run() {
        use watch::SkippedIn;
        let mut subs = Subscribers::default();
        let (mine, _) = subs.add("mine");
        let (deleted, _) = subs.add("deleted");
        subs.route(Ok(Event::Apply(watched("mine"))));
        subs.route(Ok(Event::Init));
        subs.route(Ok(Event::InitApply(watched("mine"))));
        assert_eq!(
            subs.route(Ok(Event::Skipped(skip("other", SkippedIn::List)))),
            Routed::Continue
        );
        subs.route(Ok(Event::InitDone));
        subs.route(Ok(Event::Skipped(skip("other", SkippedIn::Modified))));
        assert!(mine.borrow().fatal.is_none() && !mine.borrow().gone);
        assert_eq!(subs.pods.len(), 2);

        subs.route(Ok(Event::Skipped(skip("mine", SkippedIn::Modified))));
        let fatal = mine.borrow().fatal.clone().expect("the run is told");
        assert!(
            fatal.contains("does not decode") && fatal.contains("metadata.deletionTimestamp"),
            "{fatal}"
        );
        subs.route(Ok(Event::Skipped(skip("deleted", SkippedIn::Deleted))));
        assert!(deleted.borrow().gone && deleted.borrow().fatal.is_none());
        assert!(subs.pods.is_empty());
    }

    /// A DELETED event ends the pod's channel with its last state; other pods' events reach
    /// only their own channels.
    #[test]
    fn a_delete_should_report_the_pod_gone_with_its_last_state() {
        let mut subs = Subscribers::default();
        let (a, _) = subs.add("a");
        let (b, _) = subs.add("b");
        subs.route(Ok(Event::Apply(watched("b"))));
        assert!(a.borrow().pod.is_none());
        subs.route(Ok(Event::Delete(watched("a"))));
        assert!(a.borrow().gone && a.borrow().pod.is_some());
        assert!(!b.borrow().gone);
        assert!(!subs.pods.contains_key("a"));
    }
}
