//! `podline record`: the recorder daemon. Watches pods and writes their lifecycle into the store
//! (or, with `--kfp`, Argo pods into ML Metadata as Kubeflow's metadata-writer does), serving
//! `/metrics`, `/healthz` and `/readyz`, optionally as one of several replicas (`--leader-elect`).
//!
//! Exit codes (also in `--help`): 0 after SIGTERM/Ctrl-C (queue flushed); 2 for a bad flag or
//! environment value (the message names it and what is expected), checked before anything is
//! bound, connected or created, the same code clap exits with for the flags it parses itself
//! (such as a malformed `--listen`); 1 with a clear message when the watch fails in a way no
//! retry can fix (401, 403, a missing namespace, a rejected certificate). The codes live in
//! `cli/exit.rs`.

use std::future::Future;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use podline_client::connect::ConnectOptions;
use podline_lease::{ElectionConfig, LeaderElector};
use podline_record::CancellationToken;
use podline_record::lifecycle::DEFAULT_RUN_LABEL;
use podline_record::{
    FinalizeConfig, Health, LabelSelector, LifecycleConfig, Recorder, RecorderConfig, health,
};

use crate::cli::cluster::connect;
use crate::cli::exit::usage;
use crate::cli::signal::cancel_on_signal;
use crate::cli::{ClusterFlags, NamespaceFlag};

