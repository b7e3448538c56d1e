//! `podline sim`: serve the embedded, fault-injecting Kubernetes API server until Ctrl-C/SIGTERM,
//! and write a kubeconfig so kubectl, podline and any kube client can use it.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use podline_sim::{FaultPlan, KubeletConfig, Sim, SimConfig};

use crate::cli::duration;
use crate::cli::exit::usage;

mod ground_truth;

const AFTER_HELP: &str = "\
Examples:
  podline sim                                   # HTTPS on a random port, kubeconfig in ./podline-sim.kubeconfig
  podline sim --listen 127.0.0.1:6443 --plain-http
  podline sim --http1-only                      # no HTTP/2: clients fall back to HTTP/1.1
  podline sim --no-kubelet                      # API only: pods stay Pending, you drive their status
  podline sim --faults faults.yaml              # e.g. 30% of pod creates answer 409 Conflict
  podline sim --ground-truth-out truth.json     # the ledger of every pod, for audits

A faults file (YAML or JSON):
  rules:
    - { verb: create, resource: pods, probability: 0.3, action: { status: { code: 409 } } }
    - { verb: watch, resource: pods, times: 1, action: { reset: { after_events: 5 } } }
Actions: status {code, reason, message, retry_after}, latency {ms}, stall {after_events},
reset {after_bytes | after_events}, end_early {after_events}, commit_then_drop,
freeze {after_ms} (the request's whole TCP connection stops reading and writing, never closes),
reset_stream {after_bytes | after_events}, commit_then_reset_stream (reset and commit_then_drop
for the one request: over HTTP/2 only its stream is reset, other streams on the connection go on).
Rules can also be changed at runtime: GET/POST/DELETE /_sim/faults, GET /_sim/counts,
POST /_sim/compact, POST /_sim/restart?seconds=N (same bearer token as the API).

The ground truth (every pod ever created: phase transitions, exit codes, deletion) is served at
GET /_sim/ground-truth; --ground-truth-out also writes it to a file, replaced atomically.

Scripted pods (default) read annotations: sim.podline.io/duration, exit-code, logs, log-lines,
image-error, unschedulable, ... With --exec, containers run their command as local processes.";

/// Serve the embedded Kubernetes API server (with a simulated kubelet) until Ctrl-C.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = format!("{AFTER_HELP}\n\n{}", crate::cli::exit::sim_codes()))]
pub struct SimArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Serve plain HTTP instead of HTTPS with a generated CA.
    #[arg(long)]
    pub plain_http: bool,
    /// Serve HTTP/1.1 only. By default the sim serves HTTP/2 and HTTP/1.1 like a real API server
    /// (ALPN `h2`, `http/1.1` over TLS; HTTP/2 prior knowledge over plain HTTP).
    #[arg(long)]
    pub http1_only: bool,
    /// Bearer token clients must send (default: random). Prefer the environment variable.
    #[arg(
        long,
        env = "PODLINE_SIM_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Where to write the kubeconfig for this sim.
    #[arg(long, value_name = "FILE", default_value = "podline-sim.kubeconfig")]
    pub kubeconfig_out: PathBuf,
    /// Serve the API without a kubelet: pods stay Pending, as on a control plane without nodes.
    #[arg(long)]
    pub no_kubelet: bool,
    /// Run containers' commands as local child processes (instead of scripted containers).
    #[arg(long, conflicts_with = "no_kubelet")]
    pub exec: bool,
    /// Fault rules to start with (YAML or JSON file).
    #[arg(long, value_name = "FILE")]
    pub faults: Option<PathBuf>,
    /// Watch history kept; resumes from older resourceVersions get 410 Expired.
    #[arg(long, value_name = "DURATION", default_value = "75s", value_parser = duration::positive)]
    pub history_window: Duration,
    /// Period of BOOKMARK events on watches that allow them.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration::positive)]
    pub bookmark_interval: Duration,
    /// Delay before the kubelet schedules a pod.
    #[arg(long, value_name = "DURATION", value_parser = duration::positive)]
    pub schedule_delay: Option<Duration>,
    /// Duration of a simulated image pull.
    #[arg(long, value_name = "DURATION", value_parser = duration::positive)]
    pub pull_delay: Option<Duration>,
    /// How long a scripted container runs without a `sim.podline.io/duration` annotation.
    #[arg(long, value_name = "DURATION", value_parser = duration::positive)]
    pub default_duration: Option<Duration>,
    /// Close connections idle this long, as kube-apiserver does (its default, 90s): an HTTP/2
    /// connection with no open stream gets GOAWAY (an open watch is a stream; PINGs do not
    /// count), an HTTP/1.1 keep-alive connection waiting for its next request is closed. From
    /// 100ms to 1h.
    #[arg(long, value_name = "DURATION", default_value = "90s", value_parser = parse_idle_timeout)]
    pub idle_timeout: Duration,
    /// Write the ground-truth ledger (what GET /_sim/ground-truth answers) to this file: at
    /// start, every --ground-truth-interval, and on shutdown (SIGINT/SIGTERM). Each write
    /// replaces the file atomically.
    #[arg(long, value_name = "FILE")]
    pub ground_truth_out: Option<PathBuf>,
    /// How often --ground-truth-out is rewritten while the sim runs. From 100ms to 1h.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "5s",
        value_parser = parse_ground_truth_interval,
        requires = "ground_truth_out"
    )]
    pub ground_truth_interval: Duration,
}

