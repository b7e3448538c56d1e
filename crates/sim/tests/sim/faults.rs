//! Each fault kind, observed the way a client sees it; restarts; counts; the control endpoint.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use http::{Method, StatusCode};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, PostParams, WatchParams};
use podline_sim::{FaultAction, FaultRule, FaultVerb};

use super::common::{Ending, create_pods, pod, raw, sim_without_kubelet, tcp_get};

fn api_status(err: &kube::Error) -> Option<&kube::core::Status> {
    match err {
        kube::Error::Api(status) => Some(status),
        _ => None,
    }
}

#[tokio::test]
async fn a_409_rule_answers_the_quota_conflict_for_the_next_n_creates_only() {
    let sim = sim_without_kubelet().await;
    sim.faults().push(
        FaultRule::new(FaultAction::status(409))
            .verb(FaultVerb::Create)
            .resource("pods")
            .times(2),
    );
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    for _ in 0..2 {
        let err = pods
            .create(&PostParams::default(), &pod("q"))
            .await
            .expect_err("409");
        let status = api_status(&err).expect("a Status");
        assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
        assert!(
            status
                .message
                .starts_with("Operation cannot be fulfilled on resourcequotas"),
            "{}",
            status.message
        );
    }
    pods.create(&PostParams::default(), &pod("q"))
        .await
        .expect("third create succeeds");
    assert!(sim.faults().list().is_empty(), "a spent rule retires");
    assert_eq!(sim.counts().get("create", "pods"), 3);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_429_carries_retry_after_and_5xx_rules_match_by_verb_and_name() {
    let sim = sim_without_kubelet().await;
    sim.faults().push(
        FaultRule::new(FaultAction::Status {
            code: 429,
            reason: None,
            message: None,
            retry_after: Some(3),
        })
        .verb(FaultVerb::List),
    );
    let r = raw(
        &sim,
        Method::GET,
        "/api/v1/namespaces/default/pods",
        None,
        "",
    )
    .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        r.headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("3")
    );
    assert_eq!(r.json()["details"]["retryAfterSeconds"], 3);
    let r = raw(
        &sim,
        Method::GET,
        "/api/v1/namespaces/default/pods",
        None,
        "",
    )
    .await;
    assert_eq!(
        r.status,
        StatusCode::TOO_MANY_REQUESTS,
        "a rule without `times` or probability fires on every match"
    );
    sim.faults().clear();
    // (kube-rs retries 429/503/504 by itself; 500 reaches the caller.)
    sim.faults().push(
        FaultRule::new(FaultAction::status(500))
            .verb(FaultVerb::Get)
            .name("bad-*"),
    );
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    create_pods(&pods, &["bad-1", "good-1"]).await;
    let err = pods.get("bad-1").await.expect_err("500");
    assert_eq!(api_status(&err).map(|s| s.code), Some(500));
    let r = raw(
        &sim,
        Method::GET,
        "/api/v1/namespaces/default/pods/bad-2",
        None,
        "",
    )
    .await;
    assert_eq!(r.json()["reason"], "InternalError");
    pods.get("good-1").await.expect("other names are untouched");
    sim.shutdown().await;
}

#[tokio::test]
async fn latency_delays_the_answer() {
    let sim = sim_without_kubelet().await;
    sim.faults()
        .push(FaultRule::new(FaultAction::Latency { ms: 300 }).verb(FaultVerb::List));
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let started = Instant::now();
    pods.list(&ListParams::default()).await.expect("list");
    assert!(started.elapsed() >= Duration::from_millis(300));
    sim.shutdown().await;
}

