//! Bounded inputs: numbers the real server range-checks or parses strictly, request bodies over
//! the cap, and connections that stall in the TLS handshake, the headers or the body. Each
//! answer is the one kube-apiserver 1.32 gives; none may panic or hold a connection forever.

use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use podline_sim::{Sim, SimConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::common::{Ending, config, raw, sim_without_kubelet, tcp_get};

const PODS: &str = "/api/v1/namespaces/default/pods";

fn pod_with_spec(name: &str, spec: Value, annotations: Value) -> Value {
    let mut spec_full =
        json!({"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]});
    if let (Some(full), Some(extra)) = (spec_full.as_object_mut(), spec.as_object()) {
        full.extend(extra.clone());
    }
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations}, "spec": spec_full})
}

async fn post_pod(sim: &Sim, body: &Value) -> super::common::Raw {
    raw(
        sim,
        Method::POST,
        PODS,
        Some("application/json"),
        &body.to_string(),
    )
    .await
}

#[tokio::test]
async fn active_deadline_seconds_should_be_range_checked_like_kube_apiserver() {
    let sim = sim_without_kubelet().await;
    for value in [i64::MAX, 2_147_483_648, 0] {
        let r = post_pod(
            &sim,
            &pod_with_spec("big", json!({"activeDeadlineSeconds": value}), json!({})),
        )
        .await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{value}");
        assert_eq!(
            r.json()["message"],
            format!(
                "Pod \"big\" is invalid: spec.activeDeadlineSeconds: Invalid value: {value}: must be between 1 and 2147483647, inclusive"
            )
        );
    }
    let ok = post_pod(
        &sim,
        &pod_with_spec(
            "max",
            json!({"activeDeadlineSeconds": 2_147_483_647}),
            json!({}),
        ),
    )
    .await;
    assert_eq!(ok.status, StatusCode::CREATED);
    // An update may lower the deadline but neither raise it past the range nor remove it.
    let mut pod = ok.json();
    pod["spec"]["activeDeadlineSeconds"] = json!(i64::MAX);
    let path = format!("{PODS}/max");
    let r = raw(
        &sim,
        Method::PUT,
        &path,
        Some("application/json"),
        &pod.to_string(),
    )
    .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        r.json()["message"],
        "Pod \"max\" is invalid: spec.activeDeadlineSeconds: Invalid value: 9223372036854775807: must be between 1 and 2147483647, inclusive"
    );
    pod["spec"]["activeDeadlineSeconds"] = Value::Null;
    let r = raw(
        &sim,
        Method::PUT,
        &path,
        Some("application/json"),
        &pod.to_string(),
    )
    .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        r.json()["message"],
        "Pod \"max\" is invalid: spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive integer to nil value"
    );
    pod["spec"]["activeDeadlineSeconds"] = json!(60);
    let r = raw(
        &sim,
        Method::PUT,
        &path,
        Some("application/json"),
        &pod.to_string(),
    )
    .await;
    assert_eq!(
        r.status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    sim.shutdown().await;
}