/// Record every pod's lifecycle into a store, surviving whatever the API server does.
#[derive(Debug, Clone, clap::Args)]
pub struct RecordArgs {
    #[command(flatten)]
    pub namespace: NamespaceFlag,
    /// Watch pods in all namespaces (needs list/watch on pods cluster-wide).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Also run the reaper in the recorder's namespace(s): delete the Lease and pods of every
    /// `podline run` whose liveness Lease expired (see `podline gc`).
    #[arg(long)]
    pub reap: bool,
    /// With --reap: time on top of a Lease's duration before it counts as expired, measured on
    /// this recorder's clock from the last change it saw (1s to 1h; see `podline gc --help`
    /// for what the reaper assumes). Must be longer than --reap-every.
    #[arg(long, value_name = "DURATION", default_value = "9s", value_parser = crate::cli::reaper_flags::parse_grace)]
    pub reap_grace: std::time::Duration,
    /// With --reap: time between two reaper passes. A dead launcher's pods go within the Lease
    /// duration + --reap-grace + two of these (one pass to see its last renewal, one to act).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = crate::cli::reaper_flags::parse_period)]
    pub reap_every: std::time::Duration,
    /// Only record pods matching this label selector (e.g. "app=train,tier!=db").
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Hold every pod this recorder records (its namespace(s) and -l) with a finalizer, and
    /// remove it only once the pod's final state (phase, exit codes) is committed: a pod deleted
    /// while no recorder runs waits in Terminating until a recorder records it, however long
    /// that takes. The finalizer is podline.io/record (pods of `podline run --finalizer` carry it
    /// from their create), podline.io/record-SHARD with --shard (needed with -l: each label
    /// shard holds its pods with its own), podline.io/kfp-writer with --kfp. At each start the
    /// pods' metadata is listed once: pods in scope get the finalizer, pods waiting in
    /// Terminating are recorded and released, and pods outside the scope that carry this
    /// recorder's own finalizer lose it; other recorders' finalizers are never touched. A pod
    /// deleted that never reaches a final state (its node is gone) is released 2 minutes after
    /// its grace period, with what was recorded. Needs `patch` on pods (deploy/README.md). To
    /// uninstall: stop the recorders, then `podline gc --finalizers -A` (it removes every
    /// podline finalizer). Also PODLINE_FINALIZE=true.
    #[arg(long, env = "PODLINE_FINALIZE")]
    pub finalize: bool,
    /// This recorder is the label shard NAME (docs/scale-out.md): with --finalize it holds the
    /// pods of its -l with the finalizer podline.io/record-NAME, so no other shard's start can
    /// release them, and it also takes podline.io/record (`podline run --finalizer`'s) off the
    /// pods of its scope once they are recorded; with --leader-elect its Lease defaults to
    /// podline-recorder-NAME. 1 to 56 of a-z, 0-9 and '-'. Give each shard its own name and
    /// keep it when its -l changes. Also PODLINE_SHARD.
    #[arg(long, env = "PODLINE_SHARD", value_name = "NAME")]
    pub shard: Option<String>,
    /// Where to store records: a SQLite file path (or sqlite://PATH) or postgres://USER@HOST/DB.
    #[arg(
        long,
        env = "PODLINE_DB",
        hide_env_values = true,
        default_value = "podline.db",
        value_name = "DB"
    )]
    pub db: String,
    /// The label whose value names a pod's run (pods without it fall back to podline.io/run):
    /// a Kubernetes label key, `[DNS-subdomain/]name` with a name of at most 63 characters.
    #[arg(long, default_value = DEFAULT_RUN_LABEL, value_name = "LABEL")]
    pub run_label: String,
    /// Address for /metrics, /healthz and /readyz.
    #[arg(long, default_value = "127.0.0.1:9464", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Server-side watch timeout (timeoutSeconds): seconds ("1800") or a duration ("30m").
    /// Also PODLINE_WATCH_SERVER_TIMEOUT (K8S_WATCH_SERVER_SIDE_TIMEOUT with --kfp). Default 1800 s.
    #[arg(long, value_name = "DURATION")]
    pub watch_server_timeout: Option<String>,
    /// Client-side timeout bounding every wait (connect, LIST, each gap in the stream): seconds
    /// ("60") or a duration ("90s"); must be shorter than the server timeout.
    /// Also PODLINE_WATCH_CLIENT_TIMEOUT (K8S_WATCH_CLIENT_SIDE_TIMEOUT with --kfp). Default 60 s.
    #[arg(long, value_name = "DURATION")]
    pub watch_client_timeout: Option<String>,
    /// Run several replicas safely: compete for a Lease and record only while holding it
    /// (the others stand by, ready, and take over). Also PODLINE_LEADER_ELECT=true.
    #[arg(long, env = "PODLINE_LEADER_ELECT")]
    pub leader_elect: bool,
    /// The Lease to compete for with --leader-elect; one per shard. Default podline-recorder,
    /// or podline-kfp-writer with --kfp (so both modes can run in one namespace).
    #[arg(long, env = "PODLINE_LEASE_NAME", value_name = "NAME")]
    pub lease_name: Option<String>,
    /// Namespace of the Lease (default: $POD_NAMESPACE, else the context's namespace).
    #[arg(long, env = "POD_NAMESPACE", value_name = "NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// This replica's name in the Lease (default: $POD_NAME, else $HOSTNAME). Must be unique.
    #[arg(long, env = "POD_NAME", value_name = "NAME")]
    pub leader_identity: Option<String>,
    /// How long a Lease lasts without renewal: a standby takes over a dead leader's Lease after
    /// this long. Whole seconds ("15", "15s"). Default 15 s, as Kubernetes' own controllers.
    #[arg(
        long,
        env = "PODLINE_LEASE_DURATION",
        default_value = "15s",
        value_name = "DURATION",
        value_parser = crate::cli::duration::any
    )]
    pub leader_elect_lease_duration: std::time::Duration,
    /// A leader that could not renew for this long steps down (less than the lease duration).
    #[arg(
        long,
        env = "PODLINE_LEASE_RENEW_DEADLINE",
        default_value = "10s",
        value_name = "DURATION",
        value_parser = crate::cli::duration::any
    )]
    pub leader_elect_renew_deadline: std::time::Duration,
    /// How often replicas renew or try to take the Lease.
    #[arg(
        long,
        env = "PODLINE_LEASE_RETRY_PERIOD",
        default_value = "2s",
        value_name = "DURATION",
        value_parser = crate::cli::duration::any
    )]
    pub leader_elect_retry_period: std::time::Duration,
    /// Where records go: `store` (--db) or `mlmd`, ML Metadata as Kubeflow Pipelines'
    /// metadata-writer writes it (KFP mode, configured by KFP's environment variables:
    /// NAMESPACE_TO_WATCH, K8S_WATCH_SERVER_SIDE_TIMEOUT, K8S_WATCH_CLIENT_SIDE_TIMEOUT,
    /// POD_NAMESPACE, CLUSTER_DOMAIN, METADATA_GRPC_MAX_RECEIVE_MESSAGE_LENGTH,
    /// METADATA_TLS_ENABLED, CA_CERT_PATH).
    #[arg(long, value_enum, default_value_t = Sink::Store)]
    pub sink: Sink,
    /// Shorthand for `--sink mlmd`.
    #[arg(long)]
    pub kfp: bool,
    /// MLMD gRPC address for `--sink mlmd`; default
    /// metadata-grpc-service.<POD_NAMESPACE><CLUSTER_DOMAIN>:8080, like KFP.
    #[arg(long, env = "PODLINE_MLMD_ADDRESS", value_name = "HOST:PORT")]
    pub mlmd_address: Option<String>,
    /// With --kfp: pods written to MLMD at once (each pod's own writes stay in order).
    #[arg(long, env = "PODLINE_MLMD_WORKERS", default_value = "8",
          value_parser = clap::value_parser!(u16).range(1..=256), value_name = "N")]
    pub mlmd_workers: u16,
    #[command(flatten)]
    pub cluster: ClusterFlags,
}

