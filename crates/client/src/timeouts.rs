//! The two watch timeouts, parsed strictly from flags and environment variables.
//!
//! - The **server** timeout is sent as `timeoutSeconds`: the API server ends the watch cleanly
//!   after it, and we resume from the last resourceVersion (default 1800 s, the apiserver's own
//!   `--min-request-timeout`).
//! - The **client** timeout bounds every wait on our side: connecting, each LIST page, the watch
//!   request until its headers, and, over HTTP/1.1, each gap between stream items (default 60 s).
//!   It must be shorter than the server timeout, or a quiet but healthy watch would be cut by our
//!   own timer. Over HTTP/2, HTTP/2 PING ([`crate::ping`]) notices a dead connection much sooner,
//!   and a quiet stream is left alone.
//!
//! Kubeflow's writer once read its timeout from the environment as a string and silently disabled
//! it; here a bad value stops startup with a message that names the variable (or flag), the value
//! and what was expected:
//!
//! ```
//! use podline_client::timeouts::WatchTimeouts;
//! let env = |name: &str| (name == "PODLINE_WATCH_CLIENT_TIMEOUT").then(|| "abc".to_string());
//! let err = WatchTimeouts::resolve_with(None, None, env).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     r#"PODLINE_WATCH_CLIENT_TIMEOUT="abc" is not a duration: expected seconds ("60") or a duration like "90s", "2m""#
//! );
//! ```
//!
//! Accepted forms: `"90"` (seconds), `"90s"`, `"2m"`, `"1m30s"`, `"500ms"`, `"1h"`: whole numbers
//! with units `h`, `m`, `s`, `ms` in that order, each at most once. Surrounding whitespace is
//! ignored; anything else (empty, negative, decimals, unknown units, zero) is rejected, and so is
//! anything longer than [`MAX_DURATION`] (365 days): no timeout needs more, and a bound here keeps
//! `deadline = now + d` from overflowing (a panic) anywhere the value is used.
//! [`parse_duration_at_most`] takes a smaller or larger bound for a setting that has its own
//! range (e.g. `activeDeadlineSeconds`, at most 2147483647 s).

use std::fmt;
use std::time::Duration;

/// Environment variable for the server-side watch timeout.
pub const SERVER_TIMEOUT_ENV: &str = "PODLINE_WATCH_SERVER_TIMEOUT";
/// Environment variable for the client-side timeout.
pub const CLIENT_TIMEOUT_ENV: &str = "PODLINE_WATCH_CLIENT_TIMEOUT";
/// The conventional flag for the server-side watch timeout (named in errors when a flag was used).
pub const SERVER_TIMEOUT_FLAG: &str = "--watch-server-timeout";
/// The conventional flag for the client-side timeout.
pub const CLIENT_TIMEOUT_FLAG: &str = "--watch-client-timeout";

/// Default server timeout: the apiserver's `--min-request-timeout` (1800 s).
pub const DEFAULT_SERVER_TIMEOUT: Duration = Duration::from_secs(1800);
/// Default client timeout: notices a dead connection within a minute, well inside the ~75 s of
/// watch history the apiserver keeps, so a resume after a stall rarely needs a re-list.
pub const DEFAULT_CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// The server-side and client-side timeouts of a watch, validated: both non-zero, the server one
/// in whole seconds, and client < server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchTimeouts {
    /// Sent as `timeoutSeconds`: the server ends each watch cleanly after this long.
    pub server: Duration,
    /// Bounds every wait on the client side (connect, LIST page, watch headers, stream gaps).
    pub client: Duration,
}

impl Default for WatchTimeouts {
    fn default() -> Self {
        Self {
            server: DEFAULT_SERVER_TIMEOUT,
            client: DEFAULT_CLIENT_TIMEOUT,
        }
    }
}

