//! HTTP/2 PING health checks: how soon podline notices that a connection died silently.
//!
//! A quiet watch receives nothing for minutes (the real API server sends no bookmark on a quiet
//! cluster), so silence cannot tell "quiet" from "dead". Over HTTP/2 the client sends a PING
//! frame once a connection has been silent for the **interval**, and drops the connection when
//! no answer comes within the **timeout**: every request and watch on it then fails, and the
//! watch resumes from its last resourceVersion on a new connection, well inside the ~75 s of
//! watch history the API server keeps. client-go does the same (30 s + 15 s); podline's defaults
//! notice a dead connection within 15 s.
//!
//! The settings are parsed from their text like the watch timeouts ([`crate::timeouts`]), and
//! their errors name them by [`Setting`] for the caller to put its own names in. Interval +
//! timeout must be shorter than the client timeout; a setting left at its default shrinks to a
//! third of a short client timeout ([`Http2Ping::default_for`]), so only values the user chose
//! can conflict:
//!
//! ```
//! use std::time::Duration;
//! use podline_client::ping::Http2Ping;
//! let err = Http2Ping::parse(None, Some("1m"), Duration::from_secs(60)).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "PING interval (5s) + PING timeout (60s) must be shorter than the client timeout (60s)"
//! );
//! ```

use std::time::Duration;

use crate::timeouts::{Setting, TimeoutError, format_duration, parse_setting};

/// Default interval: after 5 s without a frame from the server, send a PING. One small frame
/// per 5 s on a process's one shared connection costs nothing.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(5);
/// Default timeout: 10 s for the answer, generous for a busy server or a loaded machine (an
/// answer queues behind the data the server is already sending). With the interval, a dead
/// connection is noticed within 15 s.
pub const DEFAULT_PING_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP/2 PING settings, validated: both non-zero, and interval + timeout shorter than the
/// client timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Http2Ping {
    /// A connection silent this long gets a PING.
    pub interval: Duration,
    /// A PING unanswered this long closes the connection (failing every request on it).
    pub timeout: Duration,
}

impl Default for Http2Ping {
    fn default() -> Self {
        Self {
            interval: DEFAULT_PING_INTERVAL,
            timeout: DEFAULT_PING_TIMEOUT,
        }
    }
}

impl Http2Ping {
    /// The longest a silently dead connection goes unnoticed: interval + timeout (saturating:
    /// settings built in code are not bounded like parsed ones, and this must not panic).
    pub fn detection(&self) -> Duration {
        self.interval.saturating_add(self.timeout)
    }

    /// The defaults, fitted to the client timeout: each is at most a third of it, so a user who
    /// shortens only the client timeout (say to 1 s) keeps a PING bound inside it instead of an
    /// error about settings they never touched. At the default client timeout (60 s) these are
    /// the plain defaults (5 s + 10 s).
    pub fn default_for(client_timeout: Duration) -> Self {
        // Whole milliseconds, so messages and logs show round values.
        let third = Duration::from_millis(
            u64::try_from(client_timeout.as_millis() / 3).unwrap_or(u64::MAX),
        );
        Self {
            interval: DEFAULT_PING_INTERVAL
                .min(third)
                .max(Duration::from_millis(1)),
            timeout: DEFAULT_PING_TIMEOUT
                .min(third)
                .max(Duration::from_millis(1)),
        }
    }

    /// Validates two durations against the client timeout (e.g. built in code or tests).
    pub fn try_new(
        interval: Duration,
        timeout: Duration,
        client_timeout: Duration,
    ) -> Result<Self, TimeoutError> {
        for (setting, value) in [
            (Setting::PingInterval, interval),
            (Setting::PingTimeout, timeout),
        ] {
            if value.is_zero() {
                return Err(TimeoutError::Zero {
                    setting,
                    value: format_duration(value),
                });
            }
        }
        let ping = Self { interval, timeout };
        if ping.detection() >= client_timeout {
            return Err(TimeoutError::PingDetectionNotShorter {
                interval,
                timeout,
                client: client_timeout,
            });
        }
        Ok(ping)
    }

