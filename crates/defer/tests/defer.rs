//! A deferred launch against the sim: the worker's half (`start`) and the triggerer's half
//! (`Waiters`), with faults injected through the sim's fault plan.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::Api;
use kube::api::{ListParams, ObjectMeta};
use podline_defer::{StartRequest, Started, WaitOptions, Waiters, start};
use podline_launch::create::create_policy;
use podline_sim::fault::{FaultAction, FaultRule, FaultVerb};
use podline_testkit::{Sim, start_sim, test_config, wait_until};

/// A pod the sim's kubelet scripts by its `sim.podline.io/<key>` annotations.
fn scripted(name: &str, script: &[(&str, &str)]) -> Pod {
    let annotations: BTreeMap<String, String> = script
        .iter()
        .map(|(k, v)| (format!("sim.podline.io/{k}"), (*v).to_owned()))
        .collect();
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "base".into(),
                image: Some("busybox:1.36".into()),
                ..Container::default()
            }],
            restart_policy: Some("Never".into()),
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

fn request(pod: Pod) -> StartRequest {
    let mut request = StartRequest::new(pod, "default");
    request.create = create_policy(
        12,
        Duration::from_millis(5),
        Duration::from_millis(200),
        Duration::from_secs(30),
    )
    .unwrap();
    request
}

async fn setup() -> (Sim, kube::Client, Api<Pod>) {
    let sim = start_sim(test_config()).await;
    let client = podline_testkit::podline_client(&sim).await;
    let pods = Api::namespaced(client.clone(), "default");
    (sim, client, pods)
}

async fn phase(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get_opt(name).await.ok().flatten()?.status?.phase
}

/// Issue 31: N deferred tasks waiting in one process (one triggerer) open exactly ONE pod watch
/// on the API server between them, not one per task, and each still gets its own pod's outcome
/// judged on its base container (exit codes 0, 1, 2). Creates go through 30% 409 Conflict.
#[tokio::test]
async fn many_waits_in_one_process_should_share_one_watch_and_all_complete() {
    let (sim, client, pods) = setup().await;
    sim.faults().push(
        FaultRule::new(FaultAction::status(409))
            .verb(FaultVerb::Create)
            .resource("pods")
            .probability(0.30),
    );
    const N: usize = 30;
    let mut started: Vec<Started> = Vec::new();
    for i in 0..N {
        let code = (i % 3).to_string();
        let pod = scripted(
            &format!("deferred-{i}"),
            &[("duration", "300ms"), ("exit-code", code.as_str())],
        );
        started.push(start(client.clone(), request(pod)).await.unwrap());
    }
    let waiters = Waiters::new(client.clone());
    let waits = started.iter().map(|s| {
        let waiters = waiters.clone();
        let s = s.clone();
        tokio::spawn(async move {
            waiters
                .wait(
                    &s.namespace,
                    &s.name,
                    &s.launch_id,
                    &s.main_container,
                    &WaitOptions::default(),
                )
                .await
        })
    });
    let outcomes = futures_join(waits.collect()).await;
    for (i, outcome) in outcomes.iter().enumerate() {
        let expected = i32::try_from(i % 3).unwrap();
        assert_eq!(outcome.exit_code, Some(expected), "{outcome:?}");
        assert_eq!(outcome.succeeded, expected == 0, "{outcome:?}");
        assert_eq!(outcome.pod, format!("deferred-{i}"));
    }
    assert_eq!(
        sim.counts().get("watch", "pods"),
        1,
        "one pod watch for all {N} waits"
    );
    assert_eq!(
        pods.list(&ListParams::default()).await.unwrap().items.len(),
        N
    );
}

async fn futures_join(
    handles: Vec<
        tokio::task::JoinHandle<Result<podline_defer::Outcome, podline_defer::DeferError>>,
    >,
) -> Vec<podline_defer::Outcome> {
    let mut out = Vec::new();
    for handle in handles {
        let outcome = tokio::time::timeout(Duration::from_secs(30), handle)
            .await
            .expect("every wait resolves")
            .unwrap()
            .unwrap();
        out.push(outcome);
    }
    out
}

/// Issue 31: a trigger re-created after its triggerer died starts its wait when the pod may
/// already have ended, while the process's shared watch (started by other waits) sends nothing
/// more for it: the wait still resolves, from the pod as it is, and creates nothing.
#[tokio::test]
async fn a_wait_begun_after_the_pod_ended_should_resolve_at_once() {
    let (_sim, client, pods) = setup().await;
    let waiters = Waiters::new(client.clone());
    let other = start(
        client.clone(),
        request(scripted("other", &[("duration", "60s")])),
    )
    .await
    .unwrap();
    // The shared watch is up and following another pod.
    let pending = tokio::spawn({
        let waiters = waiters.clone();
        async move {
            waiters
                .wait(
                    &other.namespace,
                    &other.name,
                    &other.launch_id,
                    "base",
                    &WaitOptions::default(),
                )
                .await
        }
    });
    let done = start(
        client.clone(),
        request(scripted(
            "done",
            &[("duration", "10ms"), ("exit-code", "4")],
        )),
    )
    .await
    .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || async {
            phase(&pods, "done").await.as_deref() == Some("Failed")
        })
        .await
    );
    let outcome = tokio::time::timeout(
        Duration::from_secs(10),
        waiters.wait(
            &done.namespace,
            &done.name,
            &done.launch_id,
            "base",
            &WaitOptions::default(),
        ),
    )
    .await
    .expect("resolves at once")
    .unwrap();
    assert_eq!(outcome.exit_code, Some(4));
    assert!(!pending.is_finished());
    pending.abort();
}

