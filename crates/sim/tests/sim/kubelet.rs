//! The simulated kubelet seen through kube-rs, as a client of a real cluster would see it:
//! phases, conditions, container statuses, events, logs, deletion, `--exec`, ground truth.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{AsyncBufReadExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Event, Pod};
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use podline_sim::{KubeletConfig, Sim, SimConfig};
use podline_testkit::wait_until;

const WAIT: Duration = Duration::from_secs(15);

async fn sim(kubelet: KubeletConfig) -> (Sim, Api<Pod>) {
    let sim = podline_testkit::start_sim(SimConfig::default().tls(false).kubelet(kubelet)).await;
    let client = podline_testkit::client(&sim).await;
    (sim, Api::namespaced(client, "default"))
}

fn scripted(name: &str, annotations: &[(&str, &str)], spec: serde_json::Value) -> Pod {
    let annotations: BTreeMap<String, String> = annotations
        .iter()
        .map(|(k, v)| (format!("sim.podline.io/{k}"), (*v).to_owned()))
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": spec,
    }))
    .expect("valid pod json")
}

fn busybox() -> serde_json::Value {
    serde_json::json!({"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]})
}

async fn create(api: &Api<Pod>, pod: Pod) -> Pod {
    api.create(&PostParams::default(), &pod)
        .await
        .expect("create pod")
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// Polls the pod until `cond` holds; panics with the last state otherwise.
async fn wait_pod(api: &Api<Pod>, name: &str, what: &str, cond: impl Fn(&Pod) -> bool) -> Pod {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut last = None;
    while tokio::time::Instant::now() < deadline {
        last = api.get_opt(name).await.ok().flatten();
        if let Some(pod) = last.as_ref().filter(|p| cond(p)) {
            return pod.clone();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("pod {name} never became {what}; last seen: {last:#?}");
}

async fn wait_phase(api: &Api<Pod>, name: &str, want: &str) -> Pod {
    wait_pod(api, name, want, |p| phase(p) == want).await
}

async fn wait_gone(api: &Api<Pod>, name: &str) {
    let ok = wait_until(WAIT, || async {
        matches!(api.get_opt(name).await, Ok(None))
    })
    .await;
    assert!(ok, "pod {name} was never removed");
}

fn terminated(pod: &Pod, idx: usize) -> ContainerStateTerminated {
    let status = pod.status.as_ref().expect("status");
    let cs = &status
        .container_statuses
        .as_ref()
        .expect("container statuses")[idx];
    cs.state
        .as_ref()
        .and_then(|s| s.terminated.clone())
        .expect("terminated state")
}

fn waiting_reason(pod: &Pod) -> Option<String> {
    let cs = pod.status.as_ref()?.container_statuses.as_ref()?.first()?;
    cs.state.as_ref()?.waiting.as_ref()?.reason.clone()
}

fn condition<'a>(
    pod: &'a Pod,
    type_: &str,
) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// `(type, reason, message, component)` of the events about `pod`, oldest first.
async fn events(sim: &Sim, name: &str) -> Vec<(String, String, String, String)> {
    let client = podline_testkit::client(sim).await;
    let api: Api<Event> = Api::namespaced(client, "default");
    let mut list = api
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items;
    list.retain(|e| e.involved_object.name.as_deref() == Some(name));
    list.sort_by_key(|e| {
        e.metadata
            .resource_version
            .as_ref()
            .and_then(|rv| rv.parse::<u64>().ok())
    });
    list.into_iter()
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
                e.source.and_then(|s| s.component).unwrap_or_default(),
            )
        })
        .collect()
}

async fn has_event(sim: &Sim, name: &str, reason: &str) -> bool {
    events(sim, name).await.iter().any(|e| e.1 == reason)
}

#[tokio::test]
async fn scripted_pod_should_succeed_like_a_real_one() {
    let (sim, api) = sim(KubeletConfig::default()).await;
    create(
        &api,
        scripted(
            "ok",
            &[("duration", "200ms"), ("logs", "hello\nworld")],
            busybox(),
        ),
    )
    .await;
    let pod = wait_phase(&api, "ok", "Succeeded").await;

    let spec = pod.spec.as_ref().expect("spec");
    assert_eq!(spec.node_name.as_deref(), Some("sim-node-1"));
    let t = terminated(&pod, 0);
    assert_eq!(t.exit_code, 0);
    assert_eq!(t.reason.as_deref(), Some("Completed"));
    let (started, finished) = (
        t.started_at.expect("startedAt").0,
        t.finished_at.expect("finishedAt").0,
    );
    // On the wire a k8s Time has whole seconds only.
    assert!(finished >= started);
    assert!(
        t.container_id
            .as_deref()
            .is_some_and(|id| id.starts_with("containerd://"))
    );
    let status = pod.status.as_ref().expect("status");
    let cs = &status.container_statuses.as_ref().expect("statuses")[0];
    assert!(cs.image_id.starts_with("docker.io/library/busybox@sha256:"));
    assert_eq!(cs.image, "docker.io/library/busybox:latest");
    assert!(status.start_time.is_some() && status.pod_ip.is_some() && status.host_ip.is_some());
    let ready = condition(&pod, "Ready").expect("Ready condition");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("False", Some("PodCompleted"))
    );
    assert_eq!(
        condition(&pod, "PodScheduled").map(|c| c.status.as_str()),
        Some("True")
    );

    let reasons: Vec<(String, String)> = events(&sim, "ok")
        .await
        .into_iter()
        .map(|e| (e.1, e.3))
        .collect();
    let expected = [
        ("Scheduled", "default-scheduler"),
        ("Pulling", "kubelet"),
        ("Pulled", "kubelet"),
        ("Created", "kubelet"),
        ("Started", "kubelet"),
    ];
    assert_eq!(reasons, expected.map(|(a, b)| (a.to_owned(), b.to_owned())));
    let scheduled = &events(&sim, "ok").await[0].2;
    assert_eq!(scheduled, "Successfully assigned default/ok to sim-node-1");

    let logs = api.logs("ok", &LogParams::default()).await.expect("logs");
    assert_eq!(logs, "hello\nworld\n");
}

