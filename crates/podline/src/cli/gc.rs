//! `podline gc`: the reaper for users without a recorder: deletes the Lease and the pods of
//! every `podline run` whose liveness Lease expired (a launcher SIGKILLed, or whose host was
//! lost), except pods of `--on-finish keep` tasks.
//!
//! It judges by observation only ([`Reaper::sweep`]): it lists the launchers' Leases every
//! fraction of the grace until each was seen renewed (alive) or unchanged for its
//! `leaseDurationSeconds` + `--grace` (expired, reaped), or `--wait` passed. No host clock is
//! read (`renewTime` is not), and a failed list restarts every Lease's clock, so a gc run
//! during or right after an API outage reaps nothing on time it could not see (issue 27).
//!
//! `podline gc --finalizers` does something else: it removes the recorders' finalizers
//! (podline.io/record, every label shard's podline.io/record-SHARD, and KFP mode's
//! podline.io/kfp-writer) from every pod in the
//! namespace(s), the safety valve when no `podline record --finalize` will run again
//! (uninstalling), so no pod waits in Terminating for it.

use std::process::ExitCode;
use std::time::Duration;

use podline_launch::reaper::{Reaper, Sweep};

use crate::cli::exit::{self, usage};
use crate::cli::reaper_flags::{parse_grace, parse_wait, sweep_period};
use crate::cli::{ClusterFlags, NamespaceFlag, Output, OutputFlag};

const AFTER_HELP: &str = "\
How the reaper decides (what it assumes): a Lease of a `podline run` (named podline-launcher-*)
is expired once gc has seen it unchanged for its leaseDurationSeconds + --grace, on gc's own
clock: no host clock is compared, so clock skew between hosts does not matter. gc watches until
every such Lease was seen renewed or expired (about the Lease's duration + grace when one is
dead; at most --wait). A failed list restarts every Lease's clock: an API outage, during which
no launcher can renew either, never counts against a Lease. Assumed: a live launcher renews at
least once per duration + grace while the API server answers (podline run renews 3 times per
duration), and the API server does not answer lists while refusing every renewal for that long.
A Lease annotated podline.io/keep-for-retry (`podline run --keep-for-retry`: its task will be
retried) is held, not reaped, once seen unchanged for duration + --grace (its launcher is dead), and
reaped with its pods once seen unchanged for that long on top: gc waits for it if that falls
within --wait, else reports it held and leaves it to a later gc (or record --reap). A retry that
reattached to the pod meanwhile moved the pod to its own Lease: the held Lease goes without it.
Only Leases podline made are reaped, and only the pods they own; Leases and pods that merely
carry the podline.io/launcher label are left alone, and so are Leases and pods that do not
decode (each is logged and listed; the rest are judged as usual).

With --finalizers: instead of reaping, remove every podline finalizer: podline.io/record
(set by `podline run --finalizer` and `podline record --finalize`), podline.io/record-SHARD (set
by `podline record --finalize --shard SHARD`, any shard) and podline.io/kfp-writer (set by
`podline record --kfp --finalize`) from every pod in the namespace (-n) or all namespaces
(-A), and report how many pods were released. Other finalizers are left alone. Run it after stopping
every `podline record --finalize` for good (uninstalling), or deleted pods wait in
Terminating for a recorder that never comes. Needs list and patch on pods.
";

/// Delete the pods of launchers that died (their liveness Lease expired).
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = format!("{AFTER_HELP}\n\n{}", exit::gc_codes()))]
pub struct GcArgs {
    #[command(flatten)]
    pub namespace: NamespaceFlag,
    #[command(flatten)]
    pub output: OutputFlag,
    /// Reap in all namespaces (needs list on leases and pods cluster-wide).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Time on top of a Lease's duration before it counts as expired, measured on gc's clock
    /// from the last change gc saw (1s to 1h).
    #[arg(long, value_name = "DURATION", default_value = "9s", value_parser = parse_grace)]
    pub grace: Duration,
    /// Longest time gc watches the Leases before giving up on those it could not decide
    /// (1s to 2h; a dead launcher's Lease takes its duration + --grace to decide).
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_wait)]
    pub wait: Duration,
    /// Instead of reaping: remove the recorders' finalizers (podline.io/record, every shard's
    /// podline.io/record-SHARD and podline.io/kfp-writer) from every pod in scope (see below).
    #[arg(long)]
    pub finalizers: bool,
    #[command(flatten)]
    pub cluster: ClusterFlags,
}

