//! Test helpers: the real MLMD behind our Python gRPC server, as a child process.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Where the Python helpers live.
pub fn helper(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name)
}

/// Whether python3 with `ml_metadata` is installed. When it is not, tests skip
/// LOUDLY, unless `PODLINE_REQUIRE_MLMD=1` (set by CI) turns that into a failure.
pub fn mlmd_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import ml_metadata, grpc"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        let msg = "python3 with ml-metadata is not installed: \
                   `pip install -r crates/mlmd/tests/requirements.txt`";
        if std::env::var("PODLINE_REQUIRE_MLMD").as_deref() == Ok("1") {
            panic!("{msg} (PODLINE_REQUIRE_MLMD=1)");
        }
        eprintln!("\n!!!!!!!! SKIPPING MLMD TEST: {msg} !!!!!!!!\n");
    }
    ok
}

/// Skip the calling test (return) when MLMD is not available.
#[macro_export]
macro_rules! require_mlmd {
    () => {
        if !$crate::support::mlmd_available() {
            return;
        }
    };
}

/// A running `mlmd_server.py` over a SQLite file. Killed on drop.
pub struct MlmdServer {
    child: Option<Child>,
    /// The port it listens on (stable across [`MlmdServer::restart`]).
    pub port: u16,
    /// The SQLite file.
    pub db: PathBuf,
}

impl MlmdServer {
    /// Start a server over `db` on `port` (0 = pick one).
    pub fn start(db: &Path, port: u16) -> MlmdServer {
        MlmdServer::start_with(db, port, &[])
    }

    /// [`MlmdServer::start`] with more `mlmd_server.py` options (e.g.
    /// `--delay-ms`, `--stats`).
    pub fn start_with(db: &Path, port: u16, extra: &[String]) -> MlmdServer {
        let mut child = Command::new("python3")
            .arg(helper("mlmd_server.py"))
            .args(["--port", &port.to_string(), "--db"])
            .arg(db)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn python3 mlmd_server.py");
        let stdout = child.stdout.take().expect("stdout piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("mlmd_server.py did not print LISTENING within 30 s");
        let port = line
            .trim()
            .strip_prefix("LISTENING ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line from mlmd_server.py: {line:?}"));
        MlmdServer {
            child: Some(child),
            port,
            db: db.to_owned(),
        }
    }

    /// Stop the server (MLMD down).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start it again on the same port over the same file (MLMD back).
    pub fn restart(&mut self) {
        self.stop();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            // The port may linger briefly after the kill; retry binding.
            let probe = std::net::TcpListener::bind(("127.0.0.1", self.port));
            if probe.is_ok() || std::time::Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let again = MlmdServer::start(&self.db.clone(), self.port);
        *self = again;
    }

    /// A client config for this server.
    pub fn config(&self) -> podline_mlmd::MlmdClientConfig {
        let mut c = podline_mlmd::MlmdClientConfig::new("127.0.0.1", self.port);
        c.connect_timeout = Duration::from_secs(2);
        c.request_timeout = Duration::from_secs(10);
        c
    }
}

impl Drop for MlmdServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Run a Python helper script and parse its stdout as JSON.
pub fn python_json(script: &str, args: &[String]) -> serde_json::Value {
    let out = Command::new("python3")
        .arg(helper(script))
        .args(args)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}