/// The default Lease of the SQL recorder.
const RECORDER_LEASE: &str = "podline-recorder";
/// The default Lease of KFP mode.
const KFP_LEASE: &str = "podline-kfp-writer";

/// Where `podline record` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Sink {
    /// podline's store (SQLite or PostgreSQL, see --db).
    Store,
    /// ML Metadata over gRPC, as Kubeflow Pipelines' metadata-writer (KFP mode).
    Mlmd,
}

/// Runs the recorder until SIGTERM/Ctrl-C or a fatal watch error.
pub async fn run(args: RecordArgs) -> anyhow::Result<ExitCode> {
    if args.reap && args.reap_every >= args.reap_grace {
        // Passes further apart than the grace are gaps in the reaper's observation: each
        // restarts every Lease's clock, so nothing would ever be reaped.
        return Err(usage(format!(
            "--reap-every {:?} must be shorter than --reap-grace {:?}",
            args.reap_every, args.reap_grace
        )));
    }
    if args.kfp || args.sink == Sink::Mlmd {
        return run_kfp(args).await;
    }
    // Everything the user typed is validated before touching the network or the disk.
    let timeouts = match crate::cli::settings::watch_timeouts(
        args.watch_server_timeout.as_deref(),
        args.watch_client_timeout.as_deref(),
    ) {
        Ok(timeouts) => timeouts,
        Err(err) => return Err(usage(err)),
    };
    let connect_options = match connect_options(&args, timeouts.client) {
        Ok(options) => options,
        Err(err) => return Err(usage(err)),
    };
    let selector = match args
        .selector
        .as_deref()
        .map(LabelSelector::parse)
        .transpose()
    {
        Ok(selector) => selector,
        Err(err) => return Err(usage(err)),
    };
    let lifecycle = match check_run_label(&args.run_label)
        .and_then(|()| LifecycleConfig::new(&args.run_label).map_err(|e| e.to_string()))
    {
        Ok(lifecycle) => lifecycle,
        Err(err) => return Err(usage(format!("--run-label: {err}"))),
    };
    let db = match podline_store::DbTarget::parse(&args.db) {
        Ok(db) => db,
        Err(err) => return Err(usage(format!("--db: {err}"))),
    };
    let election = match election_plan(&args) {
        Ok(election) => election,
        Err(err) => return Err(usage(err)),
    };
    let finalize = match finalize_config(&args) {
        Ok(finalize) => finalize,
        Err(err) => return Err(usage(err)),
    };

    // Bound first: an address in use fails before anything is connected or created.
    let listener = podline_daemon::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on --listen {}", args.listen))?;
    let connected = connect(&connect_options).await?;
    let store = podline_store::open_with(
        &db,
        &podline_store::PoolSettings::for_read_write(db.backend()),
    )
    .await
    .with_context(|| format!("cannot open the store --db {db}"))?;

    let namespace = (!args.all_namespaces).then(|| connected.namespace.clone());
    let mut config = RecorderConfig::new(connected.cluster_url.to_string(), namespace.clone());
    config.selector = selector;
    config.timeouts = timeouts;
    config.lifecycle = lifecycle;
    let finalizer = finalize.as_ref().map(|f| f.finalizer.clone());
    config.finalize = finalize;
    tracing::info!(
        cluster = %connected.cluster_url,
        namespace = namespace.as_deref().unwrap_or("(all)"),
        db = %db,
        listen = %args.listen,
        finalize = args.finalize,
        finalizer = finalizer.as_deref().unwrap_or("(none)"),
        shard = args.shard.as_deref().unwrap_or("(none)"),
        server_timeout = ?timeouts.server,
        client_timeout = ?timeouts.client,
        http2_ping_interval = ?connect_options.http2_ping.interval,
        http2_ping_timeout = ?connect_options.http2_ping.timeout,
        "recording pods"
    );

    let shard_lease = args
        .shard
        .as_ref()
        .map(|shard| format!("{RECORDER_LEASE}-{shard}"));
    let election = match elector(
        election,
        &connected,
        shard_lease.as_deref().unwrap_or(RECORDER_LEASE),
    ) {
        Ok(election) => election,
        Err(err) => return Err(usage(err)),
    };

    let probe_every = config.store_probe_interval;
    let reaper = args.reap.then(|| {
        podline_launch::reaper::Reaper::new(
            connected.client.clone(),
            namespace.clone(),
            args.reap_grace,
        )
    });
    let recorder = Recorder::new(connected.client, store.clone(), config);
    let shutdown = CancellationToken::new();
    if let Some(reaper) = reaper {
        let (stop, every) = (shutdown.clone(), args.reap_every);
        tokio::spawn(async move { reaper.run(every, stop).await });
    }
    let health = recorder.health();
    let standby = Standby { store, probe_every };
    let daemon = Daemon {
        listener,
        health,
        shutdown,
        election,
        standby: Some(standby),
    };
    daemon.run(|token| recorder.run(token)).await
}

