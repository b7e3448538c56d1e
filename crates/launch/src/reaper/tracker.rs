//! When a launcher Lease counts as expired, decided from successive listings alone (pure: tested
//! without a cluster, on paused time).
//!
//! The rule is kube's own for leases (client-go's leader election keeps an `observedTime`; the
//! node lifecycle controller does not evict when every node went silent at once): a Lease is
//! expired once the reaper has *seen* it unchanged (its `resourceVersion`) for its
//! `leaseDurationSeconds` plus the grace, on the reaper's monotonic clock. `renewTime`, written
//! from the launcher's host clock, is never read, so clock skew between hosts expires no live
//! launcher and keeps no dead one.
//!
//! What "seen" means:
//! - a listing shows the Leases as they were at some instant between the request and its
//!   answer ([`Sighting`]); so a version's clock starts when the listing that first showed it
//!   was *answered*, and is read when the current listing was *asked*: the time counted is
//!   never more than the time the Lease really went unchanged;
//! - time the reaper could not see is not counted. A launcher cannot renew while the API server
//!   is down either, so after a failed listing ([`Tracker::lost_sight`]), or when two successful
//!   listings are further apart than the grace (`answered` of this one minus `asked` of the
//!   last: a slow list, a stalled process, passes that took long), every Lease's clock restarts
//!   at the next answer. An outage the reaper missed between two listings is thus shorter than
//!   the grace, which a Lease's duration + grace covers.
//!
//! A Lease annotated with a keep-for-retry (its task will be retried, see
//! [`crate::liveness::KEEP_FOR_RETRY_ANNOTATION`]) is *held* once seen unchanged for its duration
//! plus the grace (its launcher is dead, but a retry may still come for its pod) and expires only
//! once seen unchanged for duration + grace + keep-for-retry, counted the same way.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use super::view::LeaseView;

/// One successful listing: when it was asked for and when it was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sighting {
    /// When the request was sent.
    pub asked: Instant,
    /// When the answer arrived.
    pub answered: Instant,
}

/// Why every Lease's clock restarted at a sighting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blindness {
    /// A listing failed since the last sighting.
    FailedList,
    /// The sightings were this far apart (more than the grace).
    Gap(Duration),
}

/// What one sighting decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Leases seen unchanged for their duration + the grace (+ their keep-for-retry).
    pub expired: Vec<LeaseView>,
    /// Leases that became held at this sighting: seen unchanged for their duration + the grace
    /// (their launcher is dead) but kept for their keep-for-retry, for a retry to reattach.
    pub newly_held: Vec<LeaseView>,
    /// Set when the reaper had been blind: every clock restarted, nothing expired.
    pub restarted: Option<Blindness>,
}

#[derive(Debug)]
struct Entry {
    version: String,
    /// Since when the current version is known to be unchanged (an `answered` instant).
    since: Instant,
    /// The Lease changed while tracked: its launcher was alive then.
    renewed: bool,
    /// Seen unchanged for its duration + the grace, kept for its keep-for-retry.
    held: bool,
    /// Its duration + the grace + its keep-for-retry, as last listed.
    expire_after: Duration,
}

/// Remembers, per Lease, its version and since when it is seen unchanged; decides expiry.
#[derive(Debug)]
pub struct Tracker {
    grace: Duration,
    seen: BTreeMap<(String, String), Entry>,
    /// `asked` of the last successful sighting.
    last_asked: Option<Instant>,
    /// A listing failed since the last sighting.
    blind: bool,
}

impl Tracker {
    /// A tracker that has seen nothing; a Lease expires once seen unchanged for its duration
    /// plus `grace`, and sightings further apart than `grace` restart every clock.
    pub fn new(grace: Duration) -> Self {
        Self {
            grace,
            seen: BTreeMap::new(),
            last_asked: None,
            blind: false,
        }
    }

    /// A listing failed: the next sighting restarts every Lease's clock.
    pub fn lost_sight(&mut self) {
        self.blind = true;
    }

