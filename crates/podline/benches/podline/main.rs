//! The one benchmark command, `cargo bench -p podline --bench podline [-- FLAGS]`: it measures
//! the figures the issues set targets for, prints a table and writes it to docs/benchmarks.md with
//! the machine noted.
//!
//! It is a benchmark target of the `podline` package, not a subcommand, so the shipping binary
//! carries no benchmark code and the store and MLMD crates expose their load generator and test
//! server only behind features that this target's dev-dependencies turn on. Cargo builds the
//! `podline` binary with it (`CARGO_BIN_EXE_podline`), and the memory rows run that binary as a
//! child process.
//!
//! Throughput is measured in-process over loopback, with the same allocator and tuning as the
//! binary; memory is measured on a child `podline` process so that the benchmark's own
//! allocations don't count.

#[path = "../../src/allocator.rs"]
#[allow(dead_code)] // the binary's allocator module, shared so in-process figures use its tuning
mod allocator;
mod child;
mod launch;
mod mlmd;
mod record;
mod report;
mod sim;
mod stall;
mod store;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::api::ObjectMeta;

use report::Row;

/// Flags of the benchmark (after `cargo bench -p podline --bench podline --`).
#[derive(Debug, Parser)]
#[command(
    name = "podline-bench",
    about = "Measure podline against the issues' targets; prints a table and writes docs/benchmarks.md."
)]
pub struct BenchArgs {
    /// Passed by `cargo bench` to every benchmark target; ignored.
    #[arg(long, hide = true)]
    bench: bool,
    /// Run only these parts (comma-separated). Default: all.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<Part>,
    /// Smaller sizes, for a quick look (rates still compare with the targets).
    #[arg(long)]
    pub quick: bool,
    /// Pods the sim's memory row creates (default 100,000, or 10,000 with `--quick`): a smaller
    /// count measures a memory change in seconds, to extrapolate before one full run.
    #[arg(long, value_name = "N")]
    pub rss_pods: Option<usize>,
    /// Where to write the Markdown report.
    /// (Default: the repository's docs/benchmarks.md, wherever the command runs from.)
    #[arg(long, default_value_os_t = default_report(), value_name = "FILE")]
    pub out: PathBuf,
}

/// The repository's docs/benchmarks.md (`cargo bench` runs this from the package's directory).
fn default_report() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/benchmarks.md")
}

/// The parts of podline that have benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Part {
    /// The embedded API server.
    Sim,
    /// The launcher.
    Launch,
    /// The lifecycle store.
    Store,
    /// KFP mode: pods recorded into ML Metadata (needs the MLMD test server's Python packages).
    Mlmd,
    /// The recorder, end to end (sim -> watch -> recorder -> SQLite).
    Record,
    /// Noticing a frozen connection: HTTP/2 PING vs HTTP/1.1 (about a minute).
    Stall,
}

/// Problem sizes; `--quick` shrinks them.
#[derive(Debug, Clone)]
pub struct Sizes {
    sim_creates: usize,
    list_pods: usize,
    watchers: usize,
    watch_seconds: u64,
    rss_pods: usize,
    launch_pods: usize,
    launch_rss_pods: usize,
    launch_rss_many_pods: usize,
    store_pods: usize,
    mlmd_pods: usize,
    mlmd_rss_pods: usize,
    record_backlog_pods: usize,
    record_latency_seconds: u64,
    record_rss_small: usize,
    record_rss_large: usize,
    record_idle_seconds: u64,
}

impl Sizes {
    fn new(quick: bool) -> Sizes {
        if quick {
            Sizes {
                sim_creates: 4_000,
                list_pods: 10_000,
                watchers: 20,
                watch_seconds: 3,
                rss_pods: 10_000,
                launch_pods: 400,
                launch_rss_pods: 200,
                launch_rss_many_pods: 1_000,
                store_pods: 5_000,
                mlmd_pods: 300,
                mlmd_rss_pods: 2_000,
                record_backlog_pods: 4_000,
                record_latency_seconds: 3,
                record_rss_small: 2_000,
                record_rss_large: 10_000,
                record_idle_seconds: 3,
            }
        } else {
            Sizes {
                sim_creates: 16_000,
                list_pods: 10_000,
                watchers: 100,
                watch_seconds: 5,
                rss_pods: 100_000,
                launch_pods: 2_000,
                launch_rss_pods: 1_000,
                launch_rss_many_pods: 10_000,
                store_pods: 25_000,
                mlmd_pods: 2_000,
                mlmd_rss_pods: 10_000,
                record_backlog_pods: 20_000,
                record_latency_seconds: 10,
                record_rss_small: 10_000,
                record_rss_large: 100_000,
                record_idle_seconds: 10,
            }
        }
    }
}

