//! A create whose response is lost on its HTTP/2 stream alone (the sim's
//! `commit_then_reset_stream`: the pod is stored, then RST_STREAM instead of an answer). podline's
//! client sees a reset stream as a transport error and retries; the retry's AlreadyExists carries
//! our launch id, so the pod is adopted, never duplicated, and every other request multiplexed on
//! the one connection is untouched.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use podline_launch::{
    Cancel, LaunchConfig, Launcher, LogMode, NullSink, TaskSpec, create::create_policy, run_many,
};
use podline_sim::fault::{FaultAction, FaultRule, FaultVerb};
use podline_sim::{Sim, SimConfig};
use podline_testkit::start_sim;

fn config() -> LaunchConfig {
    LaunchConfig {
        create: create_policy(
            12,
            Duration::from_millis(5),
            Duration::from_millis(200),
            Duration::from_secs(30),
        )
        .unwrap(),
        schedule_timeout: Duration::from_secs(10),
        startup_timeout: Duration::from_secs(10),
        logs: LogMode::None,
        ..LaunchConfig::default()
    }
}

fn task() -> TaskSpec {
    TaskSpec {
        image: Some("busybox:1.36".into()),
        command: vec!["true".into()],
        annotations: BTreeMap::from([("sim.podline.io/duration".into(), "20ms".into())]),
        ..TaskSpec::default()
    }
}

/// A TLS sim (ALPN offers h2) whose next pod create loses its response on its stream.
async fn sim_losing_one_create() -> Sim {
    let sim = start_sim(SimConfig::default()).await;
    sim.faults().push(
        FaultRule::new(FaultAction::CommitThenResetStream)
            .verb(FaultVerb::Create)
            .resource("pods")
            .times(1),
    );
    sim
}

fn assert_one_http2_connection(sim: &Sim) {
    let (http1, http2) = sim.requests_by_version();
    assert_eq!(http1, 0, "the client spoke HTTP/1.1");
    assert!(http2 > 0);
    assert_eq!(
        sim.accepted_connections(),
        1,
        "a per-stream fault must not cost the connection"
    );
}

#[tokio::test]
async fn a_create_whose_http2_stream_is_reset_after_the_commit_should_be_adopted() {
    let sim = sim_losing_one_create().await;
    let launcher = Launcher::new(
        podline_testkit::podline_client(&sim).await,
        "default",
        config(),
    );
    let result = launcher
        .run(&task(), Arc::new(NullSink), &Cancel::new())
        .await;
    assert!(result.succeeded(), "{result:?}");
    assert!(result.adopted, "the stored pod was adopted: {result:?}");
    assert!(result.retries >= 1);
    assert_eq!(
        sim.counts().get("create", "pods"),
        2,
        "one retry, then AlreadyExists"
    );
    assert_eq!(sim.ground_truth().len(), 1, "exactly one pod ever existed");
    assert_one_http2_connection(&sim);
}

/// Eight launches share one connection; the one whose create loses its answer adopts its pod,
/// the seven others never notice.
#[tokio::test]
async fn one_lost_create_among_many_on_one_connection_should_cost_only_its_own_retry() {
    let sim = sim_losing_one_create().await;
    // No request first: the eight concurrent first creates share the first one's connection.
    let launcher = Launcher::new(
        podline_testkit::podline_client(&sim).await,
        "default",
        config(),
    );
    let summary = run_many(&launcher, vec![task(); 8], 8, None, false, &Cancel::new()).await;
    let failures: Vec<_> = summary
        .results
        .iter()
        .filter_map(|r| r.error.clone())
        .collect();
    assert_eq!(summary.succeeded, 8, "{failures:?}");
    let adopted = summary.results.iter().filter(|r| r.adopted).count();
    assert_eq!(adopted, 1);
    assert_eq!(
        summary.results.iter().filter(|r| r.retries > 0).count(),
        1,
        "only the faulted launch retried"
    );
    assert_eq!(sim.ground_truth().len(), 8, "no pod duplicated");
    assert_one_http2_connection(&sim);
}