    /// Takes in one listing of every launcher Lease in scope and returns what expired. Leases
    /// absent from the listing are forgotten.
    pub fn observe(&mut self, leases: &[LeaseView], sight: Sighting) -> Verdict {
        let gap = self
            .last_asked
            .map(|asked| sight.answered.saturating_duration_since(asked));
        let restarted = if self.blind {
            Some(Blindness::FailedList)
        } else {
            gap.filter(|gap| *gap > self.grace).map(Blindness::Gap)
        };
        self.blind = false;
        self.last_asked = Some(sight.asked);
        if restarted.is_some() {
            for entry in self.seen.values_mut() {
                entry.since = sight.answered;
            }
        }
        let listed: std::collections::BTreeSet<(String, String)> = leases.iter().map(key).collect();
        self.seen.retain(|k, _| listed.contains(k));
        let (mut expired, mut newly_held) = (Vec::new(), Vec::new());
        for lease in leases {
            let entry = self.seen.entry(key(lease)).or_insert_with(|| Entry {
                version: lease.resource_version.clone(),
                since: sight.answered,
                renewed: false,
                held: false,
                expire_after: Duration::ZERO,
            });
            if entry.version != lease.resource_version {
                entry.version.clone_from(&lease.resource_version);
                entry.since = sight.answered;
                entry.renewed = true;
                entry.held = false;
            }
            let unchanged = sight.asked.saturating_duration_since(entry.since);
            let dead_after = lease.duration.saturating_add(self.grace);
            entry.expire_after = dead_after.saturating_add(lease.keep_for_retry);
            if unchanged > entry.expire_after {
                expired.push(lease.clone());
            } else if unchanged > dead_after && !entry.held {
                entry.held = true;
                newly_held.push(lease.clone());
            }
        }
        Verdict {
            expired,
            newly_held,
            restarted,
        }
    }

    /// Stops tracking a Lease (it was reaped).
    pub fn forget(&mut self, lease: &LeaseView) {
        self.seen.remove(&key(lease));
    }

    /// Every Lease tracked (`namespace/name`).
    pub fn tracked(&self) -> Vec<String> {
        self.seen
            .keys()
            .map(|(ns, name)| format!("{ns}/{name}"))
            .collect()
    }

    /// Leases tracked that were not seen to change yet: neither known alive nor expired nor
    /// held.
    pub fn undecided(&self) -> Vec<String> {
        self.seen
            .iter()
            .filter(|(_, e)| !e.renewed && !e.held)
            .map(|((ns, name), _)| format!("{ns}/{name}"))
            .collect()
    }

    /// Whether a held Lease expires by `deadline` on the current count (unless a failed list
    /// restarts it): a sweep that may watch until then waits for it.
    pub fn held_expiring_by(&self, deadline: Instant) -> bool {
        self.seen
            .values()
            .any(|e| e.held && e.since + e.expire_after <= deadline)
    }

    /// Leases of dead launchers kept for a retry (`namespace/name`): seen unchanged for their
    /// duration + the grace, not yet for their keep-for-retry on top.
    pub fn held(&self) -> Vec<String> {
        self.seen
            .iter()
            .filter(|(_, e)| e.held)
            .map(|((ns, name), _)| format!("{ns}/{name}"))
            .collect()
    }
}

