//! The recorder: watches pods and writes their lifecycle into a store, losing no event and writing
//! nothing twice.
//!
//! Depends on podline-client (the watch), podline-store (the records) and podline-daemon
//! (health, metrics); it must not depend on the launcher, the sim or the binary.
//!
//! It is what Kubeflow's metadata-writer should have been: a list+watch that resumes from the last
//! resourceVersion (never re-lists on a routine reconnect), a store write path that never makes
//! the watch wait, and a resume point committed in the same transaction as the data it covers, so
//! a restart (even `kill -9`) neither skips nor repeats anything.
//!
//! The pieces, each in its own module:
//! - [`recorder`]: [`Recorder`] — the watch task, the coalescing queue and the writer task;
//! - [`lifecycle`]: the pure mapping from a `Pod` to what is stored (transitions derived from the
//!   object itself, so nothing depends on seeing every event; no env values ever copied);
//! - [`reconcile`]: after a relist, pods the store believes live but the list lacks are marked
//!   vanished (deleted, final state unknown);
//! - [`selector`]: `-l` label selectors, parsed once and evaluated on stored labels;
//! - [`finalize`]: with a finalizer on every recorded pod, a pod deleted while no recorder runs
//!   waits in Terminating until its final state is committed (opt-in);
//! - `ticket`: the release ticket the queue carries behind a pod's observation to the
//!   finalizer worker (the reason is public as [`finalize::decide::ReleaseReason`]);
//! - [`metrics`]: the recorder's own counters (skipped objects, finalizers), registered next to
//!   the watch, queue and write metrics every daemon exports;
//! - [`health`]: the store's part of readiness, probed while the recorder is idle.
//!
//! What an operator sees (`/metrics`, `/healthz`, `/readyz` and the server for them) is
//! `podline-daemon`'s, shared with KFP mode: [`Recorder::health`] is the handle to serve.
//!
//! ```no_run
//! use podline_record::{CancellationToken, Recorder, RecorderConfig};
//!
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let store = podline_store::open("podline.db").await?;
//! let config = RecorderConfig::new("https://my-cluster:6443", Some("default".to_owned()));
//! let recorder = Recorder::new(client, store, config);
//! let listener = podline_daemon::bind("127.0.0.1:9464".parse()?).await?;
//! let shutdown = CancellationToken::new();
//! tokio::spawn(podline_daemon::serve(listener, recorder.health(), shutdown.clone()));
//! // Returns Ok after `shutdown.cancel()` (queue flushed), Err only on what no retry can fix.
//! recorder.run(shutdown).await?;
//! # Ok(())
//! # }
//! ```

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod error;
pub mod finalize;
pub mod health;
pub mod lifecycle;
pub mod metrics;
mod queue;
pub mod reconcile;
pub mod recorder;
pub mod selector;
mod ticket;

pub use error::{ObserveError, RecordError, SelectorError};
pub use finalize::FinalizeConfig;
pub use lifecycle::{LifecycleConfig, observe};
pub use metrics::RecorderMetrics;
/// Re-exported: the readiness state a [`Recorder`] reports into (`podline-daemon`'s).
pub use podline_daemon::Health;
/// Re-exported: the metrics a [`Recorder`] serves (`podline-daemon`'s, with
/// [`RecorderMetrics`] registered in them).
pub use podline_daemon::Metrics;
pub use recorder::{Recorder, RecorderConfig};
pub use selector::LabelSelector;
/// Re-exported so callers of [`Recorder::run`] need no direct tokio-util dependency.
pub use tokio_util::sync::CancellationToken;
