//! KFP mode: what Kubeflow Pipelines' v1 metadata-writer does, done right.
//!
//! - [`pod`]: classify a pod (skip rules) and read what is recorded
//!   ([`KfpPod`]), from [`argo`] (template, URIs, outputs) and [`component`]
//!   (component spec, parameters). Pure.
//! - [`writer`]: [`KfpWriter`] records a [`KfpPod`] into MLMD idempotently.
//! - [`sink`]: [`KfpSink`] turns pod events into records and pod markers,
//!   waiting out MLMD outages; [`run`] drives it from a pod watch.
//! - [`patch`]: the labels and annotations written back on the pod.
//! - [`daemon`]: [`run_daemon`], KFP mode as `podline record --sink mlmd` runs it.
//! - [`config`]: [`KfpEnv`], the writer's environment variables, strictly parsed.
//! - [`keys`]: the label/annotation names of the contract.
//! - [`fixture`]: KFP-shaped pods for tests, demos and benchmarks.

pub mod argo;
pub mod component;
pub mod config;
pub mod daemon;
pub mod fixture;
pub mod keys;
pub mod patch;
pub mod pod;
pub mod sink;
pub mod writer;

pub use config::{EnvError, KfpEnv};
pub use daemon::{KfpError, mlmd_config, run_daemon};
pub use patch::PodPatch;
pub use pod::{KfpPod, Skip, Warning, classify};
pub use sink::{KfpSink, Outcome, SinkConfig, SinkStats, run};
pub use writer::{KfpWriter, Recorded};
