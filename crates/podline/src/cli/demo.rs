//! `podline demo`: the whole system on the embedded sim, with faults switched on.
//!
//! It starts the sim in-process (HTTPS, bearer token, simulated kubelet) with 409 Conflicts and
//! 429s on pod creates and broken log streams, runs the recorder into a local SQLite file,
//! launches rounds of pods with the launcher library while a timeline of watch faults plays
//! (a frozen connection, resets, an API restart with a compaction during the outage), then checks that the
//! store equals the sim's ground truth. Exits non-zero if any task failed unexpectedly or the
//! check fails.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use podline_client::connect::{ConfigSource, ConnectOptions, connect_with_kubeconfig};
use podline_client::ping::Http2Ping;
use podline_client::timeouts::WatchTimeouts;
use podline_launch::{Cancel, LaunchConfig, Launcher, LogMode, TaskSpec};
use podline_record::{Recorder, RecorderConfig};
use podline_sim::{FaultAction, FaultRule, FaultVerb, Sim, SimConfig};
use rand::Rng as _;
use tokio_util::sync::CancellationToken;

/// The round whose fault is an API server restart with a compaction during the outage.
const RESTART_ROUND: usize = 4;

/// Flags of `podline demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Rounds of pods; each round launches its pods at once.
    #[arg(long, default_value_t = 6, value_name = "N")]
    pub rounds: usize,
    /// Pods per round.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub pods: usize,
    /// SQLite file the recorder writes (replaced at start; query it afterwards with
    /// `podline runs --db FILE`).
    #[arg(long, default_value = "podline-demo.db", value_name = "FILE")]
    pub db: PathBuf,
    /// Run without injected faults, for comparison.
    #[arg(long)]
    pub no_faults: bool,
}