/// Issue 31: a new try of a task (a worker retried while its trigger was lost) reattaches to
/// the task's live pod by its task id: no second pod; the trigger for it finds it by launch id
/// and resolves when it ends. A pod of the same name with another launch id is refused.
#[tokio::test]
async fn start_with_reattach_should_take_the_live_pod_and_a_foreign_launch_id_is_refused() {
    let (_sim, client, pods) = setup().await;
    let mut first = request(scripted("task-pod", &[("duration", "1500ms")]));
    first.task_id = Some("dag.task.run.0".into());
    first.reattach = true;
    let created = start(client.clone(), first.clone()).await.unwrap();
    assert!(!created.reattached);
    let again = start(client.clone(), first).await.unwrap();
    assert!(again.reattached, "{again:?}");
    assert_eq!(
        (&again.name, &again.launch_id),
        (&created.name, &created.launch_id)
    );
    let waiters = Waiters::new(client.clone());
    let foreign = waiters
        .wait(
            "default",
            &created.name,
            "not-this-launch",
            "base",
            &WaitOptions::default(),
        )
        .await
        .unwrap();
    assert!(
        foreign
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("not this task's"),
        "{foreign:?}"
    );
    let outcome = waiters
        .wait(
            "default",
            &again.name,
            &again.launch_id,
            "base",
            &WaitOptions::default(),
        )
        .await
        .unwrap();
    assert!(outcome.succeeded, "{outcome:?}");
    assert_eq!(
        pods.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
}

/// A pod deleted by someone else while a wait follows it ends the wait as gone.
#[tokio::test]
async fn a_pod_deleted_while_waited_for_should_end_the_wait_as_gone() {
    let (_sim, client, pods) = setup().await;
    let s = start(
        client.clone(),
        request(scripted("doomed", &[("duration", "60s")])),
    )
    .await
    .unwrap();
    let waiters = Waiters::new(client.clone());
    let wait = tokio::spawn(async move {
        waiters
            .wait(
                &s.namespace,
                &s.name,
                &s.launch_id,
                "base",
                &WaitOptions::default(),
            )
            .await
    });
    assert!(
        wait_until(Duration::from_secs(10), || async {
            phase(&pods, "doomed").await.as_deref() == Some("Running")
        })
        .await
    );
    pods.delete(
        "doomed",
        &kube::api::DeleteParams::default().grace_period(0),
    )
    .await
    .unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("resolves")
        .unwrap()
        .unwrap();
    assert!(outcome.gone && !outcome.succeeded, "{outcome:?}");
}

fn lease_owners(pod: &Pod) -> Vec<String> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|o| o.kind == "Lease")
        .map(|o| o.name.clone())
        .collect()
}

fn triggerer_lease(
    client: &kube::Client,
    seconds: u64,
) -> std::sync::Arc<podline_launch::Liveness> {
    let config = podline_launch::LivenessConfig::new(
        Duration::from_secs(seconds),
        Duration::from_millis(200),
    )
    .unwrap();
    podline_launch::Liveness::start(
        client.clone(),
        &podline_launch::spec::new_launch_id(),
        "test-triggerer",
        config,
        podline_client::retry::RetryPolicy::default(),
        podline_client::retry::RetryPolicy::default(),
    )
}