/// Why a timeout setting was rejected. `Display` names the setting (variable or flag), the value
/// and what is expected, so the CLI can print it as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimeoutError {
    /// The value does not follow the duration grammar.
    #[error(
        "{name}=\"{value}\" is not a duration: expected seconds (\"60\") or a duration like \"90s\", \"2m\""
    )]
    NotADuration {
        /// The variable or flag.
        name: String,
        /// The raw value.
        value: String,
    },
    /// Longer than [`MAX_DURATION`]: no setting needs that much, and deadlines computed from it
    /// would overflow.
    #[error("{name}=\"{value}\" is out of range: expected a duration of at most {}", describe_max(*max))]
    TooLong {
        /// The variable or flag.
        name: String,
        /// The raw value.
        value: String,
        /// The largest value accepted.
        max: Duration,
    },
    /// Zero would disable the bound (or end every watch at once).
    #[error("{name}=\"{value}\" must be greater than zero")]
    Zero {
        /// The variable or flag.
        name: String,
        /// The raw value.
        value: String,
    },
    /// `timeoutSeconds` is an integer on the wire.
    #[error("{name}=\"{value}\" must be a whole number of seconds (it is sent as timeoutSeconds)")]
    NotWholeSeconds {
        /// The variable or flag.
        name: String,
        /// The raw value.
        value: String,
    },
    /// A client timeout >= the server's would cut healthy quiet watches.
    #[error(
        "{client_name} ({client}) must be shorter than {server_name} ({server})",
        client = Human(*client),
        server = Human(*server)
    )]
    ClientNotShorter {
        /// Where the client timeout came from.
        client_name: String,
        /// Its value.
        client: Duration,
        /// Where the server timeout came from.
        server_name: String,
        /// Its value.
        server: Duration,
    },
    /// HTTP/2 PING detection (interval + timeout) must fit inside the client timeout, or the
    /// client timeout would give up on a request before PING could tell that its connection died.
    #[error(
        "{interval_name} ({interval}) + {timeout_name} ({timeout}) must be shorter than the client timeout ({client})",
        interval = Human(*interval),
        timeout = Human(*timeout),
        client = Human(*client)
    )]
    PingDetectionNotShorter {
        /// Where the PING interval came from.
        interval_name: String,
        /// Its value.
        interval: Duration,
        /// Where the PING timeout came from.
        timeout_name: String,
        /// Its value.
        timeout: Duration,
        /// The client timeout.
        client: Duration,
    },
    /// A connect timeout must end an attempt before the client timeout ends the request.
    #[error(
        "{name} ({value}) must be shorter than the client timeout ({client})",
        value = Human(*value),
        client = Human(*client)
    )]
    ConnectNotShorter {
        /// Where the connect timeout came from.
        name: String,
        /// Its value.
        value: Duration,
        /// The client timeout.
        client: Duration,
    },
}

/// Checks a connect timeout the user chose (see [`crate::connect::ConnectOptions::connect_timeout`]):
/// `name` is where it came from (the binary's flag or variable, for the message), `raw` its
/// text, parsed like every duration here. It must be greater than zero and shorter than the
/// client timeout, so an attempt is abandoned (and another made) before the caller's own timer
/// gives up on the request. It may be longer than the PING timeout (a slow link's TLS handshake
/// may need it); only the default follows the PING timeout.
pub fn connect_timeout(
    name: &str,
    raw: &str,
    client_timeout: Duration,
) -> Result<Duration, TimeoutError> {
    let setting = Setting {
        name: name.to_string(),
        raw: raw.to_string(),
    };
    let value = setting.parse()?;
    if value >= client_timeout {
        return Err(TimeoutError::ConnectNotShorter {
            name: setting.name,
            value,
            client: client_timeout,
        });
    }
    Ok(value)
}

/// Where a setting's value came from, for messages: the flag or variable, or "(default)".
pub(crate) fn setting_name(setting: &Option<Setting>, default_env: &str) -> String {
    setting
        .as_ref()
        .map_or_else(|| format!("{default_env} (default)"), |s| s.name.clone())
}

