//! Watch streams with the real server's semantics: resume from a resourceVersion (or synthetic
//! ADDED events for the current state), 410 Expired in-stream when the history is gone,
//! selector transitions (DELETED when an object stops matching, ADDED when it starts),
//! BOOKMARK events, and a clean end at `timeoutSeconds` (random 30-60 min when absent).
//!
//! Each event is one JSON line, one body frame (so it is flushed on its own); the bytes of an
//! event are shared by every watcher that receives it unchanged.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use http::StatusCode;
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use super::filter::Filter;
use super::query::{self, ListParams};
use super::respond::json_response;
use super::{AppState, RequestInfo};
use crate::status::ApiError;
use podline_sim_core::cluster::{
    ChangeKind, Cluster, Facts, Stored, TooOld, WatchEvent, WatchFrom, event_line, watch_line,
};
use podline_sim_core::kinds::ApiKind;

/// How long before `timeoutSeconds` the last bookmark is sent, like the real server.
const FINAL_BOOKMARK_LEAD: Duration = Duration::from_secs(2);

/// A deadline that never comes in practice (about 30 years), for timeouts past the clock's range.
const NEVER: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// Starts a watch of kind `K` for this request.
pub fn watch<K: ApiKind>(
    state: &AppState,
    info: &RequestInfo,
    query: Option<&str>,
) -> Result<Response, ApiError> {
    let params: ListParams = query::parse(query)?;
    let filter = Filter::new::<K>(info, &params)?;
    let send_initial = params.send_initial_events == Some(true);
    let from = match params.resource_version.as_deref() {
        _ if send_initial => WatchFrom::Now,
        None | Some("") | Some("0") => WatchFrom::Now,
        // The watch cache answers a bad resourceVersion with the storage layer's bare error.
        Some(rv) => WatchFrom::After(query::go_parse_uint(rv).map_err(|why| {
            ApiError::new(
                500,
                "",
                format!(
                    "resourceVersion: Invalid value: {}: {why}",
                    query::go_quote(rv)
                ),
            )
        })?),
    };
    let timeout = query::watch_timeout(params.timeout_seconds);
    let cluster = state.cluster().clone();
    let start = match K::table(&cluster).start_watch(from) {
        Ok(start) => start,
        Err(too_old) => return Ok(json_response(StatusCode::OK, expired_line(too_old))),
    };
    let now = Instant::now();
    // A timeout may be as long as 292 years: past the clock's range, the watch simply never
    // times out.
    let deadline = now.checked_add(timeout).unwrap_or_else(|| now + NEVER);
    let mut watcher = Watcher::<K> {
        cluster,
        filter,
        pending: VecDeque::new(),
        rx: start.rx,
        start_rv: start.rv,
        seen_rv: start.subscribed_rv,
        deadline,
        buffer: state.cluster().watch_buffer(),
        bookmarks: params.allow_watch_bookmarks == Some(true),
        bookmark_every: state.bookmark_interval(),
        next_bookmark: now
            .checked_add(state.bookmark_interval())
            .unwrap_or(deadline),
        final_bookmark_at: (timeout > FINAL_BOOKMARK_LEAD)
            .then(|| deadline.checked_sub(FINAL_BOOKMARK_LEAD))
            .flatten(),
    };
    for stored in &start.initial {
        if watcher.in_namespace(&stored.facts) && watcher.filter.matches(&stored.facts) {
            watcher.pending.push_back(added_line(stored));
        }
    }
    for event in &start.backlog {
        if let Some(frame) = watcher.render(event) {
            watcher.pending.push_back(frame);
        }
    }
    if send_initial {
        watcher
            .pending
            .push_back(bookmark_line::<K>(start.rv, true));
    }
    let stream = futures::stream::unfold(watcher, |mut w| async move {
        let frame = w.next_frame().await?;
        Some((Ok::<_, Infallible>(frame), w))
    });
    let mut response = json_response(StatusCode::OK, Body::from_stream(stream.boxed()));
    response.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache, private"),
    );
    Ok(response)
}

fn added_line<K: ApiKind>(stored: &Stored<K>) -> Bytes {
    watch_line("ADDED", &stored.json()).0
}

/// The in-stream `ERROR` event with a 410 Expired Status the real server sends when a watch
/// (re)starts from, or falls behind, a resourceVersion the history no longer holds.
fn expired_line(TooOld { asked, oldest }: TooOld) -> Bytes {
    let status =
        ApiError::expired(format!("too old resource version: {asked} ({oldest})")).to_status();
    Bytes::from(format!("{}\n", json!({"type": "ERROR", "object": status})))
}

