//! Kubeflow compatibility for podline: an ML Metadata (MLMD) gRPC client and
//! a drop-in, correct replacement for Kubeflow Pipelines' v1 `metadata-writer`.
//!
//! Depends on podline-client (the watch) and podline-daemon (health, metrics); it must not
//! depend on the SQL recorder or store (podline-record, podline-store).
//!
//! - [`client`]: [`MlmdClient`], a typed tonic client for the part of
//!   `ml_metadata.MetadataStoreService` podline uses ([`proto`] holds the
//!   hand-written wire messages, specified by `proto/mlmd_subset.proto`).
//! - [`kfp`]: KFP mode. Pure parsing and mapping of Argo/KFP pods
//!   (skip rules, `ARGO_TEMPLATE`, `component_spec`, URIs, outputs), the
//!   environment configuration with KFP's names and defaults, and the writer
//!   that records pods into MLMD idempotently, and the daemon that runs it.
//! - `test_server` (feature `test-server`, for tests and benchmarks only): the real MLMD (the `ml-metadata` PyPI package behind
//!   `tests/mlmd_server.py`) as a child process, for tests and benchmarks.
//!
//! ```no_run
//! # async fn demo() -> Result<(), podline_mlmd::MlmdError> {
//! use podline_mlmd::{MlmdClient, MlmdClientConfig, proto};
//! let client = MlmdClient::new(&MlmdClientConfig::new("127.0.0.1", 8080))?;
//! let types = client.get_context_types(proto::GetContextTypesRequest {}).await?;
//! println!("{} context types", types.context_types.len());
//! # Ok(()) }
//! ```

pub mod client;
pub mod error;
pub mod kfp;
pub mod proto;
#[cfg(feature = "test-server")]
pub mod test_server;

pub use client::{MlmdClient, MlmdClientConfig, MlmdTls};
pub use error::MlmdError;
