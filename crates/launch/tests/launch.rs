//! The launcher against the sim, with faults injected through the sim's fault plan.
//! One test binary; each test starts its own sim on a random port.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use podline_launch::{
    BufferSink, Cancel, CancelReason, LaunchConfig, Launcher, LogConfig, LogMode, NullSink,
    OnFinish, TaskSpec, create::create_policy, exit, run_many,
};
use podline_sim::fault::{FaultAction, FaultRule, FaultVerb};
use podline_testkit::{Sim, client, start_sim, test_config, wait_until};

/// Fast knobs: tiny backoff (the sim answers in microseconds), short timeouts.
fn fast_config() -> LaunchConfig {
    let log = LogConfig {
        stall_timeout: Duration::from_millis(300),
        post_termination: Duration::from_secs(10),
        ..LogConfig::default()
    };
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
        log,
        ..LaunchConfig::default()
    }
}

/// A scripted task: `sim.podline.io/<key>: <value>` annotations drive the sim's kubelet.
fn task(script: &[(&str, &str)]) -> TaskSpec {
    let annotations: BTreeMap<String, String> = script
        .iter()
        .map(|(k, v)| (format!("sim.podline.io/{k}"), (*v).to_owned()))
        .collect();
    TaskSpec {
        image: Some("busybox:1.36".into()),
        command: vec!["sh".into(), "-c".into(), "true".into()],
        annotations,
        ..TaskSpec::default()
    }
}

async fn setup(config: LaunchConfig) -> (Sim, Launcher, Api<Pod>) {
    let sim = start_sim(test_config()).await;
    let client = client(&sim).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    (sim, Launcher::new(client, "default", config), pods)
}

/// True once no pod is left in the namespace.
async fn no_pods_left(pods: &Api<Pod>) -> bool {
    wait_until(Duration::from_secs(10), || async {
        pods.list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.is_empty())
    })
    .await
}

fn rule(verb: FaultVerb, resource: &str, action: FaultAction) -> FaultRule {
    FaultRule::new(action).verb(verb).resource(resource)
}

/// Done-when 1 (the seed experiment): 50 pods launched at once, 20 rounds (1000 pods), with 409
/// Conflict on 30% of creates and 429 on 5%: every one succeeds, none is left, none is
/// duplicated, and the retries are visible in the logs an operator reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_experiment_1000_pods_under_409_and_429_all_succeed() {
    podline_testkit::trace_init();
    let mut config = fast_config();
    config.logs = LogMode::None;
    let (sim, _, pods) = setup(config.clone()).await;
    // podline's own client stack, as `podline run` uses: no kube retry layer hiding the 429s.
    let launcher = Launcher::new(
        podline_testkit::podline_client(&sim).await,
        "default",
        config,
    );
    sim.faults()
        .push(rule(FaultVerb::Create, "pods", FaultAction::status(409)).probability(0.30));
    sim.faults().push(
        rule(
            FaultVerb::Create,
            "pods",
            FaultAction::Status {
                code: 429,
                reason: None,
                message: None,
                retry_after: Some(1),
            },
        )
        .probability(0.05),
    );
    let mut retries = 0;
    for round in 0..20 {
        let specs = vec![task(&[("duration", "20ms")]); 50];
        let summary = run_many(&launcher, specs, 50, None, false, &Cancel::new()).await;
        let failures: Vec<_> = summary
            .results
            .iter()
            .filter(|r| !r.succeeded())
            .map(|r| r.error.clone())
            .take(5)
            .collect();
        assert_eq!(
            summary.succeeded, 50,
            "round {round}: failures: {failures:?}"
        );
        assert!(summary.p99_time_to_running_ms.is_some());
        retries += summary.retries;
    }
    assert!(retries >= 200, "retries: {retries}");
    assert!(no_pods_left(&pods).await, "pods left behind");
    let truth = sim.ground_truth();
    assert_eq!(truth.len(), 1000, "a duplicate or missing pod");
    assert!(truth.iter().all(|p| p.deleted_at.is_some()));
    let logs = podline_testkit::captured_logs();
    let conflict_lines = logs
        .lines()
        .filter(|l| l.contains("retrying") && l.contains("status=409"))
        .count();
    let throttled_lines = logs
        .lines()
        .filter(|l| l.contains("retrying") && l.contains("status=429"))
        .count();
    assert!(
        conflict_lines >= 200 && throttled_lines >= 10,
        "retries not visible in the logs: {conflict_lines} 409 lines, {throttled_lines} 429 lines"
    );
}