/// A BOOKMARK event shaped like kube-apiserver's: the kind's empty object as Go serializes it
/// (a Pod has `spec: {containers: null}, status: {}`), with only `resourceVersion` (and a null
/// `creationTimestamp`) in its metadata. The initial-events-end bookmark of a `sendInitialEvents`
/// watch also carries `k8s.io/initial-events-end` and (1.32) the
/// `kubernetes.io/initial-events-list-blueprint` annotation: an empty list of the kind, encoded
/// as the response is (JSON), in base64.
fn bookmark_line<K: ApiKind>(rv: u64, initial_events_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
    if initial_events_end {
        metadata["annotations"] = json!({
            "k8s.io/initial-events-end": "true",
            "kubernetes.io/initial-events-list-blueprint": list_blueprint::<K>(),
        });
    }
    let mut object = json!({"kind": K::KIND, "apiVersion": K::API_VERSION, "metadata": metadata});
    match K::KIND {
        "Pod" => {
            object["spec"] = json!({"containers": null});
            object["status"] = json!({});
        }
        "Namespace" => {
            object["spec"] = json!({});
            object["status"] = json!({});
        }
        "Lease" => object["spec"] = json!({}),
        "Event" => {
            object["involvedObject"] = json!({});
            object["source"] = json!({});
            object["firstTimestamp"] = json!(null);
            object["lastTimestamp"] = json!(null);
            object["eventTime"] = json!(null);
            object["reportingComponent"] = json!("");
            object["reportingInstance"] = json!("");
        }
        // Custom resources are unstructured: nothing but kind, apiVersion and metadata.
        _ => {}
    }
    let line = json!({"type": "BOOKMARK", "object": object});
    Bytes::from(format!("{line}\n"))
}

/// The base64 of the empty list kube-apiserver 1.32 encodes into the initial-events-end
/// bookmark (Go's JSON encoder ends it with a newline; a converted empty list has null items).
fn list_blueprint<K: ApiKind>() -> String {
    use base64::Engine as _;
    let list =
        json!({"kind": K::LIST_KIND, "apiVersion": K::API_VERSION, "metadata": {}, "items": null});
    base64::engine::general_purpose::STANDARD.encode(format!("{list}\n"))
}

/// One watcher's state; [`Watcher::next_frame`] is its step function.
struct Watcher<K: ApiKind> {
    cluster: Cluster,
    filter: Filter,
    /// Frames ready to send (initial state, backlog).
    pending: VecDeque<Bytes>,
    rx: tokio::sync::broadcast::Receiver<Arc<WatchEvent<K>>>,
    /// The resourceVersion the watch started at (bookmarks only after a later change).
    start_rv: u64,
    /// Every event of this table up to this resourceVersion has been taken from `rx` (or was in
    /// the initial state/backlog). A lagging `rx` is replaced by a resume from here.
    seen_rv: u64,
    deadline: Instant,
    /// Events this watcher may leave untaken before it is closed (0: never; see
    /// [`crate::SimConfig::watch_buffer`]).
    buffer: usize,
    bookmarks: bool,
    bookmark_every: Duration,
    next_bookmark: Instant,
    final_bookmark_at: Option<Instant>,
}

impl<K: ApiKind> Watcher<K> {
    fn in_namespace(&self, facts: &Facts) -> bool {
        self.filter
            .namespace
            .as_deref()
            .is_none_or(|ns| facts.namespace() == ns)
    }

    /// The frame this watcher sends for `event`, if any (selector semantics applied).
    fn render(&self, event: &WatchEvent<K>) -> Option<Bytes> {
        if !self.in_namespace(&event.facts) {
            return None;
        }
        if !self.filter.has_selectors() {
            return Some(event.line.clone());
        }
        let now = self.filter.matches(&event.facts);
        let before = event
            .prev
            .as_ref()
            .is_some_and(|prev| self.filter.matches(&prev.facts));
        match (event.kind, before, now) {
            (ChangeKind::Added, _, true) => Some(event.line.clone()),
            (ChangeKind::Deleted, b, n) if b || n => Some(event.line.clone()),
            (ChangeKind::Modified, true, true) => Some(event.line.clone()),
            (ChangeKind::Modified, false, true) => Some(watch_line("ADDED", &event.json).0),
            (ChangeKind::Modified, true, false) => {
                // The real server sends the old object, at the resourceVersion of the change.
                let mut old = event.prev.as_ref()?.decode();
                old.meta_mut().resource_version = Some(event.rv.to_string());
                Some(event_line("DELETED", &old).0)
            }
            _ => None,
        }
    }