/// The finalizer settings of `--finalize` (`None` without it), checked before connecting: a
/// recorder with `-l` is a label shard and must be named (`--shard`), as its finalizer must be
/// its own. With the shared podline.io/record, each shard's start released the other shards'
/// pods (out of its scope) and a pod of a shard that was down went unrecorded (issue 27).
fn finalize_config(args: &RecordArgs) -> Result<Option<FinalizeConfig>, String> {
    let Some(shard) = &args.shard else {
        if args.finalize && args.selector.is_some() {
            return Err(
                "--finalize with -l/--selector needs --shard NAME: a recorder of a label scope \
                 holds its pods with its own finalizer podline.io/record-NAME, so that other \
                 recorders (other shards) never release them (expected a name unique to this \
                 shard, e.g. --shard team-a; see docs/scale-out.md)"
                    .to_owned(),
            );
        }
        return Ok(args.finalize.then(FinalizeConfig::default));
    };
    let config = FinalizeConfig::for_shard(shard).map_err(|err| format!("--shard: {err}"))?;
    Ok(args.finalize.then_some(config))
}

/// KFP mode: Argo pods into ML Metadata (podline_mlmd), with KFP's environment variables, the
/// SQL recorder's `/metrics`, `/healthz`, `/readyz`, graceful SIGTERM and `--leader-elect`.
async fn run_kfp(args: RecordArgs) -> anyhow::Result<ExitCode> {
    use podline_mlmd::kfp::{KfpEnv, Observability, mlmd_config, run_daemon};
    if args.shard.is_some() {
        return Err(usage(
            "--shard names a label shard of the store recorder; KFP mode records every Argo pod \
             of its namespace(s) with its own finalizer podline.io/kfp-writer (expected no \
             --shard with --kfp; shard KFP mode by namespace, see docs/scale-out.md)",
        ));
    }
    let mut env = match KfpEnv::from_env() {
        Ok(env) => env,
        Err(err) => return Err(usage(err)),
    };
    if args.all_namespaces {
        env.namespace_to_watch = None;
    }
    env.finalize = args.finalize;
    if let Err(err) = env.override_watch_timeouts(
        args.watch_server_timeout
            .as_deref()
            .map(|raw| ("--watch-server-timeout", raw)),
        args.watch_client_timeout
            .as_deref()
            .map(|raw| ("--watch-client-timeout", raw)),
    ) {
        return Err(usage(err));
    }
    let mlmd = match mlmd_config(&env, args.mlmd_address.as_deref()) {
        Ok(mlmd) => mlmd,
        Err(err) => return Err(usage(format!("--mlmd-address: {err}"))),
    };
    let connect_options = match connect_options(&args, env.client_side_timeout) {
        Ok(options) => options,
        Err(err) => return Err(usage(err)),
    };
    let election = match election_plan(&args) {
        Ok(election) => election,
        Err(err) => return Err(usage(err)),
    };
    // Bound first: an address in use fails before anything is connected or created.
    let listener = podline_daemon::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on --listen {}", args.listen))?;
    let connected = connect(&connect_options).await?;
    let election = match elector(election, &connected, KFP_LEASE) {
        Ok(election) => election,
        Err(err) => return Err(usage(err)),
    };
    let observability = Observability::new(env.client_side_timeout);
    let health = observability.health.clone();
    let kube = connected.client;
    let workers = usize::from(args.mlmd_workers);
    let daemon = Daemon {
        listener,
        health,
        shutdown: CancellationToken::new(),
        election,
        standby: None,
    };
    daemon
        .run(|token| run_daemon(kube, &env, &mlmd, &observability, workers, token))
        .await
}

