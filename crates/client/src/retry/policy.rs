//! How a unary call is retried ([`RetryPolicy`]): attempts, an overall deadline, and the
//! delay before each retry (the backoff's, at least the server's capped Retry-After).

use std::time::Duration;

use tokio::time::Instant;

use super::disposition::Disposition;
use crate::backoff::FullJitter;

/// How a unary call is retried: full-jitter backoff, at most `max_attempts` calls in total, an
/// overall deadline that includes response time, and a cap on the server's Retry-After.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    backoff: FullJitter,
    max_attempts: u32,
    deadline: Option<Duration>,
    max_retry_after: Duration,
}

impl RetryPolicy {
    /// Builds a policy from a backoff; defaults: 8 attempts, a 2-minute deadline, Retry-After
    /// capped at 30 s (a misbehaving proxy must not park us for an hour).
    pub fn new(backoff: FullJitter) -> Self {
        Self {
            backoff,
            max_attempts: 8,
            deadline: Some(Duration::from_secs(120)),
            max_retry_after: Duration::from_secs(30),
        }
    }

    /// Total calls allowed, the first included (1 = never retry). Values below 1 mean 1.
    #[must_use]
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Overall time budget from the first call, responses included; `None` = attempts only.
    #[must_use]
    pub fn with_deadline(mut self, deadline: Option<Duration>) -> Self {
        self.deadline = deadline;
        self
    }

    /// The longest Retry-After we honour.
    #[must_use]
    pub fn with_max_retry_after(mut self, cap: Duration) -> Self {
        self.max_retry_after = cap;
        self
    }

    /// Total calls allowed.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The overall deadline, if any.
    pub fn deadline(&self) -> Option<Duration> {
        self.deadline
    }

    /// The backoff the delays are drawn from.
    pub fn backoff(&self) -> &FullJitter {
        &self.backoff
    }

    /// The delay before the next call, given the backoff's proposal and what the error said: at
    /// least the server's Retry-After (capped), never past the deadline.
    pub(super) fn adjust(
        &self,
        disposition: Disposition,
        proposed: Option<Duration>,
        started: Instant,
    ) -> Option<Duration> {
        let mut delay = proposed?;
        if let Disposition::Retry {
            retry_after: Some(after),
            ..
        } = disposition
        {
            delay = delay.max(after.min(self.max_retry_after));
        }
        if let Some(deadline) = self.deadline {
            let remaining = deadline.saturating_sub(started.elapsed());
            if remaining.is_zero() {
                return None;
            }
            delay = delay.min(remaining);
        }
        Some(delay)
    }
}

impl Default for RetryPolicy {
    /// 100 ms doubling to 15 s: fits a burst of 50 creates answered 409 (see the brief).
    fn default() -> Self {
        let backoff =
            const { FullJitter::doubling(Duration::from_millis(100), Duration::from_secs(15)) };
        Self::new(backoff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::classify;
    use crate::retry::test_support::{api, api_retry_after, fast_policy};

    use proptest::prelude::*;

    proptest! {
        /// The delay the policy picks: at least the capped Retry-After, never past the deadline,
        /// and none once the deadline has passed.
        #[test]
        fn adjusted_delays_should_respect_retry_after_cap_and_deadline(
            proposed_ms in 0u64..20_000,
            retry_after_s in proptest::option::of(0u32..10_000),
            cap_s in 1u64..60,
            deadline_s in 1u64..300,
            elapsed_s in 0u64..400,
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
            rt.block_on(async {
                let policy = fast_policy()
                    .with_max_retry_after(Duration::from_secs(cap_s))
                    .with_deadline(Some(Duration::from_secs(deadline_s)));
                let started = Instant::now();
                tokio::time::advance(Duration::from_secs(elapsed_s)).await;
                let err = match retry_after_s {
                    Some(s) => api_retry_after(429, s),
                    None => api(429, "TooManyRequests"),
                };
                let proposed = Duration::from_millis(proposed_ms);
                let remaining = Duration::from_secs(deadline_s).saturating_sub(Duration::from_secs(elapsed_s));
                match policy.adjust(classify(&err), Some(proposed), started) {
                    None => prop_assert!(remaining.is_zero()),
                    Some(d) => {
                        prop_assert!(d <= remaining);
                        let floor = retry_after_s
                            .map(|s| Duration::from_secs(u64::from(s)).min(Duration::from_secs(cap_s)))
                            .unwrap_or_default()
                            .max(proposed);
                        prop_assert_eq!(d, floor.min(remaining));
                    }
                }
                prop_assert_eq!(policy.adjust(classify(&err), None, started), None);
                Ok(())
            })?;
        }
    }
}
