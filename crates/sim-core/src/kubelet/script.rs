//! Scripted containers: what a pod's `sim.podline.io/*` annotations ask the kubelet to do.
//!
//! Keys apply to every container; `<key>.<container>` (e.g. `sim.podline.io/exit-code.sidecar`)
//! overrides one container. Parsing is strict: a bad value is a [`ScriptError`] naming the
//! annotation, the value and what was expected, and the kubelet fails the pod with it rather
//! than guessing. Unknown keys under the prefix are reported as warnings (a typo must be
//! visible), never fatal.

use std::collections::BTreeMap;
use std::time::Duration;

/// The annotation prefix of every scripting key.
pub const ANNOTATION_PREFIX: &str = "sim.podline.io/";

/// Pod-level keys (the scheduler's), then container-level keys.
const POD_KEYS: &[&str] = &["schedule-delay", "unschedulable"];
const CONTAINER_KEYS: &[&str] = &[
    "duration",
    "exit-code",
    "logs",
    "log-lines",
    "pull-delay",
    "image-error",
    "image-error-transient",
    "termination-message",
    "oom",
];

/// Most generated log lines one container may ask for (keeps a typo from eating memory).
const MAX_LOG_LINES: u64 = 1_000_000;

/// A bad scripting annotation: which one, its value, and what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("annotation {key}: {value:?} {problem}; expected {expected}")]
pub struct ScriptError {
    /// The full annotation key, e.g. `sim.podline.io/duration`.
    pub key: String,
    /// The value found (cut to 80 characters).
    pub value: String,
    /// What is wrong with it.
    pub problem: String,
    /// What the annotation accepts.
    pub expected: &'static str,
}

/// How a scripted image pull fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ImageErrorKind {
    /// The image does not exist (`ErrImagePull`, then `ImagePullBackOff`).
    NotFound,
    /// The registry refuses us (401 Unauthorized), same waiting reasons as `NotFound`.
    Unauthorized,
    /// The reference does not parse (`InvalidImageName`, never retried).
    InvalidName,
}

/// The scripted log output of a container.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum LogScript {
    /// No output.
    #[default]
    None,
    /// These lines, spread over the run.
    Lines(Vec<String>),
    /// `line 1` .. `line N`, spread over the run.
    Generated(u32),
}

impl LogScript {
    pub(crate) fn len(&self) -> u32 {
        match self {
            LogScript::None => 0,
            LogScript::Lines(lines) => u32::try_from(lines.len()).unwrap_or(u32::MAX),
            LogScript::Generated(n) => *n,
        }
    }

    /// The `i`-th line (0-based).
    pub(crate) fn line(&self, i: u32) -> String {
        match self {
            LogScript::None => String::new(),
            LogScript::Lines(lines) => lines.get(i as usize).cloned().unwrap_or_default(),
            LogScript::Generated(_) => format!("line {}", i + 1),
        }
    }
}

/// The most of a termination message the kubelet reports: it reads at most the last 4096 bytes
/// of the message file (`kubecontainer.MaxContainerTerminationMessageLength`, read with
/// `tail.ReadAtMost` in kubelet `pkg/kubelet/kuberuntime/kuberuntime_container.go`).
pub(crate) const MAX_TERMINATION_MESSAGE: usize = 4096;

/// The last [`MAX_TERMINATION_MESSAGE`] bytes of `message` (from the first whole character
/// within them: the sim's messages are text).
pub(crate) fn last_termination_bytes(message: &str) -> &str {
    let mut start = message.len().saturating_sub(MAX_TERMINATION_MESSAGE);
    while !message.is_char_boundary(start) {
        start += 1;
    }
    &message[start..]
}

/// What one container does when scripted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ContainerScript {
    pub(crate) duration: Option<Duration>,
    pub(crate) exit_code: i32,
    pub(crate) logs: LogScript,
    pub(crate) pull_delay: Option<Duration>,
    pub(crate) image_error: Option<ImageErrorKind>,
    /// With `image_error`: fail only this many pulls, then succeed.
    pub(crate) transient_failures: Option<u32>,
    pub(crate) termination_message: Option<String>,
    pub(crate) oom: bool,
}

/// What a whole pod does: the scheduler's part and one script per container (spec order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PodScript {
    pub(crate) schedule_delay: Option<Duration>,
    pub(crate) unschedulable: bool,
    pub(crate) containers: Vec<ContainerScript>,
}

/// The parsed script plus warnings about keys that were ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub(crate) script: PodScript,
    pub(crate) warnings: Vec<String>,
}

