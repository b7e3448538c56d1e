//! One container's lines: an append-only text buffer, per-line times, and a wake-up for followers.

use std::sync::{Mutex, MutexGuard};

use jiff::Timestamp;
use tokio::sync::Notify;

/// Where one line ends in the text buffer and when it was written.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LineMeta {
    pub(crate) at: Timestamp,
    pub(crate) end: usize,
}

/// The lines of one container. Followers wait on `notify` for appends and for `finish`.
#[derive(Debug, Default)]
pub(crate) struct ContainerLog {
    inner: Mutex<Lines>,
    pub(crate) notify: Notify,
}

/// The guarded part of a [`ContainerLog`].
#[derive(Debug, Default)]
pub(crate) struct Lines {
    /// The bytes of every line, as the container wrote them: not necessarily UTF-8 (the
    /// kubelet passes a container's output through unchanged).
    pub(crate) text: Vec<u8>,
    pub(crate) lines: Vec<LineMeta>,
    pub(crate) finished: bool,
}

impl Lines {
    /// The text of line `i` (without newline).
    pub(crate) fn line(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.lines[i - 1].end };
        &self.text[start..self.lines[i].end]
    }
}

impl ContainerLog {
    pub(crate) fn append(&self, line: &[u8], at: Timestamp) {
        {
            let mut inner = self.lock();
            if inner.finished {
                return;
            }
            let line = line.strip_suffix(b"\n").unwrap_or(line);
            for part in line.split(|b| *b == b'\n') {
                inner.text.extend_from_slice(part);
                let end = inner.text.len();
                inner.lines.push(LineMeta { at, end });
            }
        }
        self.notify.notify_waiters();
    }

    pub(crate) fn finish(&self) {
        self.lock().finished = true;
        self.notify.notify_waiters();
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.lock().finished
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().lines.len()
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Lines> {
        // Every mutation is a push or a flag set: a poisoned lock still guards valid data.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