/// The longest duration [`parse_duration`] accepts: 365 days. Every timeout, interval and grace
/// period podline reads is far below it, and any `Instant + d` with `d` up to it is safe.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Why a string is not an acceptable duration (without naming a setting; see [`TimeoutError`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidDuration {
    /// The text does not follow the duration grammar.
    #[error("not a duration: expected seconds (\"60\") or a duration like \"90s\", \"2m\"")]
    Malformed,
    /// A well-formed duration longer than the setting's maximum (or too long to represent).
    #[error("out of range: expected a duration of at most {}", describe_max(*max))]
    TooLong {
        /// The largest value accepted.
        max: Duration,
    },
}

/// `"365 days (31536000s)"`, `"2147483647s"`: the bound as a user reads it.
fn describe_max(max: Duration) -> String {
    let secs = max.as_secs();
    if max.subsec_nanos() == 0 && secs >= 86_400 && secs.is_multiple_of(86_400) {
        format!("{} days ({})", secs / 86_400, Human(max))
    } else {
        Human(max).to_string()
    }
}

/// Parses `"90"`, `"90s"`, `"1m30s"`, `"2m"`, `"500ms"`, `"1h"` (see the module doc), at most
/// [`MAX_DURATION`]. Zero parses (as zero); settings reject it separately, with their own message.
pub fn parse_duration(input: &str) -> Result<Duration, InvalidDuration> {
    parse_duration_at_most(input, MAX_DURATION)
}

/// [`parse_duration`] with another upper bound, for a setting whose range is not the default
/// one (a value sent to the API server as `activeDeadlineSeconds`, say). Anything above `max`,
/// including numbers too large to represent, is [`InvalidDuration::TooLong`].
pub fn parse_duration_at_most(input: &str, max: Duration) -> Result<Duration, InvalidDuration> {
    let d = parse_unbounded(input)?;
    if d > max {
        return Err(InvalidDuration::TooLong { max });
    }
    Ok(d)
}

/// The grammar alone; a number too large to represent reads as [`Duration::MAX`], which is over
/// every bound.
fn parse_unbounded(input: &str) -> Result<Duration, InvalidDuration> {
    let s = input.trim();
    if s.is_empty() {
        return Err(InvalidDuration::Malformed);
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        // All digits, so the only way `parse` fails is a number beyond u64: too long.
        return Ok(s.parse::<u64>().map_or(Duration::MAX, Duration::from_secs));
    }
    // Units from largest to smallest; each may appear once, in this order.
    const UNITS: [(&str, u64); 4] = [("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)];
    let mut rest = s;
    let mut total_ms: u64 = 0;
    let mut next_unit = 0;
    let mut overflowed = false;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(InvalidDuration::Malformed);
        }
        // A number beyond u64 is remembered as such, but the unit is checked first, so a huge
        // number with a bad unit still reads as malformed.
        let number: Option<u64> = rest[..digits].parse().ok();
        rest = &rest[digits..];
        let letters = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..letters];
        rest = &rest[letters..];
        let position = UNITS[next_unit..]
            .iter()
            .position(|(name, _)| *name == unit)
            .ok_or(InvalidDuration::Malformed)?;
        let (_, ms_per_unit) = UNITS[next_unit + position];
        next_unit += position + 1;
        // On overflow keep reading: a later part may still be malformed, which says more.
        overflowed |= match number
            .and_then(|n| n.checked_mul(ms_per_unit))
            .and_then(|ms| total_ms.checked_add(ms))
        {
            Some(total) => {
                total_ms = total;
                false
            }
            None => true,
        };
    }
    if overflowed {
        return Ok(Duration::MAX);
    }
    Ok(Duration::from_millis(total_ms))
}

