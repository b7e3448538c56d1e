//! The election loop under paused time against an in-memory Lease with scripted faults: exact
//! timing properties (step down before expiry, takeover bound) that real sockets would blur.
//! The same scenarios run over HTTP against the sim in `tests/sim.rs`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use futures::channel::mpsc;
use k8s_openapi::api::coordination::v1::Lease;
use kube::core::Status;
use tokio::time::Instant;

use crate::backend::LeaseApi;
use crate::elector::spawn;
use crate::{ElectionConfig, Leadership, record, takeover_bound};

mod lead;

/// What the fake does to a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Answer 500 without writing.
    Fail500,
    /// Answer 409 Conflict without writing.
    Conflict,
    /// Write, then answer 500 (the answer was lost).
    CommitThenFail,
}

#[derive(Default)]
struct Inner {
    lease: Option<Lease>,
    rv: u64,
    /// Writes claiming this holder fail with 500 (a replica cut off from the API).
    partitioned: Option<String>,
    /// Writes claiming this holder fail with 403 (its RBAC was revoked).
    forbidden: Option<String>,
    /// Every Nth write gets this fault.
    every_nth: Option<(u64, Fault)>,
    writes: u64,
    /// Successful writes: (when, holder).
    log: Vec<(Instant, Option<String>)>,
    /// Open lease watches: each gets every written version at once.
    watchers: Vec<mpsc::UnboundedSender<Lease>>,
    /// Watches are refused (their streams end at once), as when RBAC forbids them.
    no_watch: bool,
}

#[derive(Clone, Default)]
struct FakeLeases(Arc<Mutex<Inner>>);

fn api_error(code: u16, reason: &str) -> kube::Error {
    kube::Error::Api(Status::failure("fake", reason).with_code(code).boxed())
}

impl FakeLeases {
    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.0.lock().unwrap())
    }

    fn holder(&self) -> Option<String> {
        self.with(|i| i.lease.as_ref().and_then(record::holder).map(str::to_owned))
    }

    fn write(&self, lease: &Lease, create: bool) -> Result<Lease, kube::Error> {
        self.with(|inner| {
            inner.writes += 1;
            let holder = record::holder(lease).map(str::to_owned);
            if holder.is_some() && holder == inner.partitioned {
                return Err(api_error(500, "InternalError"));
            }
            if holder.is_some() && holder == inner.forbidden {
                return Err(api_error(403, "Forbidden"));
            }
            let fault = inner
                .every_nth
                .filter(|(n, _)| inner.writes.is_multiple_of(*n))
                .map(|(_, f)| f);
            match fault {
                Some(Fault::Fail500) => return Err(api_error(500, "InternalError")),
                Some(Fault::Conflict) => return Err(api_error(409, "Conflict")),
                _ => {}
            }
            match (&inner.lease, create) {
                (Some(_), true) => return Err(api_error(409, "AlreadyExists")),
                (None, false) => return Err(api_error(404, "NotFound")),
                (Some(current), false)
                    if current.metadata.resource_version != lease.metadata.resource_version =>
                {
                    return Err(api_error(409, "Conflict"));
                }
                _ => {}
            }
            inner.rv += 1;
            let mut stored = lease.clone();
            stored.metadata.resource_version = Some(inner.rv.to_string());
            inner.lease = Some(stored.clone());
            inner.log.push((Instant::now(), holder));
            inner
                .watchers
                .retain(|watcher| watcher.unbounded_send(stored.clone()).is_ok());
            if fault == Some(Fault::CommitThenFail) {
                return Err(api_error(500, "InternalError"));
            }
            Ok(stored)
        })
    }
}

impl LeaseApi for FakeLeases {
    async fn get(&self) -> Result<Option<Lease>, kube::Error> {
        Ok(self.with(|i| i.lease.clone()))
    }
    async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.write(lease, true)
    }
    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.write(lease, false)
    }
    fn changes(&self) -> impl Stream<Item = Lease> + Send + 'static {
        let (tx, rx) = mpsc::unbounded();
        self.with(|inner| {
            if !inner.no_watch {
                // Like a watcher's initial list: the current version first.
                if let Some(lease) = &inner.lease {
                    let _ = tx.unbounded_send(lease.clone());
                }
                inner.watchers.push(tx);
            }
        });
        rx
    }
}

/// Lease 2 s, renew deadline 1 s, retry 200 ms: short, and the deadline is well before expiry.
fn cfg() -> ElectionConfig {
    ElectionConfig::try_new(
        Duration::from_secs(2),
        Duration::from_secs(1),
        Duration::from_millis(200),
    )
    .unwrap()
}

/// Every change of every elector's leadership, with its (virtual) time.
#[derive(Clone, Default)]
struct Timeline(Arc<Mutex<Vec<(Instant, String, bool)>>>);

