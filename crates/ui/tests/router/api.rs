//! The JSON API under `/api/`: what each route answers for a known run, and its errors.

use std::collections::BTreeSet;

use crate::support::{Fixture, PODS, RUN, get, send};

#[tokio::test]
async fn runs_timeline_pods_failures_and_counts_should_describe_the_run() {
    let fixture = Fixture::with_run().await;
    let app = fixture.app();

    let runs = get(&app, "/api/runs").await;
    assert_eq!(runs.status, 200, "{}", runs.body);
    assert_eq!(runs.headers["content-type"], "application/json");
    let runs = runs.json();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    let run = &runs[0];
    assert_eq!(run["run"], RUN);
    assert_eq!(run["namespace"], "default");
    assert_eq!(run["pods"], 10);
    assert_eq!(run["succeeded"], 7);
    assert_eq!(run["failed"], 3);
    assert_eq!(run["status"], "failed");

    // Filters: status, namespace and creation time (the run was created moments ago).
    for (query, expected) in [
        ("status=failed", 1),
        ("status=succeeded", 0),
        ("status=running", 0),
        ("namespace=default", 1),
        ("namespace=elsewhere", 0),
        ("since=1h", 1),
        ("until=1h", 0),
    ] {
        let answer = get(&app, &format!("/api/runs?{query}")).await;
        assert_eq!(answer.status, 200, "{query}: {}", answer.body);
        assert_eq!(answer.json().as_array().unwrap().len(), expected, "{query}");
    }

    let detail = get(&app, &format!("/api/runs/default/{RUN}")).await.json();
    assert_eq!(detail["run"]["run"], RUN);
    let bars = detail["timeline"]["bars"].as_array().unwrap();
    assert_eq!(bars.len(), PODS, "one bar per pod");
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

    let pods = get(&app, &format!("/api/pods?run={RUN}")).await.json();
    assert_eq!(pods.as_array().unwrap().len(), PODS);
    let pod = get(&app, "/api/pods/ok-0").await.json();
    assert_eq!(pod["uid"], "ok-0");
    assert_eq!(pod["phase"], "Succeeded");
    assert_eq!(pod["transitions"].as_array().unwrap().len(), 3, "{pod}");
    let failed = get(&app, "/api/pods?phase=Failed&limit=1").await.json();
    assert_eq!(failed.as_array().unwrap().len(), 1, "{failed}");

    let groups = get(&app, "/api/failures").await.json();
    let groups: Vec<(&str, usize)> = groups
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["reason"].as_str().unwrap(),
                g["pods"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(
        groups,
        [("Error (exit 1)", 1), ("ImagePull", 1), ("OOMKilled", 1)]
    );
    let in_run = get(&app, &format!("/api/failures?run={RUN}")).await.json();
    let oom = in_run
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["reason"] == "OOMKilled")
        .unwrap();
    assert_eq!(oom["pods"][0]["failure"]["exit_code"], 137);
    let elsewhere = get(&app, "/api/failures?run=other").await.json();
    assert!(elsewhere.as_array().unwrap().is_empty(), "{elsewhere}");

    let counts = get(&app, "/api/counts").await.json();
    assert_eq!(counts["pods"], 10);
}

#[tokio::test]
async fn bad_input_and_unknown_things_should_get_clear_json_errors() {
    let fixture = Fixture::with_run().await;
    let app = fixture.app();
    for (path, status, needle) in [
        (
            "/api/runs?status=bogus",
            400,
            "status=\"bogus\" is invalid; expected running, failed or succeeded",
        ),
        ("/api/runs?since=yesterday", 400, "since=\"yesterday\""),
        ("/api/pods?limit=-3", 400, "limit=\"-3\""),
        ("/api/changes?since=soon", 400, "since=\"soon\""),
        ("/api/events?since=soon", 400, "since=\"soon\""),
        (
            "/api/runs/default/no-such-run",
            404,
            "no run \"no-such-run\"",
        ),
        (
            "/api/runs/elsewhere/round-1",
            404,
            "in namespace \"elsewhere\"",
        ),
        ("/api/pods/no-such-uid", 404, "no recorded pod with uid"),
    ] {
        let answer = get(&app, path).await;
        assert_eq!(answer.status, status, "{path}: {}", answer.body);
        assert_eq!(answer.headers["content-type"], "application/json", "{path}");
        let error = answer.json()["error"].as_str().unwrap().to_owned();
        assert!(error.contains(needle), "{path}: {error}");
    }
}

#[tokio::test]
async fn only_get_should_be_allowed() {
    let fixture = Fixture::with_run().await;
    let app = fixture.app();
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        for path in ["/api/runs", "/api/pods/ok-0", "/"] {
            let answer = send(&app, method, path, "localhost").await;
            assert_eq!(answer.status, 405, "{method} {path}");
        }
    }
}