/// Before the fix a 68-year deadline (or an 11-year scripted delay) panicked the kubelet's
/// timer wheel: the API kept answering and every later pod stayed Pending.
#[tokio::test]
async fn huge_durations_on_pods_should_not_stop_the_kubelet() {
    let sim = podline_testkit::start_sim(SimConfig::default().tls(false)).await;
    let pods: Api<Pod> = Api::namespaced(podline_testkit::client(&sim).await, "default");
    let create = |name: &str, spec: Value, annotations: Value| {
        let pod: Pod =
            serde_json::from_value(pod_with_spec(name, spec, annotations)).expect("a pod");
        let pods = pods.clone();
        async move {
            pods.create(&PostParams::default(), &pod)
                .await
                .expect("create")
        }
    };
    create(
        "deadline",
        json!({"activeDeadlineSeconds": 2_147_483_647, "terminationGracePeriodSeconds": i64::MAX}),
        json!({"sim.podline.io/duration": "1h"}),
    )
    .await;
    create(
        "slow",
        json!({}),
        json!({"sim.podline.io/duration": "100000h", "sim.podline.io/pull-delay.main": "0s"}),
    )
    .await;
    create(
        "pull",
        json!({}),
        json!({"sim.podline.io/pull-delay": "50000h"}),
    )
    .await;
    create(
        "schedule",
        json!({}),
        json!({"sim.podline.io/schedule-delay": "50000h"}),
    )
    .await;
    let phase = |name: &'static str| {
        let pods = pods.clone();
        async move {
            pods.get(name)
                .await
                .ok()
                .and_then(|p| p.status)
                .and_then(|s| s.phase)
                .unwrap_or_default()
        }
    };
    assert!(
        podline_testkit::wait_until(Duration::from_secs(40), || async {
            phase("deadline").await == "Running" && phase("slow").await == "Running"
        })
        .await,
        "the long-running pods run"
    );
    // The grace period is i64::MAX seconds: the deletion must still finish (the kubelet's
    // kill delay is short) and nothing may overflow on the way.
    pods.delete("deadline", &DeleteParams::default())
        .await
        .expect("delete");
    create(
        "after",
        json!({}),
        json!({"sim.podline.io/duration": "10ms"}),
    )
    .await;
    assert!(
        podline_testkit::wait_until(Duration::from_secs(40), || async {
            phase("after").await == "Succeeded"
        })
        .await,
        "a pod created after them still runs to completion"
    );
    assert!(
        podline_testkit::wait_until(Duration::from_secs(40), || async {
            pods.get_opt("deadline").await.ok().flatten().is_none()
        })
        .await,
        "the pod with the huge grace period was removed"
    );
    assert_eq!(phase("pull").await, "Pending", "still pulling");
    sim.shutdown().await;
}

