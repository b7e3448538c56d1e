//! The one duration grammar of the binary's flags and variables: the client crate's strict,
//! bounded parser (`90` = seconds, `90s`, `2m`, `1m30s`, `500ms`, `1h`; at most 365 days, so no
//! deadline computed from a value can overflow), with the checks flags share (above zero, within
//! a range) and errors that quote the value and say what was expected.

use std::time::Duration;

/// Any duration of the grammar, zero included (for settings checked later, together).
pub(crate) fn any(s: &str) -> Result<Duration, String> {
    podline_client::timeouts::parse_duration(s).map_err(|e| format!("{s:?}: {e}"))
}

/// A duration above zero: every period, timeout and backoff flag.
pub(crate) fn positive(s: &str) -> Result<Duration, String> {
    let d = any(s)?;
    if d.is_zero() {
        return Err(format!("{s:?} must be greater than zero"));
    }
    Ok(d)
}

/// A duration from `min` to `max`, both included.
pub(crate) fn bounded(s: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let d = any(s)?;
    if d < min || d > max {
        return Err(format!(
            "{s:?} is out of range (expected {min:?} to {max:?})"
        ));
    }
    Ok(d)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn positive_should_refuse_zero_and_bad_text_naming_the_value() {
        assert_eq!(positive("90"), Ok(Duration::from_secs(90)));
        assert_eq!(positive("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(any("0s"), Ok(Duration::ZERO));
        assert!(positive("0s").unwrap_err().contains("greater than zero"));
        assert!(positive("soon").unwrap_err().starts_with("\"soon\""));
    }

    #[test]
    fn bounded_should_include_both_ends() {
        let (min, max) = (Duration::from_secs(1), Duration::from_secs(60));
        assert_eq!(bounded("1s", min, max), Ok(min));
        assert_eq!(bounded("1m", min, max), Ok(max));
        assert!(
            bounded("61s", min, max)
                .unwrap_err()
                .contains("out of range")
        );
        assert!(bounded("999ms", min, max).is_err());
    }
}
