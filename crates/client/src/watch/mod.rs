//! A LIST+WATCH that never hangs, resumes where it was, and never ends by itself.
//!
//! [`watch`] lists the objects (in pages), then watches from the list's resourceVersion with
//! bookmarks and `timeoutSeconds` = the server timeout. Every reconnect resumes from the last
//! resourceVersion seen (an event's or a BOOKMARK's); only 410 Gone/Expired re-lists. The client
//! timeout bounds every wait: each LIST page, the watch request until its headers, and, over
//! HTTP/1.1, each gap between stream items. Over HTTP/2 a silent stream is a quiet watch: the
//! transport's PING health check fails the stream if its connection dies (see
//! [`crate::transport`]), so the gap bound there is the server timeout + 5 s. Failures are yielded as `Err(WatchError)` items and the stream carries on
//! after a full-jitter backoff; only fatal errors (401, 403, 404, bad selector) end it.
//!
//! Which fault each path handles: see the table in the [crate docs](crate#faults-and-what-the-watch-does).
//!
//! ```no_run
//! use futures::StreamExt;
//! use podline_client::watch::{watch, Event, WatchConfig};
//! # async fn demo(client: kube::Client) {
//! let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::default_namespaced(client);
//! let mut events = std::pin::pin!(watch(pods, WatchConfig::default().labels("app=demo")));
//! while let Some(item) = events.next().await {
//!     match item {
//!         Ok(Event::Apply(pod)) | Ok(Event::InitApply(pod)) => { /* upsert */ }
//!         Ok(Event::Delete(pod)) => { /* mark deleted */ }
//!         Ok(Event::InitDone) => { /* reconcile: anything not seen since Init is gone */ }
//!         Ok(Event::Bookmark(rv)) => { /* persist rv as the resume point */ }
//!         Ok(_) => {}
//!         Err(e) if e.is_fatal() => { eprintln!("{e}"); std::process::exit(1) }
//!         Err(e) => tracing::debug!(reason = e.reason().as_str(), "{e}"),
//!     }
//! }
//! # }
//! ```

mod error;
mod outage;
mod state;

use std::time::Duration;

use futures::Stream;
use kube::Api;
use serde::de::DeserializeOwned;

pub use crate::reason::Reason;
pub use error::{Phase, WatchError};
pub use outage::{OutageLog, OutageReport};

use crate::backoff::FullJitter;
use crate::timeouts::WatchTimeouts;

/// What a watch yields (inside `Ok`).
///
/// `Delete` events can be missed while disconnected; after a re-list, anything applied before
/// `Init` but not seen between `Init` and `InitDone` must be treated as deleted.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<K> {
    /// A (re-)list starts: a consumer opens a fresh "seen" set.
    Init,
    /// An object that exists now, from the list.
    InitApply(K),
    /// The list is complete: anything not seen since `Init` is gone.
    InitDone,
    /// An object was added or modified.
    Apply(K),
    /// An object was deleted (its last state).
    Delete(K),
    /// The server confirmed progress up to this resourceVersion: a safe resume point to persist.
    Bookmark(String),
    /// A watch request was answered and its stream is open (the watch is healthy: use it for
    /// readiness). `reason` says why the previous watch ended (the first cause, if several
    /// failures followed): [`Reason::ServerTimeout`], [`Reason::ClientTimeout`],
    /// [`Reason::Reset`], [`Reason::Http5xx`], [`Reason::TooManyRequests`], [`Reason::Gone`],
    /// [`Reason::Refused`], [`Reason::Transport`]... Count these as reconnects by reason. The
    /// stream's first `Connected` says [`Reason::Initial`] (or [`Reason::Resume`] when it started
    /// from [`WatchConfig::resume_from`]), even if attempts failed before it (those were yielded
    /// as errors); [`Reason::is_first_connect`] tells those apart from reconnects.
    Connected {
        /// Why the previous watch ended.
        reason: Reason,
        /// The resourceVersion this watch started from.
        resource_version: String,
    },
}

/// How to watch. Defaults: no selectors, [`WatchTimeouts::default`] (1800 s / 60 s), pages of 500
/// (client-go's pager), backoff 200 ms doubling to 30 s with full jitter, reset after 120 s
/// without a failure (client-go's reflector uses 800 ms..30 s and 2 min).
#[derive(Debug, Clone)]
pub struct WatchConfig {
    /// `labelSelector` for LIST and WATCH.
    pub label_selector: Option<String>,
    /// `fieldSelector` for LIST and WATCH.
    pub field_selector: Option<String>,
    /// Server timeout (`timeoutSeconds`) and client timeout (bounds every wait).
    pub timeouts: WatchTimeouts,
    /// LIST page size (`limit`).
    pub page_size: u32,
    /// Start by watching from this resourceVersion instead of listing (after a process restart);
    /// a 410 falls back to a LIST.
    pub resume_from: Option<String>,
    /// Delays between failed attempts.
    pub backoff: FullJitter,
    /// After this long without a failure the backoff starts small again.
    pub healthy_after: Duration,
}

impl Default for WatchConfig {
    fn default() -> Self {
        // Proven invariant: base > 0, cap >= base, factor >= 1.
        #[allow(clippy::unwrap_used)]
        let backoff =
            FullJitter::try_new(Duration::from_millis(200), Duration::from_secs(30), 2.0).unwrap();
        Self {
            label_selector: None,
            field_selector: None,
            timeouts: WatchTimeouts::default(),
            page_size: 500,
            resume_from: None,
            backoff,
            healthy_after: Duration::from_secs(120),
        }
    }
}

impl WatchConfig {
    /// Watch only objects with these labels (`"app=demo,tier!=db"`).
    #[must_use]
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_string());
        self
    }

    /// Watch only objects matching these fields (`"spec.nodeName=n1"`).
    #[must_use]
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_string());
        self
    }

    /// Use these server/client timeouts.
    #[must_use]
    pub fn timeouts(mut self, timeouts: WatchTimeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Resume from a stored resourceVersion instead of listing first.
    #[must_use]
    pub fn resume_from(mut self, resource_version: Option<String>) -> Self {
        self.resume_from = resource_version.filter(|rv| !rv.is_empty() && rv != "0");
        self
    }

    /// LIST page size.
    #[must_use]
    pub fn page_size(mut self, n: u32) -> Self {
        self.page_size = n.max(1);
        self
    }

    /// Backoff between failed attempts.
    #[must_use]
    pub fn backoff(mut self, backoff: FullJitter) -> Self {
        self.backoff = backoff;
        self
    }
}

/// Watches `api` per `config`: see the module doc for the guarantees and the fault table.
///
/// The stream never ends by itself except after a fatal error. Consume it with `while let`, never
/// with `?` or `try_for_each`, which would stop at the first routine error.
pub fn watch<K>(
    api: Api<K>,
    config: WatchConfig,
) -> impl Stream<Item = Result<Event<K>, WatchError>> + Send
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    state::run(api, config)
}
