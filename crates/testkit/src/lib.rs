//! Test helpers for podline: the sim on a random port, tracing for tests, wait-until helpers, and
//! the module import graph the no-cycle and layering tests read ([`modules`]). A dev-dependency
//! only: no shipping crate may depend on it.
//!
//! ```no_run
//! # async fn t() {
//! use podline_testkit::{client, start_sim, test_config, wait_until};
//! use std::time::Duration;
//!
//! let sim = start_sim(test_config()).await;          // plain HTTP, kubelet on
//! let client = client(&sim).await;                    // a kube::Client for it
//! let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::default_namespaced(client);
//! assert!(wait_until(Duration::from_secs(5), || async { pods.list(&Default::default()).await.is_ok() }).await);
//! # }
//! ```

/// The store-versus-ground-truth check ([`podline_audit`]), re-exported for the tests.
pub use podline_audit as audit;
pub mod bin;
pub mod db;
pub mod modules;

use std::future::Future;
use std::io::Write;
use std::sync::Once;
use std::time::Duration;

pub use podline_sim::{Sim, SimConfig};

/// Installs a tracing subscriber for tests once: quiet by default (`warn`, plus the `info`
/// "retrying" lines of `podline_client::retry`), `RUST_LOG` wins. Output goes to the test
/// harness and, so tests can assert what an operator would read, to [`captured_logs`].
pub fn trace_init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new("warn,podline_client::retry=info")
        });
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(TeeWriter)
            .try_init();
    });
}

/// At most this much log text is kept for [`captured_logs`] (the rest is still printed).
const CAPTURE_LIMIT: usize = 8 << 20;

fn capture_buffer() -> &'static std::sync::Mutex<Vec<u8>> {
    static BUFFER: std::sync::OnceLock<std::sync::Mutex<Vec<u8>>> = std::sync::OnceLock::new();
    BUFFER.get_or_init(Default::default)
}

/// Everything logged through [`trace_init`]'s subscriber in this process so far (nextest runs
/// each test in its own process, so: this test's logs).
pub fn captured_logs() -> String {
    let buffer = capture_buffer()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    String::from_utf8_lossy(&buffer).into_owned()
}

/// Writes each log line to the test harness's captured stdout and to the capture buffer.
struct TeeWriter;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for TeeWriter {
    type Writer = TeeWriter;
    fn make_writer(&'a self) -> Self::Writer {
        TeeWriter
    }
}

impl Write for TeeWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        {
            let mut captured = capture_buffer()
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if captured.len() + buf.len() <= CAPTURE_LIMIT {
                captured.extend_from_slice(buf);
            }
        }
        // print! (not io::stdout) so the test harness captures it like with_test_writer does.
        print!("{}", String::from_utf8_lossy(buf));
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The config tests usually want: plain HTTP (faster to start, no TLS handshakes), random port,
/// kubelet on with its fast defaults.
pub fn test_config() -> SimConfig {
    SimConfig::default().tls(false)
}

/// Starts a sim (with tracing initialised). Panics if it cannot start: tests can't go on.
pub async fn start_sim(cfg: SimConfig) -> Sim {
    trace_init();
    match Sim::start(cfg).await {
        Ok(sim) => sim,
        Err(err) => panic!("cannot start the sim: {err}"),
    }
}

/// Writes the sim's kubeconfig to a temporary file (deleted when the handle drops).
pub fn kubeconfig_file(sim: &Sim) -> tempfile::NamedTempFile {
    let mut file = match tempfile::Builder::new()
        .prefix("podline-sim-")
        .suffix(".kubeconfig")
        .tempfile()
    {
        Ok(file) => file,
        Err(err) => panic!("cannot create a temporary kubeconfig: {err}"),
    };
    if let Err(err) = file.write_all(sim.kubeconfig_yaml().as_bytes()) {
        panic!("cannot write the temporary kubeconfig: {err}");
    }
    file
}

/// A kube config for the sim (from its kubeconfig, exactly as a user would load it).
pub async fn kube_config(sim: &Sim) -> kube::Config {
    let kubeconfig = match kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml()) {
        Ok(k) => k,
        Err(err) => panic!("the sim's kubeconfig does not parse: {err}"),
    };
    match kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await {
        Ok(config) => config,
        Err(err) => panic!("the sim's kubeconfig is not usable: {err}"),
    }
}

/// A kube client for the sim (kube's defaults).
pub async fn client(sim: &Sim) -> kube::Client {
    match kube::Client::try_from(kube_config(sim).await) {
        Ok(client) => client,
        Err(err) => panic!("cannot build a client for the sim: {err}"),
    }
}

/// A kube client for the sim built by podline's own stack
/// ([`podline_client::connect::client_from_config`]: kube's silent retry layer off, podline's
/// timeouts), for tests that must see every answer the sim gives, as podline's commands do.
pub async fn podline_client(sim: &Sim) -> kube::Client {
    let config = kube_config(sim).await;
    match podline_client::connect::client_from_config(
        config,
        podline_client::timeouts::DEFAULT_CLIENT_TIMEOUT,
        podline_client::ping::Http2Ping::default(),
    ) {
        Ok(client) => client,
        Err(err) => panic!("cannot build a podline client for the sim: {err}"),
    }
}

/// Polls `cond` every 10 ms until it returns true or `timeout` passes; returns whether it held.
/// Use it instead of sleeping: it waits only as long as needed.
pub async fn wait_until<F, Fut>(timeout: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if cond().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