#[tokio::test]
async fn pod_should_be_seen_running_before_it_succeeds() {
    let (_sim, api) = sim(KubeletConfig::default()).await;
    create(&api, scripted("slow", &[("duration", "2s")], busybox())).await;
    let pod = wait_phase(&api, "slow", "Running").await;
    let cs = &pod
        .status
        .as_ref()
        .expect("status")
        .container_statuses
        .as_ref()
        .expect("cs")[0];
    assert!(cs.ready);
    assert!(cs.state.as_ref().and_then(|s| s.running.as_ref()).is_some());
    assert_eq!(
        condition(&pod, "Ready").map(|c| c.status.as_str()),
        Some("True")
    );
}

#[tokio::test]
async fn exit_codes_and_oom_should_fail_the_pod_with_the_real_reasons() {
    let (_sim, api) = sim(KubeletConfig::default()).await;
    create(
        &api,
        scripted(
            "one",
            &[("exit-code", "1"), ("termination-message", "boom")],
            busybox(),
        ),
    )
    .await;
    create(&api, scripted("oom", &[("oom", "true")], busybox())).await;
    create(&api, scripted("kill", &[("exit-code", "137")], busybox())).await;

    let t = terminated(&wait_phase(&api, "one", "Failed").await, 0);
    assert_eq!(
        (t.exit_code, t.reason.as_deref(), t.message.as_deref()),
        (1, Some("Error"), Some("boom"))
    );
    let t = terminated(&wait_phase(&api, "oom", "Failed").await, 0);
    assert_eq!((t.exit_code, t.reason.as_deref()), (137, Some("OOMKilled")));
    let t = terminated(&wait_phase(&api, "kill", "Failed").await, 0);
    assert_eq!((t.exit_code, t.reason.as_deref()), (137, Some("Error")));
}

