//! The two watch timeouts, and the strict duration grammar every setting of the client is read
//! with.
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
//! it; here a bad value is an error that names the setting, the value and what was expected. The
//! crate knows a setting only by what it does ([`Setting`]); a program that reads settings from
//! its own flags, variables or files names them its own way with [`TimeoutError::display_with`]:
//!
//! ```
//! use podline_client::timeouts::{Setting, WatchTimeouts};
//! let err = WatchTimeouts::parse(None, Some("abc")).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     r#"client timeout="abc" is not a duration: expected seconds ("60") or a duration like "90s", "2m""#
//! );
//! let named = err.display_with(&|setting| match setting {
//!     Setting::WatchClientTimeout => "timeouts.client".to_string(),
//!     other => other.to_string(),
//! });
//! assert!(named.to_string().starts_with(r#"timeouts.client="abc" is not a duration"#));
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

/// A duration setting of the client, by what it does. It exists so that errors can say which
/// setting was wrong without this crate naming a flag or variable: the program that read the
/// value knows what the user typed, and names it ([`TimeoutError::display_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Setting {
    /// The watch's server-side timeout ([`WatchTimeouts::server`]).
    WatchServerTimeout,
    /// The client timeout ([`WatchTimeouts::client`]).
    WatchClientTimeout,
    /// The HTTP/2 PING interval ([`crate::ping::Http2Ping::interval`]).
    PingInterval,
    /// The HTTP/2 PING timeout ([`crate::ping::Http2Ping::timeout`]).
    PingTimeout,
    /// The connect timeout ([`connect_timeout`]).
    ConnectTimeout,
}

impl Setting {
    /// How a message names the setting when the program gives it no name of its own.
    pub fn describe(self) -> &'static str {
        match self {
            Setting::WatchServerTimeout => "server timeout",
            Setting::WatchClientTimeout => "client timeout",
            Setting::PingInterval => "PING interval",
            Setting::PingTimeout => "PING timeout",
            Setting::ConnectTimeout => "connect timeout",
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Why a timeout setting was rejected: which [`Setting`], the value and what is expected.
/// `Display` names settings by [`Setting::describe`]; [`TimeoutError::display_with`] prints the
/// same message with the program's own names (its flags or variables).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimeoutError {
    /// The value does not follow the duration grammar.
    NotADuration {
        /// Which setting.
        setting: Setting,
        /// The raw value.
        value: String,
    },
    /// Longer than [`MAX_DURATION`]: no setting needs that much, and deadlines computed from it
    /// would overflow.
    TooLong {
        /// Which setting.
        setting: Setting,
        /// The raw value.
        value: String,
        /// The largest value accepted.
        max: Duration,
    },
    /// Zero would disable the bound (or end every watch at once).
    Zero {
        /// Which setting.
        setting: Setting,
        /// The raw value.
        value: String,
    },
    /// `timeoutSeconds` is an integer on the wire.
    NotWholeSeconds {
        /// Which setting.
        setting: Setting,
        /// The raw value.
        value: String,
    },
    /// A client timeout >= the server's would cut healthy quiet watches. Names
    /// [`Setting::WatchClientTimeout`] and [`Setting::WatchServerTimeout`].
    ClientNotShorter {
        /// The client timeout.
        client: Duration,
        /// The server timeout.
        server: Duration,
    },
    /// HTTP/2 PING detection (interval + timeout) must fit inside the client timeout, or the
    /// client timeout would give up on a request before PING could tell that its connection died.
    /// Names [`Setting::PingInterval`] and [`Setting::PingTimeout`].
    PingDetectionNotShorter {
        /// The PING interval.
        interval: Duration,
        /// The PING timeout.
        timeout: Duration,
        /// The client timeout.
        client: Duration,
    },
    /// A connect timeout must end an attempt before the client timeout ends the request. Names
    /// [`Setting::ConnectTimeout`].
    ConnectNotShorter {
        /// The connect timeout.
        value: Duration,
        /// The client timeout.
        client: Duration,
    },
}

impl TimeoutError {
    /// The message with every setting named by `name`: the binary passes its flag or variable
    /// (and says when a default was used), so the user reads what they typed.
    pub fn display_with<'a>(
        &'a self,
        name: &'a dyn Fn(Setting) -> String,
    ) -> impl fmt::Display + 'a {
        Named { error: self, name }
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, name: &dyn Fn(Setting) -> String) -> fmt::Result {
        match self {
            TimeoutError::NotADuration { setting, value } => write!(
                f,
                "{}=\"{value}\" is not a duration: expected seconds (\"60\") or a duration like \"90s\", \"2m\"",
                name(*setting)
            ),
            TimeoutError::TooLong {
                setting,
                value,
                max,
            } => write!(
                f,
                "{}=\"{value}\" is out of range: expected a duration of at most {}",
                name(*setting),
                describe_max(*max)
            ),
            TimeoutError::Zero { setting, value } => {
                write!(
                    f,
                    "{}=\"{value}\" must be greater than zero",
                    name(*setting)
                )
            }
            TimeoutError::NotWholeSeconds { setting, value } => write!(
                f,
                "{}=\"{value}\" must be a whole number of seconds (it is sent as timeoutSeconds)",
                name(*setting)
            ),
            TimeoutError::ClientNotShorter { client, server } => write!(
                f,
                "{} ({}) must be shorter than {} ({})",
                name(Setting::WatchClientTimeout),
                Human(*client),
                name(Setting::WatchServerTimeout),
                Human(*server)
            ),
            TimeoutError::PingDetectionNotShorter {
                interval,
                timeout,
                client,
            } => write!(
                f,
                "{} ({}) + {} ({}) must be shorter than the client timeout ({})",
                name(Setting::PingInterval),
                Human(*interval),
                name(Setting::PingTimeout),
                Human(*timeout),
                Human(*client)
            ),
            TimeoutError::ConnectNotShorter { value, client } => write!(
                f,
                "{} ({}) must be shorter than the client timeout ({})",
                name(Setting::ConnectTimeout),
                Human(*value),
                Human(*client)
            ),
        }
    }
}