impl Timeline {
    fn follow(&self, leadership: &Leadership) {
        let mut rx = leadership.subscribe();
        let name = leadership.identity().to_owned();
        let log = self.0.clone();
        tokio::spawn(async move {
            while rx.changed().await.is_ok() {
                let leader = *rx.borrow_and_update();
                log.lock()
                    .unwrap()
                    .push((Instant::now(), name.clone(), leader));
            }
            // The election ended (released, or aborted like a crash): it leads no more.
            log.lock().unwrap().push((Instant::now(), name, false));
        });
    }

    /// Leadership intervals per elector: (start, end or None while still leading).
    fn intervals(&self) -> Vec<(String, Instant, Option<Instant>)> {
        let mut open: BTreeMap<String, Instant> = BTreeMap::new();
        let mut done = Vec::new();
        for (at, name, leader) in self.0.lock().unwrap().iter() {
            if *leader {
                open.insert(name.clone(), *at);
            } else if let Some(start) = open.remove(name) {
                done.push((name.clone(), start, Some(*at)));
            }
        }
        done.extend(open.into_iter().map(|(n, s)| (n, s, None)));
        done
    }

    /// Panics if two electors ever led at the same time.
    fn assert_one_leader_at_a_time(&self) {
        let intervals = self.intervals();
        for (i, (a, a_start, a_end)) in intervals.iter().enumerate() {
            for (b, b_start, b_end) in intervals.iter().skip(i + 1) {
                let a_end = a_end.unwrap_or(Instant::now() + Duration::from_secs(3600));
                let b_end = b_end.unwrap_or(Instant::now() + Duration::from_secs(3600));
                let overlap = a_start < &b_end && b_start < &a_end;
                assert!(!overlap, "{a} and {b} led at the same time: {intervals:?}");
            }
        }
    }

    /// When `name` last became leader.
    fn last_start(&self, name: &str) -> Option<Instant> {
        self.intervals()
            .into_iter()
            .filter(|(n, _, _)| n == name)
            .map(|(_, s, _)| s)
            .max()
    }
}

fn start(fake: &FakeLeases, timeline: &Timeline, names: &[&str]) -> Vec<Leadership> {
    names
        .iter()
        .map(|name| {
            let leadership = spawn(
                fake.clone(),
                "ns".into(),
                "lease".into(),
                (*name).into(),
                cfg(),
            );
            timeline.follow(&leadership);
            leadership
        })
        .collect()
}