/// The skeleton both recorder modes run in once bound and connected (one, so the two cannot
/// drift): `/healthz`, `/readyz` and `/metrics` served on `listener` from `health`, the one
/// SIGINT/SIGTERM handler cancelling `shutdown`, the work run alone or while this replica leads
/// (`election`), then the server stopped after the work.
struct Daemon {
    listener: tokio::net::TcpListener,
    health: Arc<Health>,
    /// Cancelled by a signal; also stops whatever the mode spawned on it (the reaper).
    shutdown: CancellationToken,
    election: Option<LeaderElector>,
    /// What a standby probes to report itself ready (the SQL store; `None` in KFP mode).
    standby: Option<Standby>,
}

impl Daemon {
    /// Serves and records until a signal (exit 0) or until `record` fails (its error).
    async fn run<F, Fut, E>(self, record: F) -> anyhow::Result<ExitCode>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let Daemon {
            listener,
            health,
            shutdown,
            election,
            standby,
        } = self;
        let server = tokio::spawn(podline_daemon::serve(
            listener,
            health.clone(),
            shutdown.clone(),
        ));
        tokio::spawn(cancel_on_signal(shutdown.clone()));
        let outcome = match election {
            None => record(shutdown.clone()).await.map_err(anyhow::Error::from),
            Some(elector) => run_as_leader(health, elector, standby, &shutdown, record).await,
        };
        shutdown.cancel();
        if let Ok(Err(err)) = server.await {
            tracing::warn!(error = %err, "metrics server failed");
        }
        outcome?;
        tracing::info!("stopped");
        Ok(ExitCode::SUCCESS)
    }
}

/// What `--leader-elect` needs, checked before connecting.
#[derive(Debug)]
struct ElectionPlan {
    identity: String,
    lease_name: Option<String>,
    lease_namespace: Option<String>,
    timing: ElectionConfig,
}

/// Checks the `--leader-elect*` and `--lease-*` flags (and `-n`, which names the namespace the
/// recorder watches and the Lease's default one); `None` without `--leader-elect`.
fn election_plan(args: &RecordArgs) -> Result<Option<ElectionPlan>, String> {
    if let Some(namespace) = &args.namespace.namespace {
        check_dns_label("--namespace", namespace)?;
    }
    if !args.leader_elect {
        return Ok(None);
    }
    let timing = election_config(args)?;
    let identity = args
        .leader_identity
        .clone()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default();
    if identity.is_empty() {
        return Err(
            "--leader-elect: this replica has no identity: set --leader-identity or POD_NAME \
             (expected a name unique among the replicas, e.g. the pod's name)"
                .to_owned(),
        );
    }
    if let Some(name) = &args.lease_name {
        check_dns_subdomain("--lease-name", name)?;
    }
    if let Some(namespace) = &args.lease_namespace {
        check_dns_label("--lease-namespace", namespace)?;
    }
    Ok(Some(ElectionPlan {
        identity,
        lease_name: args.lease_name.clone(),
        lease_namespace: args.lease_namespace.clone(),
        timing,
    }))
}

/// The leader elector for `--leader-elect` (`None` without it), on `--lease-name` or `lease`.
fn elector(
    plan: Option<ElectionPlan>,
    connected: &podline_client::connect::Connected,
    lease: &str,
) -> Result<Option<LeaderElector>, String> {
    let Some(plan) = plan else {
        return Ok(None);
    };
    LeaderElector::new(
        connected.client.clone(),
        plan.lease_namespace
            .unwrap_or_else(|| connected.namespace.clone()),
        plan.lease_name.unwrap_or_else(|| lease.to_owned()),
        plan.identity,
        plan.timing,
    )
    .map(Some)
    .map_err(|err| format!("--leader-elect: {err} (set --leader-identity or POD_NAME)"))
}

