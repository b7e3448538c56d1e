//! Leader election over HTTP against the sim: the Lease really lives in an API server that
//! enforces resourceVersion preconditions, and faults come from the sim's fault plan.
//! Timings: lease 2 s, renew deadline 1 s, retry 200 ms.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use podline_lease::{ElectionConfig, Ended, LeadError, LeaderElector, Leadership, takeover_bound};
use podline_sim::{FaultAction, FaultRule, FaultVerb, Sim};
use podline_testkit::{client, start_sim, test_config, wait_until};
use tokio_util::sync::CancellationToken;

const NS: &str = "default";
const LEASE: &str = "podline-recorder";

fn cfg() -> ElectionConfig {
    ElectionConfig::try_new(
        Duration::from_secs(2),
        Duration::from_secs(1),
        Duration::from_millis(200),
    )
    .unwrap()
}

/// Slack for real sockets and a loaded 2-core machine on top of the computed bounds.
const SLACK: Duration = Duration::from_millis(700);

/// What a takeover may take beyond the lease duration: the sim delivering the dead leader's last
/// renewal on the follower's watch, then one read and one write, on a loaded 2-core machine.
const DELIVERY: Duration = Duration::from_millis(200);

async fn sim() -> Sim {
    start_sim(test_config().kubelet_enabled(false)).await
}

async fn elect(sim: &Sim, identity: &str, timeline: &Timeline) -> Leadership {
    elect_with(sim, identity, timeline, cfg()).await
}

async fn elect_with(
    sim: &Sim,
    identity: &str,
    timeline: &Timeline,
    cfg: ElectionConfig,
) -> Leadership {
    let elector = LeaderElector::new(client(sim).await, NS, LEASE, identity, cfg).unwrap();
    let leadership = elector.run();
    timeline.follow(&leadership);
    leadership
}

async fn holder(sim: &Sim) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client(sim).await, NS);
    leases
        .get_opt(LEASE)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty())
}

/// Every leadership change of every elector, on the test's clock.
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
            log.lock().unwrap().push((Instant::now(), name, false));
        });
    }

    /// Panics if two electors ever led at once.
    fn assert_one_leader_at_a_time(&self) {
        let mut leading: Vec<String> = Vec::new();
        for (_, name, leader) in self.0.lock().unwrap().iter() {
            if *leader {
                assert!(
                    leading.is_empty() || leading == [name.clone()],
                    "{name} became leader while {leading:?} led"
                );
                leading = vec![name.clone()];
            } else {
                leading.retain(|n| n != name);
            }
        }
    }

    fn became_leader_since(&self, since: Instant) -> Option<(Instant, String)> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .find(|(at, _, leader)| *leader && *at >= since)
            .map(|(at, name, _)| (*at, name.clone()))
    }
}

async fn the_leader(all: &[Leadership], within: Duration) -> usize {
    assert!(
        wait_until(within, || async { all.iter().any(Leadership::is_leader) }).await,
        "no leader within {within:?}"
    );
    all.iter().position(Leadership::is_leader).unwrap()
}

/// Three electors: exactly one leads, and it is the Lease's holder on the server. The leader is
/// killed (no release) three times; each time another takes over within the lease duration (plus
/// the sim's delivery of the lease watch and one read and write), never two at once.
#[tokio::test]
async fn one_leader_at_a_time_and_a_killed_leader_is_replaced_within_the_lease_duration() {
    let sim = sim().await;
    let timeline = Timeline::default();
    let mut all = Vec::new();
    for name in ["r-0", "r-1", "r-2"] {
        all.push(elect(&sim, name, &timeline).await);
    }
    for round in 0..3 {
        let leader = the_leader(&all, takeover_bound(&cfg()) + SLACK).await;
        let name = all[leader].identity().to_owned();
        assert_eq!(
            holder(&sim).await.as_deref(),
            Some(name.as_str()),
            "round {round}"
        );
        assert_eq!(all.iter().filter(|l| l.is_leader()).count(), 1);

        all.remove(leader).abort();
        let killed = Instant::now();
        let next = the_leader(&all, takeover_bound(&cfg()) + SLACK).await;
        let (at, new_name) = timeline.became_leader_since(killed).unwrap();
        assert_eq!(new_name, all[next].identity());
        let took = at - killed;
        assert!(
            took <= takeover_bound(&cfg()) + DELIVERY,
            "round {round}: takeover after {took:?}"
        );
        eprintln!("round {round}: {name} killed, {new_name} took over after {took:?}");
        assert_eq!(holder(&sim).await, Some(new_name));
        all.push(elect(&sim, &format!("r-{}", round + 3), &timeline).await);
    }
    timeline.assert_one_leader_at_a_time();
}

