//! KFP mode: what Kubeflow Pipelines' v1 metadata-writer does, done right.
//!
//! - [`pod`]: classify a pod (skip rules) and read what is recorded
//!   ([`KfpPod`]), from [`argo`] (template, URIs, outputs) and [`component`]
//!   (component spec, parameters). Pure.
//! - [`writer`]: [`KfpWriter`] records a [`KfpPod`] into MLMD idempotently.
//! - [`sink`]: [`KfpSink`] turns pod events into records and pod markers,
//!   waiting out MLMD outages, and cancels executions of vanished pods;
//!   [`stats`]: [`SinkStats`], the counters it and the releaser count into.
//! - [`pipeline`]: [`pipeline::run`] drives the sink from a pod watch through
//!   [`queue`], a per-pod keyed work queue of slim [`PodSnapshot`]s, with
//!   parallel workers.
//! - [`patch`]: the labels and annotations written back on the pod.
//! - [`finalize`]: the finalizer that holds a pod until its final state is in
//!   MLMD, and the pure rules of when it goes on and comes off; [`release`]
//!   takes it off in the background.
//! - [`daemon`]: [`run_daemon`], KFP mode as the recorder's daemon runs it,
//!   reporting into the SQL recorder's health and metrics ([`Observability`]).
//! - [`config`]: [`KfpEnv`], the writer's environment variables, strictly parsed.
//! - [`keys`]: the label/annotation names of the contract.
//! - [`fixture`]: KFP-shaped pods for tests, demos and benchmarks.

pub mod argo;
pub mod component;
pub mod config;
pub mod daemon;
pub mod finalize;
pub mod fixture;
pub mod keys;
pub mod patch;
pub mod pipeline;
pub mod pod;
pub mod queue;
pub mod release;
pub mod sink;
pub mod stats;
pub mod writer;

pub use config::{EnvError, KfpEnv};
pub use daemon::{KfpError, Observability, mlmd_config, run_daemon};
pub use finalize::KFP_FINALIZER;
pub use patch::PodPatch;
pub use pipeline::{PipelineConfig, run};
pub use pod::{KfpPod, Skip, Warning, classify};
pub use queue::PodSnapshot;
pub use sink::{KfpSink, Outcome, SinkConfig};
pub use stats::SinkStats;
pub use writer::{KfpWriter, Recorded, Written};
