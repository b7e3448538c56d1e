//! What every podline daemon serves for operators: `/healthz`, `/readyz` and Prometheus
//! `/metrics`, on one small HTTP server.
//!
//! Both daemons of `podline record` (the SQL recorder, `podline-record`, and KFP mode,
//! `podline-mlmd`) are the same pipeline: a pod watch feeding a queue that a writer drains into a
//! sink (a SQL store, or ML Metadata). This crate holds what an operator sees of that pipeline,
//! so each daemon only reports into it:
//! - [`Health`]: the readiness state machine. Ready while the watch is established and making
//!   progress and the sink is writable; [`Health::readiness`] says what is wrong otherwise.
//! - [`Metrics`]: the Prometheus registry every part of a daemon registers into, with the
//!   pipeline's own metrics (watch events, reconnects, relists, queue depth, writes, sink errors)
//!   that both daemons export under the same names. A daemon adds its own through
//!   [`Metrics::with_extra`] (the recorder its finalizer counters, KFP mode its `kfp_` ones).
//! - [`server`]: [`router`], [`bind`] and [`serve`] (graceful shutdown on a token).
//!
//! # What it must not depend on
//! No store, no recorder, no Kubernetes client, no CLI: the daemons depend on this crate, never
//! the other way round, and a daemon that writes somewhere new (as KFP mode writes MLMD) reuses it
//! without pulling in the others. Whatever is specific to one sink (the SQL store's periodic
//! probe, for instance) lives in that daemon's crate and reports through [`Health`].
//!
//! # Example
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use podline_daemon::{Health, Metrics};
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let metrics = Arc::new(Metrics::new());
//! // An idle watch reconnects every client timeout (60 s): twice that without progress is a stall.
//! let health = Arc::new(Health::new(metrics, Duration::from_secs(120)));
//! // Bind first, so an address in use fails before anything else starts.
//! let listener = podline_daemon::bind("127.0.0.1:0".parse().unwrap()).await?;
//! let shutdown = CancellationToken::new();
//! let server = tokio::spawn(podline_daemon::serve(listener, health.clone(), shutdown.clone()));
//!
//! // The pipeline reports as it goes; /readyz answers 200 once all three hold.
//! health.set_watch_established(true);
//! health.set_store_writable(true);
//! health.metrics().event("apply");
//! assert!(health.readiness().is_ready());
//!
//! shutdown.cancel();
//! server.await.expect("the server task")?;
//! # Ok(())
//! # }
//! ```

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod health;
pub mod metrics;
pub mod server;

pub use health::{Health, Readiness};
pub use metrics::Metrics;
pub use server::{bind, router, serve};
