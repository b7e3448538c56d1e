//! Command-line surface: the global kubectl-style flags and one module per subcommand.

pub mod cluster;
mod demo;
#[cfg(test)]
mod flag_names;
pub mod gc;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

pub mod query;
pub mod record;
pub mod result_file;
pub mod run;
pub mod settings;
pub mod signal;
pub mod sim;
pub mod ui;

/// Exit code for errors podline could not attribute to a task (bad config, unreachable API...).
pub const EXIT_ERROR: u8 = 2;
/// Exit code for invalid usage (bad flag or environment value): 2 in every subcommand, the code
/// clap itself exits with for a usage error, so a script sees one convention.
pub const EXIT_USAGE: u8 = 2;

/// The exit-code policy of the daemons (`record`, `ui`), shown at the end of their `--help`.
const EXIT_CODES_DAEMON: &str = "\
Exit codes:
  0  stopped by SIGINT (Ctrl-C) or SIGTERM after a clean shutdown
  2  bad usage (an invalid flag, environment variable or file: nothing was started), or an
     error no retry can fix (e.g. 401, 403, a missing namespace, an unusable store)";

/// The exit-code policy of the store queries (`runs`, `pods`, `show`).
const EXIT_CODES_QUERY: &str = "\
Exit codes:
  0  printed
  2  bad usage (an invalid flag, environment variable or file), a store that cannot be read,
     or (show) no such recorded pod";

/// The exit-code policy of `demo`.
const EXIT_CODES_DEMO: &str = "\
Exit codes:
  0  every check on the store passed
  1  a check failed (the summary says which)
  2  bad usage (an invalid flag, environment variable or file) or an error that stopped the demo";

/// podline runs Kubernetes pods as tasks and records what every pod did, and keeps doing both
/// when the Kubernetes API misbehaves.
#[derive(Debug, Parser)]
#[command(name = "podline", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every subcommand understands, spelled like kubectl's.
#[derive(Debug, Clone, clap::Args)]
pub struct Global {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    /// KUBECONFIG is read by the client, as kubectl reads it (a list of files; empty = unset),
    /// not as this flag's value.
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: the current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Namespace to act in (default: the context's namespace, else "default").
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// HTTP/2 health check: a connection to the API server that received nothing for this long
    /// gets a PING ("5s", "500ms"). Also PODLINE_HTTP2_PING_INTERVAL. Default 5s (at most a
    /// third of the client timeout).
    #[arg(long, global = true, value_name = "DURATION")]
    pub http2_ping_interval: Option<String>,
    /// HTTP/2 health check: a PING unanswered this long closes the connection, and every watch
    /// on it resumes on a new one. Interval + timeout (how late a dead connection is noticed)
    /// must be shorter than the client timeout. Also PODLINE_HTTP2_PING_TIMEOUT. Default 10s (at
    /// most a third of the client timeout).
    #[arg(long, global = true, value_name = "DURATION")]
    pub http2_ping_timeout: Option<String>,
    /// Each attempt at a new connection to the API server (TCP connect and TLS handshake) that
    /// is not done within this long is abandoned and tried again with backoff, so a network
    /// that froze is used again as soon as it is back. Must be shorter than the client timeout;
    /// may be longer than the PING timeout (a slow link). Also PODLINE_CONNECT_TIMEOUT. Default:
    /// the PING timeout.
    #[arg(long, global = true, value_name = "DURATION")]
    pub connect_timeout: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// More log output (-v info, -vv debug, -vvv trace). RUST_LOG overrides.
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbosity: u8,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Human-readable columns.
    Table,
    /// Columns plus extra detail.
    Wide,
    /// Machine-readable JSON.
    Json,
    /// Machine-readable YAML.
    Yaml,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The whole system on the embedded sim with faults switched on; checks the store at the end.
    #[command(after_help = EXIT_CODES_DEMO)]
    Demo(demo::DemoArgs),
    /// Run a command as a pod, follow its logs, exit with its exit code.
    Run(Box<run::RunArgs>),
    /// Serve the embedded, fault-injecting Kubernetes API server (and its kubelet) until Ctrl-C.
    Sim(Box<sim::SimArgs>),
    /// Record every pod's lifecycle into a store (a daemon with /metrics, /healthz, /readyz).
    #[command(after_help = EXIT_CODES_DAEMON)]
    Record(Box<record::RecordArgs>),
    /// List recorded runs (pods grouped by their run label).
    #[command(after_help = EXIT_CODES_QUERY)]
    Runs(query::RunsArgs),
    /// List recorded pods (filter with --run, --phase, -n).
    #[command(after_help = EXIT_CODES_QUERY)]
    Pods(query::PodsArgs),
    /// Show one recorded pod and its timeline.
    #[command(after_help = EXIT_CODES_QUERY)]
    Show(query::ShowArgs),
    /// Serve a read-only web page over the store: runs, timelines, pods, failures, live.
    #[command(after_help = EXIT_CODES_DAEMON)]
    Ui(ui::UiArgs),
    /// Delete the pods of `podline run`s that died (their liveness Lease expired), once.
    Gc(gc::GcArgs),
}

/// Sets up tracing to stderr: podline's own info lines (retries, reconnects) and warnings by
/// default, louder with -v, or as RUST_LOG says. The demo summarises retries
/// itself, so it defaults to warnings only. kube's HTTP trace layer reports every handled
/// transport error at ERROR; podline logs those itself (as retries), so it is silenced below -vv.
const KUBE_TRACE_LAYER: &str = "kube_client::client::builder=off";

pub fn init_tracing(global: &Global, command: &Command) {
    let summarising = matches!(command, Command::Demo(_));
    let default = match global.verbosity {
        0 if summarising => format!("warn,{KUBE_TRACE_LAYER}"),
        0 => format!("warn,podline=info,{KUBE_TRACE_LAYER}"),
        1 => format!("info,{KUBE_TRACE_LAYER}"),
        2 => "debug,hyper=info,h2=info,rustls=info".to_string(),
        _ => "trace".to_string(),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

impl Global {
    /// The HTTP/2 PING settings (flags, then `PODLINE_HTTP2_PING_*`, then defaults), validated
    /// against the client timeout they must fit in ([`settings::http2_ping`]).
    pub fn http2_ping(
        &self,
        client_timeout: std::time::Duration,
    ) -> anyhow::Result<podline_client::ping::Http2Ping> {
        settings::http2_ping(
            self.http2_ping_interval.as_deref(),
            self.http2_ping_timeout.as_deref(),
            client_timeout,
        )
    }

    /// The connect timeout (the flag, then `PODLINE_CONNECT_TIMEOUT`), checked against the
    /// client timeout; `None` when neither is set (the client then uses the PING timeout).
    pub fn connect_timeout(
        &self,
        client_timeout: std::time::Duration,
    ) -> anyhow::Result<Option<std::time::Duration>> {
        settings::connect_timeout(self.connect_timeout.as_deref(), client_timeout)
    }
}

/// Runs the chosen subcommand.
pub async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Demo(args) => demo::run(args).await,
        Command::Run(args) => run::run(*args, &cli.global).await,
        Command::Sim(args) => sim::run(*args, &cli.global).await,
        Command::Record(args) => record::run(*args, &cli.global).await,
        Command::Runs(args) => query::runs(args, &cli.global).await,
        Command::Pods(args) => query::pods(args, &cli.global).await,
        Command::Show(args) => query::show(args, &cli.global).await,
        Command::Ui(args) => ui::run(args).await,
        Command::Gc(args) => gc::run(args, &cli.global).await,
    }
}