impl fmt::Display for TimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, &|setting| setting.describe().to_string())
    }
}

/// [`TimeoutError::display_with`]'s result.
struct Named<'a> {
    error: &'a TimeoutError,
    name: &'a dyn Fn(Setting) -> String,
}

impl fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.write(f, self.name)
    }
}

/// Checks a connect timeout the user chose (see [`crate::connect::ConnectOptions::connect_timeout`]),
/// from its text, parsed like every duration here. It must be greater than zero and shorter than
/// the client timeout, so an attempt is abandoned (and another made) before the caller's own
/// timer gives up on the request. It may be longer than the PING timeout (a slow link's TLS
/// handshake may need it); only the default follows the PING timeout.
pub fn connect_timeout(raw: &str, client_timeout: Duration) -> Result<Duration, TimeoutError> {
    let value = parse_setting(Setting::ConnectTimeout, raw)?;
    if value >= client_timeout {
        return Err(TimeoutError::ConnectNotShorter {
            value,
            client: client_timeout,
        });
    }
    Ok(value)
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

/// Parses one setting's text: the duration grammar, at most [`MAX_DURATION`], greater than zero;
/// errors name `setting`.
pub(crate) fn parse_setting(setting: Setting, raw: &str) -> Result<Duration, TimeoutError> {
    let d = parse_duration(raw).map_err(|err| match err {
        InvalidDuration::TooLong { max } => TimeoutError::TooLong {
            setting,
            value: raw.to_string(),
            max,
        },
        InvalidDuration::Malformed => TimeoutError::NotADuration {
            setting,
            value: raw.to_string(),
        },
    })?;
    if d.is_zero() {
        return Err(TimeoutError::Zero {
            setting,
            value: raw.to_string(),
        });
    }
    Ok(d)
}

impl WatchTimeouts {
    /// Validates two durations (e.g. built in code or tests).
    pub fn try_new(server: Duration, client: Duration) -> Result<Self, TimeoutError> {
        use Setting::{WatchClientTimeout, WatchServerTimeout};
        for (setting, value) in [(WatchServerTimeout, server), (WatchClientTimeout, client)] {
            if value.is_zero() {
                return Err(TimeoutError::Zero {
                    setting,
                    value: format_duration(value),
                });
            }
        }
        for (setting, value) in [(WatchServerTimeout, server), (WatchClientTimeout, client)] {
            if value > MAX_DURATION {
                return Err(TimeoutError::TooLong {
                    setting,
                    value: format_duration(value),
                    max: MAX_DURATION,
                });
            }
        }
        if server.subsec_nanos() != 0 {
            return Err(TimeoutError::NotWholeSeconds {
                setting: WatchServerTimeout,
                value: format_duration(server),
            });
        }
        if client >= server {
            return Err(TimeoutError::ClientNotShorter { client, server });
        }
        Ok(Self { server, client })
    }

    /// Parses the two settings from their text; `None` (not given) means the default. Each
    /// follows the duration grammar and is greater than zero, the server one in whole seconds,
    /// and client < server. Where the text came from (a flag, a variable) is the caller's
    /// business: it names the settings in the error ([`TimeoutError::display_with`]).
    pub fn parse(server: Option<&str>, client: Option<&str>) -> Result<Self, TimeoutError> {
        let server = match server {
            Some(raw) => {
                let d = parse_setting(Setting::WatchServerTimeout, raw)?;
                if d.subsec_nanos() != 0 {
                    return Err(TimeoutError::NotWholeSeconds {
                        setting: Setting::WatchServerTimeout,
                        value: raw.to_string(),
                    });
                }
                d
            }
            None => DEFAULT_SERVER_TIMEOUT,
        };
        let client = match client {
            Some(raw) => parse_setting(Setting::WatchClientTimeout, raw)?,
            None => DEFAULT_CLIENT_TIMEOUT,
        };
        if client >= server {
            return Err(TimeoutError::ClientNotShorter { client, server });
        }
        Ok(Self { server, client })
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
        assert_eq!(connect_timeout("2s", client), Ok(Duration::from_secs(2)));
        // Longer than the default PING timeout is allowed when chosen.
        assert_eq!(connect_timeout("45", client), Ok(Duration::from_secs(45)));
        assert_eq!(
            connect_timeout("0", client).unwrap_err().to_string(),
            r#"connect timeout="0" must be greater than zero"#
        );
        assert_eq!(
            connect_timeout("1m", client).unwrap_err(),
            TimeoutError::ConnectNotShorter {
                value: secs(60),
                client
            }
        );
        assert_eq!(
            connect_timeout("1m", client).unwrap_err().to_string(),
            "connect timeout (60s) must be shorter than the client timeout (60s)"
        );
        assert!(matches!(
            connect_timeout("soon", client),
            Err(TimeoutError::NotADuration {
                setting: Setting::ConnectTimeout,
                ..
            })
        ));
    }
    use proptest::prelude::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
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
        let err = WatchTimeouts::parse(None, Some("18446744073709551615")).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"client timeout="18446744073709551615" is out of range: expected a duration of at most 365 days (31536000s)"#
        );
        let err = WatchTimeouts::parse(Some("9000h"), None).unwrap_err();
        assert_eq!(
            err,
            TimeoutError::TooLong {
                setting: Setting::WatchServerTimeout,
                value: "9000h".into(),
                max: MAX_DURATION
            }
        );
    }

    #[test]
    fn defaults_should_apply_when_nothing_is_given() {
        let t = WatchTimeouts::parse(None, None).unwrap();
        assert_eq!(t, WatchTimeouts::default());
        assert_eq!(t.server_seconds(), 1800);
        assert_eq!(t.client, secs(60));
    }

    #[test]
    fn errors_should_name_the_setting_value_and_expectation() {
        let err = WatchTimeouts::parse(None, Some("abc")).unwrap_err();
        assert_eq!(
            err,
            TimeoutError::NotADuration {
                setting: Setting::WatchClientTimeout,
                value: "abc".into()
            }
        );
        assert_eq!(
            err.to_string(),
            r#"client timeout="abc" is not a duration: expected seconds ("60") or a duration like "90s", "2m""#
        );
        let err = WatchTimeouts::parse(Some("30m"), Some("1800")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "client timeout (1800s) must be shorter than server timeout (1800s)"
        );
        let err = WatchTimeouts::parse(Some("0"), None).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"server timeout="0" must be greater than zero"#
        );
        let err = WatchTimeouts::parse(Some("1500ms"), None).unwrap_err();
        assert_eq!(
            err,
            TimeoutError::NotWholeSeconds {
                setting: Setting::WatchServerTimeout,
                value: "1500ms".into()
            }
        );
        // Client above the default server timeout, server not given.
        let err = WatchTimeouts::parse(None, Some("1h")).unwrap_err();
        assert_eq!(
            err,
            TimeoutError::ClientNotShorter {
                client: secs(3600),
                server: DEFAULT_SERVER_TIMEOUT
            }
        );
        // A bad server value is reported first, as before.
        let err = WatchTimeouts::parse(Some("-1"), Some("abc")).unwrap_err();
        assert!(
            matches!(
                err,
                TimeoutError::NotADuration {
                    setting: Setting::WatchServerTimeout,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn display_with_should_put_the_callers_names_in_the_same_message() {
        let name = |setting: Setting| match setting {
            Setting::WatchClientTimeout => "client-flag".to_string(),
            Setting::WatchServerTimeout => "server-variable (default)".to_string(),
            other => format!("{other}!"),
        };
        let err = WatchTimeouts::parse(None, Some("1h")).unwrap_err();
        assert_eq!(
            err.display_with(&name).to_string(),
            "client-flag (3600s) must be shorter than server-variable (default) (1800s)"
        );
        let err = WatchTimeouts::parse(None, Some("soon")).unwrap_err();
        assert_eq!(
            err.display_with(&name).to_string(),
            r#"client-flag="soon" is not a duration: expected seconds ("60") or a duration like "90s", "2m""#
        );
        let err = connect_timeout("2m", secs(60)).unwrap_err();
        assert_eq!(
            err.display_with(&name).to_string(),
            "connect timeout! (120s) must be shorter than the client timeout (60s)"
        );
        // Without names, each setting is described by what it does.
        for setting in [
            Setting::WatchServerTimeout,
            Setting::WatchClientTimeout,
            Setting::PingInterval,
            Setting::PingTimeout,
            Setting::ConnectTimeout,
        ] {
            assert!(!setting.describe().contains("--"), "{setting}");
            assert_eq!(setting.to_string(), setting.describe());
        }
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
        assert_eq!(
            WatchTimeouts::try_new(secs(30), secs(60))
                .unwrap_err()
                .to_string(),
            "client timeout (60s) must be shorter than server timeout (30s)"
        );
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
            let (sv, cv) = (server.to_string(), client.to_string());
            let r = WatchTimeouts::parse(Some(&sv), Some(&cv));
            prop_assert_eq!(r.is_ok(), client < server);
        }
    }
}
