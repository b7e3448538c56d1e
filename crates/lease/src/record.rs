//! The leader record kept in a Lease's spec, and the Lease objects an elector writes (pure).
//!
//! Field meanings follow client-go's `LeaderElectionRecord`: `holderIdentity` (empty = free),
//! `leaseDurationSeconds`, `acquireTime` (when the current holder took it), `renewTime` (last
//! renewal, informative only: followers time expiry on their own clock) and `leaseTransitions`
//! (how many times the holder changed).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;

/// Who holds the lease; `None` when nobody does (absent or empty `holderIdentity`).
pub(crate) fn holder(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|spec| spec.holder_identity.as_deref())
        .filter(|holder| !holder.is_empty())
}

/// The lease's own duration, if it states a positive one.
pub(crate) fn duration(lease: &Lease) -> Option<Duration> {
    let seconds = lease.spec.as_ref()?.lease_duration_seconds?;
    u64::try_from(seconds)
        .ok()
        .filter(|s| *s > 0)
        .map(Duration::from_secs)
}

/// The lease's `leaseTransitions` (0 when absent).
pub(crate) fn transitions(lease: &Lease) -> i32 {
    lease
        .spec
        .as_ref()
        .and_then(|spec| spec.lease_transitions)
        .unwrap_or(0)
}

/// A brand-new lease held by `me`, for when none exists yet.
pub(crate) fn fresh(
    namespace: &str,
    name: &str,
    me: &str,
    duration_seconds: i32,
    now: Timestamp,
) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(me.to_owned()),
            lease_duration_seconds: Some(duration_seconds),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    }
}

/// `current` taken (or renewed) by `me`. Keeps the metadata, so its resourceVersion makes the
/// update conditional: if anyone wrote the lease since `current` was read, the server answers
/// 409 Conflict and nothing changes.
pub(crate) fn claimed(current: &Lease, me: &str, duration_seconds: i32, now: Timestamp) -> Lease {
    let old = current.spec.clone().unwrap_or_default();
    let renewing = holder(current) == Some(me);
    let spec = LeaseSpec {
        holder_identity: Some(me.to_owned()),
        lease_duration_seconds: Some(duration_seconds),
        acquire_time: if renewing {
            old.acquire_time.clone().or(Some(MicroTime(now)))
        } else {
            Some(MicroTime(now))
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(if renewing {
            transitions(current)
        } else {
            transitions(current).saturating_add(1)
        }),
        ..old
    };
    Lease {
        metadata: current.metadata.clone(),
        spec: Some(spec),
    }
}

/// `current` given up: no holder and a 1 s duration, so followers take over at their next poll.
/// Conditional on `current`'s resourceVersion like [`claimed`].
pub(crate) fn released(current: &Lease, now: Timestamp) -> Lease {
    let old = current.spec.clone().unwrap_or_default();
    let spec = LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions(current)),
        ..old
    };
    Lease {
        metadata: current.metadata.clone(),
        spec: Some(spec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + seconds).unwrap()
    }

    fn with_rv(mut lease: Lease, rv: &str) -> Lease {
        lease.metadata.resource_version = Some(rv.to_owned());
        lease
    }

    #[test]
    fn a_fresh_lease_is_held_by_its_creator_with_no_transitions() {
        let lease = fresh("ns", "podline", "a", 15, at(0));
        assert_eq!(holder(&lease), Some("a"));
        assert_eq!(duration(&lease), Some(Duration::from_secs(15)));
        assert_eq!(transitions(&lease), 0);
        assert_eq!(lease.metadata.namespace.as_deref(), Some("ns"));
    }

    #[test]
    fn renewing_keeps_acquire_time_and_transitions_and_the_resource_version() {
        let lease = with_rv(fresh("ns", "l", "a", 15, at(0)), "7");
        let renewed = claimed(&lease, "a", 15, at(5));
        let spec = renewed.spec.as_ref().unwrap();
        assert_eq!(spec.acquire_time, Some(MicroTime(at(0))));
        assert_eq!(spec.renew_time, Some(MicroTime(at(5))));
        assert_eq!(transitions(&renewed), 0);
        assert_eq!(renewed.metadata.resource_version.as_deref(), Some("7"));
    }

    #[test]
    fn taking_over_counts_a_transition_and_resets_acquire_time() {
        let lease = with_rv(fresh("ns", "l", "a", 15, at(0)), "7");
        let taken = claimed(&lease, "b", 15, at(20));
        assert_eq!(holder(&taken), Some("b"));
        assert_eq!(transitions(&taken), 1);
        let spec = taken.spec.as_ref().unwrap();
        assert_eq!(spec.acquire_time, Some(MicroTime(at(20))));
    }

    #[test]
    fn released_lease_has_no_holder_and_a_short_duration() {
        let lease = claimed(&fresh("ns", "l", "a", 15, at(0)), "b", 15, at(1));
        let free = released(&lease, at(2));
        assert_eq!(holder(&free), None);
        assert_eq!(duration(&free), Some(Duration::from_secs(1)));
        assert_eq!(transitions(&free), 1, "releasing is not a transition");
    }

    #[test]
    fn empty_holder_identity_means_free() {
        let mut lease = fresh("ns", "l", "a", 15, at(0));
        lease.spec.as_mut().unwrap().holder_identity = Some(String::new());
        assert_eq!(holder(&lease), None);
        lease.spec.as_mut().unwrap().lease_duration_seconds = Some(0);
        assert_eq!(duration(&lease), None);
    }
}
