//! `podline ui`: a read-only web page and JSON API over the store (runs, timelines, pods,
//! failures, live updates). The server itself is the `podline-ui` crate.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use crate::cli::query::DbArgs;
use crate::cli::signal::cancel_on_signal;

/// Flags of `podline ui`.
#[derive(Debug, Clone, clap::Args)]
pub struct UiArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Address to serve on. Loopback by default: the pages show pod names, labels and
    /// annotations to anyone who can connect, with no authentication.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Serve this host name too (repeatable). Only localhost, 127.0.0.1, [::1] and the
    /// --listen address are served otherwise: any other Host header gets 403, so a web page
    /// cannot read the UI by pointing its own name at this address (DNS rebinding).
    #[arg(long = "allowed-host", value_name = "HOST", value_parser = parse_host)]
    pub allowed_hosts: Vec<String>,
    /// How often live pages ask the store what changed.
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = parse_poll)]
    pub poll: Duration,
}

/// An `--allowed-host` value: a host name or address, optionally with a port (ignored).
fn parse_host(s: &str) -> Result<String, String> {
    let host = s.trim();
    let bad = host.is_empty()
        || host
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '/' | '@' | '?' | '#'));
    if bad {
        return Err(format!(
            "{s:?} is not a host name (expected e.g. podline.example.com or 10.0.0.5:8080)"
        ));
    }
    Ok(host.to_owned())
}

/// A poll interval: the client crate's strict, bounded durations (`500ms`, `2s`; at most 365
/// days), above zero.
fn parse_poll(s: &str) -> Result<Duration, String> {
    crate::cli::duration::positive(s)
}

/// `podline ui`: opens the store read-only and serves until Ctrl-C or SIGTERM. Prints the
/// address it serves on (useful with `--listen 127.0.0.1:0`) as its first line.
pub async fn run(args: UiArgs) -> anyhow::Result<ExitCode> {
    let store = crate::cli::query::open_read_only(&args.db).await?;
    if !args.listen.ip().is_loopback() {
        warn_exposed(args.listen);
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    println!(
        "podline ui: serving http://{addr}/ (store {}, read-only; JSON under /api/)",
        podline_store::Redacted::new(&args.db.db)
    );
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));
    podline_ui::serve(
        listener,
        podline_ui::UiConfig::new(store)
            .poll(args.poll)
            .allow_hosts(args.allowed_hosts)
            .host_hint("start podline ui with --allowed-host NAME to serve another name"),
        shutdown,
    )
    .await
    .context("serving the ui")?;
    Ok(ExitCode::SUCCESS)
}

/// The loud warning for a non-loopback address: the UI has no authentication.
fn warn_exposed(addr: SocketAddr) {
    let message = format!(
        "podline ui listens on {addr}, which is NOT a loopback address: anyone who can reach it \
         can read every recorded pod name, label, annotation and message (there is no \
         authentication). Use --listen 127.0.0.1:PORT unless that is what you want. Browsers \
         are served only under localhost, the listen address and names given with \
         --allowed-host."
    );
    // Printed, not logged: it must show whatever the log level.
    eprintln!("WARNING: {message}");
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use clap::Parser as _;

    use crate::cli::{Cli, Command};

    #[test]
    fn ui_should_default_to_loopback_and_parse_its_flags() {
        let cli = Cli::try_parse_from(["podline", "ui"]).unwrap();
        let Command::Ui(args) = cli.command else {
            panic!("not ui")
        };
        assert!(args.listen.ip().is_loopback());
        assert_eq!(args.listen.port(), 8080);
        let cli = Cli::try_parse_from([
            "podline",
            "ui",
            "--db",
            "x.db",
            "--listen",
            "0.0.0.0:9000",
            "--poll",
            "250ms",
        ])
        .unwrap();
        let Command::Ui(args) = cli.command else {
            panic!("not ui")
        };
        assert_eq!(args.db.db, "x.db");
        assert_eq!(args.listen.port(), 9000);
        assert_eq!(args.poll, std::time::Duration::from_millis(250));
        let err = Cli::try_parse_from(["podline", "ui", "--listen", "localhost"]).unwrap_err();
        assert!(err.to_string().contains("--listen"), "{err}");
    }
}