/// Runs the demo and prints its summary.
pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.rounds > 0 && args.pods > 0,
        "--rounds and --pods must be at least 1"
    );
    let started = Instant::now();
    remove_db_files(&args.db)?;

    let sim = Sim::start(SimConfig::default().faults(create_faults(args.no_faults)))
        .await
        .context("starting the embedded sim")?;
    println!(
        "sim:      {} (HTTPS, bearer token, simulated kubelet)",
        sim.url()
    );

    // Two clients, as `podline record` and `podline run` are two processes: each has its own
    // HTTP/2 connection, so freezing the recorder's does not freeze the launches.
    let client = sim_client(&sim).await?;
    let recorder_client = sim_client(&sim).await?;
    let store = podline_store::open(&args.db.to_string_lossy())
        .await
        .with_context(|| format!("opening the store {}", args.db.display()))?;
    let mut config = RecorderConfig::new(sim.url(), None);
    config.timeouts = WatchTimeouts::try_new(Duration::from_secs(30), Duration::from_secs(2))
        .context("demo watch timeouts")?;
    let recorder = Recorder::new(recorder_client, store.clone(), config);
    let metrics = recorder.metrics();
    let shutdown = CancellationToken::new();
    let recording = tokio::spawn(recorder.run(shutdown.clone()));
    println!(
        "recorder: watching all namespaces into {}",
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
        ..LaunchConfig::default()
    };
    let launcher = Launcher::new(client, "default", launch_config);
    let cancel = Cancel::new();

    let mut launched = 0usize;
    let mut unexpected = Vec::new();
    let mut retries = 0u64;
    let mut time_to_running = Vec::new();
    for round in 1..=args.rounds {
        let (specs, expected_codes) = round_specs(round, args.pods);
        // Each round's watch fault hits while its pods are being created and run.
        let fault = (!args.no_faults).then(|| {
            let sim = sim.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(500)).await;
                inject_round_fault(&sim, round).await;
            })
        });
        let summary =
            podline_launch::many::run_many(&launcher, specs, args.pods, None, false, &cancel).await;
        if let Some(fault) = fault {
            fault.await.context("the fault timeline panicked")?;
        }
        launched += summary.results.len();
        retries += summary.retries;
        for (result, expected) in summary.results.iter().zip(&expected_codes) {
            if let Some(ms) = result.timings.time_to_running_ms {
                time_to_running.push(ms);
            }
            if result.exit_code != *expected {
                unexpected.push(format!(
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
        println!(
            "round {round}/{}: {} succeeded, {} failed (as scripted: {}), {} create retries",
            args.rounds,
            summary.succeeded,
            summary.failed,
            expected_codes.iter().filter(|code| **code != 0).count(),
            summary.retries
        );
    }

    // The recorder catches up within a few client timeouts; wait for the store to match.
    let deadline = Instant::now() + Duration::from_secs(30);
    let audit = loop {
        let report = podline_audit::compare(store.as_ref(), &sim.ground_truth())
            .await
            .context("reading the store for the check")?;
        if report.is_ok() || Instant::now() >= deadline {
            break report;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    shutdown.cancel();
    match recording.await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => bail!("the recorder failed: {err}"),
        Err(err) => bail!("the recorder task panicked: {err}"),
    }
    let counts = store.counts().await.context("counting the store")?;
    sim.shutdown().await;

    time_to_running.sort_unstable();
    let pct = |p: usize| -> String {
        if time_to_running.is_empty() {
            return "-".into();
        }
        let index = ((time_to_running.len() * p).div_ceil(100)).saturating_sub(1);
        format!(
            "{} ms",
            time_to_running[index.min(time_to_running.len() - 1)]
        )
    };
    let rendered = metrics.render();
    println!();
    println!(
        "pods launched:        {launched} ({} rounds of {})",
        args.rounds, args.pods
    );
    println!(
        "create retries:       {retries} (409 Conflict / 429 answered by the sim, retried with full jitter)"
    );
    println!("time to running:      p50 {}, p99 {}", pct(50), pct(99));
    println!("unexpected outcomes:  {}", unexpected.len());
    println!(
        "watch reconnects:     {}",
        by_label(&rendered, "podline_record_watch_reconnects_total", "reason")
    );
    println!(
        "watch relists:        {}",
        sum_metric(&rendered, "podline_record_watch_relists_total")
    );
    println!(
        "pods recorded:        {} ({} transitions, {} deleted)",
        counts.pods, counts.transitions, counts.deleted
    );
    println!("store vs ground truth: {audit}");
    println!(
        "elapsed:              {:.1} s",
        started.elapsed().as_secs_f64()
    );
    for line in unexpected.iter().take(10) {
        println!("  {line}");
    }
    if audit.is_ok() && unexpected.is_empty() {
        println!("\nOK: every pod ran as scripted and the store equals what happened.");
        println!(
            "Explore: podline runs --db {0} ; podline pods --db {0} --phase Failed",
            args.db.display()
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!("\nFAILED: see the lines above.");
        Ok(ExitCode::from(1))
    }
}

/// Create attempts per pod in the demo (see where the launch config is built).
const DEMO_CREATE_ATTEMPTS: u32 = 24;

/// Faults on every create for the whole demo: quota-style 409 Conflicts (30%), 429 with
/// Retry-After (5%), and resets of log streams (10%).
fn create_faults(no_faults: bool) -> podline_sim::FaultPlan {
    let mut plan = podline_sim::FaultPlan::default();
    if no_faults {
        return plan;
    }
    plan.rules.push(
        FaultRule::new(FaultAction::status(409))
            .verb(FaultVerb::Create)
            .resource("pods")
            .probability(0.3),
    );
    plan.rules.push(
        FaultRule::new(FaultAction::Status {
            code: 429,
            reason: None,
            message: None,
            retry_after: Some(1),
        })
        .verb(FaultVerb::Create)
        .resource("pods")
        .probability(0.05),
    );
    plan.rules.push(
        FaultRule::new(FaultAction::Reset {
            after_bytes: None,
            after_events: Some(1),
        })
        .verb(FaultVerb::Log)
        .probability(0.1),
    );
    plan
}

/// The watch fault timeline: one kind of trouble per round.
async fn inject_round_fault(sim: &Sim, round: usize) {
    let faults = sim.faults();
    match round {
        2 => {
            println!(
                "fault:    the recorder's connection freezes (a frozen proxy: HTTP/2 PING notices it)"
            );
            faults.push(
                recorder_watch(FaultAction::Freeze {
                    after_ms: Some(300),
                })
                .times(1),
            );
        }
        3 => {
            println!("fault:    watch streams reset mid-chunk, twice");
            faults.push(
                recorder_watch(FaultAction::Reset {
                    after_bytes: None,
                    after_events: Some(20),
                })
                .times(2),
            );
        }
        RESTART_ROUND => {
            println!(
                "fault:    API server restart (2 s down); its watch history is compacted during the outage"
            );
            let restarting = {
                let sim = sim.clone();
                tokio::spawn(async move { sim.restart(Duration::from_secs(2)).await })
            };
            // The kubelet keeps working while the API is down, so history moves on; compacting
            // it now makes the recorder's resume point too old: 410 Expired, re-list, reconcile.
            tokio::time::sleep(Duration::from_secs(1)).await;
            sim.compact();
            let _ = restarting.await;
        }
        5 => {
            println!(
                "fault:    watch ends early (like a server timeout) and LISTs answer 503 once"
            );
            faults.push(recorder_watch(FaultAction::EndEarly { after_events: 10 }).times(3));
            faults.push(
                FaultRule::new(FaultAction::status(503))
                    .verb(FaultVerb::List)
                    .resource("pods")
                    .times(1),
            );
        }
        _ => {}
    }
}

/// A rule on the recorder's watch only: the all-namespaces pod watch (the launcher's own
/// per-pod watches are namespaced and not matched).
fn recorder_watch(action: FaultAction) -> FaultRule {
    FaultRule::new(action)
        .verb(FaultVerb::Watch)
        .resource("pods")
        .namespace("")
}

/// One round's tasks: scripted pods with random durations and log lines. In every ten pods
/// three fail on purpose, so the store (and `podline ui`'s failures view) has each kind of
/// failure to show: one exits 1, one is OOM-killed (exit 137), and one's image cannot be
/// pulled (the launcher gives up and deletes it). Returns the specs and the exit codes each
/// is expected to end with.
fn round_specs(round: usize, pods: usize) -> (Vec<TaskSpec>, Vec<u8>) {
    let mut rng = rand::rng();
    let mut specs = Vec::with_capacity(pods);
    let mut codes = Vec::with_capacity(pods);
    for i in 0..pods {
        let mut annotations = BTreeMap::new();
        // The restart round's pods outlive the outage, so none is created, finished and deleted
        // while the API is down (only a finalizer could record the final state of such a pod).
        let duration_ms = if round == RESTART_ROUND {
            rng.random_range(4000..6000)
        } else {
            rng.random_range(300..1500)
        };
        annotations.insert(
            "sim.podline.io/duration".to_string(),
            format!("{duration_ms}ms"),
        );
        if round != RESTART_ROUND {
            // Some scheduling wait and image pull, as on a real node, so the timeline in
            // `podline ui` shows each stage (Kubernetes times have whole seconds).
            annotations.insert(
                "sim.podline.io/schedule-delay".to_string(),
                format!("{}ms", rng.random_range(0..1200)),
            );
            annotations.insert(
                "sim.podline.io/pull-delay".to_string(),
                format!("{}ms", rng.random_range(0..1800)),
            );
        }
        annotations.insert(
            "sim.podline.io/log-lines".to_string(),
            rng.random_range(1..20).to_string(),
        );
        let exit_code = match ScriptedOutcome::of(round, i) {
            ScriptedOutcome::Succeed => 0,
            ScriptedOutcome::Exit1 => {
                annotations.insert("sim.podline.io/exit-code".to_string(), "1".to_string());
                1
            }
            ScriptedOutcome::OomKilled => {
                annotations.insert("sim.podline.io/oom".to_string(), "true".to_string());
                137
            }
            ScriptedOutcome::ImagePullError => {
                annotations.insert(
                    "sim.podline.io/image-error".to_string(),
                    "ErrImagePull".to_string(),
                );
                podline_launch::exit::START_FAILED
            }
        };
        specs.push(TaskSpec {
            name: Some(format!("demo-r{round}-{i}")),
            image: Some("busybox:1.36".into()),
            command: vec!["sh".into(), "-c".into(), "echo working; sleep 1".into()],
            annotations,
            run: Some(format!("demo-round-{round}")),
            ..TaskSpec::default()
        });
        codes.push(exit_code);
    }
    (specs, codes)
}

/// How a demo pod is scripted to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScriptedOutcome {
    Succeed,
    Exit1,
    OomKilled,
    ImagePullError,
}

impl ScriptedOutcome {
    /// Pod `i` of `round`: the 8th, 9th and 10th of every ten fail, each differently. In the
    /// restart round the image-pull failure exits 1 instead: its pod would be deleted within
    /// moments of its creation, possibly while the API is down.
    fn of(round: usize, i: usize) -> Self {
        match i % 10 {
            7 => ScriptedOutcome::Exit1,
            8 => ScriptedOutcome::OomKilled,
            9 if round == RESTART_ROUND => ScriptedOutcome::Exit1,
            9 => ScriptedOutcome::ImagePullError,
            _ => ScriptedOutcome::Succeed,
        }
    }
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

/// Sums every sample of a Prometheus counter in rendered text.
fn sum_metric(rendered: &str, name: &str) -> u64 {
    rendered
        .lines()
        .filter(|line| line.starts_with(name) && !line.starts_with('#'))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// "reason=count, ..." for a labelled Prometheus counter in rendered text.
fn by_label(rendered: &str, name: &str, label: &str) -> String {
    let needle = format!("{label}=\"");
    let mut parts = Vec::new();
    for line in rendered.lines().filter(|line| line.starts_with(name)) {
        let Some(start) = line.find(&needle) else {
            continue;
        };
        let rest = &line[start + needle.len()..];
        let Some(end) = rest.find('"') else { continue };
        let Some(value) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) else {
            continue;
        };
        if value > 0.0 {
            parts.push(format!("{}={}", &rest[..end], value as u64));
        }
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RENDERED: &str = "# HELP podline_record_watch_reconnects_total x\n\
        podline_record_watch_reconnects_total{reason=\"client_timeout\"} 2\n\
        podline_record_watch_reconnects_total{reason=\"reset\"} 1\n\
        podline_record_watch_reconnects_total{reason=\"gone\"} 0\n\
        podline_record_watch_relists_total 3\n";

    #[test]
    fn counters_are_read_from_rendered_metrics() {
        assert_eq!(
            by_label(RENDERED, "podline_record_watch_reconnects_total", "reason"),
            "client_timeout=2, reset=1"
        );
        assert_eq!(
            sum_metric(RENDERED, "podline_record_watch_relists_total"),
            3
        );
        assert_eq!(
            by_label("", "podline_record_watch_reconnects_total", "reason"),
            "none"
        );
    }

    #[test]
    fn rounds_script_failures_and_name_their_run() {
        let (specs, codes) = round_specs(3, 40);
        assert_eq!(specs.len(), 40);
        assert_eq!(codes.len(), 40);
        assert!(
            specs
                .iter()
                .all(|spec| spec.run.as_deref() == Some("demo-round-3"))
        );
        for (spec, code) in specs.iter().zip(&codes) {
            let scripted = |key: &str| spec.annotations.get(&format!("sim.podline.io/{key}"));
            match code {
                0 => assert!(scripted("exit-code").is_none() && scripted("oom").is_none()),
                1 => assert_eq!(scripted("exit-code").map(String::as_str), Some("1")),
                137 => assert_eq!(scripted("oom").map(String::as_str), Some("true")),
                code => {
                    assert_eq!(*code, podline_launch::exit::START_FAILED);
                    assert!(scripted("image-error").is_some());
                }
            }
        }
        let failing = |round| {
            (0..10)
                .map(|i| ScriptedOutcome::of(round, i))
                .filter(|o| *o != ScriptedOutcome::Succeed)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            failing(1),
            [
                ScriptedOutcome::Exit1,
                ScriptedOutcome::OomKilled,
                ScriptedOutcome::ImagePullError
            ]
        );
        assert!(!failing(RESTART_ROUND).contains(&ScriptedOutcome::ImagePullError));
    }
}
