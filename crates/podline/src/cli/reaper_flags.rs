//! The reaper's duration flags, parsed alike by `gc` (`--grace`, `--wait`) and `record --reap`
//! (`--reap-grace`, `--reap-every`), and `run --keep-for-retry`, which the reaper honours.

use std::time::Duration;

use crate::cli::duration;

/// A period of the reaper: a positive duration.
pub(crate) fn parse_period(s: &str) -> Result<Duration, String> {
    duration::positive(s)
}

/// The reaper's grace: 1 s to 1 h. It is also the longest gap between two lists that is not
/// taken for an outage, so it must leave room for a list's answer (hence at least 1 s).
pub(crate) fn parse_grace(s: &str) -> Result<Duration, String> {
    duration::bounded(s, Duration::from_secs(1), Duration::from_secs(3600))
}

/// How long `gc` watches at most: 1 s to 2 h.
pub(crate) fn parse_wait(s: &str) -> Result<Duration, String> {
    duration::bounded(s, Duration::from_secs(1), Duration::from_secs(2 * 3600))
}

/// `run --keep-for-retry`: whole seconds from 0 to a day
/// ([`podline_launch::MAX_KEEP_FOR_RETRY`]), sent on the Lease in seconds.
pub(crate) fn parse_keep_for_retry(s: &str) -> Result<Duration, String> {
    let d = duration::bounded(s, Duration::ZERO, podline_launch::MAX_KEEP_FOR_RETRY)?;
    if d.subsec_nanos() != 0 {
        return Err(format!("{s:?} is not whole seconds"));
    }
    Ok(d)
}

/// The time between two of `gc`'s lists: a third of the grace, at most 1 s (well inside the
/// grace, so that consecutive lists never count as a gap in the observation).
pub(crate) fn sweep_period(grace: Duration) -> Duration {
    (grace / 3).min(Duration::from_secs(1))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn grace_and_wait_should_be_bounded_at_parse_time() {
        assert_eq!(parse_grace("9s"), Ok(Duration::from_secs(9)));
        for bad in ["0", "500ms", "2h"] {
            let err = parse_grace(bad).unwrap_err();
            assert!(err.contains("out of range"), "{bad}: {err}");
        }
        assert_eq!(parse_wait("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_wait("3h").is_err());
        assert!(sweep_period(Duration::from_secs(1)) < Duration::from_secs(1));
        assert_eq!(sweep_period(Duration::from_secs(9)), Duration::from_secs(1));
    }

    #[test]
    fn keep_for_retry_should_be_whole_seconds_up_to_a_day() {
        assert_eq!(parse_keep_for_retry("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_keep_for_retry("24h"), Ok(Duration::from_secs(86400)));
        assert_eq!(parse_keep_for_retry("330"), Ok(Duration::from_secs(330)));
        for bad in ["24h1s", "1500ms", "-1s", "soon"] {
            assert!(parse_keep_for_retry(bad).is_err(), "{bad}");
        }
    }
}