/// Bounds of `--idle-timeout`: short enough to test reconnects in a second, long enough that
/// no idle connection is kept for hours.
const IDLE_TIMEOUT_BOUNDS: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_secs(3600));

/// Bounds of `--ground-truth-interval`: often enough to follow a test, rarely enough to cost
/// nothing measurable.
const GROUND_TRUTH_INTERVAL_BOUNDS: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_secs(3600));

/// `--ground-truth-interval`: a duration within [`GROUND_TRUTH_INTERVAL_BOUNDS`].
fn parse_ground_truth_interval(s: &str) -> Result<Duration, String> {
    parse_bounded(s, GROUND_TRUTH_INTERVAL_BOUNDS)
}

/// `--idle-timeout`: a duration within [`IDLE_TIMEOUT_BOUNDS`].
fn parse_idle_timeout(s: &str) -> Result<Duration, String> {
    parse_bounded(s, IDLE_TIMEOUT_BOUNDS)
}

/// A duration within `(min, max)`, or what was expected.
fn parse_bounded(s: &str, (min, max): (Duration, Duration)) -> Result<Duration, String> {
    duration::bounded(s, min, max)
}

impl SimArgs {
    /// The sim configuration these flags describe (reads the faults file).
    pub fn config(&self) -> anyhow::Result<SimConfig> {
        let mut kubelet = KubeletConfig {
            enabled: !self.no_kubelet,
            exec: self.exec,
            ..KubeletConfig::default()
        };
        if let Some(d) = self.schedule_delay {
            kubelet.schedule_delay = d;
        }
        if let Some(d) = self.pull_delay {
            kubelet.pull_delay = d;
        }
        if let Some(d) = self.default_duration {
            kubelet.default_duration = d;
        }
        let mut cfg = SimConfig::default()
            .addr(self.listen)
            .tls(!self.plain_http)
            .http1_only(self.http1_only)
            .kubelet(kubelet)
            .history_window(self.history_window)
            .bookmark_interval(self.bookmark_interval)
            .idle_timeout(self.idle_timeout);
        if let Some(token) = &self.token {
            anyhow::ensure!(!token.trim().is_empty(), "--token must not be empty");
            cfg = cfg.token(token.trim());
        }
        if let Some(path) = &self.faults {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the faults file {}", path.display()))?;
            let plan = FaultPlan::parse(&text)
                .with_context(|| format!("in the faults file {}", path.display()))?;
            cfg = cfg.faults(plan);
        }
        Ok(cfg)
    }
}

/// Writes the kubeconfig readable by the owner only (it holds the token).
fn write_kubeconfig(path: &Path, yaml: &str) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot write the kubeconfig {}", path.display()))?;
    file.write_all(yaml.as_bytes())
        .with_context(|| format!("cannot write the kubeconfig {}", path.display()))?;
    Ok(())
}