#[tokio::test]
async fn image_errors_should_keep_the_pod_pending_in_back_off() {
    let (sim, api) = sim(KubeletConfig::default()).await;
    create(
        &api,
        scripted("nope", &[("image-error", "ErrImagePull")], busybox()),
    )
    .await;
    let pod = wait_pod(&api, "nope", "ImagePullBackOff", |p| {
        waiting_reason(p).as_deref() == Some("ImagePullBackOff")
    })
    .await;
    assert_eq!(phase(&pod), "Pending");
    let events = events(&sim, "nope").await;
    let failed: Vec<&str> = events
        .iter()
        .filter(|e| e.1 == "Failed")
        .map(|e| e.2.as_str())
        .collect();
    assert!(
        failed.iter().any(|m| m.contains("code = NotFound")),
        "{failed:?}"
    );
    assert!(failed.contains(&"Error: ErrImagePull"), "{failed:?}");
    assert!(
        events
            .iter()
            .any(|e| e.1 == "BackOff" && e.2 == "Back-off pulling image \"busybox\"")
    );
    assert!(
        events
            .iter()
            .filter(|e| e.1 == "Failed")
            .all(|e| e.0 == "Warning")
    );

    create(
        &api,
        scripted(
            "bad-name",
            &[],
            serde_json::json!({"restartPolicy": "Never",
        "containers": [{"name": "main", "image": "Not/Valid:Image:"}]}),
        ),
    )
    .await;
    let pod = wait_pod(&api, "bad-name", "InvalidImageName", |p| {
        waiting_reason(p).as_deref() == Some("InvalidImageName")
    })
    .await;
    assert_eq!(phase(&pod), "Pending");
}

#[tokio::test]
async fn transient_image_error_should_recover() {
    let (sim, api) = sim(KubeletConfig::default()).await;
    let annotations = [
        ("image-error", "ErrImagePull"),
        ("image-error-transient", "1"),
    ];
    create(&api, scripted("flaky", &annotations, busybox())).await;
    wait_phase(&api, "flaky", "Succeeded").await;
    assert!(has_event(&sim, "flaky", "BackOff").await);
}

#[tokio::test]
async fn unschedulable_pod_should_stay_pending_with_failed_scheduling() {
    let (sim, api) = sim(KubeletConfig::default()).await;
    create(
        &api,
        scripted("stuck", &[("unschedulable", "true")], busybox()),
    )
    .await;
    let pod = wait_pod(&api, "stuck", "Unschedulable", |p| {
        condition(p, "PodScheduled").is_some_and(|c| c.reason.as_deref() == Some("Unschedulable"))
    })
    .await;
    assert_eq!(phase(&pod), "Pending");
    assert_eq!(pod.spec.as_ref().and_then(|s| s.node_name.clone()), None);
    let events = events(&sim, "stuck").await;
    let failed = events
        .iter()
        .find(|e| e.1 == "FailedScheduling")
        .expect("FailedScheduling");
    assert_eq!(failed.0, "Warning");
    assert!(
        failed.2.starts_with("0/1 nodes are available: "),
        "{}",
        failed.2
    );
    assert_eq!(failed.3, "default-scheduler");
}

#[tokio::test]
async fn active_deadline_should_fail_the_pod_as_deadline_exceeded() {
    let (sim, api) = sim(KubeletConfig::default()).await;
    let spec = serde_json::json!({"restartPolicy": "Never", "activeDeadlineSeconds": 1,
        "containers": [{"name": "main", "image": "busybox"}]});
    create(&api, scripted("late", &[("duration", "1h")], spec)).await;
    let pod = wait_phase(&api, "late", "Failed").await;
    let status = pod.status.as_ref().expect("status");
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was active on the node longer than the specified deadline")
    );
    assert_eq!(terminated(&pod, 0).exit_code, 137);
    assert!(has_event(&sim, "late", "DeadlineExceeded").await);
}

#[tokio::test]
async fn deleting_a_running_pod_should_kill_it_then_remove_it() {
    let (sim, api) = sim(KubeletConfig::default()).await;
    let pod = create(&api, scripted("victim", &[("duration", "1h")], busybox())).await;
    wait_phase(&api, "victim", "Running").await;
    api.delete("victim", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&api, "victim").await;
    assert!(has_event(&sim, "victim", "Killing").await);
    let uid = pod.metadata.uid.expect("uid");
    let truth = sim
        .ground_truth()
        .into_iter()
        .find(|h| h.uid == uid)
        .expect("ground truth");
    assert!(truth.deleted_at.is_some());
    assert_eq!(truth.exit_codes.get("main"), Some(&137));
    assert_eq!(
        truth.transitions.last().map(|t| t.0.as_str()),
        Some("Failed")
    );
}

