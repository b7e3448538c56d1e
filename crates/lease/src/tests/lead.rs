//! [`LeaderElector::lead`](crate::LeaderElector::lead) under paused time against the in-memory
//! Lease: when the work starts, how fast it stops when leadership goes, what shutdown releases,
//! and what is returned. The same loop over HTTP against the sim is in `tests/sim.rs`.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{FakeLeases, cfg};
use crate::elector::spawn;
use crate::lead::lead;
use crate::{ElectionError, Ended, LeadError, Leadership, record};

fn elector(fake: &FakeLeases, name: &str) -> Leadership {
    spawn(
        fake.clone(),
        "ns".into(),
        "lease".into(),
        name.into(),
        cfg(),
    )
}

/// When the last successful write to the Lease happened (a renewal, while someone leads).
fn last_write(fake: &FakeLeases) -> Instant {
    fake.with(|i| i.log.last().map(|(at, _)| *at)).unwrap()
}

/// Another replica writes the Lease as its own (as one does that took it over after expiry).
fn taken_by(fake: &FakeLeases, holder: &str) {
    let current = fake.with(|i| i.lease.clone()).unwrap();
    let claim = record::claimed(&current, holder, 2, Timestamp::now());
    fake.write(&claim, false).unwrap();
}

/// When a work started, and who held the Lease at that moment.
type Started = (Instant, Option<String>);
/// When a work was dropped, once it was.
type DroppedAt = Arc<Mutex<Option<Instant>>>;

/// Awaits a `lead` task that must end on its own once leadership is gone: within a lease
/// duration (virtual time), so a loop that missed the loss fails instead of hanging.
async fn returns_in_time<T>(task: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(cfg().lease_duration(), task)
        .await
        .expect("lead did not return after leadership was gone")
        .unwrap()
}

/// Work that never ends by itself: it reports when it starts and when it is dropped.
struct Endless {
    started: Option<oneshot::Sender<Started>>,
    dropped: DroppedAt,
}

impl Endless {
    fn new() -> (Self, oneshot::Receiver<Started>, DroppedAt) {
        let (tx, rx) = oneshot::channel();
        let dropped = Arc::new(Mutex::new(None));
        let work = Endless {
            started: Some(tx),
            dropped: dropped.clone(),
        };
        (work, rx, dropped)
    }

    async fn run(mut self, fake: FakeLeases) -> Result<(), Infallible> {
        if let Some(started) = self.started.take() {
            let _ = started.send((Instant::now(), fake.holder()));
        }
        std::future::pending().await
    }
}

impl Drop for Endless {
    fn drop(&mut self) {
        *self.dropped.lock().unwrap() = Some(Instant::now());
    }
}