#[tokio::test]
async fn a_stalled_watch_keeps_the_connection_open_and_sends_nothing_more() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    create_pods(&pods, &["a", "b", "c"]).await;
    sim.faults().push(
        FaultRule::new(FaultAction::Stall { after_events: 1 })
            .verb(FaultVerb::Watch)
            .times(1),
    );
    let (body, ending) = tcp_get(
        &sim,
        "/api/v1/namespaces/default/pods?watch=true",
        Duration::from_millis(500),
    )
    .await;
    assert_eq!(ending, Ending::Silent, "open and quiet");
    assert_eq!(body.matches("\"type\":\"ADDED\"").count(), 1, "{body}");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_stalled_unary_request_never_answers() {
    let sim = sim_without_kubelet().await;
    sim.faults().push(
        FaultRule::new(FaultAction::Stall { after_events: 0 })
            .verb(FaultVerb::Get)
            .times(1),
    );
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let outcome = tokio::time::timeout(Duration::from_millis(500), pods.get_opt("x")).await;
    assert!(outcome.is_err(), "no answer: the client has to time out");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_reset_breaks_the_watch_in_the_middle_of_a_chunk() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    create_pods(&pods, &["a", "b", "c"]).await;
    sim.faults().push(
        FaultRule::new(FaultAction::Reset {
            after_bytes: None,
            after_events: Some(1),
        })
        .verb(FaultVerb::Watch),
    );
    let (body, ending) = tcp_get(
        &sim,
        "/api/v1/namespaces/default/pods?watch=true",
        Duration::from_secs(5),
    )
    .await;
    assert!(matches!(ending, Ending::Reset | Ending::Eof), "{ending:?}");
    assert!(!body.ends_with("\r\n0\r\n\r\n"), "no terminating chunk");
    assert_eq!(body.matches("\"type\":\"ADDED\"").count(), 1);
    // kube-rs sees a broken stream (an error), not a clean end.
    let mut events = pods
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    let first = events.try_next().await;
    assert!(matches!(first, Ok(Some(_))), "{first:?}");
    let second = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .expect("ends");
    assert!(second.is_err(), "an error, not a clean end: {second:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn end_early_closes_the_watch_cleanly_after_n_events() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    create_pods(&pods, &["a", "b", "c"]).await;
    sim.faults().push(
        FaultRule::new(FaultAction::EndEarly { after_events: 2 })
            .verb(FaultVerb::Watch)
            .times(1),
    );
    let mut events = pods
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    assert!(events.try_next().await.expect("1").is_some());
    assert!(events.try_next().await.expect("2").is_some());
    let end = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .expect("ends");
    assert!(matches!(end, Ok(None)), "{end:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn commit_then_drop_stores_the_pod_but_the_client_gets_no_answer() {
    let sim = sim_without_kubelet().await;
    sim.faults().push(
        FaultRule::new(FaultAction::CommitThenDrop)
            .verb(FaultVerb::Create)
            .times(1),
    );
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let err = pods
        .create(&PostParams::default(), &pod("ctd"))
        .await
        .expect_err("dropped");
    assert!(
        api_status(&err).is_none(),
        "a transport error, not a Status: {err:?}"
    );
    assert!(
        pods.get_opt("ctd").await.expect("get").is_some(),
        "the create was committed"
    );
    let retry = pods
        .create(&PostParams::default(), &pod("ctd"))
        .await
        .expect_err("retry");
    assert_eq!(
        api_status(&retry).map(|s| s.reason.as_str()),
        Some("AlreadyExists")
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn a_restart_drops_connections_refuses_new_ones_then_serves_the_same_state() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    create_pods(&pods, &["keep"]).await;
    let mut watch = pods
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    assert!(watch.try_next().await.expect("initial").is_some());
    let restarting = {
        let sim = sim.clone();
        tokio::spawn(async move { sim.restart(Duration::from_millis(800)).await })
    };
    let broken = tokio::time::timeout(Duration::from_secs(5), watch.try_next())
        .await
        .expect("watch ends");
    assert!(
        !matches!(broken, Ok(Some(_))),
        "the open watch is dropped: {broken:?}"
    );
    let refused = tokio::net::TcpStream::connect(sim.addr()).await;
    assert!(refused.is_err(), "new connections are refused while down");
    restarting.await.expect("restart");
    let back = podline_testkit::wait_until(Duration::from_secs(5), || async {
        pods.get_opt("keep").await.is_ok()
    })
    .await;
    assert!(back, "serves again");
    assert!(
        pods.get_opt("keep").await.expect("get").is_some(),
        "same state"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn the_control_endpoint_manages_faults_counts_and_compaction() {
    let sim = sim_without_kubelet().await;
    let r = raw(
        &sim,
        Method::POST,
        "/_sim/faults",
        Some("application/yaml"),
        "rules:\n  - verb: list\n    resource: pods\n    action: {status: {code: 500}}\n",
    )
    .await;
    assert_eq!(
        r.status,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    let listed = raw(&sim, Method::GET, "/_sim/faults", None, "")
        .await
        .json();
    assert_eq!(listed["rules"][0]["action"]["status"]["code"], 500);
    let r = raw(
        &sim,
        Method::GET,
        "/api/v1/namespaces/default/pods",
        None,
        "",
    )
    .await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        raw(&sim, Method::DELETE, "/_sim/faults", None, "")
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    let r = raw(
        &sim,
        Method::GET,
        "/api/v1/namespaces/default/pods",
        None,
        "",
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    let counts = raw(&sim, Method::GET, "/_sim/counts", None, "")
        .await
        .json();
    assert_eq!(counts["list pods"], 2);
    let bad = raw(
        &sim,
        Method::POST,
        "/_sim/faults",
        Some("application/json"),
        "{\"rules\": [{\"action\": {\"status\": {\"code\": 200}}}]}",
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        raw(&sim, Method::POST, "/_sim/compact", None, "")
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn the_audit_stream_names_each_request_its_answer_and_when_it_was_received() {
    let sim = sim_without_kubelet().await;
    let mut audit = sim.audit();
    sim.faults().push(
        FaultRule::new(FaultAction::status(409))
            .verb(FaultVerb::Create)
            .resource("pods")
            .times(1),
    );
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let mut generated = pod("");
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("audited-".into());
    let before = tokio::time::Instant::now();
    pods.create(&PostParams::default(), &generated)
        .await
        .expect_err("the injected 409");
    let created = pods
        .create(&PostParams::default(), &generated)
        .await
        .expect("create");
    pods.get(created.metadata.name.as_deref().expect("a name"))
        .await
        .expect("get");
    let mut entries = Vec::new();
    while entries.len() < 3 {
        entries.push(audit.recv().await.expect("an audit entry"));
    }
    let seen: Vec<(&str, &str, &str, u16)> = entries
        .iter()
        .map(|e| {
            (
                e.verb.as_str(),
                e.resource.as_str(),
                e.name.as_str(),
                e.code,
            )
        })
        .collect();
    let name = created.metadata.name.as_deref().expect("a name");
    assert_eq!(
        seen,
        [
            ("create", "pods", "", 409),
            ("create", "pods", name, 201),
            ("get", "pods", name, 200)
        ],
        "a create is audited under the name it stored (generateName included), a fault too"
    );
    for entry in &entries {
        assert_eq!(entry.namespace, "default");
        assert!(before <= entry.received && entry.received <= entry.answered);
    }
    assert!(entries[1].answered <= entries[2].received, "in order");
    sim.shutdown().await;
}

/// `GET /_sim/ground-truth` lets a tool outside the process audit against the ledger: every pod
/// with its phase transitions and exit codes, as JSON.
#[tokio::test]
async fn the_ground_truth_ledger_is_served_as_json() {
    let sim = podline_testkit::start_sim(super::common::config().kubelet_enabled(true)).await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let mut quick = pod("ledger");
    quick
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("sim.podline.io/duration".to_owned(), "50ms".to_owned());
    pods.create(&PostParams::default(), &quick)
        .await
        .expect("create");
    let done = podline_testkit::wait_until(Duration::from_secs(20), || async {
        sim.ground_truth()
            .iter()
            .any(|p| p.name == "ledger" && p.reached("Succeeded").is_some())
    })
    .await;
    assert!(done, "the pod ran");
    let r = raw(&sim, Method::GET, "/_sim/ground-truth", None, "").await;
    assert_eq!(r.status, StatusCode::OK);
    let ledger = r.json();
    let entry = ledger["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .find(|p| p["name"] == "ledger")
        .expect("the pod is in the ledger")
        .clone();
    assert_eq!(entry["namespace"], "default");
    let phases: Vec<&str> = entry["transitions"]
        .as_array()
        .expect("transitions")
        .iter()
        .map(|t| t["phase"].as_str().expect("phase"))
        .collect();
    assert_eq!(phases, ["Pending", "Running", "Succeeded"], "{entry}");
    assert_eq!(entry["exitCodes"]["main"], 0, "{entry}");
    sim.shutdown().await;
}

/// `reset {after_events: N}` on a log stream counts lines, however the log was chunked: a log
/// read after its whole backlog was written (one frame of 20 lines) is cut after line 5.
#[tokio::test]
async fn a_reset_on_a_log_stream_counts_lines_not_frames() {
    use http_body_util::BodyExt as _;
    let sim = podline_testkit::start_sim(super::common::config().kubelet_enabled(true)).await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    let mut chatty = pod("chatty");
    let annotations = chatty.metadata.annotations.get_or_insert_default();
    annotations.insert("sim.podline.io/duration".to_owned(), "50ms".to_owned());
    annotations.insert("sim.podline.io/log-lines".to_owned(), "20".to_owned());
    pods.create(&PostParams::default(), &chatty)
        .await
        .expect("create");
    let done = podline_testkit::wait_until(Duration::from_secs(20), || async {
        sim.ground_truth()
            .iter()
            .any(|p| p.name == "chatty" && p.reached("Succeeded").is_some())
    })
    .await;
    assert!(done, "the pod ran");
    sim.faults().push(
        FaultRule::new(FaultAction::Reset {
            after_bytes: None,
            after_events: Some(5),
        })
        .resource("pods/log")
        .times(1),
    );
    let req = http::Request::get("/api/v1/namespaces/default/pods/chatty/log")
        .header("authorization", format!("Bearer {}", sim.token()))
        .body(axum::body::Body::empty())
        .expect("request");
    let response = tower::ServiceExt::oneshot(sim.router(), req)
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let mut received = Vec::new();
    let mut reset = false;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => received.extend_from_slice(frame.data_ref().map_or(&[][..], |d| d)),
            Err(_) => {
                reset = true;
                break;
            }
        }
    }
    assert!(reset, "the stream was reset");
    let text = String::from_utf8_lossy(&received);
    assert_eq!(
        text.lines().count(),
        5,
        "five whole lines before the reset: {text:?}"
    );
    sim.shutdown().await;
}

/// An injected 422 carries a real Invalid body: `Pod "<name>" is invalid: <field>: ...` with
/// the kind, name and one field cause in `details`, as a client's validation-error handling
/// expects.
#[tokio::test]
async fn an_injected_422_is_an_invalid_status_with_causes() {
    let sim = sim_without_kubelet().await;
    sim.faults().push(
        FaultRule::new(FaultAction::status(422))
            .resource("pods")
            .times(1),
    );
    let r = raw(
        &sim,
        Method::PUT,
        "/api/v1/namespaces/default/pods/some-pod",
        Some("application/json"),
        "{}",
    )
    .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    let status = r.json();
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(status["details"]["kind"], "Pod");
    assert_eq!(status["details"]["name"], "some-pod");
    let causes = status["details"]["causes"].as_array().expect("causes");
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0]["reason"], "FieldValueInvalid");
    let message = status["message"].as_str().expect("message");
    assert!(
        message.starts_with("Pod \"some-pod\" is invalid: metadata.annotations: Invalid value"),
        "{message}"
    );
    sim.shutdown().await;
}

/// Issue 27's sim side: `malform` with `field: deletion_timestamp` serves "not-a-time" as the
/// `deletionTimestamp` of the pods it names, in a GET, in each LIST item and in each watch
/// event; other pods and the answers to writes are unchanged.
#[tokio::test]
async fn malform_serves_an_undecodable_deletion_timestamp_in_gets_lists_and_watches() {
    let sim = sim_without_kubelet().await;
    let pods: Api<Pod> = Api::default_namespaced(podline_testkit::client(&sim).await);
    sim.faults().push(
        FaultRule::new(FaultAction::Malform {
            name: "bad-*".into(),
            field: podline_sim::fault::MalformField::DeletionTimestamp,
        })
        .resource("pods"),
    );
    // The creates' answers decode: writes are not garbled.
    create_pods(&pods, &["bad-1", "good-1"]).await;
    let path = "/api/v1/namespaces/default/pods";
    let get = |name: &str| {
        let (sim, url) = (&sim, format!("{path}/{name}"));
        async move { raw(sim, Method::GET, &url, None, "").await }
    };
    assert_eq!(
        get("bad-1").await.json()["metadata"]["deletionTimestamp"],
        "not-a-time"
    );
    assert!(get("good-1").await.json()["metadata"]["deletionTimestamp"].is_null());
    assert!(pods.get("good-1").await.is_ok());
    assert!(
        matches!(pods.get("bad-1").await, Err(kube::Error::SerdeError(_))),
        "no client decodes it"
    );
    let list = raw(&sim, Method::GET, path, None, "").await.json();
    let stamps: Vec<(String, serde_json::Value)> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|p| {
            let meta = &p["metadata"];
            (
                meta["name"].as_str().unwrap_or_default().to_owned(),
                meta["deletionTimestamp"].clone(),
            )
        })
        .collect();
    assert_eq!(
        stamps,
        [
            ("bad-1".to_owned(), serde_json::json!("not-a-time")),
            ("good-1".to_owned(), serde_json::Value::Null)
        ]
    );
    let (body, _) = tcp_get(
        &sim,
        &format!("{path}?watch=true&resourceVersion=0&timeoutSeconds=1"),
        Duration::from_secs(3),
    )
    .await;
    let garbled: Vec<&str> = body
        .lines()
        .filter(|l| l.contains(r#""deletionTimestamp":"not-a-time""#))
        .collect();
    assert_eq!(garbled.len(), 1, "{body}");
    assert!(garbled[0].contains(r#""name":"bad-1""#), "{body}");
    assert!(body.contains(r#""name":"good-1""#), "{body}");
    sim.shutdown().await;
}
