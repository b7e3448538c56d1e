//! The server-rendered pages: each renders the run's data, misses are 404 pages, and HTML in
//! names, labels, annotations and messages comes out as text.

use std::collections::BTreeMap;

use podline_store::StoreOp;

use crate::support::{Fixture, PODS, RUN, get, running_pod};

/// A body is an HTML page (`text/html`, a doctype).
fn assert_html(path: &str, answer: &crate::support::Answer) {
    let kind = answer.headers["content-type"].to_str().unwrap();
    assert!(kind.starts_with("text/html"), "{path}: {kind}");
    assert!(
        answer.body.starts_with("<!DOCTYPE html>"),
        "{path}: {}",
        answer.body
    );
}

#[tokio::test]
async fn runs_run_pod_and_failures_pages_should_render_the_run() {
    let fixture = Fixture::with_run().await;
    let app = fixture.app();

    let runs = get(&app, "/").await;
    assert_eq!(runs.status, 200, "{}", runs.body);
    assert_html("/", &runs);
    assert!(
        runs.body.contains(&format!("href=\"/runs/default/{RUN}\"")),
        "{}",
        runs.body
    );
    let none = get(&app, "/?status=succeeded").await;
    assert!(none.body.contains("No runs match"), "{}", none.body);

    let run = get(&app, &format!("/runs/default/{RUN}")).await;
    assert_eq!(run.status, 200, "{}", run.body);
    assert_html("run", &run);
    assert!(
        run.body.contains("<svg class=\"timeline\" id=\"timeline\""),
        "{}",
        run.body
    );
    assert_eq!(
        run.body.matches("<g class=\"bar ").count(),
        PODS,
        "one bar per pod"
    );
    assert!(
        run.body
            .contains(&format!("<span class=\"run-name\">{RUN}</span>"))
    );

    let pod = get(&app, "/pods/oom").await;
    assert_eq!(pod.status, 200, "{}", pod.body);
    assert_html("pod", &pod);
    assert!(
        pod.body.contains("<span class=\"pod-name\">pod-oom</span>"),
        "{}",
        pod.body
    );
    assert!(
        pod.body
            .contains("<strong class=\"failure-reason\">OOMKilled</strong>")
    );

    let failures = get(&app, "/failures").await;
    assert_eq!(failures.status, 200, "{}", failures.body);
    assert_html("failures", &failures);
    for reason in ["OOMKilled", "ImagePull", "Error (exit 1)"] {
        assert!(
            failures.body.contains(reason),
            "{reason}: {}",
            failures.body
        );
    }
    assert_eq!(failures.body.matches("class=\"failed-pod\"").count(), 3);
}

#[tokio::test]
async fn a_missing_run_or_pod_should_get_a_404_page_saying_so() {
    let fixture = Fixture::with_run().await;
    let app = fixture.app();
    for (path, needle) in [
        (
            "/runs/default/no-such-run",
            "no run &quot;no-such-run&quot;",
        ),
        (
            "/pods/no-such-uid",
            "no recorded pod with uid &quot;no-such-uid&quot;",
        ),
    ] {
        let answer = get(&app, path).await;
        assert_eq!(answer.status, 404, "{path}: {}", answer.body);
        assert_html(path, &answer);
        assert!(answer.body.contains(needle), "{path}: {}", answer.body);
    }
    let bad = get(&app, "/?status=bogus").await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert_html("bad filter", &bad);
}

#[tokio::test]
async fn html_in_labels_annotations_and_names_should_render_as_text() {
    let fixture = Fixture::with_run().await;
    let evil = "<img src=x onerror=\"window.pwned=1\"><script>window.pwned=2</script><b>bold</b>";
    let escaped = "&lt;img src=x onerror=&quot;window.pwned=1&quot;&gt;&lt;script&gt;\
                   window.pwned=2&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;";
    let mut pod = running_pod("evil-uid", "evil-<i>pod</i>", "run-<b>x</b>");
    pod.labels.insert("team".to_owned(), evil.to_owned());
    pod.annotations = BTreeMap::from([("note".to_owned(), evil.to_owned())]);
    pod.message = Some(evil.to_owned());
    fixture.write(vec![StoreOp::Upsert(pod)]).await;
    let app = fixture.app();

    for path in [
        "/pods/evil-uid",
        "/",
        "/runs/default/run-%3Cb%3Ex%3C%2Fb%3E",
    ] {
        let answer = get(&app, path).await;
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
        for raw in ["<img", "<script>", "<b>", "<i>"] {
            assert!(
                !answer.body.contains(raw),
                "{path}: {raw} was not escaped:\n{}",
                answer.body
            );
        }
    }
    let page = get(&app, "/pods/evil-uid").await.body;
    // Label value, annotation value and message, each as text.
    assert!(page.matches(escaped).count() >= 3, "{page}");
    assert!(
        page.contains("<span class=\"pod-name\">evil-&lt;i&gt;pod&lt;/i&gt;</span>"),
        "{page}"
    );
    let run = get(&app, "/runs/default/run-%3Cb%3Ex%3C%2Fb%3E").await.body;
    assert!(
        run.contains("<span class=\"run-name\">run-&lt;b&gt;x&lt;/b&gt;</span>"),
        "{run}"
    );
    assert_eq!(run.matches("<g class=\"bar ").count(), 1);
    // The JSON API returns the text as it was recorded (JSON-escaped, served as JSON).
    let json = get(&app, "/api/pods/evil-uid").await.json();
    assert_eq!(json["annotations"]["note"], evil);
}
