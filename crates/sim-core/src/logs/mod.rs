//! The per-container log store behind `GET /api/v1/namespaces/{ns}/pods/{name}/log`.
//!
//! The simulated kubelet (scripted or exec-mode containers) appends each line with the time it
//! was written; the HTTP log handler reads them back through [`LogStore::stream`] with the
//! kubelet's own semantics (see the kubelet's `kuberuntime/logs` package):
//!
//! - `tailLines` picks the last N lines first, then `sinceTime`/`sinceSeconds` filter those
//!   (a line is kept unless its time is strictly before the bound, so the bound is inclusive);
//!   when both `sinceSeconds` and `sinceTime` are given the later bound wins;
//! - `timestamps` prefixes each line with [`rfc3339_nano_fixed`] and a space;
//! - `limitBytes` counts the bytes sent (prefix included) and cuts the last line short;
//! - `follow` keeps the stream open for new lines and ends it when the container finished
//!   ([`LogStore::finish`]) or its pod was removed ([`LogStore::remove_pod`]).
//!
//! Memory stays lean: a container that never logged costs nothing until someone follows it or it
//! finishes, and a container's lines live in one `String` plus 24 bytes of metadata per line.
//!
//! ```
//! use futures::StreamExt;
//! use podline_sim_core::logs::{LogQuery, LogStore};
//!
//! # tokio_test_block_on(async {
//! let store = LogStore::default();
//! store.append("uid-1", "main", "hello", jiff::Timestamp::now());
//! store.finish("uid-1", "main");
//! let chunks: Vec<_> = store.stream("uid-1", "main", LogQuery::default()).collect().await;
//! assert_eq!(chunks.concat(), b"hello\n");
//! # });
//! # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
//! # }
//! ```

mod buffer;
mod query;
mod stream;
mod timestamp;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use futures::stream::BoxStream;
use jiff::Timestamp;

pub use query::LogQuery;
pub use timestamp::rfc3339_nano_fixed;

use buffer::ContainerLog;

/// Logs of every container the simulated kubelet ran, keyed by pod uid and container name.
///
/// It exists so container output outlives the code that produced it (a scripted timer or an
/// exec-mode child process) and can be read, tailed and followed by any number of clients.
/// Cheap to share by reference (the `Cluster` owns one); all methods take `&self`.
#[derive(Debug, Default)]
pub struct LogStore {
    pods: Mutex<PodLogs>,
}

/// Pod uid -> its containers' logs (few per pod, so a small vector beats a nested map).
type PodLogs = HashMap<String, Vec<(String, Arc<ContainerLog>)>>;

impl LogStore {
    /// Creates an empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one line (without its trailing newline) written at `at`.
    ///
    /// A line containing `\n` is stored as several lines with the same time, as a container
    /// runtime would split it. Appending after [`finish`](Self::finish) is ignored.
    pub fn append(&self, uid: &str, container: &str, line: &str, at: Timestamp) {
        self.append_bytes(uid, container, line.as_bytes(), at);
    }

    /// Appends output as the container wrote it, valid UTF-8 or not: the kubelet and the log
    /// API pass a container's bytes through unchanged (kubelet `pkg/kubelet/kuberuntime/logs`
    /// copies the CRI log's bytes; the API server proxies them as they come).
    pub fn append_bytes(&self, uid: &str, container: &str, line: &[u8], at: Timestamp) {
        let log = self.entry(uid, container);
        log.append(line, at);
    }

    /// Marks the container's output as complete: followers drain what is left and end.
    pub fn finish(&self, uid: &str, container: &str) {
        self.entry(uid, container).finish();
    }

    /// Forgets every container of a removed pod and ends its followers.
    pub fn remove_pod(&self, uid: &str) {
        let removed = self.lock().remove(uid);
        for (_, log) in removed.into_iter().flatten() {
            log.finish();
        }
    }

    /// Whether the container's output is complete (false if it never logged nor finished).
    pub fn is_finished(&self, uid: &str, container: &str) -> bool {
        self.get(uid, container)
            .is_some_and(|log| log.is_finished())
    }

    /// Number of lines stored for the container (0 if none); handy for tests and metrics.
    pub fn line_count(&self, uid: &str, container: &str) -> usize {
        self.get(uid, container).map_or(0, |log| log.len())
    }

    /// Streams the container's log per `query`: the existing lines after the filters, then
    /// (with `follow`) new lines as they come, ending when the container finishes.
    ///
    /// Each item is one or more whole lines (each ending in `\n`), except that `limit_bytes`
    /// may cut the last one. A container unknown to the store yields nothing without `follow`,
    /// and with `follow` waits for its first line (the caller checks the container started).
    pub fn stream(&self, uid: &str, container: &str, query: LogQuery) -> BoxStream<'static, Bytes> {
        let log = if query.follow {
            Some(self.entry(uid, container))
        } else {
            self.get(uid, container)
        };
        match log {
            Some(log) => stream::follow(log, &query, Timestamp::now()),
            None => Box::pin(futures::stream::empty()),
        }
    }

    fn get(&self, uid: &str, container: &str) -> Option<Arc<ContainerLog>> {
        let pods = self.lock();
        let containers = pods.get(uid)?;
        containers
            .iter()
            .find(|(name, _)| name == container)
            .map(|(_, log)| Arc::clone(log))
    }

    fn entry(&self, uid: &str, container: &str) -> Arc<ContainerLog> {
        let mut pods = self.lock();
        let containers = pods.entry(uid.to_owned()).or_default();
        if let Some((_, log)) = containers.iter().find(|(name, _)| name == container) {
            return Arc::clone(log);
        }
        let log = Arc::new(ContainerLog::default());
        containers.push((container.to_owned(), Arc::clone(&log)));
        log
    }

    fn lock(&self) -> MutexGuard<'_, PodLogs> {
        // A panic while holding this lock leaves the map consistent (every operation is a
        // single insert/remove), so a poisoned lock is safe to keep using.
        self.pods
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