    /// Parses the two settings from their text (`None`: not given, the default fitted to the
    /// client timeout applies) and checks them against the client timeout they must fit in.
    /// Where the text came from is the caller's business: it names the settings in the error
    /// ([`TimeoutError::display_with`]).
    pub fn parse(
        interval: Option<&str>,
        timeout: Option<&str>,
        client_timeout: Duration,
    ) -> Result<Self, TimeoutError> {
        let fitted = Self::default_for(client_timeout);
        let ping = Self {
            interval: match interval {
                Some(raw) => parse_setting(Setting::PingInterval, raw)?,
                None => fitted.interval,
            },
            timeout: match timeout {
                Some(raw) => parse_setting(Setting::PingTimeout, raw)?,
                None => fitted.timeout,
            },
        };
        if ping.detection() >= client_timeout {
            return Err(TimeoutError::PingDetectionNotShorter {
                interval: ping.interval,
                timeout: ping.timeout,
                client: client_timeout,
            });
        }
        Ok(ping)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn defaults_should_notice_a_dead_connection_within_15_seconds() {
        let ping = Http2Ping::parse(None, None, secs(60)).unwrap();
        assert_eq!(ping, Http2Ping::default());
        assert!(ping.detection() <= secs(15));
    }

    #[test]
    fn given_values_should_win_and_errors_should_name_the_setting() {
        let ping = Http2Ping::parse(Some("2s"), Some("3s"), secs(60)).unwrap();
        assert_eq!((ping.interval, ping.timeout), (secs(2), secs(3)));
        let err = Http2Ping::parse(None, Some("abc"), secs(60)).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"PING timeout="abc" is not a duration: expected seconds ("60") or a duration like "90s", "2m""#
        );
        let err = Http2Ping::parse(Some("0"), Some("3s"), secs(60)).unwrap_err();
        assert_eq!(
            err,
            TimeoutError::Zero {
                setting: Setting::PingInterval,
                value: "0".into()
            }
        );
        let err = Http2Ping::parse(Some("30s"), Some("30s"), secs(60)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "PING interval (30s) + PING timeout (30s) must be shorter than the client timeout (60s)"
        );
    }

    #[test]
    fn defaults_should_fit_a_short_client_timeout_but_chosen_values_must_fit_themselves() {
        // Only the client timeout was shortened (to 1 s): the untouched PING settings shrink to
        // a third of it each.
        let ping = Http2Ping::parse(None, None, secs(1)).unwrap();
        assert_eq!(ping.interval, Duration::from_millis(333));
        assert_eq!(ping.timeout, Duration::from_millis(333));
        assert!(ping.detection() < secs(1));
        // At 30 s the interval keeps its default, the timeout shrinks to 10 s (= default).
        assert_eq!(Http2Ping::default_for(secs(30)), Http2Ping::default());
        assert_eq!(Http2Ping::default_for(secs(60)), Http2Ping::default());
        // A value the user chose is never changed: it fits or it is an error naming it.
        let err = Http2Ping::parse(Some("5s"), None, secs(6)).unwrap_err();
        assert_eq!(
            err,
            TimeoutError::PingDetectionNotShorter {
                interval: secs(5),
                timeout: secs(2),
                client: secs(6)
            }
        );
    }

    #[test]
    fn huge_values_should_be_a_clear_error_not_a_panic() {
        for (interval, timeout, named) in [
            (Some("18446744073709551615"), None, Setting::PingInterval),
            (None, Some("18446744073709551615s"), Setting::PingTimeout),
            (Some("99999999999999999999"), None, Setting::PingInterval),
        ] {
            let err = Http2Ping::parse(interval, timeout, secs(60)).unwrap_err();
            assert!(
                matches!(err, TimeoutError::TooLong { setting, .. } if setting == named),
                "{err}"
            );
            let shown = err.to_string();
            assert!(
                shown.starts_with(named.describe()) && shown.contains("at most 365 days"),
                "{shown}"
            );
        }
        // Built in code, unbounded: detection saturates instead of overflowing.
        let ping = Http2Ping {
            interval: Duration::MAX,
            timeout: secs(1),
        };
        assert_eq!(ping.detection(), Duration::MAX);
        assert!(Http2Ping::try_new(Duration::MAX, Duration::MAX, secs(60)).is_err());
    }

    #[test]
    fn try_new_should_validate() {
        assert!(Http2Ping::try_new(secs(1), secs(2), secs(4)).is_ok());
        assert!(Http2Ping::try_new(secs(2), secs(2), secs(4)).is_err());
        assert!(Http2Ping::try_new(secs(0), secs(2), secs(4)).is_err());
        assert!(Http2Ping::try_new(secs(1), Duration::ZERO, secs(4)).is_err());
    }

    proptest! {
        #[test]
        fn detection_must_fit_in_the_client_timeout(i in 1u64..100, t in 1u64..100, c in 1u64..200) {
            let (iv, tv) = (i.to_string(), t.to_string());
            let r = Http2Ping::parse(Some(&iv), Some(&tv), secs(c));
            prop_assert_eq!(r.is_ok(), i + t < c);
        }
    }
}