/// What a label key must look like, for `--run-label` errors.
const LABEL_KEY_EXPECTED: &str = "expected a Kubernetes label key: an optional DNS-subdomain \
     prefix and '/', then a name of 1 to 63 characters (letters, digits, '-', '_', '.'; a letter \
     or digit at both ends), e.g. workflows.argoproj.io/workflow or run";

/// Checks that `--run-label` is a label key Kubernetes accepts (a pod can carry no other), by the
/// launch library's label grammar (the one `run`'s `--label` keys are checked by), in the words
/// of this flag's errors.
fn check_run_label(key: &str) -> Result<(), String> {
    podline_launch::spec::validate_label_key("--run-label", key).map_err(|err| {
        let why = match err {
            podline_launch::SpecError::InvalidLabel { why, .. } => why.to_owned(),
            other => other.to_string(),
        };
        format!("{key:?} is not a valid label key: {why} ({LABEL_KEY_EXPECTED})")
    })
}

/// Why `value` is not an RFC 1123 label (a namespace name), if it is not one.
fn dns_label_problem(value: &str) -> Option<&'static str> {
    if value.is_empty() || value.len() > 63 {
        return Some("it must be 1 to 63 characters");
    }
    label_chars_problem(value)
}

/// Why `value` is not made of a-z, 0-9 and inner '-', if it is not.
fn label_chars_problem(value: &str) -> Option<&'static str> {
    if !value
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Some("it has characters other than a-z, 0-9 and '-'");
    }
    if value.starts_with('-') || value.ends_with('-') {
        return Some("it starts or ends with '-'");
    }
    None
}

/// Why `value` is not an RFC 1123 subdomain (a Lease name, a label key prefix), if it is not one.
fn dns_subdomain_problem(value: &str) -> Option<&'static str> {
    if value.is_empty() || value.len() > 253 {
        return Some("it must be 1 to 253 characters");
    }
    value.split('.').find_map(|part| {
        if part.is_empty() {
            Some("it has an empty part between dots")
        } else {
            label_chars_problem(part)
        }
    })
}

/// Checks a namespace flag.
fn check_dns_label(flag: &str, value: &str) -> Result<(), String> {
    match dns_label_problem(value) {
        None => Ok(()),
        Some(why) => Err(format!(
            "{flag} {value:?} is not a valid namespace name: {why} (expected lower-case a-z, 0-9 \
             and '-', starting and ending alphanumeric, at most 63 characters)"
        )),
    }
}

/// Checks a Lease name flag.
fn check_dns_subdomain(flag: &str, value: &str) -> Result<(), String> {
    match dns_subdomain_problem(value) {
        None => Ok(()),
        Some(why) => Err(format!(
            "{flag} {value:?} is not a valid Lease name: {why} (expected lower-case a-z, 0-9, '-' \
             and '.', starting and ending alphanumeric, at most 253 characters)"
        )),
    }
}

/// `--leader-elect`: stand by (ready, not recording) until this replica holds the Lease, then
/// `record` (the SQL recorder or KFP mode) until `shutdown` ([`LeaderElector::lead`]). Losing
/// the Lease ends the process with an error at once, without flushing, so only the new leader
/// writes; nothing is lost, as both modes' writes are idempotent and resume from what is stored,
/// and Kubernetes restarts the pod as a standby. On SIGTERM the leader flushes, then releases the
/// Lease so a standby takes over at once.
async fn run_as_leader<F, Fut, E>(
    health: Arc<Health>,
    elector: LeaderElector,
    standby_store: Option<Standby>,
    shutdown: &CancellationToken,
    record: F,
) -> anyhow::Result<()>
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    let standing_by = CancellationToken::new();
    let _stop_standing_by_on_exit = standing_by.clone().drop_guard();
    stand_by(&health, standby_store, &standing_by).await;
    elector
        .lead(shutdown, |token| {
            standing_by.cancel(); // the recorder reports its own readiness from here on
            health.set_watch_established(false);
            record(token)
        })
        .await?;
    Ok(())
}