    /// A bookmark if one is due and safe now.
    fn bookmark(&mut self) -> Option<Bytes> {
        let (rv, table_last) = K::table(&self.cluster).bookmark_rv(&self.rx);
        let rv = rv?;
        // The real server sends bookmarks only once the resource changed after the watch began.
        (table_last > self.start_rv).then(|| bookmark_line::<K>(rv, false))
    }

    /// After `rx` lagged: resubscribes and queues every event after `seen_rv` from the history,
    /// so a slow reader loses nothing while the history still holds it. Once the history has
    /// moved past `seen_rv`, ends the stream with 410 Expired, as the real server does.
    fn catch_up(&mut self) {
        match K::table(&self.cluster).start_watch(WatchFrom::After(self.seen_rv)) {
            Ok(start) => {
                self.rx = start.rx;
                for event in &start.backlog {
                    if let Some(frame) = self.render(event) {
                        self.pending.push_back(frame);
                    }
                }
                self.seen_rv = start.subscribed_rv;
            }
            Err(too_old) => {
                tracing::info!(
                    asked = too_old.asked,
                    oldest = too_old.oldest,
                    resource = K::RESOURCE,
                    "watcher fell behind the history; ending it with 410"
                );
                self.pending.push_back(expired_line(too_old));
                self.deadline = Instant::now();
            }
        }
    }

    /// Ends a watch whose consumer fell more than its buffer behind, as kube-apiserver's cacher
    /// terminates such a watcher: the body just ends (no ERROR event) and the client resumes
    /// from the last resourceVersion it saw, or re-lists.
    fn close_slow(&mut self) {
        tracing::info!(
            buffer = self.buffer,
            behind = self.rx.len(),
            resource = K::RESOURCE,
            "watcher fell behind its buffer; closing the watch"
        );
        self.pending.clear();
        self.deadline = Instant::now();
    }

    async fn next_frame(&mut self) -> Option<Bytes> {
        loop {
            if let Some(frame) = self.pending.pop_front() {
                // kube-apiserver's dispatcher feeds new events into a watcher's buffer while the
                // watcher still sends its initial events, and force-closes it ("Forcing ...
                // watcher close due to unresponsiveness") once that buffer stays full: a slow
                // reader of a long backlog is cut off mid-backlog (apiserver
                // `pkg/storage/cacher/cacher.go` `dispatchEvent`, `cache_watcher.go` `add`).
                if self.buffer > 0 && self.rx.len() >= self.buffer {
                    self.close_slow();
                    return None;
                }
                return Some(frame);
            }
            let now = Instant::now();
            if now >= self.deadline {
                return None;
            }
            let mut wake = self.deadline;
            if self.bookmarks {
                wake = wake.min(self.next_bookmark);
                if let Some(at) = self.final_bookmark_at {
                    wake = wake.min(at);
                }
            }
            tokio::select! {
                biased;
                received = self.rx.recv() => match received {
                    Ok(_) if self.buffer > 0 && self.rx.len() >= self.buffer => {
                        self.close_slow();
                        return None;
                    }
                    Err(RecvError::Lagged(_)) if self.buffer > 0 => {
                        self.close_slow();
                        return None;
                    }
                    Ok(event) => {
                        self.seen_rv = event.rv;
                        if let Some(frame) = self.render(&event) {
                            return Some(frame);
                        }
                    }
                    Err(RecvError::Lagged(missed)) => {
                        tracing::debug!(missed, resource = K::RESOURCE, "watcher behind the live ring; catching up from history");
                        self.catch_up();
                    }
                    Err(RecvError::Closed) => return None,
                },
                () = tokio::time::sleep_until(wake) => {
                    let now = Instant::now();
                    if now >= self.deadline {
                        return None;
                    }
                    let periodic = self.bookmarks && now >= self.next_bookmark;
                    let last = self.bookmarks && self.final_bookmark_at.is_some_and(|at| now >= at);
                    if periodic || last {
                        if !self.rx.is_empty() {
                            // Deliver what is queued first; the bookmark stays due.
                            continue;
                        }
                        if periodic {
                            self.next_bookmark =
                                now.checked_add(self.bookmark_every).unwrap_or(self.deadline);
                        }
                        if last {
                            self.final_bookmark_at = None;
                        }
                        if let Some(frame) = self.bookmark() {
                            return Some(frame);
                        }
                    }
                }
            }
        }
    }
}