/// Formats a duration the way the parser reads it back (`"1800s"`, `"500ms"`, `"1m30s"` is shown
/// as `"90s"`): used in messages.
pub fn format_duration(d: Duration) -> String {
    Human(d).to_string()
}

struct Human(Duration);

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.subsec_millis() == 0 {
            write!(f, "{}s", self.0.as_secs())
        } else {
            write!(f, "{}ms", self.0.as_millis())
        }
    }
}

/// One setting: its value and where it came from, so errors can name the source.
pub(crate) struct Setting {
    pub(crate) name: String,
    pub(crate) raw: String,
}

impl Setting {
    /// Flag over environment; `None` means "use the default".
    pub(crate) fn pick(
        flag: Option<&str>,
        flag_name: &str,
        env_name: &str,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Option<Self> {
        if let Some(v) = flag {
            return Some(Self {
                name: flag_name.to_string(),
                raw: v.to_string(),
            });
        }
        env(env_name).map(|raw| Self {
            name: env_name.to_string(),
            raw,
        })
    }

    pub(crate) fn parse(&self) -> Result<Duration, TimeoutError> {
        let d = parse_duration(&self.raw).map_err(|err| match err {
            InvalidDuration::TooLong { max } => TimeoutError::TooLong {
                name: self.name.clone(),
                value: self.raw.clone(),
                max,
            },
            InvalidDuration::Malformed => TimeoutError::NotADuration {
                name: self.name.clone(),
                value: self.raw.clone(),
            },
        })?;
        if d.is_zero() {
            return Err(TimeoutError::Zero {
                name: self.name.clone(),
                value: self.raw.clone(),
            });
        }
        Ok(d)
    }
}

impl WatchTimeouts {
    /// Validates two durations (e.g. built in code or tests).
    pub fn try_new(server: Duration, client: Duration) -> Result<Self, TimeoutError> {
        let name = |n: &str| n.to_string();
        if server.is_zero() {
            return Err(TimeoutError::Zero {
                name: name("server timeout"),
                value: format_duration(server),
            });
        }
        if client.is_zero() {
            return Err(TimeoutError::Zero {
                name: name("client timeout"),
                value: format_duration(client),
            });
        }
        for (what, value) in [("server timeout", server), ("client timeout", client)] {
            if value > MAX_DURATION {
                return Err(TimeoutError::TooLong {
                    name: name(what),
                    value: format_duration(value),
                    max: MAX_DURATION,
                });
            }
        }
        if server.subsec_nanos() != 0 {
            return Err(TimeoutError::NotWholeSeconds {
                name: name("server timeout"),
                value: format_duration(server),
            });
        }
        if client >= server {
            return Err(TimeoutError::ClientNotShorter {
                client_name: name("client timeout"),
                client,
                server_name: name("server timeout"),
                server,
            });
        }
        Ok(Self { server, client })
    }

    /// Reads `PODLINE_WATCH_SERVER_TIMEOUT` and `PODLINE_WATCH_CLIENT_TIMEOUT` (defaults when
    /// unset) and validates them.
    pub fn from_env() -> Result<Self, TimeoutError> {
        Self::resolve(None, None)
    }

    /// Flags over environment over defaults: pass the raw flag values (`None` when the flag was not
    /// given). Declare the flags without clap's `env` so errors can tell a flag from a variable.
    pub fn resolve(
        server_flag: Option<&str>,
        client_flag: Option<&str>,
    ) -> Result<Self, TimeoutError> {
        Self::resolve_with(server_flag, client_flag, |name| std::env::var(name).ok())
    }

