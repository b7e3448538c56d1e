//! The timestamp format the kubelet puts in front of each log line.
//!
//! `kubectl logs --timestamps` prints what the kubelet writes: Go's fixed-width variant of
//! RFC 3339 with nanoseconds (`2006-01-02T15:04:05.000000000Z07:00`, called `RFC3339NanoFixed`
//! in the kubelet's `kuberuntime/logs` package). Unlike `time.RFC3339Nano` it never trims
//! trailing zeros, so every prefix has the same width (30 bytes for UTC).

use std::fmt::Write as _;

use jiff::Timestamp;
use jiff::tz::TimeZone;

/// Formats `at` as `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ` (UTC, always nine fractional digits).
pub fn rfc3339_nano_fixed(at: Timestamp) -> String {
    let mut out = String::with_capacity(30);
    write_rfc3339_nano_fixed(&mut out, at);
    out
}

/// Appends the fixed-width timestamp to `out` (avoids an allocation per log line).
pub(crate) fn write_rfc3339_nano_fixed(out: &mut String, at: Timestamp) {
    let dt = at.to_zoned(TimeZone::UTC).datetime();
    // Writing into a String cannot fail.
    let _ = write!(
        out,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        dt.subsec_nanosecond()
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_should_keep_all_nine_fractional_digits() {
        let at: Timestamp = "2026-03-04T05:06:07.120Z".parse().unwrap();
        assert_eq!(rfc3339_nano_fixed(at), "2026-03-04T05:06:07.120000000Z");
    }

    #[test]
    fn timestamp_should_print_zero_fraction_in_full() {
        let at: Timestamp = "2026-03-04T05:06:07Z".parse().unwrap();
        assert_eq!(rfc3339_nano_fixed(at), "2026-03-04T05:06:07.000000000Z");
    }

    #[test]
    fn timestamp_should_be_utc_with_nanoseconds() {
        let at: Timestamp = "2026-03-04T23:59:59.987654321+02:00".parse().unwrap();
        assert_eq!(rfc3339_nano_fixed(at), "2026-03-04T21:59:59.987654321Z");
    }
}