/// A graceful release clears the holder on the server, and the other elector, watching the
/// Lease, takes over at once: here followers poll only every 2 s, so a takeover within
/// `DELIVERY` can only come from the watch.
#[tokio::test]
async fn a_released_lease_is_taken_over_at_once() {
    let sim = sim().await;
    let timeline = Timeline::default();
    let slow_polls = ElectionConfig::try_new(
        Duration::from_secs(6),
        Duration::from_secs(4),
        Duration::from_secs(2),
    )
    .unwrap();
    let mut all = vec![
        elect_with(&sim, "r-0", &timeline, slow_polls).await,
        elect_with(&sim, "r-1", &timeline, slow_polls).await,
    ];
    let leader = the_leader(&all, Duration::from_secs(5)).await;
    all.remove(leader).release().await.unwrap();
    let released = Instant::now();
    the_leader(&all, Duration::from_secs(5)).await;
    let (at, name) = timeline.became_leader_since(released).unwrap();
    let took = at - released;
    assert!(
        took <= DELIVERY,
        "takeover after {took:?}, expected at once (the next poll is up to 2.4 s away)"
    );
    assert_eq!(holder(&sim).await, Some(name));
    timeline.assert_one_leader_at_a_time();
}

/// 500s, 409s and commit-then-drop on a third of lease updates, plus the API server restarting
/// for longer than the renew deadline: leadership may move, but never to two at once, and there
/// is a leader again afterwards.
#[tokio::test]
async fn api_faults_never_make_two_leaders() {
    let sim = sim().await;
    let timeline = Timeline::default();
    let all = vec![
        elect(&sim, "r-0", &timeline).await,
        elect(&sim, "r-1", &timeline).await,
        elect(&sim, "r-2", &timeline).await,
    ];
    the_leader(&all, Duration::from_secs(5)).await;
    for action in [
        FaultAction::status(500),
        FaultAction::status(409),
        FaultAction::status(503),
        FaultAction::CommitThenDrop,
    ] {
        sim.faults().push(
            FaultRule::new(action)
                .verb(FaultVerb::Update)
                .resource("leases")
                .probability(0.1),
        );
    }
    tokio::time::sleep(Duration::from_secs(6)).await;
    timeline.assert_one_leader_at_a_time();

    sim.restart(Duration::from_millis(1500)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    sim.faults().clear();
    let leader = the_leader(&all, takeover_bound(&cfg()) + SLACK * 3).await;
    assert!(
        wait_until(Duration::from_secs(5), || async {
            holder(&sim).await.as_deref() == Some(all[leader].identity())
        })
        .await
    );
    timeline.assert_one_leader_at_a_time();
    assert!(
        sim.counts().get("update", "leases") > 10,
        "the faults were exercised"
    );
}

/// `lead` over the sim: the work starts only once its replica holds the Lease on the server; on
/// shutdown the leader's work finishes, the Lease is released, and the standby's work starts at
/// once (its replica watches the Lease), long before the Lease could have expired.
#[tokio::test]
async fn lead_hands_the_work_over_on_shutdown() {
    let sim = sim().await;
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let mut replicas = Vec::new();
    for name in ["r-0", "r-1"] {
        let elector = LeaderElector::new(client(&sim).await, NS, LEASE, name, cfg()).unwrap();
        let (shutdown, started_tx) = (CancellationToken::new(), started_tx.clone());
        let sim_client = client(&sim).await;
        let task = tokio::spawn({
            let shutdown = shutdown.clone();
            async move {
                elector
                    .lead(&shutdown, |stop| async move {
                        let leases: Api<Lease> = Api::namespaced(sim_client, NS);
                        let holder = leases
                            .get(LEASE)
                            .await
                            .ok()
                            .and_then(|l| l.spec?.holder_identity);
                        started_tx.send((name, holder, Instant::now())).unwrap();
                        stop.cancelled().await;
                        Ok::<_, std::convert::Infallible>(name)
                    })
                    .await
            }
        });
        replicas.push((name, shutdown, task));
    }
    let (first, holder_then, _) = started.recv().await.unwrap();
    assert_eq!(
        holder_then.as_deref(),
        Some(first),
        "the work started before the Lease was its own"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(started.try_recv().is_err(), "two works ran at once");

    let index = replicas
        .iter()
        .position(|(name, _, _)| *name == first)
        .unwrap();
    let (_, shutdown, task) = replicas.remove(index);
    shutdown.cancel();
    let stopped = Instant::now();
    assert_eq!(task.await.unwrap().unwrap(), Ended::WorkFinished(first));
    let (second, holder_then, at) = started.recv().await.unwrap();
    assert_ne!(second, first);
    assert_eq!(holder_then.as_deref(), Some(second));
    let took = at - stopped;
    assert!(
        took <= DELIVERY + SLACK,
        "the standby's work started {took:?} after shutdown"
    );
    let (_, shutdown, task) = replicas.remove(0);
    shutdown.cancel();
    assert_eq!(task.await.unwrap().unwrap(), Ended::WorkFinished(second));
    assert_eq!(holder(&sim).await, None, "released at the end");
}

/// The Lease rewritten on the server to another holder (as a replica that took it over after
/// expiry would): the leader's next renewal finds it, and its work is dropped within about one
/// retry period; the new holder's Lease is left alone.
#[tokio::test]
async fn lead_stops_the_work_when_another_holder_has_the_lease() {
    let sim = sim().await;
    let (work, started, dropped) = endless();
    let elector = LeaderElector::new(client(&sim).await, NS, LEASE, "r-0", cfg()).unwrap();
    let leader =
        tokio::spawn(async move { elector.lead(&CancellationToken::new(), |_| work).await });
    started.await.unwrap();
    let leases: Api<Lease> = Api::namespaced(client(&sim).await, NS);
    let mut lease = leases.get(LEASE).await.unwrap();
    let spec = lease.spec.as_mut().unwrap();
    spec.holder_identity = Some("intruder".into());
    leases
        .replace(LEASE, &Default::default(), &lease)
        .await
        .unwrap();
    let taken = Instant::now();
    let ended = tokio::time::timeout(cfg().lease_duration(), leader)
        .await
        .expect("lead did not return")
        .unwrap();
    assert!(matches!(ended, Err(LeadError::Lost)), "{ended:?}");
    let took = dropped.lock().unwrap().unwrap() - taken;
    assert!(
        took <= cfg().retry_period() + SLACK,
        "work stopped {took:?} after the takeover"
    );
    assert_eq!(holder(&sim).await.as_deref(), Some("intruder"));
}

/// Every Lease update failing with 500 on the server: the leader drops its work by its renew
/// deadline, before the Lease could expire.
#[tokio::test]
async fn lead_stops_the_work_when_renewals_keep_failing() {
    let sim = sim().await;
    let (work, started, dropped) = endless();
    let elector = LeaderElector::new(client(&sim).await, NS, LEASE, "r-0", cfg()).unwrap();
    let leader =
        tokio::spawn(async move { elector.lead(&CancellationToken::new(), |_| work).await });
    started.await.unwrap();
    sim.faults().push(
        FaultRule::new(FaultAction::status(500))
            .verb(FaultVerb::Update)
            .resource("leases"),
    );
    let failing = Instant::now();
    let ended = tokio::time::timeout(cfg().lease_duration() + SLACK, leader)
        .await
        .expect("lead did not return")
        .unwrap();
    assert!(matches!(ended, Err(LeadError::Lost)), "{ended:?}");
    let took = dropped.lock().unwrap().unwrap() - failing;
    assert!(
        took < cfg().lease_duration(),
        "work stopped {took:?} after renewals began to fail: the Lease could have expired"
    );
}

/// When a work was dropped, once it was.
type DroppedAt = Arc<Mutex<Option<Instant>>>;

/// A work that never ends by itself, reporting when it starts and when it is dropped.
fn endless() -> (
    impl Future<Output = Result<(), std::convert::Infallible>>,
    tokio::sync::oneshot::Receiver<()>,
    DroppedAt,
) {
    struct OnDrop(DroppedAt);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            *self.0.lock().unwrap() = Some(Instant::now());
        }
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let dropped = Arc::new(Mutex::new(None));
    let guard = OnDrop(dropped.clone());
    let work = async move {
        let _guard = guard;
        let _ = tx.send(());
        std::future::pending().await
    };
    (work, rx, dropped)
}