#[tokio::test]
async fn deleting_a_pending_pod_should_remove_it_promptly() {
    let (_sim, api) = sim(KubeletConfig::default()).await;
    create(
        &api,
        scripted("never", &[("unschedulable", "true")], busybox()),
    )
    .await;
    create(
        &api,
        scripted("pulling", &[("image-error", "ErrImagePull")], busybox()),
    )
    .await;
    wait_pod(&api, "pulling", "ErrImagePull", |p| {
        waiting_reason(p).is_some_and(|r| r != "ContainerCreating")
    })
    .await;
    api.delete("never", &DeleteParams::default())
        .await
        .expect("delete");
    api.delete("pulling", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&api, "never").await;
    wait_gone(&api, "pulling").await;
}

#[tokio::test]
async fn bad_annotation_should_fail_the_pod_and_name_the_annotation() {
    let (sim, api) = sim(KubeletConfig::default()).await;
    create(
        &api,
        scripted("typo", &[("duration", "forever")], busybox()),
    )
    .await;
    let pod = wait_phase(&api, "typo", "Failed").await;
    let status = pod.status.as_ref().expect("status");
    assert_eq!(status.reason.as_deref(), Some("InvalidSimAnnotation"));
    let message = status.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("sim.podline.io/duration") && message.contains("expected"),
        "{message}"
    );
    assert!(has_event(&sim, "typo", "InvalidSimAnnotation").await);
    // The kubelet keeps working for the next pod.
    create(&api, scripted("after", &[], busybox())).await;
    wait_phase(&api, "after", "Succeeded").await;
}

#[tokio::test]
async fn follow_logs_should_stream_lines_until_the_container_exits() {
    let (_sim, api) = sim(KubeletConfig::default()).await;
    create(
        &api,
        scripted(
            "chatty",
            &[("log-lines", "5"), ("duration", "500ms")],
            busybox(),
        ),
    )
    .await;
    wait_phase(&api, "chatty", "Running").await;
    let params = LogParams {
        follow: true,
        timestamps: true,
        ..LogParams::default()
    };
    let stream = api.log_stream("chatty", &params).await.expect("log stream");
    let lines: Vec<String> = tokio::time::timeout(WAIT, stream.lines().try_collect())
        .await
        .expect("follow must end when the container exits")
        .expect("read lines");
    assert_eq!(lines.len(), 5, "{lines:?}");
    for (i, line) in lines.iter().enumerate() {
        let (ts, text) = line.split_once(' ').expect("timestamp prefix");
        assert_eq!(text, format!("line {}", i + 1));
        assert_eq!(ts.len(), 30, "fixed-width RFC3339Nano: {ts}");
        assert!(
            ts.ends_with('Z') && ts.parse::<jiff::Timestamp>().is_ok(),
            "{ts}"
        );
    }
    let tail = api
        .logs(
            "chatty",
            &LogParams {
                tail_lines: Some(2),
                ..LogParams::default()
            },
        )
        .await
        .expect("tail");
    assert_eq!(tail, "line 4\nline 5\n");
}

#[tokio::test]
async fn ground_truth_should_equal_the_times_in_the_status() {
    let (sim, api) = sim(KubeletConfig::default()).await;
    let created = create(&api, scripted("truth", &[("duration", "300ms")], busybox())).await;
    let pod = wait_phase(&api, "truth", "Succeeded").await;
    let uid = created.metadata.uid.expect("uid");
    let history = sim
        .ground_truth()
        .into_iter()
        .find(|h| h.uid == uid)
        .expect("ground truth");
    let t = terminated(&pod, 0);
    let secs = |ts: jiff::Timestamp| ts.as_second();
    let expected = vec![
        (
            "Pending".to_owned(),
            secs(pod.metadata.creation_timestamp.clone().expect("created").0),
        ),
        (
            "Running".to_owned(),
            secs(t.started_at.expect("startedAt").0),
        ),
        (
            "Succeeded".to_owned(),
            secs(t.finished_at.expect("finishedAt").0),
        ),
    ];
    let got: Vec<(String, i64)> = history
        .transitions
        .iter()
        .map(|(p, ts)| (p.clone(), secs(*ts)))
        .collect();
    assert_eq!(got, expected);
    assert_eq!(history.exit_codes.get("main"), Some(&0));
}

