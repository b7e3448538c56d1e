//! The flag groups subcommands share, spelled like kubectl's: each subcommand flattens the
//! groups that mean something to it (see the table in `cli/mod.rs`), so `--help` shows only
//! those and any other is an unknown argument there.

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use podline_client::connect::ConnectOptions;
use podline_client::ping::Http2Ping;

use crate::cli::settings;

/// How to reach the API server: for the subcommands that talk to a cluster (`run`, `record`,
/// `gc`).
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Cluster")]
pub struct ClusterFlags {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    /// KUBECONFIG is read by the client, as kubectl reads it (a list of files; empty = unset),
    /// not as this flag's value.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: the current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// HTTP/2 health check: a connection to the API server that received nothing for this long
    /// gets a PING ("5s", "500ms"). Also PODLINE_HTTP2_PING_INTERVAL. Default 5s (at most a
    /// third of the client timeout).
    #[arg(long, value_name = "DURATION")]
    pub http2_ping_interval: Option<String>,
    /// HTTP/2 health check: a PING unanswered this long closes the connection, and every watch
    /// on it resumes on a new one. Interval + timeout (how late a dead connection is noticed)
    /// must be shorter than the client timeout. Also PODLINE_HTTP2_PING_TIMEOUT. Default 10s (at
    /// most a third of the client timeout).
    #[arg(long, value_name = "DURATION")]
    pub http2_ping_timeout: Option<String>,
    /// Each attempt at a new connection to the API server (TCP connect and TLS handshake) that
    /// is not done within this long is abandoned and tried again with backoff, so a network
    /// that froze is used again as soon as it is back. Must be shorter than the client timeout;
    /// may be longer than the PING timeout (a slow link). Also PODLINE_CONNECT_TIMEOUT. Default:
    /// the PING timeout.
    #[arg(long, value_name = "DURATION")]
    pub connect_timeout: Option<String>,
}

impl ClusterFlags {
    /// The HTTP/2 PING settings (flags, then `PODLINE_HTTP2_PING_*`, then defaults), validated
    /// against the client timeout they must fit in ([`settings::http2_ping`]).
    pub fn http2_ping(&self, client_timeout: Duration) -> anyhow::Result<Http2Ping> {
        settings::http2_ping(
            self.http2_ping_interval.as_deref(),
            self.http2_ping_timeout.as_deref(),
            client_timeout,
        )
    }

    /// The connect timeout (the flag, then `PODLINE_CONNECT_TIMEOUT`), checked against the
    /// client timeout; `None` when neither is set (the client then uses the PING timeout).
    pub fn connect_timeout(&self, client_timeout: Duration) -> anyhow::Result<Option<Duration>> {
        settings::connect_timeout(self.connect_timeout.as_deref(), client_timeout)
    }

    /// The client options of these flags and `namespace` (`-n`), with the PING and connect
    /// timeouts checked against `client_timeout`: an error here is bad usage, found before
    /// anything connects.
    pub fn connect_options(
        &self,
        namespace: Option<String>,
        client_timeout: Duration,
    ) -> anyhow::Result<ConnectOptions> {
        Ok(ConnectOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            namespace,
            client_timeout,
            http2_ping: self.http2_ping(client_timeout)?,
            connect_timeout: self.connect_timeout(client_timeout)?,
            exec_timeout: None,
        })
    }
}

/// The namespace a cluster subcommand acts in (`run`, `record`, `gc`). The store readers have
/// their own `-n`, a filter with another default (`cli/query.rs`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct NamespaceFlag {
    /// Namespace to act in (default: the context's namespace, else "default").
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

/// How a subcommand that prints a result prints it (`run`, `gc`, `runs`, `pods`, `show`).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct OutputFlag {
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
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