/// Runs `podline gc`: see [`exit::gc_codes`] for the exit codes.
pub async fn run(args: GcArgs) -> anyhow::Result<ExitCode> {
    let options = match args.cluster.connect_options(
        args.namespace.namespace.clone(),
        podline_client::timeouts::DEFAULT_CLIENT_TIMEOUT,
    ) {
        Ok(options) => options,
        Err(err) => return Err(usage(err)),
    };
    let connected = crate::cli::cluster::connect(&options).await?;
    let namespace = (!args.all_namespaces).then(|| connected.namespace.clone());
    if args.finalizers {
        return release_all(connected.client, namespace, args.output.output).await;
    }
    let reaper = Reaper::new(connected.client, namespace, args.grace);
    match reaper.sweep(sweep_period(args.grace), args.wait).await {
        Ok(sweep) => {
            print_sweep(&sweep, args.output.output)?;
            if sweep.undecided.is_empty() {
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!(
                    "warning: {} Lease(s) neither seen renewed nor expired within --wait {:?}, left alone: {}",
                    sweep.undecided.len(),
                    args.wait,
                    sweep.undecided.join(", ")
                );
                Ok(exit::code(exit::UNDECIDED))
            }
        }
        Err(err) => {
            eprintln!("error: {err}");
            Ok(exit::code(exit::ERROR))
        }
    }
}

/// Prints what a sweep did, in the chosen format.
fn print_sweep(sweep: &Sweep, output: Output) -> anyhow::Result<()> {
    match output {
        Output::Json => println!("{}", serde_json::to_string_pretty(sweep)?),
        Output::Yaml => print!("{}", serde_saphyr::to_string(sweep)?),
        Output::Table | Output::Wide => {
            let work = &sweep.work;
            println!(
                "{} launcher lease(s) seen, {} expired and reaped, {} pod(s) deleted, {} kept (--on-finish keep)",
                work.leases,
                work.reaped.len(),
                work.pods_deleted,
                work.pods_kept
            );
            if work.foreign_leases > 0 || work.pods_not_owned > 0 {
                println!(
                    "left alone: {} lease(s) labelled podline.io/launcher that podline did not make, {} labelled pod(s) a reaped Lease did not own",
                    work.foreign_leases, work.pods_not_owned
                );
            }
            if !work.held.is_empty() {
                println!(
                    "held for a retry: {} expired lease(s) whose task will be retried, kept with their pods for the time their annotation podline.io/keep-for-retry gives, beyond --wait (a later gc or record --reap deletes them): {}",
                    work.held.len(),
                    work.held.join(", ")
                );
            }
            if !work.undecodable.is_empty() {
                println!(
                    "left alone: {} listed object(s) that do not decode (never judged): {}",
                    work.undecodable.len(),
                    work.undecodable.join(", ")
                );
            }
            if sweep.failed_lists > 0 {
                println!(
                    "{} list(s) failed during {:.1}s of watching (each restarted every Lease's clock){}",
                    sweep.failed_lists,
                    sweep.observed_seconds,
                    sweep
                        .last_error
                        .as_deref()
                        .map(|e| format!("; last: {e}"))
                        .unwrap_or_default()
                );
            }
        }
    }
    Ok(())
}

/// What `gc --finalizers` did.
#[derive(Debug, Default, serde::Serialize)]
struct Released {
    /// The finalizers removed ([`RELEASED`]).
    finalizers: [&'static str; 3],
    /// Pods listed.
    pods: usize,
    /// Pods a finalizer was removed from.
    released: usize,
    /// Pods one could not be removed from, or whose metadata did not decode
    /// (`namespace/name: error`).
    failed: Vec<String>,
}

/// What `gc --finalizers` removes, as reported: the recorders' and every shard's.
const RELEASED: [&str; 3] = [
    podline_client::finalizer::RECORD_FINALIZER,
    "podline.io/record-SHARD",
    podline_mlmd::kfp::KFP_FINALIZER,
];

/// Whether `gc --finalizers` removes `finalizer`: any of podline's recorders' (every scope's).
fn is_podline_finalizer(finalizer: &str) -> bool {
    podline_client::finalizer::is_recorder_finalizer(finalizer)
        || finalizer == podline_mlmd::kfp::KFP_FINALIZER
}

/// `gc --finalizers`: removes [`Released::finalizers`] from every pod in scope that carries one
/// (the list and release loop: [`podline_client::finalizer::release_all`]), and reports.
async fn release_all(
    client: kube::Client,
    namespace: Option<String>,
    output: Output,
) -> anyhow::Result<ExitCode> {
    let policy = podline_client::retry::RetryPolicy::default();
    let done = match podline_client::finalizer::release_all(
        &client,
        namespace.as_deref(),
        &is_podline_finalizer,
        &policy,
    )
    .await
    {
        Ok(done) => done,
        Err(err) => {
            eprintln!(
                "error: cannot list pods: {}",
                podline_client::error::Chain(&err)
            );
            return Ok(exit::code(exit::ERROR));
        }
    };
    let report = Released {
        finalizers: RELEASED,
        pods: done.pods,
        released: done.released,
        failed: done.failed,
    };
    match output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Output::Yaml => print!("{}", serde_saphyr::to_string(&report)?),
        Output::Table | Output::Wide => {
            println!(
                "{} pod(s) seen, finalizers {}, {} and {} removed from {}, {} failed",
                report.pods,
                RELEASED[0],
                RELEASED[1],
                RELEASED[2],
                report.released,
                report.failed.len()
            );
            for failure in &report.failed {
                eprintln!("error: {failure}");
            }
        }
    }
    Ok(if report.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        exit::code(exit::ERROR)
    })
}
