//! When may a follower take the lease? (pure; time is passed in)
//!
//! A follower never trusts the `renewTime` written by another machine's clock. It remembers when
//! it first saw the current version of the lease record, on its own monotonic clock, and treats
//! the lease as expired once that version has stayed unchanged for the lease's duration.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use tokio::time::Instant;

use crate::record;

/// The last lease version a follower saw, and when it first saw it.
#[derive(Debug, Default)]
pub(crate) struct Observer {
    last: Option<Seen>,
}

#[derive(Debug)]
struct Seen {
    resource_version: Option<String>,
    spec: Option<LeaseSpec>,
    since: Instant,
}

impl Observer {
    /// Records `lease` as read at `now`; returns since when this exact version has been seen.
    pub(crate) fn observe(&mut self, lease: &Lease, now: Instant) -> Instant {
        match &self.last {
            Some(seen)
                if seen.resource_version == lease.metadata.resource_version
                    && seen.spec == lease.spec =>
            {
                seen.since
            }
            _ => {
                self.last = Some(Seen {
                    resource_version: lease.metadata.resource_version.clone(),
                    spec: lease.spec.clone(),
                    since: now,
                });
                now
            }
        }
    }
}

/// What a follower does after reading the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Try to take the lease (conditional update).
    Acquire,
    /// Someone else holds a live lease: don't write before this instant.
    WaitUntil(Instant),
}

/// Decides for `me`, given the lease, since when its current version has been seen, and now.
/// `fallback` is the duration to assume when the lease doesn't state a valid one.
pub(crate) fn decide(
    lease: &Lease,
    me: &str,
    seen_since: Instant,
    now: Instant,
    fallback: Duration,
) -> Decision {
    match record::holder(lease) {
        // Free (never held or released), or ours already (e.g. we restarted with the same name).
        None => Decision::Acquire,
        Some(holder) if holder == me => Decision::Acquire,
        Some(_) => {
            let expires = seen_since + record::duration(lease).unwrap_or(fallback);
            if now >= expires {
                Decision::Acquire
            } else {
                Decision::WaitUntil(expires)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    const FALLBACK: Duration = Duration::from_secs(15);

    fn lease(holder: &str, rv: &str, seconds: i32) -> Lease {
        let mut lease = record::fresh("ns", "l", holder, seconds, Timestamp::UNIX_EPOCH);
        lease.metadata.resource_version = Some(rv.to_owned());
        lease
    }

    #[test]
    fn a_live_lease_held_by_another_is_left_alone_until_it_expires() {
        let t0 = Instant::now();
        let mut observer = Observer::default();
        let a = lease("a", "1", 2);
        let since = observer.observe(&a, t0);
        assert_eq!(
            decide(&a, "b", since, t0, FALLBACK),
            Decision::WaitUntil(t0 + Duration::from_secs(2))
        );
        let later = t0 + Duration::from_millis(1999);
        let since = observer.observe(&a, later);
        assert_eq!(since, t0, "an unchanged record keeps its first-seen time");
        assert!(matches!(
            decide(&a, "b", since, later, FALLBACK),
            Decision::WaitUntil(_)
        ));
        let expired = t0 + Duration::from_secs(2);
        assert_eq!(
            decide(&a, "b", observer.observe(&a, expired), expired, FALLBACK),
            Decision::Acquire
        );
    }

    #[test]
    fn a_renewal_restarts_the_follower_clock() {
        let t0 = Instant::now();
        let mut observer = Observer::default();
        observer.observe(&lease("a", "1", 2), t0);
        let t1 = t0 + Duration::from_millis(1500);
        let renewed = lease("a", "2", 2);
        let since = observer.observe(&renewed, t1);
        assert_eq!(since, t1);
        let t2 = t0 + Duration::from_millis(2500);
        assert_eq!(
            decide(&renewed, "b", since, t2, FALLBACK),
            Decision::WaitUntil(t1 + Duration::from_secs(2))
        );
    }

    #[test]
    fn a_free_or_own_lease_is_taken_at_once() {
        let t0 = Instant::now();
        let mut free = lease("a", "1", 15);
        free.spec.as_mut().unwrap().holder_identity = None;
        assert_eq!(decide(&free, "b", t0, t0, FALLBACK), Decision::Acquire);
        let own = lease("b", "1", 15);
        assert_eq!(decide(&own, "b", t0, t0, FALLBACK), Decision::Acquire);
    }

    #[test]
    fn a_lease_without_a_duration_uses_the_fallback() {
        let t0 = Instant::now();
        let mut odd = lease("a", "1", 2);
        odd.spec.as_mut().unwrap().lease_duration_seconds = None;
        assert_eq!(
            decide(&odd, "b", t0, t0, FALLBACK),
            Decision::WaitUntil(t0 + FALLBACK)
        );
    }
}
