//! Conversions between Rust values and the portable column types (BIGINT and TEXT only).
//!
//! Both backends store the same representation so one set of statements serves both:
//! timestamps are microseconds since the Unix epoch (UTC), maps are JSON text, flags are 0/1,
//! resourceVersions are BIGINT (etcd revisions are int64, so every real one fits).
//!
//! Free text (names, phases, reasons, messages, images, the watch key: every TEXT column but the
//! JSON maps) goes through [`text`] on the way in and [`text_from`] on the way out, because a
//! container can put anything into its termination message and PostgreSQL refuses a NUL in TEXT
//! (which failed the whole batch) while SQLite cut the value at it. The escape is lossless and
//! the identity on every string without NUL or [`ESCAPE`]:
//! - NUL (U+0000) is stored as `␀0` ([`ESCAPE`] then `0`);
//! - [`ESCAPE`] itself (U+2400 SYMBOL FOR NULL) is stored doubled, `␀␀`;
//! - on read, `␀0` and `␀␀` are undone, and any other `␀` (only a hand edit makes one) is kept.
//!
//! Labels and annotations are JSON text, and JSON already writes NUL as `\u0000`: no escape.
//! Filters compare escaped values ([`text`] on the bound parameter), so a query for a name with a
//! NUL finds it.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::error::StoreError;

/// Timestamp -> microseconds since the epoch.
pub(crate) fn ts(t: Timestamp) -> i64 {
    t.as_microsecond()
}

/// Optional timestamp -> optional microseconds.
pub(crate) fn ts_opt(t: Option<Timestamp>) -> Option<i64> {
    t.map(ts)
}

/// Microseconds -> timestamp; out-of-range values are reported as corrupt, not clamped.
pub(crate) fn ts_from(what: &'static str, micros: i64) -> Result<Timestamp, StoreError> {
    Timestamp::from_microsecond(micros).map_err(|_| StoreError::Corrupt {
        what,
        value: micros.to_string(),
    })
}

/// Optional microseconds -> optional timestamp.
pub(crate) fn ts_from_opt(
    what: &'static str,
    micros: Option<i64>,
) -> Result<Option<Timestamp>, StoreError> {
    micros.map(|m| ts_from(what, m)).transpose()
}

/// resourceVersion -> BIGINT. The plan rejects values that don't fit before any statement runs,
/// so saturating here never changes a stored value.
pub(crate) fn rv(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// BIGINT -> resourceVersion; negative values only come from hand edits.
pub(crate) fn rv_from(what: &'static str, v: i64) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt {
        what,
        value: v.to_string(),
    })
}

/// The escape character of free text: U+2400 SYMBOL FOR NULL (`␀`), chosen because it is
/// practically never in real text (so almost nothing is ever escaped) and reads as "a NUL was
/// here" to someone looking at the raw column.
pub(crate) const ESCAPE: char = '\u{2400}';

/// Free text -> its stored form: NUL as `␀0`, `␀` as `␀␀`, everything else unchanged. Owned
/// because sqlx copies a bound `&str` into a `String` anyway.
pub(crate) fn text(value: &str) -> String {
    if !value.contains(['\0', ESCAPE]) {
        return value.to_owned();
    }
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        match c {
            '\0' => {
                out.push(ESCAPE);
                out.push('0');
            }
            ESCAPE => {
                out.push(ESCAPE);
                out.push(ESCAPE);
            }
            c => out.push(c),
        }
    }
    out
}

/// Optional free text -> optional stored form.
pub(crate) fn text_opt(value: Option<&str>) -> Option<String> {
    value.map(text)
}

/// Stored form -> free text (the inverse of [`text`]). A `␀` followed by anything but `0` or
/// `␀` cannot come from [`text`]; it is kept as it is rather than failing the whole read.
pub(crate) fn text_from(stored: String) -> String {
    if !stored.contains(ESCAPE) {
        return stored;
    }
    let mut out = String::with_capacity(stored.len());
    let mut chars = stored.chars().peekable();
    while let Some(c) = chars.next() {
        if c != ESCAPE {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('0') => {
                chars.next();
                out.push('\0');
            }
            Some(&ESCAPE) => {
                chars.next();
                out.push(ESCAPE);
            }
            _ => out.push(ESCAPE),
        }
    }
    out
}

/// Optional stored form -> optional free text.
pub(crate) fn text_from_opt(stored: Option<String>) -> Option<String> {
    stored.map(text_from)
}

/// Label/annotation map -> JSON text.
pub(crate) fn map_json(map: &BTreeMap<String, String>) -> String {
    // Serializing a map of strings cannot fail; fall back to an empty object just in case.
    serde_json::to_string(map).unwrap_or_else(|_| "{}".to_owned())
}

/// JSON text -> label/annotation map.
pub(crate) fn map_from_json(
    what: &'static str,
    text: &str,
) -> Result<BTreeMap<String, String>, StoreError> {
    serde_json::from_str(text).map_err(|_| StoreError::Corrupt {
        what,
        value: text.chars().take(200).collect(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_should_round_trip_at_microsecond_precision() {
        let t: Timestamp = "2026-11-30T11:00:00.123456Z".parse().unwrap();
        assert_eq!(ts_from("t", ts(t)).unwrap(), t);
        assert!(ts_from("t", i64::MAX).is_err());
    }

    #[test]
    fn free_text_should_round_trip_and_never_store_a_nul() {
        let hostile = [
            "",
            "plain text",
            "\0",
            "exit\0code\0\0",
            "␀",
            "␀0",
            "␀␀",
            "a␀0b\0␀",
            "\0␀0\0",
            "tab\tnl\ncr\resc\u{1b}[31m del\u{7f} c1\u{85} bom\u{feff} nonchar\u{ffff}",
            "rtl \u{202e}evil\u{202c} emoji 🧨 combining e\u{301}",
        ];
        for value in hostile {
            let stored = text(value);
            assert!(!stored.contains('\0'), "{value:?} stored as {stored:?}");
            assert_eq!(text_from(stored.clone()), value, "stored as {stored:?}");
        }
        // Identity on ordinary text (no allocation of a different value, nothing to migrate).
        assert_eq!(text("Completed: exit 0"), "Completed: exit 0");
        assert_eq!(text("\0"), "␀0");
        assert_eq!(text("␀"), "␀␀");
        // A lone escape (a hand edit) is kept, not an error.
        assert_eq!(text_from("x␀y␀".to_owned()), "x␀y␀");
        let long = "\0␀x".repeat(100_000);
        assert_eq!(text_from(text(&long)), long);
    }

    #[test]
    fn maps_should_round_trip_and_bad_json_should_be_corrupt() {
        let map = BTreeMap::from([
            ("a".to_owned(), "b \"quoted\"".to_owned()),
            ("nul\0key".to_owned(), "nul\0value ␀".to_owned()),
        ]);
        assert!(!map_json(&map).contains('\0'), "JSON escapes NUL itself");
        assert_eq!(map_from_json("labels", &map_json(&map)).unwrap(), map);
        assert!(matches!(
            map_from_json("labels", "not json"),
            Err(StoreError::Corrupt { what: "labels", .. })
        ));
    }
}
