//! `podline demo`: the whole system on the embedded sim, with faults switched on.
//!
//! It starts the sim in-process (HTTPS, bearer token, simulated kubelet, a short watch history)
//! with 409 Conflicts and 429s on pod creates and broken log streams, runs the recorder (with its
//! reaper and its finalizer, as `podline record -A --reap --finalize`) into a local SQLite file,
//! and plays the rounds of [`schedule::SCHEDULE`]: rounds of pods (each created with the
//! recorder's finalizer, as `podline run --finalizer`) launched with the launcher library while
//! one kind of watch trouble hits the recorder (a frozen connection, resets, an API restart with
//! a compaction during the outage, early ends); a round whose `podline run` child process is
//! SIGKILLed while its pods run; a round during which the recorder is down for longer than the
//! watch history while its pods run, finish and are deleted. At the end it checks that the store
//! equals the sim's ground truth, that no pod is left in the cluster (0 orphans) and that no
//! pod's final state was lost (0 vanished). Exits 1 if any task failed unexpectedly or a check
//! fails.

mod create;
mod faults;
mod figures;
mod kill;
mod outage;
mod recording;
mod schedule;

use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use podline_client::connect::{ConfigSource, ConnectOptions, connect_with_kubeconfig};
use podline_client::finalizer::RECORD_FINALIZER;
use podline_client::ping::Http2Ping;
use podline_client::timeouts::WatchTimeouts;
use podline_launch::{Cancel, LaunchConfig, Launcher, LogMode};
use podline_record::{FinalizeConfig, RecorderConfig};
use podline_sim::{Sim, SimConfig};

use self::create::DEMO_CREATE_ATTEMPTS;
use self::figures::{by_label, sum_metric};
use self::recording::{RecorderSetup, Recording};
use self::schedule::Round;

/// Flags of `podline demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Rounds to play, in order: plain, frozen connection, resets, API restart, early ends,
    /// launcher SIGKILLed, recorder down past the watch history (1 to 50; rounds past these
    /// seven are plain).
    #[arg(long, default_value_t = 7, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=50))]
    pub rounds: u16,
    /// Pods per round (1 to 1000).
    #[arg(long, default_value_t = 50, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub pods: u16,
    /// SQLite file the recorder writes (replaced at start; query it afterwards with
    /// `podline runs --db FILE`).
    #[arg(long, default_value = "podline-demo.db", value_name = "FILE")]
    pub db: PathBuf,
    /// Run without injected faults or crashes, for comparison.
    #[arg(long)]
    pub no_faults: bool,
}

/// What the launching rounds add up to.
#[derive(Debug, Default)]
struct Tally {
    launched: usize,
    retries: u64,
    time_to_running: Vec<u64>,
    unexpected: Vec<String>,
    /// Pods of SIGKILLed launchers still in the API long after the reaper's bound.
    orphans_of_killed: usize,
    /// Pods of the recorder outage round not recorded with their final state.
    lost_in_outage: usize,
}

/// What a launching round's pods did.
struct RoundResult {
    succeeded: usize,
    failed: usize,
    scripted_failures: usize,
    retries: u64,
}