/// A standby is ready while its store is writable and the election runs: it can take over.
/// Until `standing_by` is cancelled, its store is probed and the watch part of readiness kept
/// fresh. (KFP mode has no store of its own here: its MLMD connection is checked by its own loop.)
async fn stand_by(
    health: &Arc<Health>,
    standby_store: Option<Standby>,
    standing_by: &CancellationToken,
) {
    match standby_store {
        Some(standby) => {
            health.set_store_writable(standby.store.health().await.is_ok());
            tokio::spawn(health::probe_store(
                standby.store,
                health.clone(),
                standby.probe_every,
                standing_by.clone(),
            ));
        }
        None => health.set_store_writable(true),
    }
    health.set_watch_established(true);
    let (health, stop) = (health.clone(), standing_by.clone());
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => health.progress(),
            }
        }
    });
}

/// The election timing from the three `--leader-elect-*` flags (each parsed by clap), checked
/// together.
fn election_config(args: &RecordArgs) -> Result<ElectionConfig, String> {
    ElectionConfig::try_new(
        args.leader_elect_lease_duration,
        args.leader_elect_renew_deadline,
        args.leader_elect_retry_period,
    )
    .map_err(|err| format!("--leader-elect-*: {err}"))
}

/// What a standby needs to keep its readiness true to its store.
struct Standby {
    store: std::sync::Arc<dyn podline_store::StoreWrite>,
    probe_every: std::time::Duration,
}