#[tokio::test]
async fn exec_mode_should_run_the_command_with_its_env_and_exit_code() {
    let (sim, api) = sim(KubeletConfig::default().exec(true)).await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(podline_testkit::client(&sim).await, "default");
    let secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "s"}, "stringData": {"k": "from-the-secret"},
    }))
    .expect("secret");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create secret");
    let spec = serde_json::json!({"restartPolicy": "Never", "containers": [{
        "name": "main", "image": "busybox",
        "command": ["sh", "-c"], "args": ["echo hi $GREETING $TOKEN; echo err >&2; exit 3"],
        "env": [
            {"name": "GREETING", "value": "there"},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        ],
    }]});
    create(&api, scripted("exec", &[], spec)).await;
    let pod = wait_phase(&api, "exec", "Failed").await;
    let t = terminated(&pod, 0);
    assert_eq!((t.exit_code, t.reason.as_deref()), (3, Some("Error")));
    let logs = api.logs("exec", &LogParams::default()).await.expect("logs");
    let mut lines: Vec<&str> = logs.lines().collect();
    lines.sort_unstable();
    // The secretKeyRef is resolved as a kubelet resolves it.
    assert_eq!(lines, ["err", "hi there from-the-secret"]);
}

#[tokio::test]
async fn exec_mode_should_kill_the_process_when_the_pod_is_deleted() {
    let (sim, api) = sim(KubeletConfig::default()
        .exec(true)
        .kill_delay(Duration::from_secs(5)))
    .await;
    let spec = serde_json::json!({"restartPolicy": "Never", "containers": [{
        "name": "main", "image": "busybox", "command": ["sleep", "30"]}]});
    let pod = create(&api, scripted("sleeper", &[], spec)).await;
    wait_phase(&api, "sleeper", "Running").await;
    let started = std::time::Instant::now();
    api.delete("sleeper", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&api, "sleeper").await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the child is killed, not waited for"
    );
    let uid = pod.metadata.uid.expect("uid");
    let truth = sim
        .ground_truth()
        .into_iter()
        .find(|h| h.uid == uid)
        .expect("ground truth");
    assert_eq!(
        truth.exit_codes.get("main"),
        Some(&137),
        "SIGKILL is 128 + 9"
    );
}

#[tokio::test]
async fn pods_created_over_http_in_bursts_should_all_complete() {
    const PODS: usize = 500;
    let (sim, api) =
        sim(KubeletConfig::default().default_duration(Duration::from_millis(50))).await;
    futures::stream::iter(0..PODS)
        .map(|i| {
            let api = api.clone();
            async move { create(&api, scripted(&format!("bulk-{i}"), &[], busybox())).await }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    let done = wait_until(Duration::from_secs(45), || async {
        sim.ground_truth()
            .iter()
            .filter(|h| h.transitions.last().is_some_and(|t| t.0 == "Succeeded"))
            .count()
            == PODS
    })
    .await;
    assert!(done, "every pod should reach Succeeded");
}

#[tokio::test]
async fn ten_thousand_scripted_pods_should_run_to_completion_quickly() {
    const PODS: usize = 10_000;
    let (sim, _api) =
        sim(KubeletConfig::default().default_duration(Duration::from_millis(100))).await;
    let started = std::time::Instant::now();
    for i in 0..PODS {
        let name = format!("many-{i}");
        let mut pod = scripted(&name, &[], busybox());
        pod.metadata.namespace = Some("default".to_owned());
        pod.metadata.uid = Some(format!("uid-many-{i}"));
        pod.metadata.creation_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
        );
        sim.cluster()
            .write_pod("default", &name, |_| {
                Ok::<_, ()>((podline_sim::cluster::Write::Create(pod), ()))
            })
            .expect("create directly in the store");
    }
    eprintln!("{PODS} pods created in {:?}", started.elapsed());
    // Poll the phases the store keeps for field selectors (cheap), not decoded pods or the
    // ground truth (a deep copy per call).
    let phase_field = <Pod as podline_sim::cluster::Kind>::FIELDS
        .iter()
        .position(|f| *f == "status.phase")
        .expect("pods support status.phase");
    let all_succeeded = || {
        let (pods, _) = sim.cluster().pod_table().snapshot(None, None);
        pods.iter()
            .filter(|p| p.facts.field(phase_field) == "Succeeded")
            .count()
            == PODS
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(50);
    let mut done = false;
    while !done && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        done = all_succeeded();
    }
    assert!(done, "every pod should reach Succeeded");
    let rss = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .map(str::to_owned)
        })
        .unwrap_or_default();
    eprintln!(
        "{PODS} scripted pods completed in {:?} ({rss}, whole test process)",
        started.elapsed()
    );
}