async fn wait_for_leader(all: &[Leadership]) -> usize {
    loop {
        if let Some(i) = all.iter().position(Leadership::is_leader) {
            return i;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A crashed leader (task aborted, lease not released) is replaced after the lease expires,
/// within `takeover_bound` (the lease duration) of the crash, and never before its last renewal
/// is a lease duration old.
#[tokio::test(start_paused = true)]
async fn a_crashed_leader_is_replaced_within_the_lease_duration_and_not_before() {
    crashed_leader_is_replaced(FakeLeases::default(), takeover_bound(&cfg())).await;
}

/// Without a lease watch (RBAC forbids it, or it keeps failing), followers still notice every
/// renewal by polling, and take over at most one jittered poll later than with the watch.
#[tokio::test(start_paused = true)]
async fn without_a_lease_watch_a_crashed_leader_is_replaced_one_poll_later_at_most() {
    let fake = FakeLeases::default();
    fake.with(|i| i.no_watch = true);
    let bound = takeover_bound(&cfg()) + cfg().retry_period().mul_f64(1.2);
    crashed_leader_is_replaced(fake, bound).await;
}

async fn crashed_leader_is_replaced(fake: FakeLeases, bound: Duration) {
    let timeline = Timeline::default();
    let mut all = start(&fake, &timeline, &["a", "b", "c"]);
    let first = wait_for_leader(&all).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let crashed = all.remove(first);
    let name = crashed.identity().to_owned();
    crashed.abort();
    let killed_at = Instant::now();
    let last_renewal = fake.with(|i| i.log.last().map(|(t, _)| *t)).unwrap();
    let next = wait_for_leader(&all).await;
    let took = timeline.last_start(all[next].identity()).unwrap() - killed_at;
    assert!(took <= bound, "takeover after {took:?}, bound {bound:?}");
    let takeover_write = fake
        .with(|i| {
            i.log
                .iter()
                .find(|(t, _)| *t > last_renewal)
                .map(|(t, _)| *t)
        })
        .unwrap();
    assert!(takeover_write - last_renewal >= cfg().lease_duration());
    assert_ne!(fake.holder().as_deref(), Some(name.as_str()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(all.iter().filter(|l| l.is_leader()).count(), 1);
    timeline.assert_one_leader_at_a_time();
}

/// A graceful release clears the lease; a follower watching it takes over at once, long before
/// the lease would have expired (and, without the watch, at its next poll).
#[tokio::test(start_paused = true)]
async fn a_released_lease_is_taken_over_at_once() {
    for (watch, bound) in [
        (true, Duration::from_millis(1)),
        (false, cfg().retry_period().mul_f64(1.2)),
    ] {
        let fake = FakeLeases::default();
        fake.with(|i| i.no_watch = !watch);
        released_lease_is_taken_over(fake, bound).await;
    }
}

async fn released_lease_is_taken_over(fake: FakeLeases, bound: Duration) {
    let timeline = Timeline::default();
    let mut all = start(&fake, &timeline, &["a", "b"]);
    let first = wait_for_leader(&all).await;
    let leader = all.remove(first);
    leader.release().await.unwrap();
    let released_at = Instant::now();
    assert!(
        fake.with(|i| i.log.iter().any(|(_, holder)| holder.is_none())),
        "release clears holderIdentity"
    );
    wait_for_leader(&all).await;
    let took = timeline.last_start(all[0].identity()).unwrap() - released_at;
    assert!(took <= bound, "took {took:?}, bound {bound:?}");
    timeline.assert_one_leader_at_a_time();
}

/// A leader whose renewals all fail steps down at its renew deadline, before the lease could
/// expire; the follower takes over only after that.
#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_renew_steps_down_before_its_lease_expires() {
    let fake = FakeLeases::default();
    let timeline = Timeline::default();
    let all = start(&fake, &timeline, &["a", "b"]);
    let first = wait_for_leader(&all).await;
    let name = all[first].identity().to_owned();
    tokio::time::sleep(Duration::from_secs(1)).await;
    fake.with(|i| i.partitioned = Some(name.clone()));
    let cut_off = Instant::now();
    let last_renewal = fake.with(|i| i.log.last().map(|(t, _)| *t)).unwrap();
    let other = 1 - first;
    while !all[other].is_leader() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let intervals = timeline.intervals();
    let (_, _, stepped_down) = intervals
        .iter()
        .find(|(n, _, end)| *n == name && end.is_some())
        .unwrap();
    let stepped_down = stepped_down.unwrap();
    assert!(stepped_down > cut_off);
    assert!(stepped_down - last_renewal <= cfg().renew_deadline());
    assert!(stepped_down < last_renewal + cfg().lease_duration());
    assert!(!all[first].is_leader());
    timeline.assert_one_leader_at_a_time();
}

/// Conflicts, 5xx and lost answers on writes, for 60 virtual seconds among three electors:
/// never two leaders, and someone leads most of the time.
#[tokio::test(start_paused = true)]
async fn write_faults_never_make_two_leaders() {
    for fault in [Fault::Conflict, Fault::Fail500, Fault::CommitThenFail] {
        let fake = FakeLeases::default();
        fake.with(|i| i.every_nth = Some((3, fault)));
        let timeline = Timeline::default();
        let all = start(&fake, &timeline, &["a", "b", "c"]);
        tokio::time::sleep(Duration::from_secs(60)).await;
        timeline.assert_one_leader_at_a_time();
        let led: Duration = timeline
            .intervals()
            .iter()
            .map(|(_, s, e)| e.unwrap_or_else(Instant::now) - *s)
            .sum();
        assert!(
            led >= Duration::from_secs(45),
            "{fault:?}: led only {led:?}"
        );
        for leadership in all {
            leadership.abort();
        }
    }
}

/// A fatal answer (403: RBAC forbids leases) ends the election with an error instead of
/// retrying forever, so the daemon can exit loudly.
#[tokio::test(start_paused = true)]
async fn a_forbidden_lease_ends_the_election_with_an_error() {
    struct Forbidden;
    impl LeaseApi for Forbidden {
        async fn get(&self) -> Result<Option<Lease>, kube::Error> {
            Err(api_error(403, "Forbidden"))
        }
        async fn create(&self, _: &Lease) -> Result<Lease, kube::Error> {
            Err(api_error(403, "Forbidden"))
        }
        async fn replace(&self, _: &Lease) -> Result<Lease, kube::Error> {
            Err(api_error(403, "Forbidden"))
        }
        fn changes(&self) -> impl Stream<Item = Lease> + Send + 'static {
            futures::stream::empty()
        }
    }
    let mut leadership = spawn(Forbidden, "ns".into(), "lease".into(), "a".into(), cfg());
    let err = leadership.finished().await.unwrap_err();
    assert!(matches!(err, crate::ElectionError::Fatal { .. }), "{err}");
    assert!(!leadership.is_leader());
    assert!(!leadership.wait_until_leader().await);
}

/// A server that answers 409 to every renewal while the lease still reads as ours must not be
/// hammered: the leader retries at most every retry period, then steps down at its deadline.
#[tokio::test(start_paused = true)]
async fn a_leader_facing_endless_conflicts_backs_off_and_steps_down() {
    let fake = FakeLeases::default();
    let timeline = Timeline::default();
    let all = start(&fake, &timeline, &["a"]);
    wait_for_leader(&all).await;
    fake.with(|i| i.every_nth = Some((1, Fault::Conflict)));
    let before = fake.with(|i| i.writes);
    tokio::time::sleep(cfg().renew_deadline() + cfg().retry_period()).await;
    let attempts = fake.with(|i| i.writes) - before;
    assert!(!all[0].is_leader(), "stepped down at the renew deadline");
    assert!(
        attempts <= 12,
        "{attempts} write attempts in one renew deadline"
    );
}
