//! The reaper's duration flags, parsed alike by `gc` (`--grace`, `--wait`) and `record --reap`
//! (`--reap-grace`, `--reap-every`).

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
}
