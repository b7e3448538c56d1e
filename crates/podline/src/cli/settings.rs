//! The client's duration settings as the binary reads them: each from its flag, else its
//! environment variable, else the default, with errors that name whichever the user set.
//!
//! The client crate parses and checks the values and says which [`Setting`] was wrong; only
//! this module knows the settings' flags and variables (no library crate names them).

use std::time::Duration;

use podline_client::ping::Http2Ping;
use podline_client::timeouts::{self, Setting, TimeoutError, WatchTimeouts};

/// The flag and the environment variable of a setting.
fn names(setting: Setting) -> Option<(&'static str, &'static str)> {
    Some(match setting {
        Setting::WatchServerTimeout => ("--watch-server-timeout", "PODLINE_WATCH_SERVER_TIMEOUT"),
        Setting::WatchClientTimeout => ("--watch-client-timeout", "PODLINE_WATCH_CLIENT_TIMEOUT"),
        Setting::PingInterval => ("--http2-ping-interval", "PODLINE_HTTP2_PING_INTERVAL"),
        Setting::PingTimeout => ("--http2-ping-timeout", "PODLINE_HTTP2_PING_TIMEOUT"),
        Setting::ConnectTimeout => ("--connect-timeout", "PODLINE_CONNECT_TIMEOUT"),
        _ => return None,
    })
}

/// One setting as found: its text (`None`: neither flag nor variable, the default applies)
/// and the name messages give it (the flag, the variable, or "VARIABLE (default)").
struct Picked {
    setting: Setting,
    raw: Option<String>,
    name: String,
}

/// The flag's value over the variable's; `env` looks a variable up.
fn pick(setting: Setting, flag: Option<&str>, env: &dyn Fn(&str) -> Option<String>) -> Picked {
    let Some((flag_name, env_name)) = names(setting) else {
        return Picked {
            setting,
            raw: flag.map(str::to_owned),
            name: setting.to_string(),
        };
    };
    let (raw, name) = match (flag, env(env_name)) {
        (Some(value), _) => (Some(value.to_owned()), flag_name.to_owned()),
        (None, Some(value)) => (Some(value), env_name.to_owned()),
        (None, None) => (None, format!("{env_name} (default)")),
    };
    Picked { setting, raw, name }
}

/// The library's message with each setting named as the user set it.
fn told(err: &TimeoutError, picked: &[&Picked]) -> anyhow::Error {
    let name = |setting: Setting| {
        picked
            .iter()
            .find(|p| p.setting == setting)
            .map_or_else(|| setting.to_string(), |p| p.name.clone())
    };
    anyhow::anyhow!("{}", err.display_with(&name))
}

fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The watch timeouts: `--watch-server-timeout` / `--watch-client-timeout` (raw flag values,
/// `None` when not given), then `PODLINE_WATCH_SERVER_TIMEOUT` / `PODLINE_WATCH_CLIENT_TIMEOUT`,
/// then the defaults. The flags are declared without clap's `env`, so that a message can tell
/// a flag from a variable.
pub fn watch_timeouts(
    server_flag: Option<&str>,
    client_flag: Option<&str>,
) -> anyhow::Result<WatchTimeouts> {
    watch_timeouts_with(server_flag, client_flag, &process_env)
}

fn watch_timeouts_with(
    server_flag: Option<&str>,
    client_flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<WatchTimeouts> {
    let server = pick(Setting::WatchServerTimeout, server_flag, env);
    let client = pick(Setting::WatchClientTimeout, client_flag, env);
    WatchTimeouts::parse(server.raw.as_deref(), client.raw.as_deref())
        .map_err(|err| told(&err, &[&server, &client]))
}

/// The HTTP/2 PING settings: `--http2-ping-interval` / `--http2-ping-timeout`, then
/// `PODLINE_HTTP2_PING_*`, then the defaults fitted to `client_timeout`, which they must fit in.
pub fn http2_ping(
    interval_flag: Option<&str>,
    timeout_flag: Option<&str>,
    client_timeout: Duration,
) -> anyhow::Result<Http2Ping> {
    http2_ping_with(interval_flag, timeout_flag, client_timeout, &process_env)
}

fn http2_ping_with(
    interval_flag: Option<&str>,
    timeout_flag: Option<&str>,
    client_timeout: Duration,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Http2Ping> {
    let interval = pick(Setting::PingInterval, interval_flag, env);
    let timeout = pick(Setting::PingTimeout, timeout_flag, env);
    Http2Ping::parse(
        interval.raw.as_deref(),
        timeout.raw.as_deref(),
        client_timeout,
    )
    .map_err(|err| told(&err, &[&interval, &timeout]))
}

/// The connect timeout: `--connect-timeout`, then `PODLINE_CONNECT_TIMEOUT`, checked against
/// `client_timeout`; `None` when neither is set (the client then uses the PING timeout).
pub fn connect_timeout(
    flag: Option<&str>,
    client_timeout: Duration,
) -> anyhow::Result<Option<Duration>> {
    connect_timeout_with(flag, client_timeout, &process_env)
}

fn connect_timeout_with(
    flag: Option<&str>,
    client_timeout: Duration,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Option<Duration>> {
    let given = pick(Setting::ConnectTimeout, flag, env);
    let Some(raw) = &given.raw else {
        return Ok(None);
    };
    timeouts::connect_timeout(raw, client_timeout)
        .map(Some)
        .map_err(|err| told(&err, &[&given]))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn message<T: std::fmt::Debug>(result: anyhow::Result<T>) -> String {
        result.unwrap_err().to_string()
    }

    #[test]
    fn watch_timeout_errors_should_name_the_variable_value_and_expectation() {
        let env = env_of(&[("PODLINE_WATCH_CLIENT_TIMEOUT", "abc")]);
        assert_eq!(
            message(watch_timeouts_with(None, None, &env)),
            r#"PODLINE_WATCH_CLIENT_TIMEOUT="abc" is not a duration: expected seconds ("60") or a duration like "90s", "2m""#
        );
        let env = env_of(&[
            ("PODLINE_WATCH_CLIENT_TIMEOUT", "1800"),
            ("PODLINE_WATCH_SERVER_TIMEOUT", "30m"),
        ]);
        assert_eq!(
            message(watch_timeouts_with(None, None, &env)),
            "PODLINE_WATCH_CLIENT_TIMEOUT (1800s) must be shorter than PODLINE_WATCH_SERVER_TIMEOUT (1800s)"
        );
        let env = env_of(&[("PODLINE_WATCH_SERVER_TIMEOUT", "0")]);
        assert_eq!(
            message(watch_timeouts_with(None, None, &env)),
            r#"PODLINE_WATCH_SERVER_TIMEOUT="0" must be greater than zero"#
        );
        // Client above the default server timeout, server not set: the default is named.
        let env = env_of(&[("PODLINE_WATCH_CLIENT_TIMEOUT", "1h")]);
        assert_eq!(
            message(watch_timeouts_with(None, None, &env)),
            "PODLINE_WATCH_CLIENT_TIMEOUT (3600s) must be shorter than PODLINE_WATCH_SERVER_TIMEOUT (default) (1800s)"
        );
        let env = env_of(&[]);
        assert_eq!(
            message(watch_timeouts_with(
                None,
                Some("18446744073709551615"),
                &env
            )),
            r#"--watch-client-timeout="18446744073709551615" is out of range: expected a duration of at most 365 days (31536000s)"#
        );
        let t = watch_timeouts_with(None, None, &env).unwrap();
        assert_eq!(t, WatchTimeouts::default());
    }

    #[test]
    fn flags_should_override_variables_and_be_named_in_errors() {
        let env = env_of(&[
            ("PODLINE_WATCH_CLIENT_TIMEOUT", "abc"),
            ("PODLINE_WATCH_SERVER_TIMEOUT", "120"),
        ]);
        let t = watch_timeouts_with(None, Some("30s"), &env).unwrap();
        assert_eq!((t.server, t.client), (secs(120), secs(30)));
        assert_eq!(
            message(watch_timeouts_with(Some("-1"), Some("30s"), &env)),
            r#"--watch-server-timeout="-1" is not a duration: expected seconds ("60") or a duration like "90s", "2m""#
        );
        assert_eq!(
            message(watch_timeouts_with(Some("60"), Some("90"), &env)),
            "--watch-client-timeout (90s) must be shorter than --watch-server-timeout (60s)"
        );
    }

    #[test]
    fn ping_errors_should_name_the_flag_or_variable_and_the_defaults() {
        let env = env_of(&[
            ("PODLINE_HTTP2_PING_INTERVAL", "2s"),
            ("PODLINE_HTTP2_PING_TIMEOUT", "abc"),
        ]);
        let ping = http2_ping_with(None, Some("3s"), secs(60), &env).unwrap();
        assert_eq!((ping.interval, ping.timeout), (secs(2), secs(3)));
        assert_eq!(
            message(http2_ping_with(None, None, secs(60), &env)),
            r#"PODLINE_HTTP2_PING_TIMEOUT="abc" is not a duration: expected seconds ("60") or a duration like "90s", "2m""#
        );
        assert_eq!(
            message(http2_ping_with(Some("0"), Some("3s"), secs(60), &env)),
            r#"--http2-ping-interval="0" must be greater than zero"#
        );
        assert_eq!(
            message(http2_ping_with(Some("30s"), Some("30s"), secs(60), &env)),
            "--http2-ping-interval (30s) + --http2-ping-timeout (30s) must be shorter than the client timeout (60s)"
        );
        let env = env_of(&[("PODLINE_HTTP2_PING_TIMEOUT", "1m")]);
        assert_eq!(
            message(http2_ping_with(None, None, secs(60), &env)),
            "PODLINE_HTTP2_PING_INTERVAL (default) (5s) + PODLINE_HTTP2_PING_TIMEOUT (60s) must be shorter than the client timeout (60s)"
        );
        let env = env_of(&[("PODLINE_HTTP2_PING_INTERVAL", "5s")]);
        assert_eq!(
            message(http2_ping_with(None, None, secs(6), &env)),
            "PODLINE_HTTP2_PING_INTERVAL (5s) + PODLINE_HTTP2_PING_TIMEOUT (default) (2s) must be shorter than the client timeout (6s)"
        );
        let env = env_of(&[]);
        let huge = message(http2_ping_with(
            Some("18446744073709551615"),
            None,
            secs(60),
            &env,
        ));
        assert!(
            huge.starts_with("--http2-ping-interval=") && huge.contains("at most 365 days"),
            "{huge}"
        );
    }

    #[test]
    fn the_connect_timeout_should_be_named_by_its_flag_or_variable() {
        let none = env_of(&[]);
        assert_eq!(connect_timeout_with(None, secs(60), &none).unwrap(), None);
        assert_eq!(
            connect_timeout_with(Some("2s"), secs(60), &none).unwrap(),
            Some(secs(2))
        );
        assert_eq!(
            message(connect_timeout_with(Some("0"), secs(60), &none)),
            r#"--connect-timeout="0" must be greater than zero"#
        );
        let env = env_of(&[("PODLINE_CONNECT_TIMEOUT", "1m")]);
        assert_eq!(
            message(connect_timeout_with(None, secs(60), &env)),
            "PODLINE_CONNECT_TIMEOUT (60s) must be shorter than the client timeout (60s)"
        );
        // The flag wins over the variable.
        assert_eq!(
            connect_timeout_with(Some("3s"), secs(60), &env).unwrap(),
            Some(secs(3))
        );
    }

    #[test]
    fn every_client_setting_should_have_a_flag_and_a_variable() {
        for setting in [
            Setting::WatchServerTimeout,
            Setting::WatchClientTimeout,
            Setting::PingInterval,
            Setting::PingTimeout,
            Setting::ConnectTimeout,
        ] {
            let (flag, env) = names(setting).unwrap();
            assert!(flag.starts_with("--") && env.starts_with("PODLINE_"));
        }
    }
}