/// Many tasks at once follow their pods on ONE shared watch (not one per task in flight), and
/// each still gets its own pod's outcome: exit codes, a permanent image error.
#[tokio::test]
async fn many_tasks_should_follow_their_pods_on_one_shared_watch() {
    let (sim, launcher, pods) = setup(fast_config()).await;
    let specs: Vec<TaskSpec> = (0..40)
        .map(|i| match i % 4 {
            0 => task(&[("exit-code", "1")]),
            1 => task(&[("image-error", "ErrImagePull")]),
            _ => task(&[("duration", "20ms")]),
        })
        .collect();
    let summary = run_many(&launcher, specs, 40, None, false, &Cancel::new()).await;
    for (i, result) in summary.results.iter().enumerate() {
        match i % 4 {
            0 => assert_eq!(result.container_exit_code(), Some(1), "{result:?}"),
            1 => assert!(
                result
                    .error
                    .as_deref()
                    .unwrap_or_default()
                    .contains("ErrImagePull"),
                "{result:?}"
            ),
            _ => assert!(result.succeeded(), "{result:?}"),
        }
    }
    assert_eq!(summary.succeeded, 20);
    assert_eq!(
        sim.counts().get("watch", "pods"),
        1,
        "one pod watch for all 40 tasks"
    );
    assert!(no_pods_left(&pods).await);
}

