//! `podline run`'s log flags: which containers' logs are followed (`--logs-container`,
//! `--init-logs-container`, `--all-init-containers`, next to `--all-containers`) and how they
//! are written (`--log-format text|json`). The JSON form is for wrappers such as the Airflow
//! operator: each line carries its container, and the pod's lifecycle events (created, started,
//! completed, teardown, cleanup) come on the same stream, with the pod, so the wrapper can
//! format lines and call its hooks.

use k8s_openapi::api::core::v1::Pod;
use podline_launch::{Containers, Lifecycle, LogSelection, LogSink};
use serde::Serialize;

/// Most container names one log flag takes (a pod rarely has more than a handful).
pub const MAX_LOG_CONTAINERS: usize = 64;

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// As the container wrote them (`[container] ` first when several are followed).
    #[default]
    Text,
    /// One JSON object a line: `{"container": .., "line": ..}` for a log line,
    /// `{"event": .., "pod": {..}}` for a lifecycle event (the whole pod, env values included:
    /// for a wrapper reading a pipe, never for a terminal or a shared log).
    Json,
}

/// The log flags of `podline run` (flattened into its arguments).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LogFlags {
    /// Follow this container's logs (repeatable, at most 64; the main container only if named
    /// too). Lines are prefixed with [container] when more than one container is followed.
    #[arg(help_heading = "Logs", long = "logs-container", value_name = "NAME", value_parser = parse_container_name, conflicts_with = "all_containers")]
    pub logs_container: Vec<String>,
    /// Before the other logs, print this init container's log whole (repeatable, at most 64; in
    /// the pod's order).
    #[arg(help_heading = "Logs", long = "init-logs-container", value_name = "NAME", value_parser = parse_container_name, conflicts_with = "all_init_containers")]
    pub init_logs_container: Vec<String>,
    /// Before the other logs, print every init container's log whole, in the pod's order.
    #[arg(help_heading = "Logs", long)]
    pub all_init_containers: bool,
    /// text: lines as the containers wrote them; json: one object a line with the container's
    /// name, and the pod's lifecycle events (for wrappers; the events carry the whole pod).
    #[arg(
        help_heading = "Logs",
        long,
        value_name = "FORMAT",
        default_value = "text"
    )]
    pub log_format: LogFormat,
}

/// A container name as the API accepts it (a DNS label: 1 to 63 characters of `a-z0-9-`,
/// starting and ending alphanumeric), so a bad one fails at parse time, naming the rule.
fn parse_container_name(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "{s:?} is not a container name (1 to 63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit)"
        ))
    }
}

impl LogFlags {
    /// The selection these flags make, or `None` when none is given (the run's default:
    /// the main container, or every container with `--all-containers`).
    pub fn selection(&self, all_containers: bool) -> anyhow::Result<Option<LogSelection>> {
        for (flag, names) in [
            ("--logs-container", &self.logs_container),
            ("--init-logs-container", &self.init_logs_container),
        ] {
            if names.len() > MAX_LOG_CONTAINERS {
                anyhow::bail!(
                    "{flag} was given {} times: at most {MAX_LOG_CONTAINERS}",
                    names.len()
                );
            }
        }
        let init = if self.all_init_containers {
            Containers::All
        } else if self.init_logs_container.is_empty() {
            Containers::None
        } else {
            Containers::Named(self.init_logs_container.clone())
        };
        let containers = if all_containers {
            Containers::All
        } else if self.logs_container.is_empty() {
            Containers::Main
        } else {
            Containers::Named(self.logs_container.clone())
        };
        if init == Containers::None && containers == Containers::Main {
            return Ok(None);
        }
        Ok(Some(LogSelection {
            containers,
            init_containers: init,
        }))
    }
}

/// `--log-format json`: each line and lifecycle event as one JSON object on stdout.
#[derive(Debug, Default, Clone, Copy)]
pub struct JsonLinesSink;

/// One log line on the JSON stream.
#[derive(Serialize)]
struct Line<'a> {
    container: &'a str,
    line: &'a str,
}

/// One lifecycle event on the JSON stream.
#[derive(Serialize)]
struct Event<'a> {
    event: &'static str,
    pod: Option<&'a Pod>,
}

impl JsonLinesSink {
    fn emit(value: &impl Serialize) {
        use std::io::Write as _;
        let Ok(mut text) = serde_json::to_vec(value) else {
            return;
        };
        text.push(b'\n');
        let mut out = std::io::stdout().lock();
        // A closed stdout must not fail the task; the record is dropped.
        let _ = out.write_all(&text).and_then(|()| out.flush());
    }
}

impl LogSink for JsonLinesSink {
    fn write_line(&self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        Self::emit(&Line {
            container: "",
            line: text.trim_end_matches('\n'),
        });
    }

    fn container_line(&self, container: &str, _prefixed: bool, text: &[u8], _complete: bool) {
        Self::emit(&Line {
            container,
            line: &String::from_utf8_lossy(text),
        });
    }

    fn lifecycle(&self, event: Lifecycle, pod: Option<&Pod>) {
        Self::emit(&Event {
            event: event.as_str(),
            pod,
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Container names are checked at parse time and the flags' counts are bounded.
    #[test]
    fn names_should_be_dns_labels_and_counts_bounded() {
        assert!(parse_container_name("side-car1").is_ok());
        for bad in ["", "Side", "-a", "a-", "a_b", &"a".repeat(64)] {
            assert!(parse_container_name(bad).is_err(), "{bad:?}");
        }
        let flags = LogFlags {
            logs_container: vec!["a".into(); MAX_LOG_CONTAINERS + 1],
            ..LogFlags::default()
        };
        assert!(flags.selection(false).is_err());
        assert_eq!(LogFlags::default().selection(false).unwrap(), None);
        let flags = LogFlags {
            all_init_containers: true,
            ..LogFlags::default()
        };
        let s = flags.selection(false).unwrap().unwrap();
        assert_eq!(
            (s.containers, s.init_containers),
            (Containers::Main, Containers::All)
        );
    }
}
