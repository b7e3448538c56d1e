//! Conversions between Rust values and the portable column types (BIGINT and TEXT only).
//!
//! Both backends store the same representation so one set of statements serves both:
//! timestamps are microseconds since the Unix epoch (UTC), maps are JSON text, flags are 0/1,
//! resourceVersions are BIGINT (etcd revisions are int64, so every real one fits).

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
    fn maps_should_round_trip_and_bad_json_should_be_corrupt() {
        let map = BTreeMap::from([("a".to_owned(), "b \"quoted\"".to_owned())]);
        assert_eq!(map_from_json("labels", &map_json(&map)).unwrap(), map);
        assert!(matches!(
            map_from_json("labels", "not json"),
            Err(StoreError::Corrupt { what: "labels", .. })
        ));
    }
}
