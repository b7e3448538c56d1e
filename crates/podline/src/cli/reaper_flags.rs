//! The reaper's duration flags, parsed alike by `gc` (`--grace`) and `record --reap`
//! (`--reap-grace`, `--reap-every`).

use std::time::Duration;

/// A duration flag of the reaper (`90`, `9s`, `2m`, `500ms`; at most 365 days).
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    podline_client::timeouts::parse_duration(s).map_err(|e| format!("{s:?}: {e}"))
}

/// A period of the reaper: a positive duration.
pub(crate) fn parse_period(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(format!("{s:?} must be greater than zero"));
    }
    Ok(d)
}
