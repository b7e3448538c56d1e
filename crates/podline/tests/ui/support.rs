//! A demo store, the `podline ui` process, HTTP and store-writing helpers.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use jiff::Timestamp;
use podline_store::{
    Batch, ContainerObservation, ContainerState, PhaseTransition, PodObservation, StoreOp,
};

pub const BIN: &str = env!("CARGO_BIN_EXE_podline");

/// The run every demo store holds (one round).
pub const RUN: &str = "demo-round-1";

/// A temp dir holding a store filled by `podline demo --rounds 1 --pods N`.
pub struct DemoStore {
    /// Keeps the store's directory alive.
    pub _dir: tempfile::TempDir,
    pub db: PathBuf,
    pub pods: usize,
}

/// Runs the real demo (sim + launcher + recorder) into a fresh SQLite file. Its round has
/// 7 succeeding pods and 3 failures per 10: exit 1, OOMKilled, image pull error.
pub fn demo_store(pods: usize) -> DemoStore {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.db");
    let out = Command::new(BIN)
        .args(["demo", "--rounds", "1", "--pods", &pods.to_string(), "--db"])
        .arg(&db)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "podline demo failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    DemoStore {
        _dir: dir,
        db,
        pods,
    }
}

/// A running `podline ui`; killed on drop.
pub struct UiServer {
    child: Child,
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub url: String,
    /// Its first line on stdout ("podline ui: serving http://... (store ...)").
    #[allow(dead_code)] // read by tests/secrets.rs, which shares this file
    pub first_line: String,
    /// What it printed on stderr (filled when it has exited).
    pub stderr: Option<std::process::ChildStderr>,
}

impl UiServer {
    /// `podline ui --db DB --listen 127.0.0.1:0 --poll 200ms`, waiting for its first line.
    pub fn start(db: &Path) -> UiServer {
        Self::start_with(db, &["--listen", "127.0.0.1:0"])
    }

    pub fn start_with(db: &Path, extra: &[&str]) -> UiServer {
        let mut child = Command::new(BIN)
            .args(["ui", "--poll", "200ms", "--db"])
            .arg(db)
            .args(extra)
            .env_remove("PODLINE_DB")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("podline ui printed no address within 30 s");
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .trim_end_matches('/')
            .to_owned();
        let stderr = child.stderr.take();
        UiServer {
            child,
            url,
            first_line: line,
            stderr,
        }
    }
}

impl Drop for UiServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP answer.
pub struct Answer {
    pub status: u16,
    /// Read by the secrets test (which shares this module), not by the UI tests since their
    /// header checks moved in-process.
    #[allow(dead_code)]
    pub headers: http::HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|err| panic!("not JSON ({err}): {}", self.body))
    }
}

/// Sends `method url` with an empty body and reads the whole answer.
pub async fn request(method: &str, url: &str) -> Answer {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let request = http::Request::builder()
        .method(method)
        .uri(url)
        .body(Empty::new())
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(20), client.request(request))
        .await
        .expect("no answer within 20 s")
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

pub async fn get(url: &str) -> Answer {
    request("GET", url).await
}

/// Writes one pod into the store, as `podline record` would.
pub async fn write_pod(db: &Path, pod: PodObservation) {
    let store = podline_store::open(&db.to_string_lossy()).await.unwrap();
    store
        .apply(&Batch::new(vec![StoreOp::Upsert(pod)]))
        .await
        .unwrap();
}

/// A pod of `run` that just started running, created a few seconds ago.
pub fn running_pod(uid: &str, name: &str, run: &str) -> PodObservation {
    let now = Timestamp::now();
    let created = now - jiff::SignedDuration::from_secs(3);
    PodObservation {
        uid: uid.to_owned(),
        namespace: "default".to_owned(),
        name: name.to_owned(),
        resource_version: 1_000_000,
        run: Some(run.to_owned()),
        labels: BTreeMap::from([("podline.io/run".to_owned(), run.to_owned())]),
        annotations: BTreeMap::new(),
        owner: None,
        node: Some("sim-node-1".to_owned()),
        phase: "Running".to_owned(),
        reason: None,
        message: None,
        created_at: Some(created),
        scheduled_at: Some(created),
        started_at: Some(now),
        finished_at: None,
        deletion_requested_at: None,
        containers: vec![ContainerObservation {
            name: "task".to_owned(),
            image: "busybox:1.36".to_owned(),
            state: Some(ContainerState::Running),
            started_at: Some(now),
            ..ContainerObservation::default()
        }],
        transitions: vec![
            PhaseTransition::new("Pending", created),
            PhaseTransition::new("Running", now),
        ],
    }
}