/// Runs `podline sim`.
pub async fn run(args: SimArgs) -> anyhow::Result<ExitCode> {
    let cfg = args.config().map_err(usage)?;
    let kubelet_on = cfg.kubelet.enabled;
    let sim = Sim::start(cfg).await.context("cannot start the sim")?;
    write_kubeconfig(&args.kubeconfig_out, &sim.kubeconfig_yaml()).map_err(usage)?;
    let ledger = match &args.ground_truth_out {
        Some(path) => Some(
            ground_truth::LedgerWriter::start(
                sim.clone(),
                path.clone(),
                args.ground_truth_interval,
            )
            .await
            .context("--ground-truth-out")
            .map_err(usage)?,
        ),
        None => None,
    };
    let kubeconfig =
        std::fs::canonicalize(&args.kubeconfig_out).unwrap_or_else(|_| args.kubeconfig_out.clone());
    let mode = if kubelet_on {
        if args.exec {
            "kubelet: exec (containers run as local processes)"
        } else {
            "kubelet: scripted"
        }
    } else {
        "no kubelet: pods stay Pending"
    };
    println!("podline sim: Kubernetes API at {} ({mode})", sim.url());
    println!("kubeconfig: {}", kubeconfig.display());
    if let Some(path) = &args.ground_truth_out {
        println!("ground truth: {}", path.display());
    }
    println!();
    println!("  export KUBECONFIG={}", kubeconfig.display());
    println!("  kubectl get pods");
    println!(
        "  kubectl run hello --image=busybox --restart=Never --annotations=sim.podline.io/logs=hello"
    );
    println!("  kubectl logs -f hello");
    println!();
    println!("Press Ctrl-C to stop.");
    let _ = std::io::stdout().flush();
    crate::cli::signal::shutdown().await;
    eprintln!("podline sim: stopping");
    sim.shutdown().await;
    if let Some(ledger) = ledger {
        ledger.finish().await.context("--ground-truth-out")?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: SimArgs,
    }

    fn parse(args: &[&str]) -> Result<SimArgs, clap::Error> {
        let mut argv = vec!["podline-sim"];
        argv.extend_from_slice(args);
        Wrapper::try_parse_from(argv).map(|w| w.args)
    }

    #[test]
    fn defaults_are_https_on_a_random_port_with_a_kubelet() {
        let args = parse(&[]).expect("defaults parse");
        assert_eq!(args.listen.to_string(), "127.0.0.1:0");
        assert!(!args.plain_http && !args.no_kubelet && !args.exec);
        assert_eq!(args.kubeconfig_out, PathBuf::from("podline-sim.kubeconfig"));
        let cfg = args.config().expect("config");
        assert!(cfg.tls);
        assert!(cfg.kubelet.enabled);
        assert_eq!(cfg.history_window, Duration::from_secs(75));
        assert_eq!(cfg.idle_timeout, podline_sim::DEFAULT_IDLE_TIMEOUT);
    }

    #[test]
    fn the_ground_truth_interval_is_bounded_and_needs_a_file() {
        let args = parse(&["--ground-truth-out", "t.json"]).expect("parse");
        assert_eq!(args.ground_truth_interval, Duration::from_secs(5));
        let args = parse(&[
            "--ground-truth-out",
            "t.json",
            "--ground-truth-interval",
            "250ms",
        ])
        .expect("parse");
        assert_eq!(args.ground_truth_interval, Duration::from_millis(250));
        for bad in ["10ms", "2h", "0"] {
            let err = parse(&[
                "--ground-truth-out",
                "t.json",
                "--ground-truth-interval",
                bad,
            ])
            .expect_err(bad);
            assert!(err.to_string().contains(bad), "{err}");
        }
        assert!(parse(&["--ground-truth-interval", "1s"]).is_err());
    }

    #[test]
    fn the_idle_timeout_is_settable_within_its_bounds() {
        let args = parse(&["--idle-timeout", "2s"]).expect("parse");
        assert_eq!(
            args.config().expect("config").idle_timeout,
            Duration::from_secs(2)
        );
        for bad in ["50ms", "2h", "0", "soon"] {
            let err = parse(&["--idle-timeout", bad]).expect_err(bad);
            assert!(err.to_string().contains(bad), "{err}");
        }
        let err = parse(&["--idle-timeout", "2h"]).expect_err("too long");
        assert!(err.to_string().contains("expected 100ms to 3600s"), "{err}");
    }

    #[test]
    fn flags_reach_the_config() {
        let args = parse(&[
            "--listen",
            "127.0.0.1:6443",
            "--plain-http",
            "--no-kubelet",
            "--history-window",
            "5s",
            "--schedule-delay",
            "250ms",
            "--token",
            "t0k",
        ])
        .expect("parse");
        let cfg = args.config().expect("config");
        assert_eq!(cfg.addr.port(), 6443);
        assert!(!cfg.tls);
        assert!(!cfg.kubelet.enabled);
        assert_eq!(cfg.history_window, Duration::from_secs(5));
        assert_eq!(cfg.kubelet.schedule_delay, Duration::from_millis(250));
        assert_eq!(cfg.token, "t0k");
    }

    #[test]
    fn bad_values_are_rejected_with_what_was_expected() {
        let err = parse(&["--history-window", "soon"]).expect_err("bad duration");
        assert!(err.to_string().contains("soon"), "{err}");
        assert!(parse(&["--listen", "nowhere"]).is_err());
        assert!(parse(&["--no-kubelet", "--exec"]).is_err());
    }

    #[test]
    fn a_faults_file_is_read_and_a_bad_one_names_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = dir.path().join("faults.yaml");
        std::fs::write(
            &good,
            "rules:\n  - verb: create\n    action: {status: {code: 409}}\n",
        )
        .expect("write");
        let args = parse(&["--faults", good.to_str().expect("utf-8")]).expect("parse");
        assert_eq!(args.config().expect("config").faults.rules.len(), 1);
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "rules: [{action: {explode: 1}}]\n").expect("write");
        let args = parse(&["--faults", bad.to_str().expect("utf-8")]).expect("parse");
        let err = args.config().expect_err("bad plan");
        assert!(format!("{err:#}").contains("bad.yaml"), "{err:#}");
    }
}
