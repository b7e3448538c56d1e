//! `podline gc`: one pass of the reaper, for users without a recorder: deletes the Lease and
//! the pods of every `podline run` whose liveness Lease expired (a launcher SIGKILLed, or whose
//! host was lost), except pods of `--on-finish keep` tasks.
//!
//! One pass cannot watch a Lease change, so it judges by the Lease's `renewTime` against this
//! host's clock: a Lease not renewed for `leaseDurationSeconds` + `--grace` is expired. The
//! clocks of the launcher's host and this one must agree within the grace. `podline record
//! --reap` reaps continuously and measures on its own clock instead (immune to skew).

use std::process::ExitCode;
use std::time::Duration;

use podline_launch::reaper::{Clock, Reaper, Tracker};

use crate::cli::{Global, Output};

const AFTER_HELP: &str = "\
Exit codes:
  0  one pass done (whatever it reaped)
  1  the pass failed (an API error no retry fixed, e.g. 403: see deploy/README.md for RBAC)
  2  bad usage (an invalid flag): nothing was done";

/// Delete the pods of launchers that died (their liveness Lease expired).
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct GcArgs {
    /// Reap in all namespaces (needs list on leases and pods cluster-wide).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Time on top of a Lease's duration before it counts as expired.
    #[arg(long, value_name = "DURATION", default_value = "9s", value_parser = parse_duration)]
    pub grace: Duration,
}

/// A duration flag of the reaper (`90`, `9s`, `2m`, `500ms`; at most 365 days).
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    podline_client::timeouts::parse_duration(s).map_err(|e| format!("{s:?}: {e}"))
}

/// A period of the reaper: a positive duration.
pub(crate) fn parse_period(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(format!("{s:?} must be greater than zero"));
    }
    Ok(d)
}

/// Runs `podline gc`: exit 0 after a pass (whatever it reaped), 1 if the pass failed.
pub async fn run(args: GcArgs, global: &Global) -> anyhow::Result<ExitCode> {
    let options = podline_client::connect::ConnectOptions {
        kubeconfig: global.kubeconfig.clone(),
        context: global.context.clone(),
        namespace: global.namespace.clone(),
        ..podline_client::connect::ConnectOptions::default()
    };
    let connected = crate::cli::cluster::connect(&options).await?;
    let namespace = (!args.all_namespaces).then(|| connected.namespace.clone());
    let reaper = Reaper::new(connected.client, namespace, args.grace);
    let pass = reaper
        .pass(
            &mut Tracker::new(),
            Clock::RenewTime(jiff::Timestamp::now()),
        )
        .await;
    match pass {
        Ok(pass) => {
            match global.output {
                Output::Json => println!("{}", serde_json::to_string_pretty(&pass)?),
                Output::Yaml => print!("{}", serde_saphyr::to_string(&pass)?),
                Output::Table | Output::Wide => println!(
                    "{} launcher lease(s) seen, {} expired and reaped, {} pod(s) deleted, {} kept (--on-finish keep)",
                    pass.leases,
                    pass.reaped.len(),
                    pass.pods_deleted,
                    pass.pods_kept
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            eprintln!("error: {err}");
            Ok(ExitCode::from(1))
        }
    }
}