/// Runs the demo and prints its summary.
pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let (rounds, pods) = (usize::from(args.rounds), usize::from(args.pods));
    let started = Instant::now();
    remove_db_files(&args.db)?;

    let sim = Sim::start(
        SimConfig::default()
            .faults(faults::create_faults(args.no_faults))
            .history_window(outage::HISTORY),
    )
    .await
    .context("starting the embedded sim")?;
    println!(
        "sim:      {} (HTTPS, bearer token, simulated kubelet, {} s of watch history)",
        sim.url(),
        outage::HISTORY.as_secs()
    );
    // The kubeconfig of the launcher that runs as a child process.
    let kubeconfig = tempfile::NamedTempFile::new().context("creating the sim's kubeconfig")?;
    std::fs::write(kubeconfig.path(), sim.kubeconfig_yaml())
        .context("writing the sim's kubeconfig")?;

    // Two clients, as `podline record` and `podline run` are two processes: each has its own
    // HTTP/2 connection, so freezing the recorder's does not freeze the launches.
    let client = sim_client(&sim).await?;
    let store = podline_store::open(&args.db.to_string_lossy())
        .await
        .with_context(|| format!("opening the store {}", args.db.display()))?;
    let mut config = RecorderConfig::new(sim.url(), None);
    config.timeouts = WatchTimeouts::try_new(Duration::from_secs(30), Duration::from_secs(2))
        .context("demo watch timeouts")?;
    config.finalize = Some(FinalizeConfig::default());
    let mut recording = Recording::start(RecorderSetup {
        client: sim_client(&sim).await?,
        store: store.clone(),
        config,
    });
    println!(
        "recorder: watching all namespaces into {}, reaping dead launchers' pods, holding each \
         pod with {RECORD_FINALIZER} until its final state is recorded",
        args.db.display()
    );

    // Logs are followed (through reset log streams) and discarded.
    // The demo's storm refuses about a third of all creates (see `create_faults`): 24 quick
    // attempts make a pod that exhausts them a one-in-10^11 event, so a demo that fails means
    // podline is wrong, not unlucky.
    let launch_config = LaunchConfig {
        logs: LogMode::Main,
        create: podline_launch::create::create_policy(
            DEMO_CREATE_ATTEMPTS,
            Duration::from_millis(50),
            Duration::from_secs(2),
            Duration::from_secs(120),
        )?,
        finalizer: Some(RECORD_FINALIZER.to_owned()),
        ..LaunchConfig::default()
    };
    let launcher = Launcher::new(client.clone(), "default", launch_config);
    let cancel = Cancel::new();

    let mut tally = Tally::default();
    for round in 1..=rounds {
        let kind = Round::of(round, args.no_faults);
        let label = format!("round {round}/{rounds}");
        match kind {
            Round::KillLauncher => {
                println!(
                    "fault:    `podline run --count {pods} --parallel {pods}` is SIGKILLed while its pods run"
                );
                let figures = kill::run(&client, kubeconfig.path(), round, pods).await?;
                tally.launched += figures.pods;
                tally.orphans_of_killed += figures.orphans();
                let late = if figures.met_bound() || figures.orphans() > 0 {
                    ""
                } else {
                    ", late on this busy machine"
                };
                println!(
                    "{label}: launcher SIGKILLed with {} pods running; the reaper deleted {} of \
                     them in {:.1} s (bound {:.1} s + the pods' stop{late}): {} orphans",
                    figures.pods,
                    figures.deleted,
                    figures.took.as_secs_f64(),
                    figures.bound.as_secs_f64(),
                    figures.orphans()
                );
            }
            Round::RecorderOutage => {
                println!(
                    "fault:    the recorder stops for {} s, longer than the API's {} s watch \
                     history, while the round's pods run, finish and are deleted",
                    outage::DOWN_FOR.as_secs(),
                    outage::HISTORY.as_secs()
                );
                let timeline = outage::timeline(&mut recording, &client, round);
                let (result, down) =
                    launch_round(&launcher, &cancel, round, kind, pods, &mut tally, timeline)
                        .await?;
                let figures = outage::settle(&client, &store, round, pods, &down).await?;
                tally.lost_in_outage += figures.pods.saturating_sub(figures.recorded);
                println!(
                    "{label}: {} succeeded, {} failed (as scripted: {}); recorder down {:.1} s, \
                     {} deleted pods waited in Terminating; after its restart {} of {} final \
                     states recorded in {:.1} s, {} vanished",
                    result.succeeded,
                    result.failed,
                    result.scripted_failures,
                    down.down.as_secs_f64(),
                    down.held,
                    figures.recorded,
                    figures.pods,
                    figures.released_in.as_secs_f64(),
                    figures.vanished
                );
            }
            _ => {
                // The round's watch fault hits while its pods are being created and run.
                let fault = async {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    faults::inject_round_fault(&sim, kind).await;
                    Ok(())
                };
                let (result, ()) =
                    launch_round(&launcher, &cancel, round, kind, pods, &mut tally, fault).await?;
                println!(
                    "{label}: {} succeeded, {} failed (as scripted: {}), {} create retries",
                    result.succeeded, result.failed, result.scripted_failures, result.retries
                );
            }
        }
    }

    // The recorder catches up within a few client timeouts; wait for the store to match.
    let deadline = Instant::now() + Duration::from_secs(30);
    let audit = loop {
        let report = podline_audit::compare(store.as_ref(), &sim.ground_truth())
            .await
            .context("reading the store for the check")?;
        if (report.is_ok() && report.vanished.is_empty()) || Instant::now() >= deadline {
            break report;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let rendered = recording.finish().await?;
    let counts = store.counts().await.context("counting the store")?;
    // Every launcher is gone now (finished or killed), so a pod still in the cluster has
    // nobody left to delete it.
    let orphans = sim
        .ground_truth()
        .iter()
        .filter(|pod| pod.deleted_at.is_none())
        .count();
    sim.shutdown().await;

    tally.time_to_running.sort_unstable();
    let pct = |p: usize| -> String {
        let sorted = &tally.time_to_running;
        if sorted.is_empty() {
            return "-".into();
        }
        let index = ((sorted.len() * p).div_ceil(100)).saturating_sub(1);
        format!("{} ms", sorted[index.min(sorted.len() - 1)])
    };
    println!();
    println!(
        "pods launched:        {} ({rounds} rounds of {pods})",
        tally.launched
    );
    println!(
        "create retries:       {} (409 Conflict / 429 answered by the sim, retried with full jitter)",
        tally.retries
    );
    println!("time to running:      p50 {}, p99 {}", pct(50), pct(99));
    println!("unexpected outcomes:  {}", tally.unexpected.len());
    println!(
        "watch reconnects:     {}",
        by_label(&rendered, "podline_record_watch_reconnects_total", "reason")
    );
    println!(
        "watch relists:        {}",
        sum_metric(&rendered, "podline_record_watch_relists_total")
    );
    println!(
        "finalizers:           {} added by the recorder, removed: {}",
        sum_metric(&rendered, "podline_record_finalizers_added_total"),
        by_label(
            &rendered,
            "podline_record_finalizers_removed_total",
            "reason"
        )
    );
    println!(
        "pods recorded:        {} ({} transitions, {} deleted)",
        counts.pods, counts.transitions, counts.deleted
    );
    println!("store vs ground truth: {audit}");
    println!(
        "orphans:              {orphans} (pods left in the cluster with no launcher to delete them)"
    );
    println!(
        "vanished:             {} (pods deleted with their final state unknown)",
        audit.vanished.len()
    );
    println!(
        "elapsed:              {:.1} s",
        started.elapsed().as_secs_f64()
    );
    for line in tally.unexpected.iter().take(10) {
        println!("  {line}");
    }
    for pod in audit.vanished.iter().take(10) {
        println!("  vanished: {pod}");
    }
    let passed = audit.is_ok()
        && tally.unexpected.is_empty()
        && orphans == 0
        && tally.orphans_of_killed == 0
        && tally.lost_in_outage == 0
        && audit.vanished.is_empty();
    if passed {
        println!(
            "\nOK: every pod ran as scripted, none outlived its launcher, and the store equals what happened."
        );
        println!(
            "Explore: podline runs --db {0} ; podline pods --db {0} --phase Failed",
            args.db.display()
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!("\nFAILED: see the lines above.");
        Ok(crate::cli::exit::code(crate::cli::exit::FAILED))
    }
}

/// One round of pods from the demo's own launcher while `fault` (the round's trouble) plays;
/// returns what the pods did and what the fault returned.
async fn launch_round<T>(
    launcher: &Launcher,
    cancel: &Cancel,
    round: usize,
    kind: Round,
    pods: usize,
    tally: &mut Tally,
    fault: impl Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<(RoundResult, T)> {
    let (specs, expected_codes) = schedule::round_specs(round, kind, pods);
    let launches = podline_launch::many::run_many(launcher, specs, pods, None, false, cancel);
    let (summary, fault) = tokio::join!(launches, fault);
    let fault = fault?;
    tally.launched += summary.results.len();
    tally.retries += summary.retries;
    for (result, expected) in summary.results.iter().zip(&expected_codes) {
        if let Some(ms) = result.timings.time_to_running_ms {
            tally.time_to_running.push(ms);
        }
        if result.exit_code != *expected {
            tally.unexpected.push(format!(
                "{}: exit {} (expected {expected}){}",
                result.pod,
                result.exit_code,
                result
                    .error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            ));
        }
    }
    let result = RoundResult {
        succeeded: summary.succeeded,
        failed: summary.failed,
        scripted_failures: expected_codes.iter().filter(|code| **code != 0).count(),
        retries: summary.retries,
    };
    Ok((result, fault))
}

/// A client for the sim built the way `podline` builds every client (timeouts, no hidden
/// retries), from the sim's kubeconfig.
async fn sim_client(sim: &Sim) -> anyhow::Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml())
        .context("parsing the sim's kubeconfig")?;
    let client_timeout = Duration::from_secs(10);
    let options = ConnectOptions {
        client_timeout,
        // Notices a frozen connection within 3 s, so the demo stays short.
        http2_ping: Http2Ping::try_new(
            Duration::from_secs(1),
            Duration::from_secs(2),
            client_timeout,
        )
        .context("demo PING settings")?,
        ..ConnectOptions::default()
    };
    let connected = connect_with_kubeconfig(
        kubeconfig,
        ConfigSource::Flag(PathBuf::from("<sim>")),
        &options,
    )
    .await
    .context("connecting to the sim")?;
    Ok(connected.client)
}

fn remove_db_files(db: &std::path::Path) -> anyhow::Result<()> {
    for suffix in ["", "-wal", "-shm"] {
        let mut path = db.as_os_str().to_owned();
        path.push(suffix);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => {
                return Err(err).with_context(|| {
                    format!("removing the old {}", PathBuf::from(path).display())
                });
            }
        }
    }
    Ok(())
}