/// Reads the scripting annotations for a pod whose containers are `containers` (by name).
pub(crate) fn parse(
    annotations: Option<&BTreeMap<String, String>>,
    containers: &[&str],
) -> Result<Parsed, ScriptError> {
    let mut parsed = Parsed {
        script: PodScript {
            containers: vec![ContainerScript::default(); containers.len()],
            ..PodScript::default()
        },
        warnings: Vec::new(),
    };
    let Some(annotations) = annotations else {
        return Ok(parsed);
    };
    // Two passes: keys for all containers first, then per-container overrides.
    for per_container in [false, true] {
        for (key, value) in annotations {
            let Some(rest) = key.strip_prefix(ANNOTATION_PREFIX) else {
                continue;
            };
            let (name, container) = match rest.split_once('.') {
                Some((name, container)) => (name, Some(container)),
                None => (rest, None),
            };
            if container.is_some() != per_container {
                continue;
            }
            apply(&mut parsed, key, name, container, value, containers)?;
        }
    }
    Ok(parsed)
}

fn apply(
    parsed: &mut Parsed,
    key: &str,
    name: &str,
    container: Option<&str>,
    value: &str,
    containers: &[&str],
) -> Result<(), ScriptError> {
    let err = |problem: &str, expected: &'static str| ScriptError {
        key: key.to_owned(),
        value: value.chars().take(80).collect(),
        problem: problem.to_owned(),
        expected,
    };
    if POD_KEYS.contains(&name) {
        if container.is_some() {
            return Err(err(
                "is a pod-level key and takes no container suffix",
                "the key without `.<container>`",
            ));
        }
        let script = &mut parsed.script;
        match name {
            "schedule-delay" => {
                script.schedule_delay = Some(duration(value).map_err(|p| err(&p, DURATION))?)
            }
            _ => script.unschedulable = boolean(value).map_err(|p| err(&p, BOOL))?,
        }
        return Ok(());
    }
    if !CONTAINER_KEYS.contains(&name) {
        parsed.warnings.push(format!(
            "unknown annotation {key} is ignored; known keys under {ANNOTATION_PREFIX}: {}",
            POD_KEYS
                .iter()
                .chain(CONTAINER_KEYS)
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return Ok(());
    }
    let targets: Vec<usize> = match container {
        None => (0..containers.len()).collect(),
        Some(c) => match containers.iter().position(|name| *name == c) {
            Some(i) => vec![i],
            None => {
                return Err(err(
                    &format!("names container {c:?}, which the pod does not have"),
                    "`<key>.<container>` with one of the pod's container names",
                ));
            }
        },
    };
    for i in targets {
        let script = &mut parsed.script.containers[i];
        match name {
            "duration" => script.duration = Some(duration(value).map_err(|p| err(&p, DURATION))?),
            "pull-delay" => {
                script.pull_delay = Some(duration(value).map_err(|p| err(&p, DURATION))?)
            }
            "exit-code" => {
                script.exit_code = match value.trim().parse::<i32>() {
                    Ok(code @ 0..=255) => code,
                    _ => return Err(err("is not an exit code", "an integer from 0 to 255")),
                }
            }
            "logs" => {
                script.logs = LogScript::Lines(value.lines().map(str::to_owned).collect());
            }
            "log-lines" => {
                script.logs = match value.trim().parse::<u64>() {
                    Ok(n) if n <= MAX_LOG_LINES => LogScript::Generated(n as u32),
                    _ => return Err(err("is not a line count", "an integer from 0 to 1000000")),
                }
            }
            "image-error" => {
                script.image_error = Some(match value.trim() {
                    "ErrImagePull" | "ImagePullBackOff" => ImageErrorKind::NotFound,
                    "InvalidImageName" => ImageErrorKind::InvalidName,
                    "auth" | "Unauthorized" => ImageErrorKind::Unauthorized,
                    _ => {
                        return Err(err(
                            "is not a known image error",
                            "one of ErrImagePull, ImagePullBackOff, InvalidImageName, auth",
                        ));
                    }
                })
            }
            "image-error-transient" => {
                script.transient_failures = match value.trim().parse::<u32>() {
                    Ok(n) => Some(n),
                    _ => return Err(err("is not a pull failure count", "a non-negative integer")),
                }
            }
            "termination-message" => {
                script.termination_message = Some(last_termination_bytes(value).to_owned());
            }
            _ => script.oom = boolean(value).map_err(|p| err(&p, BOOL))?,
        }
    }
    Ok(())
}

const DURATION: &str = "a duration such as \"150ms\", \"2s\", \"1m30s\"";
const BOOL: &str = "\"true\" or \"false\"";

/// Parses a non-negative duration with units (`150ms`, `2s`, `1m30s`, `PT2S`).
pub(crate) fn duration(value: &str) -> Result<Duration, String> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err("has no unit".to_owned());
    }
    let parsed: jiff::SignedDuration = value.parse().map_err(|_| "is not a duration".to_owned())?;
    Duration::try_from(parsed).map_err(|_| "is negative".to_owned())
}

