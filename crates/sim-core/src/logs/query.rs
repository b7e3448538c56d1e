//! [`LogQuery`]: what a log reader asked for, shared by the store and its streams.

use jiff::Timestamp;

/// What a log reader asked for: the query parameters of the `pods/{name}/log` endpoint.
///
/// It exists so the HTTP handler (which parses the query string) and the store (which applies
/// the filters) agree on one typed shape. All fields default to "everything, no follow".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogQuery {
    /// Keep the stream open and send new lines until the container finishes.
    pub follow: bool,
    /// Prefix each line with its RFC3339Nano (fixed width) timestamp and a space.
    pub timestamps: bool,
    /// Only lines written at or after this time (inclusive, like the kubelet).
    pub since_time: Option<Timestamp>,
    /// Only lines written in the last N seconds before the request (inclusive).
    pub since_seconds: Option<i64>,
    /// Only the last N lines existing when the request arrives (applied before `since`).
    pub tail_lines: Option<i64>,
    /// Stop after this many bytes, cutting the last line if needed.
    pub limit_bytes: Option<i64>,
}

impl LogQuery {
    /// The lower time bound, computed at request time like the kubelet's `NewLogOptions`.
    pub(super) fn since(&self, now: Timestamp) -> Option<Timestamp> {
        let from_seconds = self
            .since_seconds
            .and_then(|secs| now.checked_sub(jiff::SignedDuration::from_secs(secs)).ok());
        match (from_seconds, self.since_time) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}
