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
//! The settings come from flags, then `PODLINE_HTTP2_PING_INTERVAL` /
//! `PODLINE_HTTP2_PING_TIMEOUT`, then the defaults, and are parsed like the watch timeouts
//! ([`crate::timeouts`]). Interval + timeout must be shorter than the client timeout; a setting
//! left at its default shrinks to a third of a short client timeout
//! ([`Http2Ping::default_for`]), so only values the user chose can conflict:
//!
//! ```
//! use std::time::Duration;
//! use podline_client::ping::Http2Ping;
//! let env = |name: &str| (name == "PODLINE_HTTP2_PING_TIMEOUT").then(|| "1m".to_string());
//! let err = Http2Ping::resolve_with(None, None, Duration::from_secs(60), env).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "PODLINE_HTTP2_PING_INTERVAL (default) (5s) + PODLINE_HTTP2_PING_TIMEOUT (60s) must be shorter than the client timeout (60s)"
//! );
//! ```

use std::time::Duration;

use crate::timeouts::{Setting, TimeoutError, format_duration, setting_name};

/// Environment variable for the PING interval.
pub const PING_INTERVAL_ENV: &str = "PODLINE_HTTP2_PING_INTERVAL";
/// Environment variable for the PING timeout.
pub const PING_TIMEOUT_ENV: &str = "PODLINE_HTTP2_PING_TIMEOUT";
/// The flag for the PING interval (named in errors when the flag was used).
pub const PING_INTERVAL_FLAG: &str = "--http2-ping-interval";
/// The flag for the PING timeout.
pub const PING_TIMEOUT_FLAG: &str = "--http2-ping-timeout";

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
        for (name, value) in [("PING interval", interval), ("PING timeout", timeout)] {
            if value.is_zero() {
                return Err(TimeoutError::Zero {
                    name: name.to_string(),
                    value: format_duration(value),
                });
            }
        }
        let ping = Self { interval, timeout };
        if ping.detection() >= client_timeout {
            return Err(TimeoutError::PingDetectionNotShorter {
                interval_name: "PING interval".to_string(),
                interval,
                timeout_name: "PING timeout".to_string(),
                timeout,
                client: client_timeout,
            });
        }
        Ok(ping)
    }

    /// Flags over environment over defaults: pass the raw flag values (`None` when the flag was
    /// not given) and the client timeout they must fit in.
    pub fn resolve(
        interval_flag: Option<&str>,
        timeout_flag: Option<&str>,
        client_timeout: Duration,
    ) -> Result<Self, TimeoutError> {
        Self::resolve_with(interval_flag, timeout_flag, client_timeout, |name| {
            std::env::var(name).ok()
        })
    }

    /// [`Http2Ping::resolve`] with an injected environment (for tests).
    pub fn resolve_with(
        interval_flag: Option<&str>,
        timeout_flag: Option<&str>,
        client_timeout: Duration,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, TimeoutError> {
        let interval = Setting::pick(interval_flag, PING_INTERVAL_FLAG, PING_INTERVAL_ENV, &env);
        let timeout = Setting::pick(timeout_flag, PING_TIMEOUT_FLAG, PING_TIMEOUT_ENV, &env);
        let fitted = Self::default_for(client_timeout);
        let ping = Self {
            interval: match &interval {
                Some(s) => s.parse()?,
                None => fitted.interval,
            },
            timeout: match &timeout {
                Some(s) => s.parse()?,
                None => fitted.timeout,
            },
        };
        if ping.detection() >= client_timeout {
            return Err(TimeoutError::PingDetectionNotShorter {
                interval_name: setting_name(&interval, PING_INTERVAL_ENV),
                interval: ping.interval,
                timeout_name: setting_name(&timeout, PING_TIMEOUT_ENV),
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

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn defaults_should_notice_a_dead_connection_within_15_seconds() {
        let ping = Http2Ping::resolve_with(None, None, secs(60), env_of(&[])).unwrap();
        assert_eq!(ping, Http2Ping::default());
        assert!(ping.detection() <= secs(15));
    }

    #[test]
    fn flags_should_override_env_and_errors_should_name_the_source() {
        let env = env_of(&[
            ("PODLINE_HTTP2_PING_INTERVAL", "2s"),
            ("PODLINE_HTTP2_PING_TIMEOUT", "abc"),
        ]);
        let ping = Http2Ping::resolve_with(None, Some("3s"), secs(60), &env).unwrap();
        assert_eq!(ping.interval, secs(2));
        assert_eq!(ping.timeout, secs(3));
        let err = Http2Ping::resolve_with(None, None, secs(60), &env).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"PODLINE_HTTP2_PING_TIMEOUT="abc" is not a duration: expected seconds ("60") or a duration like "90s", "2m""#
        );
        let err = Http2Ping::resolve_with(Some("0"), Some("3s"), secs(60), &env).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"--http2-ping-interval="0" must be greater than zero"#
        );
        let err = Http2Ping::resolve_with(Some("30s"), Some("30s"), secs(60), &env).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--http2-ping-interval (30s) + --http2-ping-timeout (30s) must be shorter than the client timeout (60s)"
        );
    }

    #[test]
    fn defaults_should_fit_a_short_client_timeout_but_chosen_values_must_fit_themselves() {
        // Only the client timeout was shortened (e.g. PODLINE_WATCH_CLIENT_TIMEOUT=1): the
        // untouched PING settings shrink to a third of it each.
        let ping = Http2Ping::resolve_with(None, None, secs(1), env_of(&[])).unwrap();
        assert_eq!(ping.interval, Duration::from_millis(333));
        assert_eq!(ping.timeout, Duration::from_millis(333));
        assert!(ping.detection() < secs(1));
        // At 30 s the interval keeps its default, the timeout shrinks to 10 s (= default).
        assert_eq!(Http2Ping::default_for(secs(30)), Http2Ping::default());
        assert_eq!(Http2Ping::default_for(secs(60)), Http2Ping::default());
        // A value the user chose is never changed: it fits or it is an error naming it.
        let env = env_of(&[("PODLINE_HTTP2_PING_INTERVAL", "5s")]);
        let err = Http2Ping::resolve_with(None, None, secs(6), &env).unwrap_err();
        assert_eq!(
            err.to_string(),
            "PODLINE_HTTP2_PING_INTERVAL (5s) + PODLINE_HTTP2_PING_TIMEOUT (default) (2s) must be shorter than the client timeout (6s)"
        );
    }

    #[test]
    fn huge_values_should_be_a_clear_error_not_a_panic() {
        for (interval, timeout, named) in [
            (Some("18446744073709551615"), None, "--http2-ping-interval"),
            (None, Some("18446744073709551615s"), "--http2-ping-timeout"),
        ] {
            let err = Http2Ping::resolve_with(interval, timeout, secs(60), env_of(&[]))
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(named) && err.contains("at most 365 days"),
                "{err}"
            );
        }
        let env = env_of(&[("PODLINE_HTTP2_PING_INTERVAL", "99999999999999999999")]);
        let err = Http2Ping::resolve_with(None, None, secs(60), &env).unwrap_err();
        assert!(matches!(err, TimeoutError::TooLong { .. }), "{err}");
        assert!(
            err.to_string().contains("PODLINE_HTTP2_PING_INTERVAL"),
            "{err}"
        );
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
            let r = Http2Ping::resolve_with(Some(&iv), Some(&tv), secs(c), env_of(&[]));
            prop_assert_eq!(r.is_ok(), i + t < c);
        }
    }
}
