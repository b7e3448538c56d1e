//! Query parameters shared by pages and the API, parsed strictly: a bad value is a 400 that
//! names the parameter, the value and what was expected.

use jiff::{SignedDuration, Timestamp};
use podline_store::{FailureFilter, PodFilter, RunFilter, RunStatus};
use serde::Deserialize;

use crate::error::UiError;

/// `?namespace=&status=&since=&until=&limit=` of the runs list.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct RunQuery {
    pub namespace: Option<String>,
    pub status: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub limit: Option<String>,
}

impl RunQuery {
    pub(crate) fn filter(&self, now: Timestamp) -> Result<RunFilter, UiError> {
        let status = non_empty(&self.status)
            .map(|s| {
                RunStatus::parse(s).ok_or_else(|| bad("status", s, "running, failed or succeeded"))
            })
            .transpose()?;
        Ok(RunFilter {
            namespace: non_empty(&self.namespace).map(str::to_owned),
            status,
            created_after: time("since", &self.since, now)?,
            created_before: time("until", &self.until, now)?,
            limit: limit(&self.limit)?,
        })
    }
}

/// `?namespace=&run=&phase=&limit=` of the pods list.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct PodQuery {
    pub namespace: Option<String>,
    pub run: Option<String>,
    pub phase: Option<String>,
    pub limit: Option<String>,
}

impl PodQuery {
    pub(crate) fn filter(&self) -> Result<PodFilter, UiError> {
        Ok(PodFilter {
            namespace: non_empty(&self.namespace).map(str::to_owned),
            run: non_empty(&self.run).map(str::to_owned),
            phase: non_empty(&self.phase).map(str::to_owned),
            limit: Some(limit(&self.limit)?.unwrap_or(DEFAULT_POD_LIMIT)),
        })
    }
}

/// Pods listed when no `limit` is given: a page stays usable on a store with millions.
const DEFAULT_POD_LIMIT: u32 = 500;

/// `?namespace=&run=` of the failures view.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct FailureQuery {
    pub namespace: Option<String>,
    pub run: Option<String>,
}

impl FailureQuery {
    pub(crate) fn filter(&self) -> FailureFilter {
        FailureFilter {
            namespace: non_empty(&self.namespace).map(str::to_owned),
            run: non_empty(&self.run).map(str::to_owned),
        }
    }
}

/// `?since=` of the change feed: a mark as RFC 3339 or microseconds since the epoch.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ChangeQuery {
    pub since: Option<String>,
}

impl ChangeQuery {
    pub(crate) fn since(&self) -> Result<Option<Timestamp>, UiError> {
        non_empty(&self.since).map(parse_mark).transpose()
    }
}

/// Parses a change mark: microseconds since the epoch (what the event stream's ids are) or
/// an RFC 3339 timestamp.
pub(crate) fn parse_mark(value: &str) -> Result<Timestamp, UiError> {
    let expected = "microseconds since the epoch or an RFC 3339 time";
    if let Ok(micros) = value.parse::<i64>() {
        return Timestamp::from_microsecond(micros).map_err(|_| bad("since", value, expected));
    }
    value.parse().map_err(|_| bad("since", value, expected))
}

/// A mark as the event stream and pages hand it out.
pub(crate) fn mark_text(mark: Option<Timestamp>) -> String {
    mark.map_or_else(String::new, |t| t.as_microsecond().to_string())
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

fn bad(name: &str, value: &str, expected: &str) -> UiError {
    let shown: String = value.chars().take(80).collect();
    UiError::BadRequest(format!(
        "query parameter {name}={shown:?} is invalid; expected {expected}"
    ))
}

fn limit(value: &Option<String>) -> Result<Option<u32>, UiError> {
    non_empty(value)
        .map(|v| {
            v.parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| bad("limit", v, "a whole number from 1"))
        })
        .transpose()
}

/// A time filter: an RFC 3339 time (`2026-01-01T00:00:00Z`) or a duration back from now
/// (`90m`, `2h`, `1d`).
fn time(name: &str, value: &Option<String>, now: Timestamp) -> Result<Option<Timestamp>, UiError> {
    let Some(v) = non_empty(value) else {
        return Ok(None);
    };
    let expected = "an RFC 3339 time such as 2026-01-01T00:00:00Z, or a duration back from now such as 90m, 2h or 1d";
    if let Ok(t) = v.parse::<Timestamp>() {
        return Ok(Some(t));
    }
    let d = parse_ago(v).ok_or_else(|| bad(name, v, expected))?;
    now.checked_sub(d)
        .map(Some)
        .map_err(|_| bad(name, v, expected))
}

/// `90m`, `2h`, `1d`, `45s`, or anything jiff's friendly duration format reads.
fn parse_ago(v: &str) -> Option<SignedDuration> {
    let (number, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit())?);
    if let Ok(n) = number.parse::<i64>() {
        let secs = match unit {
            "s" => Some(n),
            "m" => n.checked_mul(60),
            "h" => n.checked_mul(3600),
            "d" => n.checked_mul(86_400),
            _ => None,
        };
        if let Some(secs) = secs {
            return Some(SignedDuration::from_secs(secs));
        }
    }
    v.parse::<SignedDuration>()
        .ok()
        .filter(|d| !d.is_negative())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-06-01T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn run_filters_should_parse_status_times_and_limits() {
        let q = RunQuery {
            namespace: Some(" team-a ".into()),
            status: Some("Failed".into()),
            since: Some("2h".into()),
            until: Some("2026-06-01T11:30:00Z".into()),
            limit: Some("5".into()),
        };
        let f = q.filter(now()).unwrap();
        assert_eq!(f.namespace.as_deref(), Some("team-a"));
        assert_eq!(f.status, Some(RunStatus::Failed));
        assert_eq!(
            f.created_after,
            Some("2026-06-01T10:00:00Z".parse().unwrap())
        );
        assert_eq!(
            f.created_before,
            Some("2026-06-01T11:30:00Z".parse().unwrap())
        );
        assert_eq!(f.limit, Some(5));
        let empty = RunQuery {
            status: Some(String::new()),
            ..Default::default()
        };
        assert_eq!(empty.filter(now()).unwrap(), RunFilter::default());
    }

    #[test]
    fn bad_values_should_name_the_parameter_and_what_was_expected() {
        for (q, needle) in [
            (
                RunQuery {
                    status: Some("weird".into()),
                    ..Default::default()
                },
                "status=\"weird\" is invalid; expected running, failed or succeeded",
            ),
            (
                RunQuery {
                    since: Some("yesterday".into()),
                    ..Default::default()
                },
                "since=\"yesterday\"",
            ),
            (
                RunQuery {
                    limit: Some("0".into()),
                    ..Default::default()
                },
                "limit=\"0\"",
            ),
        ] {
            let err = q.filter(now()).unwrap_err();
            assert!(matches!(err, UiError::BadRequest(_)));
            assert!(err.to_string().contains(needle), "{err}");
        }
        assert!(parse_mark("soon").is_err());
        assert_eq!(
            parse_mark("1767225600000000").unwrap(),
            "2026-01-01T00:00:00Z".parse::<Timestamp>().unwrap()
        );
    }
}