fn main() -> ExitCode {
    #[cfg(not(target_os = "linux"))]
    allocator::tune(); // on Linux it already ran when the executable was loaded
    allocator::favour_throughput(); // the benchmark hosts the sim in-process
    let args = BenchArgs::parse();
    // Warnings only: the benchmark summarises retries itself. kube's HTTP trace layer reports
    // every handled transport error at ERROR; those are retries here.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("warn,kube_client::client::builder=off")
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the benchmarks, prints the table and writes the report.
async fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    if cfg!(debug_assertions) {
        eprintln!(
            "warning: this is a debug build; run `cargo bench -p podline --bench podline` for real figures"
        );
    }
    let mut sizes = Sizes::new(args.quick);
    if let Some(pods) = args.rss_pods {
        sizes.rss_pods = pods;
    }
    let wants = |part: Part| args.only.is_empty() || args.only.contains(&part);
    let mut rows: Vec<Row> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    if wants(Part::Sim) {
        eprintln!("benchmarking the sim...");
        rows.extend(sim::run(&sizes).await.context("sim benchmark")?);
        notes.push(
            "sim: server and clients share the same 2 cores; creates go through kube-rs clients, \
             the LIST is timed without client-side decoding."
                .into(),
        );
    }
    if wants(Part::Launch) {
        eprintln!("benchmarking the launcher...");
        rows.extend(
            launch::run(sizes.launch_pods)
                .await
                .context("launch benchmark")?,
        );
        // Twice: the size, and ten times more, where memory must still be bound by
        // `--parallel` rather than by the count.
        for pods in [sizes.launch_rss_pods, sizes.launch_rss_many_pods] {
            rows.push(
                launch::peak_rss_of_run(pods)
                    .await
                    .context("launch memory benchmark")?,
            );
        }
        notes.push(
            "launch: pods run 50 ms in the sim, which schedules after 10 ms and pulls for 10 ms. \
             podline's overhead on time to running is, per pod, podline's own time to running \
             minus the sim's time from receiving the create request (its audit stream, like \
             kube-apiserver's requestReceivedTimestamp) to committing Running (the pod table's \
             commit instant): what the launcher adds before its create reaches the API and after \
             Running is committed, including the TLS and HTTP/2 work of both ends. The sim runs \
             on its own async runtime (2 threads), as a separate API server process would, but \
             shares the 2 cores, so at 200 in flight the figure includes waiting for a core. \
             Tasks of one run share one pod watch. The RSS rows are a `podline run` child \
             process against a `podline sim` child over HTTPS, at 1,000 tasks and at ten times \
             as many (memory must follow `--parallel`, not the count)."
                .into(),
        );
    }
    if wants(Part::Store) {
        eprintln!("benchmarking the store...");
        rows.extend(
            store::run(sizes.store_pods)
                .await
                .context("store benchmark")?,
        );
        notes.push("store: 4 events per pod (Pending, Running, Succeeded upserts, Deleted), 500 per transaction with the resume point.".into());
    }
    if wants(Part::Mlmd) {
        match mlmd::unavailable() {
            Some(why) => {
                eprintln!("skipping the MLMD benchmark: {why}");
                notes.push(format!("mlmd: not measured: {why}."));
            }
            None => {
                eprintln!("benchmarking KFP mode into MLMD...");
                rows.extend(mlmd::run_all(&sizes).await.context("MLMD benchmark")?);
                notes.push(
                    "mlmd: the whole KFP mode pipeline (sim watch, keyed queue, 8 workers, pod \
                     patches) into the real MLMD (`ml-metadata` behind crates/mlmd/tests/mlmd_server.py, \
                     Python gRPC, one store lock); 32 pods driven at a time, 9 of 10 consuming the \
                     previous pod's output; a pod counts once `metadata_written` is on it. \
                     Write transactions are the `Put*` RPCs podline's MLMD client sent (MLMD runs \
                     each in one transaction), types and contexts included. The RSS row is a \
                     `podline record --kfp` child process. Kubeflow's writer: about 10 pods/s \
                     against the same server."
                        .into(),
                );
            }
        }
    }
    if wants(Part::Record) {
        eprintln!("benchmarking the recorder...");
        rows.extend(record::run(&sizes).await.context("recorder benchmark")?);
        notes.push(
            "record: the sim runs in the benchmark process; throughput replays a backlog of pods \
             that ran their whole lifecycle while no recorder ran (a recorder resuming from its \
             stored position), timed until the stored resume point covers the last event; \
             latency is from sending each create to the commit of the transaction holding it \
             (so it includes the API round trip); RSS and idle CPU are of a `podline record` \
             child process (default flags) and include its SQLite page cache."
                .into(),
        );
    }
    if wants(Part::Stall) {
        eprintln!("benchmarking frozen-connection detection (about a minute)...");
        rows.extend(stall::run().await.context("stall benchmark")?);
        notes.push(
            "stall: a quiet watch (no pod changes, no bookmarks) whose TCP connection the sim \
             freezes; measured from the freeze to the watch's resume, default settings, both \
             protocols at once over TLS."
                .into(),
        );
    }
    println!("{}", report::markdown(&rows));
    report::write_file(&args.out, &rows, &notes)
        .with_context(|| format!("writing {}", args.out.display()))?;
    eprintln!("wrote {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}

/// A kube client from a kubeconfig text (how users reach the sim).
async fn kube_client(kubeconfig_yaml: &str) -> anyhow::Result<kube::Client> {
    kube::Client::try_from(kube_config(kubeconfig_yaml).await?).context("building a kube client")
}

/// The client configuration the sim's kubeconfig describes.
async fn kube_config(kubeconfig_yaml: &str) -> anyhow::Result<kube::Config> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(kubeconfig_yaml)
        .context("parsing the sim's kubeconfig")?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .context("loading the sim's kubeconfig")
}

/// A pod the sim's kubelet runs from annotations, for `duration`.
fn scripted_pod(name: &str, duration: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some([("app".to_string(), "bench".to_string())].into()),
            annotations: Some(
                [("sim.podline.io/duration".to_string(), duration.to_string())].into(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox:1.36".into()),
                command: Some(vec!["true".into()]),
                ..Container::default()
            }],
            restart_policy: Some("Never".into()),
            ..PodSpec::default()
        }),
        status: None,
    }
}