fn status_of(r: &super::common::Raw) -> (u16, String, String) {
    let s = r.json();
    (
        r.status.as_u16(),
        s["reason"].as_str().unwrap_or_default().to_owned(),
        s["message"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test]
async fn numeric_query_parameters_should_parse_like_go_and_never_panic() {
    let sim = sim_without_kubelet().await;
    let get = |path: String| {
        let sim = sim.clone();
        async move { raw(&sim, Method::GET, &path, None, "").await }
    };
    for (query, value) in [
        ("watch=true&timeoutSeconds=abc", "abc"),
        ("timeoutSeconds=1.5", "1.5"),
        ("limit=abc", "abc"),
        ("limit=99999999999999999999", "99999999999999999999"),
    ] {
        let r = get(format!("{PODS}?{query}")).await;
        let (code, reason, message) = status_of(&r);
        assert_eq!((code, reason.as_str()), (400, "BadRequest"), "{query}");
        let why = if value.len() > 19 {
            "value out of range"
        } else {
            "invalid syntax"
        };
        assert_eq!(
            message,
            format!("strconv.ParseInt: parsing \"{value}\": {why}"),
            "{query}"
        );
    }
    let r = raw(
        &sim,
        Method::DELETE,
        &format!("{PODS}/x?gracePeriodSeconds=soon"),
        None,
        "",
    )
    .await;
    assert_eq!(
        status_of(&r),
        (
            400,
            "BadRequest".to_owned(),
            "strconv.ParseInt: parsing \"soon\": invalid syntax".to_owned()
        )
    );
    // A watch timeout of 2^63-1 s overflows Go's int64 nanoseconds to -1 s, and a negative one
    // is already over: the real server ends such watches at once. Before the fix the first
    // panicked the handler (no answer at all).
    for timeout in ["9223372036854775807", "-5"] {
        let started = Instant::now();
        let (body, ending) = tcp_get(
            &sim,
            &format!("{PODS}?watch=true&timeoutSeconds={timeout}"),
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(ending, Ending::CleanEnd, "{timeout}: {body}");
        assert!(body.starts_with("HTTP/1.1 200"), "{timeout}: {body}");
        assert!(started.elapsed() < Duration::from_secs(3), "{timeout}");
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn log_options_should_be_validated_like_kube_apiserver() {
    let sim = sim_without_kubelet().await;
    let log = |query: &str| {
        let sim = sim.clone();
        let path = format!("{PODS}/nopod/log?{query}");
        async move { status_of(&raw(&sim, Method::GET, &path, None, "").await) }
    };
    assert_eq!(
        log("tailLines=-1").await,
        (
            422,
            "Invalid".to_owned(),
            "PodLogOptions \"nopod\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0".to_owned()
        )
    );
    assert_eq!(
        log("limitBytes=0").await.2,
        "PodLogOptions \"nopod\" is invalid: limitBytes: Invalid value: 0: must be greater than 0"
    );
    assert_eq!(
        log("sinceSeconds=0").await.2,
        "PodLogOptions \"nopod\" is invalid: sinceSeconds: Invalid value: 0: must be greater than 0"
    );
    assert_eq!(
        log("sinceSeconds=5&sinceTime=2024-01-01T00:00:00Z").await.2,
        "PodLogOptions \"nopod\" is invalid: : Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"
    );
    assert_eq!(
        log("tailLines=ten").await,
        (
            400,
            "BadRequest".to_owned(),
            "strconv.ParseInt: parsing \"ten\": invalid syntax".to_owned()
        )
    );
    // Valid options on a missing pod: the 404, not a parse error.
    assert_eq!(
        log("follow=True&tailLines=9223372036854775807").await.0,
        404
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn a_bad_resource_version_on_list_and_watch_should_be_an_error() {
    let sim = sim_without_kubelet().await;
    let detail = "resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax";
    // Served by the watch cache: its bare storage error, a 500 without a reason.
    let r = raw(
        &sim,
        Method::GET,
        &format!("{PODS}?resourceVersion=abc"),
        None,
        "",
    )
    .await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    let s = r.json();
    assert_eq!(s["message"], detail);
    assert!(s.get("reason").is_none(), "no reason: {s}");
    // Paginated, so served from etcd: 400 BadRequest.
    let r = raw(
        &sim,
        Method::GET,
        &format!("{PODS}?resourceVersion=abc&limit=5"),
        None,
        "",
    )
    .await;
    assert_eq!(
        status_of(&r),
        (
            400,
            "BadRequest".to_owned(),
            format!("invalid resource version: {detail}")
        )
    );
    let r = raw(
        &sim,
        Method::GET,
        &format!("{PODS}?resourceVersion=-1"),
        None,
        "",
    )
    .await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    let r = raw(
        &sim,
        Method::GET,
        &format!("{PODS}?watch=1&resourceVersion=abc"),
        None,
        "",
    )
    .await;
    assert_eq!(status_of(&r).0, 500);
    assert_eq!(status_of(&r).2, detail);
    let r = raw(
        &sim,
        Method::GET,
        &format!("{PODS}/x?resourceVersion=abc"),
        None,
        "",
    )
    .await;
    assert_eq!(
        status_of(&r),
        (500, String::new(), detail.to_owned()),
        "a get too"
    );
    // Numbers (and 0, and empty) are fine.
    for rv in ["0", "", "12"] {
        let r = raw(
            &sim,
            Method::GET,
            &format!("{PODS}?resourceVersion={rv}"),
            None,
            "",
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{rv}");
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn query_booleans_should_read_like_kube_apiserver() {
    let sim = sim_without_kubelet().await;
    // `watch=maybe` is a watch on a real server (only 0 and false are false).
    let (body, ending) = tcp_get(
        &sim,
        &format!("{PODS}?watch=maybe&timeoutSeconds=1"),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(ending, Ending::CleanEnd, "{body}");
    assert_eq!(sim.counts().get("watch", "pods"), 1);
    let r = raw(&sim, Method::GET, &format!("{PODS}?watch=FALSE"), None, "").await;
    assert_eq!(r.json()["kind"], "PodList");
    assert_eq!(sim.counts().get("list", "pods"), 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn bad_label_selectors_should_be_400_with_the_real_message() {
    let sim = sim_without_kubelet().await;
    for (selector, message) in [
        (
            "app%3Dweb%20value",
            "found 'value', expected: ',' or 'end of string'",
        ),
        (
            "app%20in%20web",
            "unable to parse requirement: found 'web' expected: '('",
        ),
        (
            "a%20b%3Dc",
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
        ),
    ] {
        let r = raw(
            &sim,
            Method::GET,
            &format!("{PODS}?labelSelector={selector}"),
            None,
            "",
        )
        .await;
        assert_eq!(
            status_of(&r),
            (400, "BadRequest".to_owned(), message.to_owned()),
            "{selector}"
        );
    }
    sim.shutdown().await;
}

/// Reads from `stream` until it closes; returns how long that took (None: still open after
/// `within`).
async fn closed_within(stream: &mut TcpStream, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at((started + within).into(), stream.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn a_connection_that_never_starts_tls_should_be_closed_after_the_handshake_timeout() {
    let sim = podline_testkit::start_sim(
        SimConfig::default()
            .kubelet_enabled(false)
            .tls_handshake_timeout(Duration::from_millis(300)),
    )
    .await;
    let mut silent = TcpStream::connect(sim.addr()).await.expect("connect");
    let closed = closed_within(&mut silent, Duration::from_secs(10)).await;
    let took = closed.expect("the sim closed a connection that never sent a ClientHello");
    assert!(
        took >= Duration::from_millis(250),
        "not before the timeout: {took:?}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn slow_or_silent_http_connections_should_be_closed_after_the_header_timeout() {
    let sim = podline_testkit::start_sim(
        config()
            .header_read_timeout(Duration::from_millis(300))
            .idle_timeout(Duration::from_secs(30)),
    )
    .await;
    // Nothing at all.
    let mut silent = TcpStream::connect(sim.addr()).await.expect("connect");
    assert!(
        closed_within(&mut silent, Duration::from_secs(10))
            .await
            .is_some()
    );
    // Slowloris: headers that never end.
    let mut slow = TcpStream::connect(sim.addr()).await.expect("connect");
    slow.write_all(b"GET /api/v1/pods HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: 1\r\n")
        .await
        .expect("write");
    let took = closed_within(&mut slow, Duration::from_secs(10))
        .await
        .expect("the sim closed a connection whose headers never ended");
    assert!(took >= Duration::from_millis(250), "{took:?}");
    // A keep-alive connection may sit idle longer than the header timeout (that is the idle
    // timeout's business), and then a second request that stalls is cut like the first.
    let mut kept = TcpStream::connect(sim.addr()).await.expect("connect");
    let request = format!(
        "GET /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\r\n",
        sim.token()
    );
    for _ in 0..2 {
        kept.write_all(request.as_bytes()).await.expect("write");
        let mut buf = vec![0u8; 65536];
        let n = kept.read(&mut buf).await.expect("read");
        assert!(
            buf[..n].starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&buf[..n])
        );
        tokio::time::sleep(Duration::from_millis(900)).await;
    }
    kept.write_all(b"GET /api HTTP/1.1\r\nHost:")
        .await
        .expect("write");
    assert!(
        closed_within(&mut kept, Duration::from_secs(10))
            .await
            .is_some(),
        "a stalled second request is cut too"
    );
    sim.shutdown().await;
}

async fn send_raw(sim: &Sim, head: &str, body: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(sim.addr()).await.expect("connect");
    let head = format!(
        "{head}Host: 127.0.0.1\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n\r\n",
        sim.token()
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    stream.write_all(body).await.expect("write");
    stream
}

async fn read_response(stream: &mut TcpStream, within: Duration) -> String {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let deadline = tokio::time::Instant::now() + within;
    while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        data.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&data);
        if text.contains("\r\n\r\n") && text.trim_end().ends_with('}') {
            break;
        }
    }
    String::from_utf8_lossy(&data).into_owned()
}

#[tokio::test]
async fn request_bodies_over_the_cap_should_get_413_at_once() {
    let sim = podline_testkit::start_sim(config().max_request_body(1024)).await;
    // Announced too large: refused without waiting for (or reading) a byte of it.
    let started = Instant::now();
    let mut huge = send_raw(
        &sim,
        &format!("POST {PODS} HTTP/1.1\r\nContent-Length: 99999999999\r\n"),
        b"",
    )
    .await;
    let answer = read_response(&mut huge, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer.contains(r#""message":"Request entity too large: limit is 1024""#)
            && answer.contains(r#""reason":"RequestEntityTooLarge""#),
        "{answer}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    // Chunked, so only counting tells: one chunk of 2 KiB.
    let chunk = format!("{:x}\r\n{}\r\n0\r\n\r\n", 2048, "x".repeat(2048));
    let mut chunked = send_raw(
        &sim,
        &format!("POST {PODS} HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"),
        chunk.as_bytes(),
    )
    .await;
    let answer = read_response(&mut chunked, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer.contains("Request entity too large: limit is 1024"),
        "{answer}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn a_body_that_never_finishes_should_time_out_with_504() {
    let sim =
        podline_testkit::start_sim(config().body_read_timeout(Duration::from_millis(300))).await;
    let mut stream = send_raw(
        &sim,
        &format!("POST {PODS} HTTP/1.1\r\nContent-Length: 100\r\n"),
        b"{\"kind\":",
    )
    .await;
    let answer = read_response(&mut stream, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 504"), "{answer}");
    assert!(
        answer.contains(
            "Timeout: request did not complete within requested timeout - context deadline exceeded"
        ),
        "{answer}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_should_be_closed_after_the_idle_timeout() {
    let sim = podline_testkit::start_sim(
        config()
            .header_read_timeout(Duration::from_secs(5))
            .idle_timeout(Duration::from_millis(400)),
    )
    .await;
    let mut kept = TcpStream::connect(sim.addr()).await.expect("connect");
    let request = format!(
        "GET /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\r\n",
        sim.token()
    );
    kept.write_all(request.as_bytes()).await.expect("write");
    let mut buf = vec![0u8; 65536];
    let n = kept.read(&mut buf).await.expect("read");
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    let took = closed_within(&mut kept, Duration::from_secs(4))
        .await
        .expect("an idle connection is closed after the idle timeout, before the header timeout");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_negative_grace_period_on_delete_should_be_treated_as_one_second() {
    let sim = sim_without_kubelet().await;
    let created = post_pod(
        &sim,
        &pod_with_spec("bound", json!({"nodeName": "node-1"}), json!({})),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let r = raw(
        &sim,
        Method::DELETE,
        &format!("{PODS}/bound?gracePeriodSeconds=-5"),
        None,
        "",
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["metadata"]["deletionGracePeriodSeconds"], 1);
    sim.shutdown().await;
}

/// A frozen connection stands for a frozen proxy: the header and idle timers must not close it.
#[tokio::test]
async fn a_frozen_idle_connection_should_stay_open_past_the_timeouts() {
    use podline_sim::{FaultAction, FaultRule, FaultVerb};
    let sim = podline_testkit::start_sim(
        config()
            .header_read_timeout(Duration::from_millis(200))
            .idle_timeout(Duration::from_millis(300)),
    )
    .await;
    sim.faults().push(
        FaultRule::new(FaultAction::Freeze { after_ms: Some(50) })
            .verb(FaultVerb::List)
            .resource("pods"),
    );
    let mut conn = TcpStream::connect(sim.addr()).await.expect("connect");
    let request = format!(
        "GET {PODS} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\r\n",
        sim.token()
    );
    conn.write_all(request.as_bytes()).await.expect("write");
    let mut buf = vec![0u8; 65536];
    let n = conn.read(&mut buf).await.expect("read");
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    assert!(
        closed_within(&mut conn, Duration::from_millis(1500))
            .await
            .is_none(),
        "still open"
    );
    assert_eq!(sim.frozen_connections(), 1);
    sim.shutdown().await;
}