fn boolean(value: &str) -> Result<bool, String> {
    match value.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("is not a boolean".to_owned()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("{ANNOTATION_PREFIX}{k}"), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn no_annotations_should_give_defaults() {
        let parsed = parse(None, &["main"]).unwrap();
        assert_eq!(parsed.script.containers, vec![ContainerScript::default()]);
        assert!(!parsed.script.unschedulable);
    }

    #[test]
    fn durations_should_accept_units() {
        assert_eq!(duration("150ms").unwrap(), Duration::from_millis(150));
        assert_eq!(duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(duration("0s").unwrap(), Duration::ZERO);
        assert!(duration("2").unwrap_err().contains("no unit"));
        assert!(duration("-2s").is_err());
        assert!(duration("soon").is_err());
    }

    #[test]
    fn keys_should_apply_to_all_containers_and_suffix_should_override_one() {
        let a = annotations(&[
            ("exit-code", "3"),
            ("exit-code.side", "0"),
            ("duration", "1s"),
            ("logs", "a\nb"),
            ("oom.side", "true"),
        ]);
        let parsed = parse(Some(&a), &["main", "side"]).unwrap();
        let [main, side] = &parsed.script.containers[..] else {
            panic!()
        };
        assert_eq!(main.exit_code, 3);
        assert_eq!(side.exit_code, 0);
        assert_eq!(main.duration, Some(Duration::from_secs(1)));
        assert_eq!(main.logs, LogScript::Lines(vec!["a".into(), "b".into()]));
        assert!(side.oom && !main.oom);
    }

    #[test]
    fn bad_values_should_name_the_annotation_and_expectation() {
        let a = annotations(&[("exit-code", "lots")]);
        let e = parse(Some(&a), &["main"]).unwrap_err();
        assert_eq!(e.key, "sim.podline.io/exit-code");
        assert_eq!(
            e.to_string(),
            "annotation sim.podline.io/exit-code: \"lots\" is not an exit code; expected an integer from 0 to 255"
        );
        let a = annotations(&[("duration", "2")]);
        assert!(
            parse(Some(&a), &["main"])
                .unwrap_err()
                .to_string()
                .contains("has no unit")
        );
        let a = annotations(&[("image-error", "Boom")]);
        assert!(parse(Some(&a), &["main"]).is_err());
        let a = annotations(&[("unschedulable", "yes")]);
        assert!(parse(Some(&a), &["main"]).is_err());
        let a = annotations(&[("log-lines", "-1")]);
        assert!(parse(Some(&a), &["main"]).is_err());
        let a = annotations(&[("exit-code", "256")]);
        assert!(parse(Some(&a), &["main"]).is_err());
    }

    #[test]
    fn unknown_container_suffix_should_be_an_error() {
        let a = annotations(&[("exit-code.nope", "1")]);
        let e = parse(Some(&a), &["main"]).unwrap_err();
        assert!(e.problem.contains("\"nope\""), "{e}");
    }

    #[test]
    fn unknown_keys_should_warn_not_fail() {
        let a = annotations(&[("exitcode", "1")]);
        let parsed = parse(Some(&a), &["main"]).unwrap();
        assert_eq!(parsed.warnings.len(), 1);
        assert!(parsed.warnings[0].contains("sim.podline.io/exitcode"));
    }

    #[test]
    fn image_errors_should_map_to_kinds() {
        for (value, kind) in [
            ("ErrImagePull", ImageErrorKind::NotFound),
            ("ImagePullBackOff", ImageErrorKind::NotFound),
            ("InvalidImageName", ImageErrorKind::InvalidName),
            ("auth", ImageErrorKind::Unauthorized),
        ] {
            let a = annotations(&[("image-error", value), ("image-error-transient", "2")]);
            let parsed = parse(Some(&a), &["main"]).unwrap();
            assert_eq!(parsed.script.containers[0].image_error, Some(kind));
            assert_eq!(parsed.script.containers[0].transient_failures, Some(2));
        }
    }

    #[test]
    fn pod_keys_should_parse() {
        let a = annotations(&[("schedule-delay", "250ms"), ("unschedulable", "true")]);
        let parsed = parse(Some(&a), &["main"]).unwrap();
        assert_eq!(
            parsed.script.schedule_delay,
            Some(Duration::from_millis(250))
        );
        assert!(parsed.script.unschedulable);
        let a = annotations(&[("unschedulable.main", "true")]);
        assert!(parse(Some(&a), &["main"]).is_err());
    }

    #[test]
    fn generated_lines_should_count_from_one() {
        let logs = LogScript::Generated(3);
        assert_eq!(logs.len(), 3);
        assert_eq!(logs.line(0), "line 1");
        assert_eq!(logs.line(2), "line 3");
    }
}