    /// [`WatchTimeouts::resolve`] with an injected environment (for tests, or a config file).
    pub fn resolve_with(
        server_flag: Option<&str>,
        client_flag: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, TimeoutError> {
        let server = Setting::pick(server_flag, SERVER_TIMEOUT_FLAG, SERVER_TIMEOUT_ENV, &env);
        let client = Setting::pick(client_flag, CLIENT_TIMEOUT_FLAG, CLIENT_TIMEOUT_ENV, &env);
        let server_value = match &server {
            Some(s) => {
                let d = s.parse()?;
                if d.subsec_nanos() != 0 {
                    return Err(TimeoutError::NotWholeSeconds {
                        name: s.name.clone(),
                        value: s.raw.clone(),
                    });
                }
                d
            }
            None => DEFAULT_SERVER_TIMEOUT,
        };
        let client_value = match &client {
            Some(c) => c.parse()?,
            None => DEFAULT_CLIENT_TIMEOUT,
        };
        if client_value >= server_value {
            let name_of = |s: &Option<Setting>, default_env: &str| {
                s.as_ref()
                    .map_or_else(|| format!("{default_env} (default)"), |s| s.name.clone())
            };
            return Err(TimeoutError::ClientNotShorter {
                client_name: name_of(&client, CLIENT_TIMEOUT_ENV),
                client: client_value,
                server_name: name_of(&server, SERVER_TIMEOUT_ENV),
                server: server_value,
            });
        }
        Ok(Self {
            server: server_value,
            client: client_value,
        })
    }

    /// The server timeout as `timeoutSeconds` (whole seconds, validated).
    pub fn server_seconds(&self) -> u32 {
        u32::try_from(self.server.as_secs()).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connect_timeout_should_be_positive_and_shorter_than_the_client_timeout() {
        let client = Duration::from_secs(60);
        assert_eq!(
            connect_timeout("--connect-timeout", "2s", client),
            Ok(Duration::from_secs(2))
        );
        // Longer than the default PING timeout is allowed when chosen.
        assert_eq!(
            connect_timeout("X", "45", client),
            Ok(Duration::from_secs(45))
        );
        assert_eq!(
            connect_timeout("--connect-timeout", "0", client)
                .unwrap_err()
                .to_string(),
            r#"--connect-timeout="0" must be greater than zero"#
        );
        assert_eq!(
            connect_timeout("PODLINE_CONNECT_TIMEOUT", "1m", client)
                .unwrap_err()
                .to_string(),
            "PODLINE_CONNECT_TIMEOUT (60s) must be shorter than the client timeout (60s)"
        );
        assert!(matches!(
            connect_timeout("--connect-timeout", "soon", client),
            Err(TimeoutError::NotADuration { .. })
        ));
    }
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
    fn parse_should_accept_the_documented_forms() {
        assert_eq!(parse_duration("90"), Ok(secs(90)));
        assert_eq!(parse_duration("90s"), Ok(secs(90)));
        assert_eq!(parse_duration("1m30s"), Ok(secs(90)));
        assert_eq!(parse_duration("2m"), Ok(secs(120)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1h"), Ok(secs(3600)));
        assert_eq!(parse_duration(" 60 "), Ok(secs(60)));
        assert_eq!(
            parse_duration("1h2m3s4ms"),
            Ok(Duration::from_millis(3_723_004))
        );
    }

    #[test]
    fn parse_should_reject_garbage() {
        for bad in [
            "",
            " ",
            "abc",
            "-5",
            "-5s",
            "1.5s",
            "5x",
            "s",
            "m5",
            "5 s",
            "1s1m",
            "1s1s",
            "1ms1s",
            "+5",
            "5sec",
            "0x10",
            "99999999999999999999x",
            "1h99999999999999999999",
        ] {
            assert_eq!(
                parse_duration(bad),
                Err(InvalidDuration::Malformed),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn parse_should_reject_durations_over_the_maximum() {
        let too_long = Err(InvalidDuration::TooLong { max: MAX_DURATION });
        assert_eq!(parse_duration("31536000"), Ok(MAX_DURATION));
        assert_eq!(parse_duration("8760h"), Ok(MAX_DURATION));
        for bad in [
            "31536001",
            "8760h1ms",
            "8761h",
            "18446744073709551615",
            "18446744073709551615s",
            "18446744073709551615ms",
            "99999999999999999999",
            "99999999999999999h",
            "1h99999999999999999999s",
        ] {
            assert_eq!(parse_duration(bad), too_long, "{bad:?}");
        }
        assert_eq!(
            parse_duration("18446744073709551615")
                .unwrap_err()
                .to_string(),
            "out of range: expected a duration of at most 365 days (31536000s)"
        );
        // Another bound for a setting with its own range.
        let max = Duration::from_secs(2_147_483_647);
        assert_eq!(parse_duration_at_most("2147483647", max), Ok(max));
        assert_eq!(
            parse_duration_at_most("2147483648", max),
            Err(InvalidDuration::TooLong { max })
        );
        assert_eq!(
            parse_duration_at_most("2147483648", max)
                .unwrap_err()
                .to_string(),
            "out of range: expected a duration of at most 2147483647s"
        );
        assert_eq!(
            parse_duration_at_most("5x", max),
            Err(InvalidDuration::Malformed)
        );
    }

    #[test]
    fn settings_over_the_maximum_should_name_the_setting_value_and_range() {
        let err = WatchTimeouts::resolve_with(None, Some("18446744073709551615"), env_of(&[]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"--watch-client-timeout="18446744073709551615" is out of range: expected a duration of at most 365 days (31536000s)"#
        );
        let err = WatchTimeouts::resolve_with(
            None,
            None,
            env_of(&[("PODLINE_WATCH_SERVER_TIMEOUT", "9000h")]),
        )
        .unwrap_err();
        assert!(matches!(err, TimeoutError::TooLong { .. }), "{err}");
    }

    #[test]
    fn defaults_should_apply_without_flags_or_env() {
        let t = WatchTimeouts::resolve_with(None, None, env_of(&[])).unwrap();
        assert_eq!(t, WatchTimeouts::default());
        assert_eq!(t.server_seconds(), 1800);
        assert_eq!(t.client, secs(60));
    }

    #[test]
    fn errors_should_name_the_variable_value_and_expectation() {
        let err = WatchTimeouts::resolve_with(
            None,
            None,
            env_of(&[("PODLINE_WATCH_CLIENT_TIMEOUT", "abc")]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"PODLINE_WATCH_CLIENT_TIMEOUT="abc" is not a duration: expected seconds ("60") or a duration like "90s", "2m""#
        );
        let err = WatchTimeouts::resolve_with(
            None,
            None,
            env_of(&[
                ("PODLINE_WATCH_CLIENT_TIMEOUT", "1800"),
                ("PODLINE_WATCH_SERVER_TIMEOUT", "30m"),
            ]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "PODLINE_WATCH_CLIENT_TIMEOUT (1800s) must be shorter than PODLINE_WATCH_SERVER_TIMEOUT (1800s)"
        );
        let err = WatchTimeouts::resolve_with(
            None,
            None,
            env_of(&[("PODLINE_WATCH_SERVER_TIMEOUT", "0")]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"PODLINE_WATCH_SERVER_TIMEOUT="0" must be greater than zero"#
        );
        let err = WatchTimeouts::resolve_with(
            None,
            None,
            env_of(&[("PODLINE_WATCH_SERVER_TIMEOUT", "1500ms")]),
        )
        .unwrap_err();
        assert!(matches!(err, TimeoutError::NotWholeSeconds { .. }), "{err}");
        // Client above the default server timeout, server not set: the default is named.
        let err = WatchTimeouts::resolve_with(
            None,
            None,
            env_of(&[("PODLINE_WATCH_CLIENT_TIMEOUT", "1h")]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "PODLINE_WATCH_CLIENT_TIMEOUT (3600s) must be shorter than PODLINE_WATCH_SERVER_TIMEOUT (default) (1800s)"
        );
    }

    #[test]
    fn flags_should_override_env_and_be_named_in_errors() {
        let env = env_of(&[
            ("PODLINE_WATCH_CLIENT_TIMEOUT", "abc"),
            ("PODLINE_WATCH_SERVER_TIMEOUT", "120"),
        ]);
        let t = WatchTimeouts::resolve_with(None, Some("30s"), &env).unwrap();
        assert_eq!(t.client, secs(30));
        assert_eq!(t.server, secs(120));
        let err = WatchTimeouts::resolve_with(Some("-1"), Some("30s"), &env).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"--watch-server-timeout="-1" is not a duration: expected seconds ("60") or a duration like "90s", "2m""#
        );
    }

    #[test]
    fn try_new_should_validate() {
        assert!(WatchTimeouts::try_new(secs(10), secs(5)).is_ok());
        assert!(WatchTimeouts::try_new(secs(5), secs(5)).is_err());
        assert!(WatchTimeouts::try_new(secs(0), secs(0)).is_err());
        assert!(WatchTimeouts::try_new(Duration::from_millis(2500), secs(1)).is_err());
        // Built in code: bounded like parsed values, so `server + margin` cannot overflow.
        let err = WatchTimeouts::try_new(Duration::MAX, secs(1)).unwrap_err();
        assert!(matches!(err, TimeoutError::TooLong { .. }), "{err}");
        assert!(WatchTimeouts::try_new(MAX_DURATION, secs(1)).is_ok());
    }

    proptest! {
        #[test]
        fn plain_numbers_should_be_seconds(n in 0u64..=MAX_DURATION.as_secs()) {
            prop_assert_eq!(parse_duration(&n.to_string()), Ok(secs(n)));
        }

        #[test]
        fn composed_durations_should_round_trip(
            h in proptest::option::of(0u64..1000),
            m in proptest::option::of(0u64..1000),
            s in proptest::option::of(0u64..1000),
            ms in proptest::option::of(0u64..1000),
        ) {
            prop_assume!(h.is_some() || m.is_some() || s.is_some() || ms.is_some());
            let mut text = String::new();
            let mut expected = 0u64;
            for (part, unit, scale) in [(h, "h", 3_600_000), (m, "m", 60_000), (s, "s", 1_000), (ms, "ms", 1)] {
                if let Some(v) = part {
                    text.push_str(&format!("{v}{unit}"));
                    expected += v * scale;
                }
            }
            prop_assert_eq!(parse_duration(&text), Ok(Duration::from_millis(expected)));
        }

        #[test]
        fn no_accepted_duration_should_exceed_the_maximum(s in "[0-9]{1,25}(h|m|s|ms)?") {
            // Never panics; whatever parses is within the bound, so `now + d` cannot overflow.
            if let Ok(d) = parse_duration(&s) {
                prop_assert!(d <= MAX_DURATION);
                prop_assert!(tokio::time::Instant::now().checked_add(d).is_some());
            }
        }

        #[test]
        fn formatted_durations_should_parse_back(ms in 1u64..10_000_000_000) {
            let d = Duration::from_millis(ms);
            prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }

        #[test]
        fn strings_with_foreign_characters_should_be_rejected(s in "\\PC*") {
            let cleaned = s.trim();
            if cleaned.chars().any(|c| !(c.is_ascii_digit() || "hms".contains(c))) {
                prop_assert_eq!(parse_duration(&s), Err(InvalidDuration::Malformed));
            } else {
                // Never panics; accepted only if well-formed.
                let _ = parse_duration(&s);
            }
        }

        #[test]
        fn client_must_be_shorter_than_server(server in 1u64..10_000, client in 1u64..10_000) {
            let env = env_of(&[]);
            let (sv, cv) = (server.to_string(), client.to_string());
            let r = WatchTimeouts::resolve_with(Some(&sv), Some(&cv), &env);
            prop_assert_eq!(r.is_ok(), client < server);
        }
    }
}