/// On the shared watch, a pod deleted by someone else (at once, no grace) ends its task as
/// "gone", as a per-pod watch would, and the other tasks carry on.
#[tokio::test]
async fn a_pod_deleted_by_someone_else_should_end_its_task_on_the_shared_watch() {
    let (_sim, launcher, pods) = setup(fast_config()).await;
    let mut doomed = task(&[("duration", "60s")]);
    doomed.name = Some("doomed".into());
    doomed.exact_name = true;
    let specs = vec![doomed, task(&[("duration", "300ms")])];
    let run = tokio::spawn({
        let launcher = launcher.clone();
        async move { run_many(&launcher, specs, 2, None, false, &Cancel::new()).await }
    });
    assert!(
        wait_until(Duration::from_secs(10), || async {
            pods.get_opt("doomed")
                .await
                .ok()
                .flatten()
                .is_some_and(|p| p.status.and_then(|s| s.phase).as_deref() == Some("Running"))
        })
        .await,
        "the doomed pod never ran"
    );
    pods.delete("doomed", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let summary = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the run ended")
        .unwrap();
    let doomed = &summary.results[0];
    assert!(!doomed.succeeded(), "{doomed:?}");
    assert_eq!(doomed.exit_code, exit::LOST, "{doomed:?}");
    assert!(summary.results[1].succeeded(), "{:?}", summary.results[1]);
}

/// Done-when 2: a 422 fails on the first attempt with the server's message; no retry.
#[tokio::test]
async fn invalid_pod_should_fail_at_once_with_the_servers_message() {
    let (sim, launcher, _pods) = setup(fast_config()).await;
    sim.faults().push(rule(
        FaultVerb::Create,
        "pods",
        FaultAction::Status {
            code: 422,
            reason: Some("Invalid".into()),
            message: Some("Pod \"x\" is invalid: spec.containers[0].image: Required value".into()),
            retry_after: None,
        },
    ));
    let result = launcher
        .run(&task(&[]), Arc::new(NullSink), &Cancel::new())
        .await;
    assert_eq!(result.exit_code, exit::CREATE_FAILED);
    let error = result.error.unwrap();
    assert!(
        error.contains("422") && error.contains("Required value"),
        "{error}"
    );
    assert_eq!(sim.counts().get("create", "pods"), 1);
    assert!(sim.ground_truth().is_empty());
}

/// Done-when 3: the create is stored but its response lost; the retry answers AlreadyExists,
/// the launcher recognises its launch id and adopts the pod. Exactly one pod ever existed.
#[tokio::test]
async fn commit_then_drop_should_adopt_our_own_pod() {
    let (sim, launcher, pods) = setup(fast_config()).await;
    sim.faults()
        .push(rule(FaultVerb::Create, "pods", FaultAction::CommitThenDrop).times(1));
    let result = launcher
        .run(
            &task(&[("exit-code", "0")]),
            Arc::new(NullSink),
            &Cancel::new(),
        )
        .await;
    assert!(result.succeeded(), "{result:?}");
    assert!(result.adopted);
    assert!(result.retries >= 1);
    assert_eq!(sim.ground_truth().len(), 1);
    assert!(no_pods_left(&pods).await);
}

/// Done-when 4: a foreign pod holds the name: clear failure, the foreign pod untouched.
#[tokio::test]
async fn foreign_pod_with_our_name_should_fail_and_stay_untouched() {
    let (sim, launcher, pods) = setup(fast_config()).await;
    let mut foreign = Pod::default();
    foreign.metadata.name = Some("clash".into());
    foreign.metadata.annotations = Some(BTreeMap::from([(
        "sim.podline.io/duration".to_owned(),
        "60s".to_owned(),
    )]));
    foreign.spec = Some(k8s_openapi::api::core::v1::PodSpec {
        containers: vec![k8s_openapi::api::core::v1::Container {
            name: "c".into(),
            image: Some("nginx".into()),
            ..Default::default()
        }],
        ..Default::default()
    });
    let created = pods.create(&PostParams::default(), &foreign).await.unwrap();
    let uid = created.metadata.uid.clone();

    let mut spec = task(&[]);
    spec.name = Some("clash".into());
    spec.exact_name = true;
    let result = launcher
        .run(&spec, Arc::new(NullSink), &Cancel::new())
        .await;
    assert_eq!(result.exit_code, exit::NAME_CLASH);
    let error = result.error.unwrap();
    assert!(
        error.contains("clash") && error.contains("untouched"),
        "{error}"
    );
    let after = pods.get("clash").await.unwrap();
    assert_eq!(after.metadata.uid, uid);
    assert!(after.metadata.deletion_timestamp.is_none());
    assert_eq!(sim.counts().get("delete", "pods"), 0);
}

/// Done-when 5: the log stream is reset 10 times and stalled 10 times mid-run; stdout is
/// byte-identical to what the container wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_stream_resets_and_stalls_should_not_lose_or_double_a_line() {
    let (sim, launcher, _pods) = setup(fast_config()).await;
    sim.faults().push(
        rule(
            FaultVerb::Log,
            "pods/log",
            FaultAction::Reset {
                after_bytes: None,
                after_events: Some(7),
            },
        )
        .times(10),
    );
    sim.faults().push(
        rule(
            FaultVerb::Log,
            "pods/log",
            FaultAction::Stall { after_events: 5 },
        )
        .times(10),
    );
    let sink = Arc::new(BufferSink::default());
    let result = launcher
        .run(
            &task(&[("log-lines", "300"), ("duration", "6s")]),
            sink.clone(),
            &Cancel::new(),
        )
        .await;
    assert!(result.succeeded(), "{result:?}");
    let expected: String = (1..=300).map(|i| format!("line {i}\n")).collect();
    let got = String::from_utf8(sink.contents()).unwrap();
    assert_eq!(got, expected);
    assert!(
        result.log_reconnects >= 15,
        "reconnects: {}",
        result.log_reconnects
    );
}