/// The client options both recorder modes connect with: the cluster flags and -n, with the PING
/// and connect timeouts checked against the mode's client timeout (before anything connects).
fn connect_options(
    args: &RecordArgs,
    client_timeout: std::time::Duration,
) -> anyhow::Result<ConnectOptions> {
    args.cluster
        .connect_options(args.namespace.namespace.clone(), client_timeout)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Harness {
        #[command(flatten)]
        args: RecordArgs,
    }

    #[test]
    fn flags_parse_with_kubectl_spellings_and_defaults() {
        let h = Harness::try_parse_from(["x", "-A", "-l", "app=web", "--db", "/tmp/x.db"]).unwrap();
        assert!(h.args.all_namespaces);
        assert_eq!(h.args.selector.as_deref(), Some("app=web"));
        assert_eq!(h.args.db, "/tmp/x.db");
        assert_eq!(h.args.run_label, DEFAULT_RUN_LABEL);
        assert_eq!(
            h.args.listen,
            "127.0.0.1:9464".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(h.args.watch_client_timeout, None);
        let h = Harness::try_parse_from([
            "x",
            "--watch-client-timeout",
            "2s",
            "--watch-server-timeout",
            "30",
        ])
        .unwrap();
        assert_eq!(h.args.watch_client_timeout.as_deref(), Some("2s"));
        assert_eq!(h.args.sink, Sink::Store);
        let kfp =
            Harness::try_parse_from(["x", "--sink", "mlmd", "--mlmd-address", "h:1"]).unwrap();
        assert_eq!(kfp.args.sink, Sink::Mlmd);
        assert_eq!(kfp.args.mlmd_address.as_deref(), Some("h:1"));
        assert!(Harness::try_parse_from(["x", "--kfp"]).unwrap().args.kfp);
        assert!(!h.args.finalize, "--finalize is opt-in");
        assert!(
            Harness::try_parse_from(["x", "--finalize"])
                .unwrap()
                .args
                .finalize
        );
        assert_eq!(h.args.watch_server_timeout.as_deref(), Some("30"));
    }

    /// Issue 27: a `--finalize` recorder with `-l` must be a named shard, whose finalizer is
    /// its own; without `-l` it keeps podline.io/record; a bad name says what is expected.
    #[test]
    fn a_finalizing_label_shard_must_be_named_and_gets_its_own_finalizer() {
        let config = |argv: &[&str]| {
            let mut full = vec!["x"];
            full.extend_from_slice(argv);
            finalize_config(&Harness::try_parse_from(full).unwrap().args)
        };
        let err = config(&["--finalize", "-l", "shard=a"]).unwrap_err();
        assert!(err.contains("--shard NAME"), "{err}");
        let unsharded = config(&["--finalize"]).unwrap().unwrap();
        assert_eq!(unsharded.finalizer, "podline.io/record");
        assert_eq!(unsharded.adopt, None);
        let shard = config(&["--finalize", "-l", "shard=a", "--shard", "team-a"])
            .unwrap()
            .unwrap();
        assert_eq!(shard.finalizer, "podline.io/record-team-a");
        assert_eq!(shard.adopt.as_deref(), Some("podline.io/record"));
        assert!(config(&["-l", "shard=a"]).unwrap().is_none());
        assert!(config(&["--shard", "a"]).unwrap().is_none());
        let err = config(&["--finalize", "--shard", "Team_A"]).unwrap_err();
        assert!(err.starts_with("--shard: invalid shard name"), "{err}");
    }

    #[test]
    fn run_label_must_be_a_kubernetes_label_key() {
        let name63 = "a".repeat(63);
        let prefixed = format!("example.com/{name63}");
        for good in [
            "workflows.argoproj.io/workflow",
            "podline.io/run",
            "run",
            "A_b.c-9",
            name63.as_str(),
            prefixed.as_str(),
        ] {
            assert_eq!(check_run_label(good), Ok(()), "{good}");
        }
        let name64 = "a".repeat(64);
        for bad in [
            "",
            "/run",
            "a/b/c",
            "Example.com/run",
            "team/",
            "a b",
            "-run",
            "run.",
            name64.as_str(),
        ] {
            let err = check_run_label(bad).unwrap_err();
            assert!(
                err.contains("expected a Kubernetes label key"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn namespace_and_lease_names_are_checked_like_the_api_server() {
        assert_eq!(dns_label_problem("team-a"), None);
        assert!(dns_label_problem("Team").is_some());
        assert!(dns_label_problem(&"a".repeat(64)).is_some());
        assert_eq!(dns_subdomain_problem("podline-recorder.team-a"), None);
        assert!(dns_subdomain_problem("a..b").is_some());
        assert!(dns_subdomain_problem("recorder_1").is_some());
    }

    #[test]
    fn leader_election_flags_parse_with_defaults() {
        let h = Harness::try_parse_from(["x"]).unwrap();
        assert_eq!(h.args.lease_name, None, "the mode picks its default Lease");
        assert_eq!(
            usize::from(h.args.mlmd_workers),
            podline_mlmd::kfp::pipeline::DEFAULT_WORKERS
        );
        assert!(Harness::try_parse_from(["x", "--mlmd-workers", "0"]).is_err());
        assert_eq!(
            Harness::try_parse_from(["x", "--mlmd-workers", "32"])
                .unwrap()
                .args
                .mlmd_workers,
            32
        );
        let h = Harness::try_parse_from([
            "x",
            "--leader-elect",
            "--lease-name",
            "podline-recorder-team-a",
            "--lease-namespace",
            "podline",
            "--leader-identity",
            "recorder-0",
        ])
        .unwrap();
        assert!(h.args.leader_elect);
        assert_eq!(
            h.args.lease_name.as_deref(),
            Some("podline-recorder-team-a")
        );
        assert_eq!(h.args.lease_namespace.as_deref(), Some("podline"));
        assert_eq!(h.args.leader_identity.as_deref(), Some("recorder-0"));
        assert_eq!(
            election_config(&h.args).unwrap(),
            ElectionConfig::default(),
            "the flag defaults are the library's"
        );
        let fast = Harness::try_parse_from([
            "x",
            "--leader-elect-lease-duration",
            "3s",
            "--leader-elect-renew-deadline",
            "2s",
            "--leader-elect-retry-period",
            "500ms",
        ])
        .unwrap();
        let timing = election_config(&fast.args).unwrap();
        assert_eq!(timing.lease_duration(), std::time::Duration::from_secs(3));
        let bad = Harness::try_parse_from([
            "x",
            "--leader-elect-lease-duration",
            "3s",
            "--leader-elect-renew-deadline",
            "5s",
        ])
        .unwrap();
        let err = election_config(&bad.args).unwrap_err();
        assert!(err.contains("renew deadline"), "{err}");
        // A duration that does not parse is refused by clap, naming the flag and the value.
        let err = Harness::try_parse_from(["x", "--leader-elect-retry-period", "soon"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--leader-elect-retry-period") && err.contains("\"soon\""),
            "{err}"
        );
    }
}