/// A standby's work does not start while another replica holds a live Lease; it starts once
/// this replica has taken the Lease (after the crashed leader's Lease expired), and the Lease
/// names this replica by then.
#[tokio::test(start_paused = true)]
async fn work_starts_only_once_this_replica_holds_the_lease() {
    let fake = FakeLeases::default();
    let first = elector(&fake, "a");
    assert!(first.wait_until_leader().await);
    let shutdown = CancellationToken::new();
    let (started_tx, mut started) = oneshot::channel();
    let standby = tokio::spawn({
        let (fake, shutdown) = (fake.clone(), shutdown.clone());
        async move {
            lead(elector(&fake, "b"), &shutdown, |stop| async move {
                let _ = started_tx.send((Instant::now(), fake.holder()));
                stop.cancelled().await;
                Ok::<_, Infallible>("flushed")
            })
            .await
        }
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(started.try_recv().is_err(), "started while a led");
    first.abort(); // a crash: the Lease is not released
    let last_renewal = last_write(&fake);
    let (at, holder) = started.await.unwrap();
    assert_eq!(
        holder.as_deref(),
        Some("b"),
        "the Lease is b's when its work starts"
    );
    assert!(
        at - last_renewal >= cfg().lease_duration(),
        "{:?}",
        at - last_renewal
    );
    shutdown.cancel();
    let ended = standby.await.unwrap().unwrap();
    assert_eq!(ended, Ended::WorkFinished("flushed"));
}

/// Another replica writing the Lease as its own makes this one step down at its next renewal,
/// and the work is dropped then: within one retry period, not at the renew deadline. The Lease
/// is left to its new holder.
#[tokio::test(start_paused = true)]
async fn the_lease_taken_by_another_holder_stops_the_work_at_the_next_renewal() {
    let fake = FakeLeases::default();
    let (work, started, dropped) = Endless::new();
    let shutdown = CancellationToken::new();
    let leader = tokio::spawn({
        let fake = fake.clone();
        async move {
            let ended = lead(elector(&fake, "b"), &shutdown, |_| work.run(fake)).await;
            (ended, Instant::now())
        }
    });
    started.await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        dropped.lock().unwrap().is_none(),
        "the work runs while b leads"
    );
    taken_by(&fake, "x");
    let taken = Instant::now();
    let (ended, returned) = returns_in_time(leader).await;
    assert!(matches!(ended, Err(LeadError::Lost)), "{ended:?}");
    let dropped = dropped.lock().unwrap().unwrap();
    assert!(dropped <= returned);
    assert!(
        dropped - taken <= cfg().retry_period(),
        "work stopped {:?} after the takeover",
        dropped - taken
    );
    assert_eq!(fake.holder().as_deref(), Some("x"), "b cleared x's Lease");
}

/// A leader whose renewals all fail drops its work at its renew deadline, before the Lease could
/// expire and anyone else could take it.
#[tokio::test(start_paused = true)]
async fn renewals_failing_stop_the_work_before_the_lease_can_expire() {
    let fake = FakeLeases::default();
    let (work, started, dropped) = Endless::new();
    let shutdown = CancellationToken::new();
    let leader = tokio::spawn({
        let fake = fake.clone();
        async move { lead(elector(&fake, "b"), &shutdown, |_| work.run(fake)).await }
    });
    started.await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    fake.with(|i| i.partitioned = Some("b".into()));
    let last_renewal = last_write(&fake);
    let ended = returns_in_time(leader).await;
    assert!(matches!(ended, Err(LeadError::Lost)), "{ended:?}");
    let dropped = dropped.lock().unwrap().unwrap();
    assert!(dropped - last_renewal <= cfg().renew_deadline());
    assert!(dropped < last_renewal + cfg().lease_duration());
}

/// On shutdown the work is asked to finish (its token cancelled) and keeps the Lease while it
/// flushes; once it returns the Lease is released (holder cleared) and its value returned.
#[tokio::test(start_paused = true)]
async fn shutdown_lets_the_work_finish_then_releases_the_lease() {
    let fake = FakeLeases::default();
    let shutdown = CancellationToken::new();
    let (started_tx, started) = oneshot::channel();
    let leader = tokio::spawn({
        let (fake, shutdown) = (fake.clone(), shutdown.clone());
        async move {
            lead(elector(&fake, "b"), &shutdown, |stop| async move {
                let _ = started_tx.send(());
                stop.cancelled().await;
                // Flushing takes longer than a lease: the Lease must stay ours meanwhile.
                tokio::time::sleep(Duration::from_secs(3)).await;
                Ok::<_, Infallible>((Instant::now(), fake.holder()))
            })
            .await
        }
    });
    started.await.unwrap();
    shutdown.cancel();
    let Ok(Ended::WorkFinished((flushed, holder))) = leader.await.unwrap() else {
        panic!("expected the work's value");
    };
    assert_eq!(holder.as_deref(), Some("b"), "renewed while flushing");
    assert_eq!(fake.holder(), None, "released after the flush");
    let release = fake
        .with(|i| {
            i.log
                .iter()
                .rev()
                .find(|(_, h)| h.is_none())
                .map(|(at, _)| *at)
        })
        .unwrap();
    assert!(release >= flushed, "released before the work finished");
}

/// Shutdown while another replica leads ends the standby without ever calling the work, and
/// leaves the leader's Lease alone.
#[tokio::test(start_paused = true)]
async fn shutdown_while_standing_by_never_starts_the_work() {
    let fake = FakeLeases::default();
    let first = elector(&fake, "a");
    assert!(first.wait_until_leader().await);
    let shutdown = CancellationToken::new();
    let called = Arc::new(Mutex::new(false));
    let standby = tokio::spawn({
        let (fake, shutdown, called) = (fake.clone(), shutdown.clone(), called.clone());
        async move {
            lead(elector(&fake, "b"), &shutdown, |_| {
                *called.lock().unwrap() = true;
                async { Ok::<_, Infallible>(()) }
            })
            .await
        }
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    shutdown.cancel();
    let ended = standby.await.unwrap().unwrap();
    assert_eq!(ended, Ended::ShutdownBeforeLeading);
    assert!(!*called.lock().unwrap(), "the work was called");
    assert!(first.is_leader());
    assert_eq!(fake.holder().as_deref(), Some("a"));
}

/// Work that fails is returned as it failed, and the Lease is released for a standby.
#[tokio::test(start_paused = true)]
async fn a_failing_work_is_returned_and_the_lease_released() {
    let fake = FakeLeases::default();
    let shutdown = CancellationToken::new();
    let ended = lead(elector(&fake, "b"), &shutdown, |_| async {
        Err::<(), _>(std::io::Error::other("disk on fire"))
    })
    .await;
    let Err(LeadError::Work(err)) = ended else {
        panic!("expected the work's error, got {ended:?}");
    };
    assert_eq!(err.to_string(), "disk on fire");
    assert_eq!(fake.holder(), None, "released");
    assert!(
        fake.with(|i| i.log.iter().any(|(_, h)| h.as_deref() == Some("b"))),
        "b held the Lease first"
    );
}

/// An election the API refuses for good is returned as such, both before leading (the work
/// never starts) and while leading (a 403 on renewal is not reported as a lost Lease).
#[tokio::test(start_paused = true)]
async fn a_forbidden_lease_is_returned_as_the_election_error() {
    let fake = FakeLeases::default();
    fake.with(|i| i.forbidden = Some("b".into()));
    let ended = lead(elector(&fake, "b"), &CancellationToken::new(), |_| async {
        Ok::<_, Infallible>(())
    })
    .await;
    assert!(
        matches!(ended, Err(LeadError::Election(ElectionError::Fatal { .. }))),
        "{ended:?}"
    );

    let fake = FakeLeases::default();
    let (work, started, dropped) = Endless::new();
    let leader = tokio::spawn({
        let fake = fake.clone();
        async move {
            lead(elector(&fake, "b"), &CancellationToken::new(), |_| {
                work.run(fake)
            })
            .await
        }
    });
    started.await.unwrap();
    fake.with(|i| i.forbidden = Some("b".into()));
    let ended = returns_in_time(leader).await;
    assert!(
        matches!(ended, Err(LeadError::Election(ElectionError::Fatal { .. }))),
        "{ended:?}"
    );
    assert!(dropped.lock().unwrap().is_some(), "the work was stopped");
}

/// What an operator reads when the Lease is lost: why the work stopped, naming no flag.
#[test]
fn a_lost_lease_says_why_the_work_stopped() {
    let text = LeadError::<Infallible>::Lost.to_string();
    assert!(text.starts_with("lost the lease"), "{text}");
    assert!(text.contains("only the new leader writes"), "{text}");
}