/// Literal logs with repeated lines written at the same instant survive resets exactly.
#[tokio::test]
async fn repeated_identical_lines_should_survive_resets() {
    let (sim, launcher, _pods) = setup(fast_config()).await;
    sim.faults().push(
        rule(
            FaultVerb::Log,
            "pods/log",
            FaultAction::Reset {
                after_bytes: None,
                after_events: Some(2),
            },
        )
        .times(5),
    );
    let text = "same\nsame\nsame\nother\nsame\n";
    let sink = Arc::new(BufferSink::default());
    let result = launcher
        .run(
            &task(&[("logs", text.trim_end()), ("duration", "300ms")]),
            sink.clone(),
            &Cancel::new(),
        )
        .await;
    assert!(result.succeeded(), "{result:?}");
    assert_eq!(String::from_utf8(sink.contents()).unwrap(), text);
}

/// Done-when 6 (library level; the binary-level SIGTERM test is in crates/podline/tests):
/// cancelling a running task deletes its pod and exits 143.
#[tokio::test]
async fn cancel_during_run_should_delete_the_pod() {
    let (sim, launcher, pods) = setup(fast_config()).await;
    let cancel = Cancel::new();
    let run = {
        let launcher = launcher.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            launcher
                .run(&task(&[("duration", "60s")]), Arc::new(NullSink), &cancel)
                .await
        })
    };
    let running = wait_until(Duration::from_secs(10), || async {
        pods.list(&ListParams::default()).await.is_ok_and(|l| {
            l.items
                .iter()
                .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        })
    })
    .await;
    assert!(running);
    cancel.cancel(CancelReason::Terminate);
    let result = run.await.unwrap();
    assert_eq!(result.exit_code, exit::SIGTERM);
    assert!(result.deleted);
    assert!(no_pods_left(&pods).await);
    assert!(sim.ground_truth().iter().all(|p| p.deleted_at.is_some()));
}

/// Done-when 7a: an unschedulable pod times out with a clear report and is deleted.
#[tokio::test]
async fn schedule_timeout_should_report_and_delete_the_pod() {
    let mut config = fast_config();
    config.schedule_timeout = Duration::from_millis(800);
    let (sim, launcher, pods) = setup(config).await;
    let result = launcher
        .run(
            &task(&[("unschedulable", "true")]),
            Arc::new(NullSink),
            &Cancel::new(),
        )
        .await;
    assert_eq!(result.exit_code, exit::START_FAILED);
    let error = result.error.clone().unwrap();
    assert!(error.contains("not scheduled"), "{error}");
    assert!(result.deleted);
    assert!(
        result.failure_report().contains("FailedScheduling"),
        "{}",
        result.failure_report()
    );
    assert!(no_pods_left(&pods).await);
    assert_eq!(sim.ground_truth().len(), 1);
}

/// Done-when 7 (startup timeout): a pod that is scheduled but whose container does not start
/// in time (a slow image pull) fails with the startup timeout (not the schedule timeout), and
/// is deleted.
#[tokio::test]
async fn startup_timeout_should_report_and_delete_the_pod() {
    let mut config = fast_config();
    config.startup_timeout = Duration::from_millis(800);
    let (sim, launcher, pods) = setup(config).await;
    let result = launcher
        .run(
            &task(&[("pull-delay", "60s")]),
            Arc::new(NullSink),
            &Cancel::new(),
        )
        .await;
    assert_eq!(result.exit_code, exit::START_FAILED);
    let error = result.error.clone().unwrap();
    assert!(error.contains("did not start within"), "{error}");
    assert!(result.deleted);
    assert!(no_pods_left(&pods).await);
    assert_eq!(sim.ground_truth().len(), 1);
}

/// Done-when 7b: a missing image fails fast (well before the startup timeout), is reported
/// with its reason, and the pod is deleted.
#[tokio::test]
async fn permanent_image_error_should_fail_fast_and_delete_the_pod() {
    let (_sim, launcher, pods) = setup(fast_config()).await;
    let mut spec = task(&[]);
    spec.image = Some("registry.example/team/does-not-exist:1".into());
    let started = std::time::Instant::now();
    let result = launcher
        .run(&spec, Arc::new(NullSink), &Cancel::new())
        .await;
    assert!(started.elapsed() < Duration::from_secs(8));
    assert_eq!(result.exit_code, exit::START_FAILED);
    let error = result.error.clone().unwrap();
    assert!(error.contains("ErrImagePull"), "{error}");
    assert!(result.deleted);
    assert!(no_pods_left(&pods).await);
}

