//! Command-line surface: the shared kubectl-style flag groups (`flags`), the exit-code policy
//! (`exit`) and one module per subcommand; this file holds only the command table, tracing
//! setup and the dispatch, which nothing under it uses.

pub mod cluster;
mod demo;
pub(crate) mod duration;
pub mod exit;
#[cfg(test)]
mod flag_names;
pub mod flags;
pub mod gc;
pub mod query;
pub mod reaper_flags;
pub mod record;
pub mod result_file;
pub mod run;
pub mod run_logs;
pub mod settings;
pub mod signal;
pub mod sim;
pub mod ui;

use std::io::IsTerminal as _;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use flags::{ClusterFlags, NamespaceFlag, Output, OutputFlag};

/// podline runs Kubernetes pods as tasks and records what every pod did, and keeps doing both
/// when the Kubernetes API misbehaves.
#[derive(Debug, Parser)]
#[command(name = "podline", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// More log output (-v info, -vv debug, -vvv trace). RUST_LOG overrides.
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbosity: u8,
    #[command(subcommand)]
    pub command: Command,
}

// Which flag groups (cli/flags.rs) each subcommand flattens; only -v is global. A flag that
// means nothing to a subcommand is not in its --help and is refused there as unknown (clap's
// usage error, exit 2), and every flag goes after the subcommand's name (`podline run -n jobs`).
// ClusterFlags = --kubeconfig, --context, --http2-ping-interval, --http2-ping-timeout,
// --connect-timeout.
//
//   subcommand        ClusterFlags  -n                           -o
//   run               yes           NamespaceFlag                yes: the result document
//   record            yes           NamespaceFlag (+ the Lease)  no: a daemon, it prints none
//   gc                yes           NamespaceFlag                yes: what the pass did
//   runs, pods, show  no (store)    a filter of their own        yes
//   ui                no (store)    no                           no: it serves pages
//   sim               no            no                           no
//   demo              no            no                           no
//
// runs, pods, show and ui read the store, never the cluster. sim is the API server: it serves,
// connects to none, and writes the kubeconfig of its clients (--kubeconfig-out). demo starts its
// own sim and gives its child processes that sim's kubeconfig.

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The whole system on the embedded sim with faults switched on; checks the store at the end.
    #[command(after_help = exit::demo_codes())]
    Demo(demo::DemoArgs),
    /// Run a command as a pod, follow its logs, exit with its exit code.
    Run(Box<run::RunArgs>),
    /// Serve the embedded, fault-injecting Kubernetes API server (and its kubelet) until Ctrl-C.
    Sim(Box<sim::SimArgs>),
    /// Record every pod's lifecycle into a store (a daemon with /metrics, /healthz, /readyz).
    #[command(after_help = exit::daemon_codes())]
    Record(Box<record::RecordArgs>),
    /// List recorded runs (pods grouped by their run label).
    #[command(after_help = exit::query_codes())]
    Runs(query::RunsArgs),
    /// List recorded pods (filter with --run, --phase, -n).
    #[command(after_help = exit::query_codes())]
    Pods(query::PodsArgs),
    /// Show one recorded pod and its timeline.
    #[command(after_help = exit::query_codes())]
    Show(query::ShowArgs),
    /// Serve a read-only web page over the store: runs, timelines, pods, failures, live.
    #[command(after_help = exit::daemon_codes())]
    Ui(ui::UiArgs),
    /// Delete the pods of `podline run`s that died (their liveness Lease expired), once.
    Gc(gc::GcArgs),
}

/// Sets up tracing to stderr: podline's own info lines (retries, reconnects) and warnings by
/// default, louder with -v, or as RUST_LOG says. The demo summarises retries
/// itself, so it defaults to warnings only. kube's HTTP trace layer reports every handled
/// transport error at ERROR; podline logs those itself (as retries), so it is silenced below -vv.
const KUBE_TRACE_LAYER: &str = "kube_client::client::builder=off";

/// kube's `Client::request` and `request_status` log the whole answer at WARN when it does not
/// decode (every pod of a LIST page, env values and annotations included): one undecodable pod
/// would put them all in the log. Those lines are silenced at every verbosity but `-vvv`; the
/// caller reports the failure itself, without the body. kube's TLS warnings stay.
const KUBE_BODY_DUMPS: &str = "kube_client::client=error,kube_client::client::tls=warn";

pub fn init_tracing(verbosity: u8, command: &Command) {
    let summarising = matches!(command, Command::Demo(_));
    let default = match verbosity {
        0 if summarising => format!("warn,{KUBE_TRACE_LAYER},{KUBE_BODY_DUMPS}"),
        0 => format!("warn,podline=info,{KUBE_TRACE_LAYER},{KUBE_BODY_DUMPS}"),
        1 => format!("info,{KUBE_TRACE_LAYER},{KUBE_BODY_DUMPS}"),
        2 => format!("debug,hyper=info,h2=info,rustls=info,{KUBE_BODY_DUMPS}"),
        _ => "trace".to_string(),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR"),
        ))
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

/// Whether log lines may carry ANSI colour: only on a terminal (a task log, a file or a pipe
/// would keep the escape codes as text), and never when `NO_COLOR` is set to anything but the
/// empty string (<https://no-color.org>).
fn colour(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|value| value.is_empty())
}

/// Runs the chosen subcommand.
pub async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Demo(args) => demo::run(args).await,
        Command::Run(args) => run::run(*args).await,
        Command::Sim(args) => sim::run(*args).await,
        Command::Record(args) => record::run(*args).await,
        Command::Runs(args) => query::runs(args).await,
        Command::Pods(args) => query::pods(args).await,
        Command::Show(args) => query::show(args).await,
        Command::Ui(args) => ui::run(args).await,
        Command::Gc(args) => gc::run(args).await,
    }
}

#[cfg(test)]
mod colour_tests {
    use super::colour;

    #[test]
    fn colour_should_need_a_terminal_and_no_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some("".into())));
        assert!(!colour(true, Some("1".into())));
        assert!(!colour(false, None));
    }
}
