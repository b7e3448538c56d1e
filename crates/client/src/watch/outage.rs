//! When a consumer of [`watch`](super::watch) should warn about its error items.
//!
//! The watch recovers from every non-fatal error by itself, so its consumers log those at debug:
//! a quiet HTTP/1.1 watch reconnecting every client timeout, or a reset, is routine. But an API
//! server that stays unreachable is not: an operator must see it (a recorder that says nothing
//! for 25 s while not ready looks hung). [`OutageLog`] tells the two apart: a failure right at
//! start (nothing ever arrived) or a second failure in a row (the retry failed too) is an outage,
//! reported at once and then at most once per interval with the number of failed attempts.

use tokio::time::{Duration, Instant};

/// Counts consecutive failed watch attempts and says which of them to warn about.
///
/// Feed it every item: [`OutageLog::failed`] for a non-fatal error, [`OutageLog::succeeded`] for
/// an event. It uses tokio's clock, so paused-time tests can drive it.
#[derive(Debug, Clone)]
pub struct OutageLog {
    every: Duration,
    /// Whether any event ever arrived.
    connected: bool,
    /// Failures since the last event.
    failures: u32,
    /// When the last warning of this outage was due, if one was.
    warned_at: Option<Instant>,
}

/// What to say about a failure [`OutageLog::failed`] decided to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutageReport {
    /// Failed attempts since the last event (this one included).
    pub failures: u32,
    /// Whether nothing ever arrived (the server has been unreachable since start).
    pub since_start: bool,
}

impl OutageLog {
    /// A log warning at most once per `every` during one outage (the first failure of an
    /// outage is always reported).
    pub fn new(every: Duration) -> Self {
        Self {
            every,
            connected: false,
            failures: 0,
            warned_at: None,
        }
    }

    /// A non-fatal error item: `Some` when it should be logged as a warning.
    pub fn failed(&mut self) -> Option<OutageReport> {
        self.failures = self.failures.saturating_add(1);
        if self.connected && self.failures < 2 {
            return None; // one interruption of a working watch: routine
        }
        let now = Instant::now();
        if self
            .warned_at
            .is_some_and(|at| now.duration_since(at) < self.every)
        {
            return None;
        }
        self.warned_at = Some(now);
        Some(OutageReport {
            failures: self.failures,
            since_start: !self.connected,
        })
    }

    /// An event arrived: the outage (if any) is over. Returns the number of failed attempts when
    /// it had been reported, so the consumer can say it recovered.
    pub fn succeeded(&mut self) -> Option<u32> {
        self.connected = true;
        let failures = std::mem::take(&mut self.failures);
        self.warned_at.take().map(|_| failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_failing_start_should_be_reported_at_once_then_once_per_interval() {
        let mut log = OutageLog::new(Duration::from_secs(10));
        assert_eq!(
            log.failed(),
            Some(OutageReport {
                failures: 1,
                since_start: true
            })
        );
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(log.failed(), None, "within the interval");
        tokio::time::advance(Duration::from_secs(7)).await;
        assert_eq!(
            log.failed(),
            Some(OutageReport {
                failures: 3,
                since_start: true
            })
        );
        assert_eq!(log.succeeded(), Some(3));
        assert_eq!(log.succeeded(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn one_interruption_of_a_working_watch_should_stay_quiet() {
        let mut log = OutageLog::new(Duration::from_secs(10));
        assert_eq!(log.succeeded(), None);
        assert_eq!(log.failed(), None, "a routine reconnect");
        assert_eq!(log.succeeded(), None, "nothing was reported");
        assert_eq!(log.failed(), None);
        assert_eq!(
            log.failed(),
            Some(OutageReport {
                failures: 2,
                since_start: false
            }),
            "the retry failed too: an outage"
        );
    }
}