/// Issue 31, liveness of deferred pods: a wait moves its running pod to its process's Lease; a
/// process that dies (its Lease no longer renewed) leaves its pods to the reaper, except those
/// a new process's wait took over meanwhile (moved to the new Lease): the reaper deletes only
/// the pod nobody reattached to. An ended pod leaves every Lease (its task's clean-up decides).
#[tokio::test]
async fn a_dead_triggerers_pods_should_be_reaped_unless_a_new_one_reattached() {
    let (_sim, client, pods) = setup().await;
    let mut started = Vec::new();
    for name in ["taken-over", "abandoned", "ends"] {
        let duration = if name == "ends" { "1500ms" } else { "10m" };
        let pod = scripted(name, &[("duration", duration)]);
        started.push(start(client.clone(), request(pod)).await.unwrap());
    }
    // The first triggerer: its waits own all three pods.
    let first = triggerer_lease(&client, 1);
    let first_name = first.name().to_owned();
    let waiters = Waiters::new(client.clone());
    let mut first_waits = Vec::new();
    for s in &started {
        let (waiters, s, owner) = (waiters.clone(), s.clone(), first.clone());
        first_waits.push(tokio::spawn(async move {
            waiters
                .wait(
                    &s.namespace,
                    &s.name,
                    &s.launch_id,
                    "base",
                    &WaitOptions {
                        owner: Some(&owner),
                        ..WaitOptions::default()
                    },
                )
                .await
        }));
    }
    for s in &started {
        let owned = wait_until(Duration::from_secs(10), || async {
            let pod = pods.get(&s.name).await.unwrap();
            lease_owners(&pod) == vec![first_name.clone()]
        })
        .await;
        assert!(owned, "{} owned by the first triggerer's Lease", s.name);
    }
    // The pod that ends is released from the Lease by the wait that saw its end.
    let ended = first_waits.pop().unwrap().await.unwrap().unwrap();
    assert!(ended.succeeded, "{ended:?}");
    assert!(lease_owners(&pods.get("ends").await.unwrap()).is_empty());
    // The first triggerer dies: its waits stop, its Lease is no longer renewed.
    for wait in &first_waits {
        wait.abort();
    }
    drop(first);
    // A second triggerer re-creates one trigger only.
    let second = triggerer_lease(&client, 30);
    let second_waiters = Waiters::new(client.clone());
    let taken = started[0].clone();
    let owner = second.clone();
    let _second_wait = tokio::spawn(async move {
        second_waiters
            .wait(
                &taken.namespace,
                &taken.name,
                &taken.launch_id,
                "base",
                &WaitOptions {
                    owner: Some(&owner),
                    ..WaitOptions::default()
                },
            )
            .await
    });
    let moved = wait_until(Duration::from_secs(10), || async {
        lease_owners(&pods.get("taken-over").await.unwrap()) == vec![second.name().to_owned()]
    })
    .await;
    assert!(
        moved,
        "the reattached pod moved to the second triggerer's Lease"
    );
    // The reaper: the first Lease expires and is reaped with the pod nobody took over.
    let reaper = podline_launch::reaper::Reaper::new(
        client.clone(),
        Some("default".into()),
        Duration::from_millis(500),
    );
    let mut tracker = reaper.tracker();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let pass = reaper.pass(&mut tracker).await.unwrap();
        if pass.reaped.iter().any(|r| r.ends_with(&first_name)) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the dead triggerer's Lease is reaped"
        );
        // The reaper's own period (its passes are how it observes time).
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let abandoned_gone = wait_until(Duration::from_secs(10), || async {
        pods.get_opt("abandoned")
            .await
            .unwrap()
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;
    assert!(abandoned_gone, "the pod nobody reattached to is reaped");
    let kept = pods.get("taken-over").await.unwrap();
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "the reattached pod survives"
    );
    assert!(
        pods.get_opt("ends")
            .await
            .unwrap()
            .is_some_and(|p| p.metadata.deletion_timestamp.is_none())
    );
}

/// Issue 31, start failures while deferred: a permanent image error ends the wait at once with
/// the launcher's error and the container's waiting reason; a pod that is never scheduled ends
/// it at the schedule timeout, as `podline run` reports them.
#[tokio::test]
async fn a_pod_that_cannot_start_should_end_the_wait_as_in_sync_mode() {
    let (_sim, client, _pods) = setup().await;
    let limits = podline_defer::StartLimits {
        schedule_timeout: Duration::from_millis(800),
        startup_timeout: Duration::from_secs(30),
    };
    let options = WaitOptions {
        start: Some(limits),
        ..WaitOptions::default()
    };
    let waiters = Waiters::new(client.clone());
    let bad = start(
        client.clone(),
        request(scripted("bad-image", &[("image-error", "ErrImagePull")])),
    )
    .await
    .unwrap();
    let outcome = tokio::time::timeout(
        Duration::from_secs(20),
        waiters.wait("default", &bad.name, &bad.launch_id, "base", &options),
    )
    .await
    .expect("an image error ends the wait")
    .unwrap();
    assert!(!outcome.succeeded, "{outcome:?}");
    assert_eq!(
        outcome.reason.as_deref(),
        Some("ErrImagePull"),
        "{outcome:?}"
    );
    assert!(
        outcome
            .error
            .as_deref()
            .unwrap_or("")
            .contains("ErrImagePull"),
        "{outcome:?}"
    );

    let stuck = start(
        client.clone(),
        request(scripted("never-scheduled", &[("unschedulable", "true")])),
    )
    .await
    .unwrap();
    let outcome = tokio::time::timeout(
        Duration::from_secs(20),
        waiters.wait("default", &stuck.name, &stuck.launch_id, "base", &options),
    )
    .await
    .expect("the schedule timeout ends the wait")
    .unwrap();
    assert!(!outcome.succeeded, "{outcome:?}");
    let error = outcome.error.unwrap_or_default();
    assert!(error.contains("schedul"), "{error}");
    // Without limits the same pod is simply waited for.
    let plain = tokio::time::timeout(
        Duration::from_millis(1500),
        waiters.wait(
            "default",
            &stuck.name,
            &stuck.launch_id,
            "base",
            &WaitOptions::default(),
        ),
    )
    .await;
    assert!(plain.is_err(), "no start limits: still waiting");
}