fn key(lease: &LeaseView) -> (String, String) {
    (lease.namespace.clone(), lease.name.clone())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(5);

    fn view(name: &str, rv: &str) -> LeaseView {
        LeaseView {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            resource_version: rv.into(),
            duration: Duration::from_secs(10),
            keep_for_retry: Duration::ZERO,
        }
    }

    /// A listing that takes `took` to answer, asked now (paused time: instants are exact).
    fn sighting(took: Duration) -> Sighting {
        let asked = Instant::now();
        Sighting {
            asked,
            answered: asked + took,
        }
    }

    /// Lists every `every` from now until `until` (reaper time), each answered in 10 ms, with
    /// `leases`; returns the names that expired and when.
    async fn list_until(
        tracker: &mut Tracker,
        leases: &[LeaseView],
        every: Duration,
        until: Instant,
    ) -> Vec<(String, Duration)> {
        let start = Instant::now();
        let mut dead = Vec::new();
        while Instant::now() < until {
            let verdict = tracker.observe(leases, sighting(Duration::from_millis(10)));
            for lease in verdict.expired {
                dead.push((lease.name, start.elapsed()));
            }
            tokio::time::sleep(every).await;
        }
        dead
    }

    /// Kube's rule: expired once seen unchanged for duration + grace, counted from the first
    /// sighting; a renewal (new resourceVersion) restarts the count; a Lease gone from the
    /// listing is forgotten.
    #[tokio::test(start_paused = true)]
    async fn a_lease_should_expire_once_seen_unchanged_for_its_duration_and_grace() {
        let mut tracker = Tracker::new(GRACE);
        let a1 = [view("a", "1")];
        let t0 = Instant::now();
        let dead = list_until(
            &mut tracker,
            &a1,
            Duration::from_secs(1),
            t0 + Duration::from_secs(15),
        )
        .await;
        assert!(dead.is_empty(), "{dead:?}");
        assert_eq!(tracker.undecided(), ["ns/a"]);
        // Renewed at 15 s: the count restarts, and the Lease is known alive.
        let a2 = [view("a", "2")];
        let dead = list_until(
            &mut tracker,
            &a2,
            Duration::from_secs(1),
            t0 + Duration::from_secs(40),
        )
        .await;
        // First seen at 15.01 s; expired at the first listing asked after 15.01 + 15 s.
        assert_eq!(
            dead.first().map(|(n, at)| (n.as_str(), at.as_secs())),
            Some(("a", 16))
        );
        assert!(tracker.undecided().is_empty());
        // Gone from the listing: forgotten, and a new Lease of that name starts afresh.
        assert!(
            tracker
                .observe(&[], sighting(Duration::ZERO))
                .expired
                .is_empty()
        );
        assert!(
            tracker
                .observe(&a2, sighting(Duration::ZERO))
                .expired
                .is_empty()
        );
        assert_eq!(tracker.undecided(), ["ns/a"]);
    }

    /// The issue-27 case: during an outage no listing succeeds, and no launcher can renew. The
    /// first sighting after it restarts every clock, so live launchers that renew within their
    /// duration + grace after the API is back are kept, and a dead one still expires, counted
    /// from the end of the outage.
    #[tokio::test(start_paused = true)]
    async fn no_lease_should_be_judged_on_time_the_reaper_could_not_see() {
        let mut tracker = Tracker::new(GRACE);
        let leases = [view("live", "1"), view("dead", "1")];
        assert!(
            tracker
                .observe(&leases, sighting(Duration::ZERO))
                .expired
                .is_empty()
        );
        // A 60 s outage: every listing fails.
        for _ in 0..60 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            tracker.lost_sight();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let back = tracker.observe(&leases, sighting(Duration::from_millis(10)));
        assert_eq!(back.restarted, Some(Blindness::FailedList));
        assert!(
            back.expired.is_empty(),
            "judged on the outage: {:?}",
            back.expired
        );
        // The live launcher renews 3 s after the API is back (and is not seen to renew again
        // within this test's 15 s, less than its own duration + grace); the dead one never does.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let renewed = [view("live", "2"), view("dead", "1")];
        let end = Instant::now() + Duration::from_secs(15);
        let dead = list_until(&mut tracker, &renewed, Duration::from_secs(1), end).await;
        assert_eq!(dead.first().map(|(n, _)| n.as_str()), Some("dead"));
        // 3 s already passed; 10 + 5 s from the first answer after the outage.
        assert_eq!(dead[0].1.as_secs(), 13);
        assert!(dead.iter().all(|(n, _)| n == "dead"), "{dead:?}");
    }

    /// A gap longer than the grace between two successful sightings (a list that hung, a
    /// stalled reaper) is time the reaper could not see either: the clocks restart.
    #[tokio::test(start_paused = true)]
    async fn a_gap_longer_than_the_grace_should_restart_every_clock() {
        let mut tracker = Tracker::new(GRACE);
        let leases = [view("a", "1")];
        assert!(
            tracker
                .observe(&leases, sighting(Duration::ZERO))
                .expired
                .is_empty()
        );
        // A listing asked at 4 s and answered 30 s later: the API hung. Unchanged as of 4 s only.
        tokio::time::sleep(Duration::from_secs(4)).await;
        let slow = tracker.observe(&leases, sighting(Duration::from_secs(30)));
        assert_eq!(
            slow.restarted,
            Some(Blindness::Gap(Duration::from_secs(34)))
        );
        assert!(slow.expired.is_empty());
        // The next listing, right after: the clock counts from the slow answer (34 s), so
        // nothing expires before 34 + 15 s although the version is 49 s old.
        tokio::time::advance(Duration::from_secs(30)).await;
        let next = tracker.observe(&leases, sighting(Duration::ZERO));
        assert_eq!(
            next.restarted,
            Some(Blindness::Gap(Duration::from_secs(30)))
        );
        // Passes 2 s apart from here: no gap, and expiry 15 s after the last restart.
        let mut expired_after = None;
        for s in 1..=10 {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let v = tracker.observe(&leases, sighting(Duration::ZERO));
            assert_eq!(v.restarted, None);
            if !v.expired.is_empty() {
                expired_after = Some(s * 2);
                break;
            }
        }
        assert_eq!(expired_after, Some(16));
    }

    /// Sightings at most the grace apart are one continuous observation: no restart, and the
    /// time counted is from the answer that first showed the version to the asking of the
    /// current listing, never more than the Lease really went unchanged.
    #[tokio::test(start_paused = true)]
    async fn slow_answers_should_never_count_more_than_the_lease_was_unchanged() {
        let mut tracker = Tracker::new(GRACE);
        let leases = [view("a", "1")];
        // First seen in a listing asked at 0 and answered at 2 s.
        assert!(
            tracker
                .observe(&leases, sighting(Duration::from_secs(2)))
                .expired
                .is_empty()
        );
        // Listings asked every 4 s, answered 1 s later (gap 5 s = the grace: not a gap).
        let mut expired_at = None;
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_secs(4)).await;
            let asked = Instant::now();
            let v = tracker.observe(
                &leases,
                Sighting {
                    asked,
                    answered: asked + Duration::from_secs(1),
                },
            );
            assert_eq!(v.restarted, None);
            if !v.expired.is_empty() {
                expired_at = Some(asked);
                break;
            }
        }
        // 15 s counted from the 2 s answer: the first listing asked after 17 s (at 20 s).
        let t0 = Instant::now() - Duration::from_secs(20);
        assert_eq!(expired_at.map(|at| at - t0), Some(Duration::from_secs(20)));
    }

    /// No host clock is read: a Lease's renewTime does not exist for the tracker, so a launcher
    /// whose clock is 60 s behind is alive as long as it renews, and one 1 h ahead that stopped
    /// is dead after duration + grace like any other.
    #[tokio::test(start_paused = true)]
    async fn skewed_launcher_clocks_should_not_matter() {
        let mut tracker = Tracker::new(GRACE);
        let end = Instant::now() + Duration::from_secs(30);
        let mut dead = Vec::new();
        let mut behind = 0;
        while Instant::now() < end {
            behind += 1;
            let leases = [view("behind", &behind.to_string()), view("ahead", "1")];
            let v = tracker.observe(&leases, sighting(Duration::ZERO));
            dead.extend(v.expired.into_iter().map(|l| l.name));
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        assert!(dead.iter().all(|n| n == "ahead"), "{dead:?}");
        assert!(!dead.is_empty());
    }

    /// Issue 30: a Lease whose task will be retried is held, not reaped, once seen unchanged for
    /// duration + grace (dead, and no longer undecided), and expires only once seen unchanged
    /// for its keep-for-retry on top; a renewal meanwhile (the launcher was alive after all)
    /// ends the hold and restarts the count.
    #[tokio::test(start_paused = true)]
    async fn a_lease_kept_for_retry_should_be_held_then_expire_after_its_keep() {
        let mut tracker = Tracker::new(GRACE);
        let keep = |name: &str, rv: &str| LeaseView {
            keep_for_retry: Duration::from_secs(60),
            ..view(name, rv)
        };
        let mut leases = vec![keep("retried", "1"), view("last-try", "1")];
        let start = Instant::now();
        let (mut held_at, mut expired) = (None, Vec::new());
        while start.elapsed() < Duration::from_secs(120) {
            let v = tracker.observe(&leases, sighting(Duration::ZERO));
            if !v.newly_held.is_empty() {
                assert!(held_at.is_none(), "held twice: {v:?}");
                assert_eq!(v.newly_held[0].name, "retried");
                held_at = Some(start.elapsed());
                assert_eq!(tracker.held(), ["ns/retried"]);
            }
            for lease in v.expired {
                // Reaped: gone from the next listings.
                expired.push((lease.name.clone(), start.elapsed()));
                tracker.forget(&lease);
                leases.retain(|l| l.name != lease.name);
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        // The normal bound is 10 + 5 s (the first listing after 15 s); the kept one 60 s more.
        assert_eq!(held_at, Some(Duration::from_secs(16)));
        assert_eq!(
            expired,
            [
                ("last-try".to_owned(), Duration::from_secs(16)),
                ("retried".to_owned(), Duration::from_secs(76)),
            ]
        );
        // Held is decided: a sweep stops waiting on it.
        let mut tracker = Tracker::new(GRACE);
        let one = [keep("retried", "1")];
        let t0 = Instant::now();
        tracker.observe(&one, sighting(Duration::ZERO));
        assert_eq!(tracker.undecided(), ["ns/retried"]);
        let mut held = 0;
        for _ in 0..16 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let v = tracker.observe(&one, sighting(Duration::ZERO));
            assert!(v.expired.is_empty() && v.restarted.is_none(), "{v:?}");
            held += v.newly_held.len();
        }
        assert_eq!(held, 1);
        assert!(tracker.undecided().is_empty());
        // Seen at t0: it expires once seen unchanged for 10 + 5 + 60 s.
        assert!(!tracker.held_expiring_by(t0 + Duration::from_secs(74)));
        assert!(tracker.held_expiring_by(t0 + Duration::from_secs(75)));
        // A renewal ends the hold: the launcher lives, counted afresh.
        let renewed = [keep("retried", "2")];
        let v = tracker.observe(&renewed, sighting(Duration::ZERO));
        assert!(v.expired.is_empty() && v.newly_held.is_empty(), "{v:?}");
        assert!(tracker.held().is_empty());
    }
}