/// A pod with the largest grace period there is (`terminationGracePeriodSeconds: 2^63-1`),
/// deleted while running: the deletionTimestamp is what kube-apiserver writes, `now +
/// time.Duration(grace) * time.Second` in Go's wrapping int64 nanoseconds (apiserver
/// `pkg/registry/rest/delete.go` `BeforeDelete`), so one second before now and decodable by any
/// client; the pod stays readable and writable, and the kubelet goes on taking pods.
#[tokio::test]
async fn the_largest_grace_period_wedges_nothing() {
    let (_sim, api) = sim(KubeletConfig::default()).await;
    let mut spec = busybox();
    spec["terminationGracePeriodSeconds"] = serde_json::json!(i64::MAX);
    create(&api, scripted("forever", &[("duration", "1h")], spec)).await;
    wait_phase(&api, "forever", "Running").await;
    let before = jiff::Timestamp::now();
    api.delete("forever", &DeleteParams::default())
        .await
        .expect("delete");
    let deleting = api.get("forever").await.expect("the pod decodes");
    let stamp = deleting
        .metadata
        .deletion_timestamp
        .expect("a deletion timestamp")
        .0;
    let offset = stamp.duration_since(before).as_secs_f64();
    assert!((-2.0..=1.0).contains(&offset), "{stamp} vs {before}");
    assert_eq!(
        deleting.metadata.deletion_grace_period_seconds,
        Some(i64::MAX)
    );
    let patch = serde_json::json!({"metadata": {"labels": {"still": "writable"}}});
    api.patch(
        "forever",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .expect("the pod takes writes");
    create(&api, scripted("next", &[("duration", "10ms")], busybox())).await;
    wait_phase(&api, "next", "Succeeded").await;
}

/// A container's output that is not UTF-8 reaches the log API byte for byte: the kubelet and
/// kube-apiserver copy a container's log bytes as they are (kubelet
/// `pkg/kubelet/kuberuntime/logs/logs.go` writes the CRI log's bytes; the API server proxies the
/// kubelet's response), with no U+FFFD replacement.
#[tokio::test]
async fn exec_mode_should_pass_invalid_utf8_output_through_the_log_api() {
    use futures::AsyncReadExt;
    let (_sim, api) = sim(KubeletConfig::default().exec(true)).await;
    let spec = serde_json::json!({"restartPolicy": "Never", "containers": [{
        "name": "main", "image": "busybox",
        "command": ["sh", "-c"], "args": ["printf 'a\\377\\376b\\n'"],
    }]});
    create(&api, scripted("bytes", &[], spec)).await;
    wait_phase(&api, "bytes", "Succeeded").await;
    let mut out = Vec::new();
    api.log_stream("bytes", &LogParams::default())
        .await
        .expect("logs")
        .read_to_end(&mut out)
        .await
        .expect("read the log");
    assert_eq!(out, b"a\xff\xfeb\n");
}
