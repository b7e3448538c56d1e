//! Timing of the election: how long a lease lasts, when a leader gives up, how often everyone polls.

use std::time::Duration;

use crate::error::ConfigError;

/// The three durations that make leader election safe, validated together.
///
/// The safety argument (the same as client-go's `leaderelection` package):
/// - a follower only takes the lease over when it has seen the lease record unchanged for
///   `lease_duration`, measured on its own clock from the moment it first saw that record;
/// - a leader counts its `renew_deadline` from the moment it *sent* its last successful renewal,
///   which is before any follower could have seen that renewal;
/// - so because `renew_deadline < lease_duration`, a leader that cannot renew steps down before any
///   follower may take over, and two leaders never overlap (clock *rates* aside; clocks need not
///   agree on the time of day).
///
/// Defaults are client-go's (15 s / 10 s / 2 s), which Kubernetes' own controllers use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectionConfig {
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
    release_on_cancel: bool,
}

/// Followers wait `retry_period` times a random factor in `[1, 1 + JITTER]` between polls, so
/// replicas started together don't poll in lockstep (client-go uses the same factor).
pub(crate) const JITTER: f64 = 0.2;

impl ElectionConfig {
    /// Validates and builds a configuration.
    ///
    /// `lease_duration` must be a whole number of seconds (the Lease stores
    /// `leaseDurationSeconds`), `renew_deadline` shorter than it, and `retry_period` short enough
    /// that a leader gets at least one jittered retry before its deadline.
    pub fn try_new(
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Result<Self, ConfigError> {
        if lease_duration < Duration::from_secs(1)
            || lease_duration.subsec_nanos() != 0
            || lease_duration.as_secs() > i32::MAX as u64
        {
            return Err(ConfigError::LeaseDuration { lease_duration });
        }
        if renew_deadline.is_zero() || renew_deadline >= lease_duration {
            return Err(ConfigError::RenewDeadline {
                renew_deadline,
                lease_duration,
            });
        }
        if retry_period.is_zero() || retry_period.mul_f64(1.0 + JITTER) >= renew_deadline {
            return Err(ConfigError::RetryPeriod {
                retry_period,
                renew_deadline,
            });
        }
        Ok(Self {
            lease_duration,
            renew_deadline,
            retry_period,
            release_on_cancel: true,
        })
    }

    /// Whether a leader that is stopped gracefully clears the lease so another replica takes over
    /// at once instead of after `lease_duration` (default: true).
    #[must_use]
    pub fn release_on_cancel(mut self, release: bool) -> Self {
        self.release_on_cancel = release;
        self
    }

    /// How long a lease lasts without renewal; a killed leader is replaced after about this long.
    pub fn lease_duration(&self) -> Duration {
        self.lease_duration
    }

    /// How long a leader keeps trying to renew before it steps down.
    pub fn renew_deadline(&self) -> Duration {
        self.renew_deadline
    }

    /// How often a leader renews and a follower polls.
    pub fn retry_period(&self) -> Duration {
        self.retry_period
    }

    /// Whether a graceful stop clears the lease (see [`ElectionConfig::release_on_cancel`]).
    pub fn releases_on_cancel(&self) -> bool {
        self.release_on_cancel
    }

    /// `leaseDurationSeconds` as written into the Lease.
    pub(crate) fn lease_duration_seconds(&self) -> i32 {
        // Invariant: try_new checked lease_duration.as_secs() <= i32::MAX.
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

impl Default for ElectionConfig {
    /// client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry period.
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn default_config_is_valid() {
        let d = ElectionConfig::default();
        let checked =
            ElectionConfig::try_new(d.lease_duration(), d.renew_deadline(), d.retry_period());
        assert_eq!(checked, Ok(d));
    }

    #[test]
    fn short_test_timings_are_valid() {
        let cfg = ElectionConfig::try_new(secs(2.0), secs(1.2), secs(0.2)).unwrap();
        assert_eq!(cfg.lease_duration_seconds(), 2);
        assert!(cfg.releases_on_cancel());
        assert!(!cfg.release_on_cancel(false).releases_on_cancel());
    }

    #[test]
    fn lease_duration_must_be_whole_positive_seconds() {
        for bad in [secs(0.0), secs(0.5), secs(1.5)] {
            let err = ElectionConfig::try_new(bad, secs(0.1), secs(0.01)).unwrap_err();
            assert!(matches!(err, ConfigError::LeaseDuration { .. }), "{bad:?}");
            assert!(err.to_string().contains("whole number of seconds"));
        }
    }

    #[test]
    fn renew_deadline_must_be_shorter_than_the_lease() {
        for bad in [secs(0.0), secs(2.0), secs(3.0)] {
            let err = ElectionConfig::try_new(secs(2.0), bad, secs(0.1)).unwrap_err();
            assert!(matches!(err, ConfigError::RenewDeadline { .. }), "{bad:?}");
        }
    }

    #[test]
    fn retry_period_must_leave_room_before_the_renew_deadline() {
        // 1.0 * 1.2 >= 1.0: no jittered retry fits before the deadline.
        for bad in [secs(0.0), secs(1.0), secs(0.9)] {
            let err = ElectionConfig::try_new(secs(2.0), secs(1.0), bad).unwrap_err();
            assert!(matches!(err, ConfigError::RetryPeriod { .. }), "{bad:?}");
        }
    }
}
