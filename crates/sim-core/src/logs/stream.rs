//! Reading a container log as a stream of byte chunks: filters, then optional follow.

use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use jiff::Timestamp;

use super::buffer::{ContainerLog, Lines};
use super::query::LogQuery;
use super::timestamp::write_rfc3339_nano_fixed;

/// Upper bound on one chunk, so a huge log is sent in pieces rather than one allocation.
const MAX_CHUNK: usize = 64 * 1024;

/// A reader's position and remaining budget in one container log.
struct Reader {
    log: Arc<ContainerLog>,
    /// Index of the next line to consider.
    next: usize,
    /// Without follow: the number of lines that existed at request time (read no further).
    end: Option<usize>,
    since: Option<Timestamp>,
    timestamps: bool,
    /// Bytes still allowed by `limitBytes`.
    remaining: Option<u64>,
    done: bool,
}

/// Builds the stream for `query` over `log`, with `now` as the request time.
pub(crate) fn follow(
    log: Arc<ContainerLog>,
    query: &LogQuery,
    now: Timestamp,
) -> BoxStream<'static, Bytes> {
    let len = log.len();
    let start = match query.tail_lines {
        Some(tail) => len.saturating_sub(usize::try_from(tail.max(0)).unwrap_or(usize::MAX)),
        None => 0,
    };
    let reader = Reader {
        log,
        next: start,
        end: (!query.follow).then_some(len),
        since: query.since(now),
        timestamps: query.timestamps,
        remaining: query
            .limit_bytes
            .map(|n| u64::try_from(n.max(0)).unwrap_or(0)),
        done: query.limit_bytes.is_some_and(|n| n <= 0),
    };
    Box::pin(futures::stream::unfold(reader, |mut reader| async move {
        loop {
            if reader.done {
                return None;
            }
            let log = Arc::clone(&reader.log);
            // Register for a wake-up before looking, so an append between the look and the
            // wait is not missed.
            let notified = log.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (chunk, finished) = {
                let lines = log.lock();
                (reader.render(&lines), lines.finished)
            };
            if !chunk.is_empty() {
                return Some((Bytes::from(chunk), reader));
            }
            let at_end = reader.end.is_some_and(|end| reader.next >= end);
            if finished || at_end || reader.done {
                return None;
            }
            notified.await;
        }
    }))
}

impl Reader {
    /// Renders the lines from `next` on (up to [`MAX_CHUNK`]), advancing the position.
    fn render(&mut self, lines: &Lines) -> Vec<u8> {
        let mut out = Vec::new();
        let stop = self.end.unwrap_or(usize::MAX).min(lines.lines.len());
        while self.next < stop && out.len() < MAX_CHUNK && !self.done {
            let i = self.next;
            self.next += 1;
            let meta = lines.lines[i];
            if self.since.is_some_and(|since| meta.at < since) {
                continue;
            }
            let before = out.len();
            if self.timestamps {
                let mut stamp = String::new();
                write_rfc3339_nano_fixed(&mut stamp, meta.at);
                out.extend_from_slice(stamp.as_bytes());
                out.push(b' ');
            }
            out.extend_from_slice(lines.line(i));
            out.push(b'\n');
            if let Some(remaining) = self.remaining.as_mut() {
                let written = (out.len() - before) as u64;
                if written >= *remaining {
                    // The kubelet's `LimitWriter` cuts at the byte, mid-character or not.
                    let keep = before + usize::try_from(*remaining).unwrap_or(usize::MAX);
                    out.truncate(keep);
                    *remaining = 0;
                    self.done = true;
                } else {
                    *remaining -= written;
                }
            }
        }
        if self.end.is_some_and(|end| self.next >= end) && out.is_empty() {
            self.done = true;
        }
        out
    }
}
