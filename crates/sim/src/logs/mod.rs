//! The per-container log store (owned by sim-kubelet; this is sim-core's placeholder so the
//! crate builds): append-only lines with timestamps, streamed by the log endpoint.

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use jiff::Timestamp;

/// What a log request asks for (the query parameters of `pods/{name}/log`).
#[derive(Debug, Clone, Default)]
pub struct LogQuery {
    /// Keep streaming new lines until the container finishes.
    pub follow: bool,
    /// Prefix each line with its RFC3339Nano timestamp and a space.
    pub timestamps: bool,
    /// Only lines at or after this time.
    pub since_time: Option<Timestamp>,
    /// Only lines from the last N seconds.
    pub since_seconds: Option<i64>,
    /// Only the last N lines.
    pub tail_lines: Option<i64>,
    /// Stop after this many bytes.
    pub limit_bytes: Option<i64>,
}

/// Lines of each (pod uid, container).
type Lines = HashMap<(String, String), Vec<(Timestamp, String)>>;

/// Per (pod uid, container) log lines.
#[derive(Debug, Default)]
pub struct LogStore {
    lines: Mutex<Lines>,
}

impl LogStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one line (without its newline) written at `at`.
    pub fn append(&self, uid: &str, container: &str, line: &str, at: Timestamp) {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        lines
            .entry((uid.to_owned(), container.to_owned()))
            .or_default()
            .push((at, line.to_owned()));
    }

    /// Marks the container's log as complete (ends followers).
    pub fn finish(&self, uid: &str, container: &str) {
        let _ = (uid, container);
    }

    /// The container's log as a stream of chunks (placeholder: no follow, no filters).
    pub fn stream(&self, uid: &str, container: &str, query: LogQuery) -> BoxStream<'static, Bytes> {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        let chunks: Vec<Bytes> = lines
            .get(&(uid.to_owned(), container.to_owned()))
            .into_iter()
            .flatten()
            .map(|(at, line)| {
                if query.timestamps {
                    Bytes::from(format!("{at} {line}\n"))
                } else {
                    Bytes::from(format!("{line}\n"))
                }
            })
            .collect();
        stream::iter(chunks).boxed()
    }
}