/// Done-when 8: the container's exit code is podline's exit code (0, 1, 137), and the failure
/// report carries the termination message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_should_propagate() {
    let (_sim, launcher, pods) = setup(fast_config()).await;
    for code in [0u8, 1, 137] {
        let code_s = code.to_string();
        let result = launcher
            .run(
                &task(&[("exit-code", &code_s), ("termination-message", "bye")]),
                Arc::new(NullSink),
                &Cancel::new(),
            )
            .await;
        assert_eq!(result.exit_code, code, "{result:?}");
        assert_eq!(result.container_exit_code(), Some(i32::from(code)));
        if code != 0 {
            assert_eq!(result.phase, "Failed");
            assert!(result.failure_report().contains("bye"));
        }
    }
    assert!(no_pods_left(&pods).await);
}

/// `--on-finish keep` leaves a finished pod; `delete-succeeded` keeps only failed ones.
#[tokio::test]
async fn on_finish_should_decide_what_is_left() {
    let mut config = fast_config();
    config.on_finish = OnFinish::DeleteSucceeded;
    let (_sim, launcher, pods) = setup(config).await;
    let ok = launcher
        .run(&task(&[]), Arc::new(NullSink), &Cancel::new())
        .await;
    let bad = launcher
        .run(
            &task(&[("exit-code", "2")]),
            Arc::new(NullSink),
            &Cancel::new(),
        )
        .await;
    assert!(ok.deleted && !bad.deleted);
    let left = pods.list(&ListParams::default()).await.unwrap();
    let names: Vec<_> = left
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(names, [bad.pod]);
}

/// `--reattach`: a second run with the same task id attaches to the running pod instead of
/// creating another one, and reports its exit code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reattach_should_attach_to_the_running_pod_of_the_task() {
    let mut config = fast_config();
    config.on_finish = OnFinish::Keep;
    let (sim, first, pods) = setup(config.clone()).await;
    let mut spec = task(&[("duration", "2s"), ("exit-code", "3")]);
    spec.task_id = Some("nightly-etl".into());
    // The first launcher "dies" (its run is aborted) once the pod runs.
    let handle = {
        let spec = spec.clone();
        tokio::spawn(async move { first.run(&spec, Arc::new(NullSink), &Cancel::new()).await })
    };
    assert!(
        wait_until(Duration::from_secs(10), || async {
            pods.list(&ListParams::default()).await.is_ok_and(|l| {
                l.items
                    .iter()
                    .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            })
        })
        .await
    );
    handle.abort();
    config.reattach = true;
    config.on_finish = OnFinish::Delete;
    let second = Launcher::new(client(&sim).await, "default", config);
    let result = second.run(&spec, Arc::new(NullSink), &Cancel::new()).await;
    assert!(result.reattached, "{result:?}");
    assert_eq!(result.exit_code, 3);
    assert_eq!(sim.ground_truth().len(), 1);
    assert!(no_pods_left(&pods).await);
}

/// Issue 27: the reattach lookup lists the task's pods; one of them whose `deletionTimestamp` no
/// client decodes (the sim's `malform` fault, on LISTs) failed the whole lookup, and with it the
/// task. Now that pod is skipped (logged by name; it cannot be followed) and, no other pod of
/// the task being live, the task runs a pod of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reattach_lookup_should_skip_a_pod_that_does_not_decode() {
    let mut config = fast_config();
    config.reattach = true;
    let (sim, launcher, pods) = setup(config).await;
    let stale: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "bad-stale",
            "labels": {"podline.io/task-id": "nightly-etl"},
            "annotations": {"sim.podline.io/duration": "1h"},
        },
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &stale).await.unwrap();
    sim.faults().push(rule(
        FaultVerb::List,
        "pods",
        FaultAction::Malform {
            name: "bad-*".into(),
            field: podline_sim::fault::MalformField::DeletionTimestamp,
        },
    ));
    let mut spec = task(&[("exit-code", "0")]);
    spec.task_id = Some("nightly-etl".into());
    let result = launcher
        .run(&spec, Arc::new(NullSink), &Cancel::new())
        .await;
    assert_eq!(result.exit_code, 0, "{result:?}");
    assert!(!result.reattached, "{result:?}");
    assert_eq!(
        sim.ground_truth().len(),
        2,
        "its own pod, next to the stale one"
    );
}

