//! The JSON API under /api/ over plain HTTP, served by the binary from a store filled by
//! `podline demo`: the whole chain (demo, recorder, store, `podline ui`) end to end, and the
//! CLI's wiring (`--db`, `--listen`, `--allowed-host`). Route by route behaviour (errors, 405s,
//! headers, 404s, the change feed and event stream) is tested in-process in
//! `crates/ui/tests/router`.

use std::collections::BTreeSet;
use std::io::BufRead as _;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::support::{BIN, RUN, UiServer, demo_store, get, running_pod, write_pod};

#[tokio::test]
async fn runs_timeline_pods_failures_and_counts_should_describe_the_demo() {
    let demo = demo_store(10);
    let ui = UiServer::start(&demo.db);

    let runs = get(&format!("{}/api/runs", ui.url)).await;
    assert_eq!(runs.status, 200, "{}", runs.body);
    let runs = runs.json();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    let run = &runs[0];
    assert_eq!(run["run"], RUN);
    assert_eq!(run["namespace"], "default");
    assert_eq!(run["pods"], 10);
    assert_eq!(run["succeeded"], 7);
    assert_eq!(run["failed"], 3);
    assert_eq!(run["status"], "failed");

    // Filters: status and creation time (the run was created moments ago).
    for (query, expected) in [
        ("status=failed", 1),
        ("status=succeeded", 0),
        ("namespace=default", 1),
        ("namespace=elsewhere", 0),
        ("since=1h", 1),
        ("until=1h", 0),
    ] {
        let answer = get(&format!("{}/api/runs?{query}", ui.url)).await;
        assert_eq!(answer.status, 200, "{query}: {}", answer.body);
        assert_eq!(answer.json().as_array().unwrap().len(), expected, "{query}");
    }

    let detail = get(&format!("{}/api/runs/default/{RUN}", ui.url))
        .await
        .json();
    let bars = detail["timeline"]["bars"].as_array().unwrap();
    assert_eq!(bars.len(), demo.pods, "one bar per pod");
    for bar in bars {
        assert!(
            !bar["segments"].as_array().unwrap().is_empty(),
            "every bar has a segment: {bar}"
        );
    }
    let failures: BTreeSet<&str> = bars.iter().filter_map(|b| b["failure"].as_str()).collect();
    assert_eq!(
        failures,
        BTreeSet::from(["Error (exit 1)", "ImagePull", "OOMKilled"])
    );

    let pods = get(&format!("{}/api/pods?run={RUN}", ui.url)).await.json();
    let pods = pods.as_array().unwrap();
    assert_eq!(pods.len(), demo.pods);
    // A pod that ran to completion passed through at least Pending and Succeeded; which pod the
    // list puts first depends on the demo's random scheduling and pull delays.
    let succeeded = pods
        .iter()
        .find(|p| p["phase"] == "Succeeded")
        .expect("the demo has succeeded pods");
    let uid = succeeded["uid"].as_str().unwrap();
    let pod = get(&format!("{}/api/pods/{uid}", ui.url)).await.json();
    assert_eq!(pod["uid"], uid);
    assert!(pod["transitions"].as_array().unwrap().len() >= 2, "{pod}");
    assert_eq!(
        get(&format!("{}/api/pods?phase=Failed&limit=1", ui.url))
            .await
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let groups = get(&format!("{}/api/failures", ui.url)).await.json();
    let groups: Vec<(String, usize)> = groups
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["reason"].as_str().unwrap().to_owned(),
                g["pods"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(
        groups,
        [
            ("Error (exit 1)".to_owned(), 1),
            ("ImagePull".to_owned(), 1),
            ("OOMKilled".to_owned(), 1)
        ]
    );
    let oom = get(&format!("{}/api/failures?run={RUN}", ui.url))
        .await
        .json();
    let oom = oom
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["reason"] == "OOMKilled")
        .unwrap();
    assert_eq!(oom["pods"][0]["failure"]["exit_code"], 137);

    let counts = get(&format!("{}/api/counts", ui.url)).await.json();
    assert_eq!(counts["pods"], 10);
}

#[test]
fn a_missing_store_should_fail_with_a_message_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("absent.db");
    let out = std::process::Command::new(BIN)
        .args(["ui", "--listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .env_remove("PODLINE_DB")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(stderr.contains("podline record --db"), "{stderr}");
    assert!(!db.exists(), "the ui never creates a store");
}

#[tokio::test]
async fn a_non_loopback_address_should_be_warned_about_loudly() {
    let demo = demo_store(10);
    let mut ui = UiServer::start_with(&demo.db, &["--listen", "0.0.0.0:0"]);
    let stderr = ui.stderr.take().unwrap();
    // The warning is printed before the address line, so it is already there.
    let mut text = String::new();
    std::io::BufReader::new(stderr)
        .read_line(&mut text)
        .unwrap();
    assert!(
        text.contains("WARNING") && text.contains("NOT a loopback address"),
        "{text}"
    );
}

/// `GET url` with this `Host` header: (status, body).
async fn get_with_host(url: &str, host: &str) -> (u16, String) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let request = http::Request::builder()
        .uri(url)
        .header(http::header::HOST, host)
        .body(Empty::new())
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(20), client.request(request))
        .await
        .expect("no answer within 20 s")
        .unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn only_loopback_names_the_listen_address_and_allowed_hosts_should_be_served() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    write_pod(&db, running_pod("uid-1", "train-1", "r1")).await;
    let ui = UiServer::start_with(
        &db,
        &[
            "--listen",
            "127.0.0.2:0",
            "--allowed-host",
            "podline.example.com",
        ],
    );
    let port = ui.url.rsplit(':').next().unwrap().to_owned();
    for path in ["/api/counts", "/api/pods/uid-1", "/", "/pods/uid-1"] {
        let url = format!("{}{path}", ui.url);
        for host in [
            "localhost".to_owned(),
            format!("localhost:{port}"),
            format!("LocalHost:{port}"),
            format!("127.0.0.1:{port}"),
            "[::1]".to_owned(),
            format!("[::1]:{port}"),
            format!("127.0.0.2:{port}"),
            "podline.example.com".to_owned(),
            "podline.example.com:8443".to_owned(),
        ] {
            let (status, body) = get_with_host(&url, &host).await;
            assert_eq!(status, 200, "{path} Host {host}: {body}");
        }
        // DNS rebinding: an attacker's name pointed at this address.
        for host in [
            "evil.example".to_owned(),
            format!("evil.example:{port}"),
            format!("localhost.evil.example:{port}"),
            "podline.example.com.evil.example".to_owned(),
            format!("127.0.0.3:{port}"),
            String::new(),
        ] {
            let (status, body) = get_with_host(&url, &host).await;
            assert_eq!(status, 403, "{path} Host {host:?}: {body}");
            assert!(
                body.contains("DNS rebinding") && body.contains("--allowed-host"),
                "{body}"
            );
            assert!(!body.contains("train-1"), "{body}");
        }
    }
    let err = std::process::Command::new(BIN)
        .args(["ui", "--allowed-host", "a b", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&err.stderr);
    assert!(
        !err.status.success() && stderr.contains("--allowed-host"),
        "{stderr}"
    );
}
