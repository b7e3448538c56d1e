//! Test helpers: the real MLMD behind our Python gRPC server
//! ([`podline_mlmd::test_server`]), restartable on the same port and file.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use podline_mlmd::test_server::{self, MlmdTestServer};

/// Where the Python helpers live.
pub fn helper(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name)
}

/// Whether python3 with `ml_metadata` is installed. When it is not, tests skip
/// LOUDLY, unless `PODLINE_REQUIRE_MLMD=1` (set by CI) turns that into a failure.
pub fn mlmd_available() -> bool {
    match test_server::available() {
        Ok(()) => true,
        Err(e) if std::env::var("PODLINE_REQUIRE_MLMD").as_deref() == Ok("1") => {
            panic!("{e} (PODLINE_REQUIRE_MLMD=1)")
        }
        Err(e) => {
            eprintln!("\n!!!!!!!! SKIPPING MLMD TEST: {e} !!!!!!!!\n");
            false
        }
    }
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
    server: Option<MlmdTestServer>,
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
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let server = MlmdTestServer::start(Some(db), port, &extra).expect("start mlmd_server.py");
        MlmdServer {
            port: server.port,
            server: Some(server),
            db: db.to_owned(),
        }
    }

    /// Stop the server (MLMD down).
    pub fn stop(&mut self) {
        self.server = None;
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
        *self = MlmdServer::start(&self.db.clone(), self.port);
    }

    /// A client config for this server.
    pub fn config(&self) -> podline_mlmd::MlmdClientConfig {
        let mut c = podline_mlmd::MlmdClientConfig::new("127.0.0.1", self.port);
        c.connect_timeout = Duration::from_secs(2);
        c.request_timeout = Duration::from_secs(10);
        c
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