/// `--all-containers` prefixes each line with its container.
#[tokio::test]
async fn all_containers_should_prefix_lines() {
    let mut config = fast_config();
    config.logs = LogMode::AllContainers;
    let (_sim, launcher, _pods) = setup(config).await;
    let mut spec = task(&[("logs", "hello")]);
    let template = Pod {
        spec: Some(k8s_openapi::api::core::v1::PodSpec {
            containers: vec![
                k8s_openapi::api::core::v1::Container {
                    name: "main".into(),
                    image: Some("busybox".into()),
                    ..Default::default()
                },
                k8s_openapi::api::core::v1::Container {
                    name: "side".into(),
                    image: Some("busybox".into()),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }),
        ..Pod::default()
    };
    spec.template = Some(template);
    let sink = Arc::new(BufferSink::default());
    let result = launcher.run(&spec, sink.clone(), &Cancel::new()).await;
    assert!(result.succeeded(), "{result:?}");
    let got = String::from_utf8(sink.contents()).unwrap();
    let mut lines: Vec<&str> = got.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["[main] hello", "[side] hello"]);
}

/// A configuration built in code is not bounded like the CLI's flags: timeouts of
/// `Duration::MAX` must not panic on `Instant + d` (schedule, startup and overall deadlines, the
/// derived activeDeadlineSeconds), and the run ends normally with its pod deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_timeouts_built_in_code_should_not_panic() {
    let config = LaunchConfig {
        schedule_timeout: Duration::MAX,
        startup_timeout: Duration::MAX,
        timeout: Some(Duration::MAX),
        ..fast_config()
    };
    let (_sim, launcher, pods) = setup(config).await;
    let result = launcher
        .run(
            &task(&[("exit-code", "3")]),
            Arc::new(NullSink),
            &Cancel::new(),
        )
        .await;
    assert_eq!(result.exit_code, 3, "{result:?}");
    assert!(result.deleted, "{result:?}");
    assert!(no_pods_left(&pods).await);
}

/// Issue 19: the overall timeout expiring while the pod is still pending (a slow image pull,
/// within the startup timeout) is a start failure (exit 4) that names the overall timeout, not
/// the startup timeout it did not reach, and the pod is deleted.
#[tokio::test]
async fn an_overall_timeout_while_pending_should_say_the_pod_did_not_start_and_delete_it() {
    let config = LaunchConfig {
        timeout: Some(Duration::from_millis(800)),
        ..fast_config()
    };
    let (sim, launcher, pods) = setup(config).await;
    let result = launcher
        .run(
            &task(&[("pull-delay", "60s")]),
            Arc::new(NullSink),
            &Cancel::new(),
        )
        .await;
    assert_eq!(result.exit_code, exit::START_FAILED, "{result:?}");
    let error = result.error.clone().unwrap();
    assert!(
        error.contains("did not start before the run's overall timeout of 800ms"),
        "{error}"
    );
    assert_eq!(result.timings.time_to_running_ms, None);
    assert!(result.deleted);
    assert!(no_pods_left(&pods).await);
    assert_eq!(sim.ground_truth().len(), 1);
}

