//! What a person sees, in headless Chromium driven through chromedriver (WebDriver).
//!
//! Skipped, loudly, when Chromium or chromedriver is not installed, unless
//! `PODLINE_REQUIRE_BROWSER=1` (CI sets it), which makes a missing browser a failure.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use podline_testkit::wait_until;
use serde_json::json;

use crate::support::{RUN, UiServer, demo_store, running_pod, write_pod};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A chromedriver process and a session in a headless Chromium with a fresh profile.
/// Dropping it ends the session and chromedriver.
struct Browser {
    client: Option<Client>,
    driver: Child,
    port: u16,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium, or `None` when they are not installed
    /// (a panic instead with `PODLINE_REQUIRE_BROWSER=1`).
    async fn start() -> Option<Browser> {
        let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
            .into_iter()
            .filter(|p| !Path::new(p).exists())
            .collect();
        if !missing.is_empty() {
            let required = std::env::var("PODLINE_REQUIRE_BROWSER").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "PODLINE_REQUIRE_BROWSER=1 but {missing:?} not found: apt-get install chromium chromium-driver"
            );
            eprintln!(
                "\n*** {missing:?} not found: browser test SKIPPED, nothing was checked (apt-get install chromium chromium-driver) ***\n"
            );
            return None;
        }
        let port = {
            let probe = TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let ready = wait_until(Duration::from_secs(20), || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        })
        .await;
        assert!(ready, "chromedriver did not listen on {url} within 20 s");
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1400,1000",
            &format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".to_owned(),
            json!({ "binary": CHROMIUM, "args": args }),
        );
        let client = tokio::time::timeout(
            Duration::from_secs(45),
            ClientBuilder::new(HttpConnector::new())
                .capabilities(caps)
                .connect(&url),
        )
        .await
        .expect("no browser session within 45 s")
        .expect("starting a Chromium session");
        Some(Browser {
            client: Some(client),
            driver,
            port,
            _profile: profile,
        })
    }

    fn client(&self) -> &Client {
        self.client.as_ref().unwrap()
    }

    async fn goto(&self, url: &str) {
        self.client().goto(url).await.unwrap();
    }

    async fn text(&self, css: &str) -> String {
        self.client()
            .wait()
            .at_most(Duration::from_secs(10))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|err| panic!("no {css}: {err}"))
            .text()
            .await
            .unwrap()
    }

    async fn count(&self, css: &str) -> usize {
        self.client()
            .find_all(Locator::Css(css))
            .await
            .unwrap()
            .len()
    }

    async fn script(&self, js: &str) -> serde_json::Value {
        self.client().execute(js, vec![]).await.unwrap()
    }

    /// Ends the session (Chromium quits) and chromedriver.
    async fn close(mut self) {
        if let Some(client) = self.client.take() {
            let _ = client.close().await;
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // After a panic the session may still be open: chromedriver's `/shutdown` quits the
        // browsers it started, then chromedriver itself is ended by its pid.
        if let Ok(mut conn) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
            use std::io::{Read as _, Write as _};
            let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = conn.write_all(
                b"GET /shutdown HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            );
            let _ = conn.read(&mut [0u8; 256]);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

#[tokio::test]
async fn runs_page_should_list_the_demo_run_with_its_counts() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let demo = demo_store(10);
    let ui = UiServer::start(&demo.db);
    browser.goto(&format!("{}/", ui.url)).await;
    let row = format!("tr.run[data-run='{RUN}']");
    assert_eq!(browser.text(&format!("{row} td.pods")).await, "10");
    assert_eq!(browser.text(&format!("{row} td.succeeded")).await, "7");
    assert_eq!(browser.text(&format!("{row} td.failed")).await, "3");
    assert_eq!(browser.text(&format!("{row} .badge")).await, "failed");
    assert_eq!(browser.count("tr.run").await, 1);

    // The status filter is a form a person submits.
    browser.goto(&format!("{}/?status=succeeded", ui.url)).await;
    assert_eq!(browser.count("tr.run").await, 0);
    assert!(browser.text("main").await.contains("No runs match"));

    // Clicking the run opens its timeline.
    browser.goto(&format!("{}/", ui.url)).await;
    browser
        .client()
        .find(Locator::Css(&format!("{row} td a")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(browser.text("h1").await.contains(RUN));
    browser.close().await;
}

#[tokio::test]
async fn run_timeline_should_draw_one_bar_per_pod_with_segments_and_hover_details() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let demo = demo_store(10);
    let ui = UiServer::start(&demo.db);
    browser
        .goto(&format!("{}/runs/default/{RUN}", ui.url))
        .await;
    assert!(browser.text("h1").await.contains(RUN));
    assert_eq!(browser.count("svg#timeline g.bar").await, demo.pods);
    assert_eq!(browser.count("svg#timeline g.bar.succeeded").await, 7);
    assert_eq!(browser.count("svg#timeline g.bar.failed").await, 2);
    assert_eq!(
        browser.count("svg#timeline g.bar.lost").await,
        1,
        "the pod whose image never pulled was deleted before it finished"
    );
    assert!(browser.count("svg#timeline rect.seg.running").await >= 9);
    assert!(browser.count("svg#timeline rect.seg.pulling").await >= 1);

    // The failure reason is drawn next to the bar, and the hover text has the details.
    let reasons = browser
        .script("return [...document.querySelectorAll('svg#timeline text.reason')].map(t => t.textContent).sort()")
        .await;
    assert_eq!(reasons, json!(["Error (exit 1)", "ImagePull", "OOMKilled"]));
    let hover = browser
        .script("return document.querySelector(\"svg#timeline g.bar[data-failure='OOMKilled'] > title\").textContent")
        .await;
    let hover = hover.as_str().unwrap();
    assert!(
        hover.contains("phase: Failed (OOMKilled)") && hover.contains("exit code: 137"),
        "{hover}"
    );
    assert!(hover.contains("running: "), "{hover}");
    browser.close().await;
}

#[tokio::test]
async fn failures_view_and_pod_page_should_show_why_a_pod_failed() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let demo = demo_store(10);
    let ui = UiServer::start(&demo.db);
    browser.goto(&format!("{}/failures", ui.url)).await;
    let groups = browser
        .script("return [...document.querySelectorAll('section.failure-group')].map(s => [s.dataset.reason, s.querySelectorAll('tr.failed-pod').length])")
        .await;
    assert_eq!(
        groups,
        json!([["Error (exit 1)", 1], ["ImagePull", 1], ["OOMKilled", 1]])
    );
    assert!(
        browser
            .text("section[data-reason='ImagePull'] td.detail")
            .await
            .contains("not found")
    );

    // Follow the OOM-killed pod to its page.
    browser
        .client()
        .find(Locator::Css(
            "section[data-reason='OOMKilled'] tr.failed-pod a",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(browser.text(".failure-reason").await, "OOMKilled");
    assert_eq!(browser.text("#containers td.exit-code").await, "137");
    assert_eq!(browser.text("#containers td.reason").await, "OOMKilled");
    assert!(browser.text(".facts td.phase").await.starts_with("Failed"));
    let transitions = browser.text("#transitions").await;
    for what in ["Pending", "Scheduled", "Running", "Failed", "Deleted"] {
        assert!(transitions.contains(what), "{what} in {transitions}");
    }
    assert!(browser.text("#labels").await.contains("podline.io/run"));
    browser.close().await;
}

#[tokio::test]
async fn the_timeline_should_update_live_when_a_new_pod_is_recorded() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let demo = demo_store(10);
    let ui = UiServer::start(&demo.db);
    browser
        .goto(&format!("{}/runs/default/{RUN}", ui.url))
        .await;
    assert_eq!(browser.count("svg#timeline g.bar").await, demo.pods);
    // The page's event stream is connected before the write.
    let connected = wait_until(Duration::from_secs(15), || async {
        browser.count("#live.on").await == 1
    })
    .await;
    assert!(connected, "the live indicator never came on");

    write_pod(&demo.db, running_pod("live-uid-2", "live-pod-2", RUN)).await;

    let updated = wait_until(Duration::from_secs(20), || async {
        browser.count("svg#timeline g.bar").await == demo.pods + 1
    })
    .await;
    assert!(updated, "no new bar within 20 s of the write");
    assert_eq!(
        browser
            .count("svg#timeline g.bar.running[data-uid='live-uid-2']")
            .await,
        1
    );
    assert!(browser.text(".summary .active").await.starts_with("1 "));
    browser.close().await;
}

#[tokio::test]
async fn html_in_labels_annotations_and_names_should_render_as_text() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let demo = demo_store(10);
    let ui = UiServer::start(&demo.db);
    let evil = "<img src=x onerror=\"window.pwned=1\"><script>window.pwned=2</script><b>bold</b>";
    let mut pod = running_pod("evil-uid", "evil-<i>pod</i>", "run-<b>x</b>");
    pod.labels = BTreeMap::from([("team".to_owned(), evil.to_owned())]);
    pod.annotations = BTreeMap::from([("note".to_owned(), evil.to_owned())]);
    pod.message = Some(evil.to_owned());
    write_pod(&demo.db, pod).await;

    for path in [
        "/pods/evil-uid".to_owned(),
        "/".to_owned(),
        format!("/runs/default/{}", "run-%3Cb%3Ex%3C%2Fb%3E"),
    ] {
        browser.goto(&format!("{}{path}", ui.url)).await;
        let injected = browser
            .script("return [document.querySelectorAll('main img, main script, main b, main i').length, window.pwned === undefined]")
            .await;
        assert_eq!(injected, json!([0, true]), "{path}: markup was interpreted");
    }
    browser.goto(&format!("{}/pods/evil-uid", ui.url)).await;
    assert_eq!(browser.text("#labels td").await, evil);
    assert_eq!(browser.text("#annotations td").await, evil);
    assert_eq!(browser.text("h1 .pod-name").await, "evil-<i>pod</i>");
    browser
        .goto(&format!("{}/runs/default/run-%3Cb%3Ex%3C%2Fb%3E", ui.url))
        .await;
    assert_eq!(browser.text("h1 .run-name").await, "run-<b>x</b>");
    assert_eq!(browser.count("svg#timeline g.bar").await, 1);
    browser.close().await;
}

/// Takes the timeline screenshot shown in the README (a 20-pod demo run) and checks it is a
/// PNG of a drawn chart. With `PODLINE_UPDATE_SCREENSHOT=1` it also writes
/// `docs/img/timeline.png`: `PODLINE_UPDATE_SCREENSHOT=1 cargo nextest run -p podline -E
/// 'test(timeline_screenshot)'`.
#[tokio::test]
async fn timeline_screenshot_for_the_readme() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let demo = demo_store(20);
    let ui = UiServer::start(&demo.db);
    browser
        .goto(&format!("{}/runs/default/{RUN}", ui.url))
        .await;
    assert_eq!(browser.count("svg#timeline g.bar").await, 20);
    let png = browser
        .client()
        .find(Locator::Css("main"))
        .await
        .unwrap()
        .screenshot()
        .await
        .unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        png.len() > 10_000,
        "suspiciously small: {} bytes",
        png.len()
    );
    if std::env::var("PODLINE_UPDATE_SCREENSHOT").is_ok_and(|v| v == "1") {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/img/timeline.png");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &png).unwrap();
        eprintln!("wrote {}", path.display());
    }
    browser.close().await;
}
