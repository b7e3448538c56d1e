//! Go's time arithmetic where kube-apiserver's results depend on it (a wrapping product), kept
//! apart so that the store and the deletion logic both use it without naming each other.

use jiff::{SignedDuration, Timestamp};

/// `t.Add(time.Duration(secs) * time.Second)` as kube-apiserver computes a deletionTimestamp
/// (apiserver `pkg/registry/rest/delete.go` `BeforeDelete`): the product wraps in int64
/// nanoseconds, so every grace period gives an instant within 292 years of `t` that any client
/// decodes (2^63-1 s wraps to -1 s). The grace period itself is not bounded by validation.
pub fn go_add_seconds(t: Timestamp, secs: i64) -> Timestamp {
    let nanos = secs.wrapping_mul(1_000_000_000);
    t.checked_add(SignedDuration::from_nanos(nanos))
        .unwrap_or(t)
}
