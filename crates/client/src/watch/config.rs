//! How to watch ([`WatchConfig`]): selectors, timeouts, page size, resume point and backoff.

use std::time::Duration;

use crate::backoff::FullJitter;
use crate::timeouts::WatchTimeouts;

/// How to watch. Defaults: no selectors, [`WatchTimeouts::default`] (1800 s / 60 s), pages of 500
/// (client-go's pager), backoff 200 ms doubling to 30 s with full jitter, reset after 120 s
/// without a failure (client-go's reflector uses 800 ms..30 s and 2 min), watch lines of at most
/// [`MAX_LINE_BYTES`].
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
    /// A watch line (one event) longer than this is dropped unread and yielded as an
    /// [`Event::Skipped`](super::Event::Skipped), so one huge line cannot hold the memory of a
    /// whole body.
    pub max_line_bytes: usize,
}

/// The default bound of one watch line: 16 MiB. etcd refuses requests over 1.5 MiB by default
/// (`--max-request-bytes`), so a stored object's JSON is far below this; the bound is there for a
/// body that never sends a newline, not for real objects.
pub const MAX_LINE_BYTES: usize = 16 << 20;

impl Default for WatchConfig {
    fn default() -> Self {
        let backoff =
            const { FullJitter::doubling(Duration::from_millis(200), Duration::from_secs(30)) };
        Self {
            label_selector: None,
            field_selector: None,
            timeouts: WatchTimeouts::default(),
            page_size: 500,
            resume_from: None,
            backoff,
            healthy_after: Duration::from_secs(120),
            max_line_bytes: MAX_LINE_BYTES,
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

    /// Bound of one watch line (at least 1 byte).
    #[must_use]
    pub fn max_line_bytes(mut self, n: usize) -> Self {
        self.max_line_bytes = n.max(1);
        self
    }

    /// Backoff between failed attempts.
    #[must_use]
    pub fn backoff(mut self, backoff: FullJitter) -> Self {
        self.backoff = backoff;
        self
    }
}
