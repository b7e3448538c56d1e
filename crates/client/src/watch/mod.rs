//! A LIST+WATCH that never hangs, resumes where it was, and never ends by itself.
//!
//! [`watch`] lists the objects (in pages), then watches from the list's resourceVersion with
//! bookmarks and `timeoutSeconds` = the server timeout. Every reconnect resumes from the last
//! resourceVersion seen (an event's or a BOOKMARK's); only 410 Gone/Expired re-lists. The client
//! timeout bounds every wait: each LIST page, the watch request until its headers, and, over
//! HTTP/1.1, each gap between stream items. Over HTTP/2 a silent stream is a quiet watch: the
//! transport's PING health check fails the stream if its connection dies (see
//! [`crate::transport`]), so the gap bound there is the server timeout + 5 s. Failures are yielded as `Err(WatchError)` items and the stream carries on
//! after a full-jitter backoff; only fatal errors (401, 403, 404, bad selector) end it. An object
//! that does not decode (in a LIST page or a watch event) is yielded as [`Event::Skipped`] with
//! what could be read of it, and the watch goes on past it.
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
//!         Ok(Event::Skipped(s)) => tracing::warn!(object = %s.object_name(), "skipped: {s}"),
//!         Ok(_) => {}
//!         Err(e) if e.is_fatal() => { eprintln!("{e}"); std::process::exit(1) }
//!         Err(e) => tracing::debug!(reason = e.reason().as_str(), "{e}"),
//!     }
//! }
//! # }
//! ```

mod config;
mod decode;
mod error;
mod event;
mod lines;
mod outage;
mod skipped;
mod state;

use futures::Stream;
use kube::Api;
use serde::de::DeserializeOwned;

pub use crate::reason::Reason;
pub use config::{MAX_LINE_BYTES, WatchConfig};
/// A LIST page decoded item by item, for [`crate::list`], which lists outside the watch.
pub(crate) use decode::decode_page as decode_list_page;
pub use error::{Phase, WatchError};
pub use event::Event;
pub use outage::{OutageLog, OutageReport};
pub use skipped::{SkipKind, Skipped, SkippedIn, elide_values};

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
