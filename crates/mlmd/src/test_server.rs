//! The real ML Metadata store as a child process, for tests, benchmarks and
//! demos: `tests/mlmd_server.py`, a small gRPC server over the `ml-metadata`
//! PyPI package (`pip install -r crates/mlmd/tests/requirements.txt`).
//!
//! The script is found in this crate's source tree, so this works from a
//! checkout (tests, the benchmark command run from the repository), not from an
//! installed binary elsewhere: [`available`] says why not.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::client::MlmdClientConfig;

/// Why the test server cannot run or did not start.
#[derive(Debug, thiserror::Error)]
pub enum TestServerError {
    /// python3, the `ml-metadata` package or the script is missing.
    #[error(
        "the MLMD test server is unavailable: {0} (needs python3 and \
         `pip install -r crates/mlmd/tests/requirements.txt`, run from the repository)"
    )]
    Unavailable(String),
    /// python3 could not be started.
    #[error("cannot start python3 {script}: {source}")]
    Spawn {
        /// The script.
        script: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The server did not say `LISTENING <port>` in time.
    #[error("the MLMD test server did not start: {0}")]
    NoBanner(String),
}

/// Where `mlmd_server.py` lives.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mlmd_server.py")
}

/// Whether the server can run here (script present, python3 with
/// `ml_metadata` and `grpc` importable).
pub fn available() -> Result<(), TestServerError> {
    if !script().is_file() {
        return Err(TestServerError::Unavailable(format!(
            "{} not found",
            script().display()
        )));
    }
    let imported = Command::new("python3")
        .args(["-c", "import ml_metadata, grpc"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if imported {
        Ok(())
    } else {
        Err(TestServerError::Unavailable(
            "python3 cannot import ml_metadata".into(),
        ))
    }
}

/// A running server. Killed on drop (it also stops when its stdin closes).
#[derive(Debug)]
pub struct MlmdTestServer {
    child: Child,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
}

impl MlmdTestServer {
    /// Start a server over the SQLite file `db` (in memory when `None`) on
    /// `port` (0: any free port), with more script options in `extra` (e.g.
    /// `--delay-ms 100`).
    pub fn start(db: Option<&Path>, port: u16, extra: &[&str]) -> Result<Self, TestServerError> {
        available()?;
        let mut command = Command::new("python3");
        command.arg(script()).args(["--port", &port.to_string()]);
        if let Some(db) = db {
            command.arg("--db").arg(db);
        }
        let mut child = command
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| TestServerError::Spawn {
                script: script(),
                source,
            })?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| TestServerError::NoBanner("no stdout".into()))?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let banner = rx.recv_timeout(Duration::from_secs(30));
        let port = banner
            .as_deref()
            .ok()
            .and_then(|l| l.trim().strip_prefix("LISTENING "))
            .and_then(|p| p.parse().ok());
        match port {
            Some(port) => Ok(MlmdTestServer { child, port }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err(TestServerError::NoBanner(format!(
                    "expected `LISTENING <port>` within 30 s, got {banner:?}"
                )))
            }
        }
    }

    /// A client configuration for this server (short timeouts).
    pub fn config(&self) -> MlmdClientConfig {
        let mut c = MlmdClientConfig::new("127.0.0.1", self.port);
        c.connect_timeout = Duration::from_secs(2);
        c.request_timeout = Duration::from_secs(10);
        c
    }

    /// `127.0.0.1:<port>`, as [`crate::kfp::daemon::mlmd_config`] takes an address.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for MlmdTestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