/// Issue 19: a pod that started and then ran past the overall timeout is reported as timed out
/// while running (exit 124), not as "did not start" (exit 4), and is deleted.
#[tokio::test]
async fn an_overall_timeout_while_running_should_report_a_timeout_and_delete_the_pod() {
    let config = LaunchConfig {
        timeout: Some(Duration::from_secs(1)),
        ..fast_config()
    };
    let (sim, launcher, pods) = setup(config).await;
    let result = launcher
        .run(
            &task(&[("duration", "60s")]),
            Arc::new(NullSink),
            &Cancel::new(),
        )
        .await;
    assert_eq!(result.exit_code, exit::TIMED_OUT, "{result:?}");
    let error = result.error.clone().unwrap();
    assert!(error.contains("still running"), "{error}");
    assert!(!error.contains("did not start"), "{error}");
    assert!(result.timings.time_to_running_ms.is_some(), "{result:?}");
    assert!(result.deleted);
    assert!(no_pods_left(&pods).await);
    assert_eq!(sim.ground_truth().len(), 1);
}

/// Issue 27: with every request answered 503, a `--reattach` task gave up after about 3.5 s,
/// because the reattach lookup (and the launcher Lease's create) before the pod's create
/// retried on the unary calls' short budget while the create itself kept trying. Every call on
/// the way to the pod now has the create's budget: here the other calls may try only 3 times,
/// the lookup and the Lease create are each answered 503 eight times, and the task still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reattach_lookup_and_the_lease_create_should_retry_like_the_create() {
    use podline_client::backoff::FullJitter;
    use podline_client::retry::RetryPolicy;
    use podline_launch::{Liveness, LivenessConfig};

    let mut config = fast_config();
    config.reattach = true;
    config.calls = RetryPolicy::new(
        FullJitter::try_new(Duration::from_millis(5), Duration::from_millis(50), 2.0).unwrap(),
    )
    .with_max_attempts(3);
    let sim = start_sim(test_config()).await;
    // As podline's own client: without kube's retry layer, which would retry the 503s itself.
    let mut kube_config = podline_testkit::kube_config(&sim).await;
    kube_config.default_retry = false;
    let kube = kube::Client::try_from(kube_config).unwrap();
    let pods: Api<Pod> = Api::namespaced(kube.clone(), "default");
    let liveness = Liveness::start(
        kube.clone(),
        "retry",
        "test/1",
        LivenessConfig::default(),
        config.calls.clone(),
        config.create.clone(),
    );
    let launcher = Launcher::new(kube, "default", config).with_liveness(liveness.clone());
    for (verb, resource) in [(FaultVerb::List, "pods"), (FaultVerb::Create, "leases")] {
        sim.faults()
            .push(rule(verb, resource, FaultAction::status(503)).times(8));
    }
    let mut spec = task(&[("duration", "100ms")]);
    spec.task_id = Some("retried".into());
    let result = launcher
        .run(&spec, Arc::new(NullSink), &Cancel::new())
        .await;
    liveness.release().await;
    assert_eq!(result.exit_code, 0, "{result:?}");
    assert!(!result.reattached, "{result:?}");
    assert_eq!(sim.ground_truth().len(), 1);
    assert!(no_pods_left(&pods).await);
}

/// A task of `launcher` run in the background.
fn spawn_task(
    launcher: &Launcher,
    spec: TaskSpec,
) -> tokio::task::JoinHandle<podline_launch::report::TaskResult> {
    let launcher = launcher.clone();
    tokio::spawn(async move {
        launcher
            .run(&spec, Arc::new(NullSink), &Cancel::new())
            .await
    })
}

/// The name of the one running pod, once there is one.
async fn running_pod(pods: &Api<Pod>) -> String {
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let running = pods.list(&ListParams::default()).await.ok().and_then(|l| {
            l.items
                .into_iter()
                .find(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
                .and_then(|p| p.metadata.name)
        });
        if let Some(name) = running {
            return name;
        }
        assert!(tokio::time::Instant::now() < until, "the pod never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Issue 27: a run whose Lease a reaper deleted (then its pods) said `exit code 137 reason
/// Error` or "deleted by someone else?". It now says that its Lease expired or vanished and
/// what that means, and exits "lost" (6); a pod deleted while the Lease lives still reads as
/// deleted by someone else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_lease_was_reaped_should_say_that_its_lease_expired_or_vanished() {
    use k8s_openapi::api::coordination::v1::Lease;
    use podline_launch::liveness::lease_name;
    use podline_launch::{Liveness, LivenessConfig};

    let config = fast_config();
    let sim = start_sim(test_config()).await;
    let kube = client(&sim).await;
    let pods: Api<Pod> = Api::namespaced(kube.clone(), "default");
    let leases: Api<Lease> = Api::namespaced(kube.clone(), "default");
    let liveness = Liveness::start(
        kube.clone(),
        "lost",
        "test/1",
        LivenessConfig::default(),
        config.calls.clone(),
        config.create.clone(),
    );
    let launcher = Launcher::new(kube, "default", config).with_liveness(liveness.clone());

    // Someone else deletes the pod; the Lease lives: not the Lease's doing.
    let task_a = spawn_task(&launcher, task(&[("duration", "300s")]));
    let pod = running_pod(&pods).await;
    pods.delete(&pod, &DeleteParams::default()).await.unwrap();
    let result = task_a.await.unwrap();
    assert_ne!(result.exit_code, 0, "{result:?}");
    let error = result.error.clone().unwrap_or_default();
    assert!(!error.contains("Lease"), "{result:?}");

    // What a reaper does: the Lease (background propagation), then the pods it owned.
    let task_b = spawn_task(&launcher, task(&[("duration", "300s")]));
    let pod = running_pod(&pods).await;
    leases
        .delete(&lease_name("lost"), &DeleteParams::background())
        .await
        .unwrap();
    pods.delete(&pod, &DeleteParams::default()).await.unwrap();
    let result = task_b.await.unwrap();
    liveness.release().await;
    assert_eq!(result.exit_code, exit::LOST, "{result:?}");
    let error = result.error.clone().unwrap_or_default();
    assert!(
        error.contains("liveness Lease default/podline-launcher-lost expired or vanished")
            && error.contains("judged this launcher dead"),
        "{error}"
    );
    assert!(!error.contains("someone else?"), "{error}");
}

/// Issue 27: every transport error creating the Lease carried a hint about Lease RBAC. The
/// hint comes with a 403 only: a refused create names the rights podline run needs, a Lease
/// create that fails on the network says so without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_rbac_hint_should_come_with_a_403_only() {
    use podline_launch::{Liveness, LivenessConfig};

    let mut config = fast_config();
    config.create = create_policy(
        2,
        Duration::from_millis(5),
        Duration::from_millis(20),
        Duration::from_secs(5),
    )
    .unwrap();
    let sim = start_sim(test_config()).await;
    let kube = client(&sim).await;
    let liveness = Liveness::start(
        kube.clone(),
        "rbac",
        "test/1",
        LivenessConfig::default(),
        config.calls.clone(),
        config.create.clone(),
    );
    let launcher = Launcher::new(kube, "default", config).with_liveness(liveness.clone());
    let run = || async {
        let result = launcher
            .run(&task(&[]), Arc::new(NullSink), &Cancel::new())
            .await;
        result.error.unwrap_or_default()
    };

    sim.faults()
        .push(rule(FaultVerb::Create, "leases", FaultAction::status(403)).times(1));
    let forbidden = run().await;
    assert!(
        forbidden.contains("HTTP 403") && forbidden.contains("leases.coordination.k8s.io"),
        "{forbidden}"
    );

    sim.faults().push(rule(
        FaultVerb::Create,
        "leases",
        FaultAction::Reset {
            after_bytes: None,
            after_events: None,
        },
    ));
    let transport = run().await;
    sim.faults().clear();
    liveness.release().await;
    assert!(
        transport.contains("creating the launcher's Lease"),
        "{transport}"
    );
    assert!(
        !transport.contains("leases.coordination.k8s.io") && !transport.contains("RBAC"),
        "{transport}"
    );
    assert_eq!(
        sim.ground_truth().len(),
        0,
        "a pod was created without its Lease"
    );
}
