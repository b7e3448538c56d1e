//! The recorder: watches pods and writes their lifecycle into a store, losing no event and writing
//! nothing twice.
//!
//! The pieces, each in its own module:
//! - [`lifecycle`]: the pure mapping from a `Pod` to what is stored (transitions derived from the
//!   object itself, so nothing depends on seeing every event).
//! - [`metrics`]: the Prometheus metrics.
//! - [`health`]: `/metrics`, `/healthz` and `/readyz` over axum.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod error;
pub mod health;
pub mod lifecycle;
pub mod metrics;
mod queue;
pub mod reconcile;
pub mod recorder;
pub mod selector;

pub use error::{ObserveError, RecordError, SelectorError};
pub use health::Health;
pub use lifecycle::{LifecycleConfig, observe};
pub use metrics::Metrics;
pub use recorder::{Recorder, RecorderConfig};
pub use selector::LabelSelector;
/// Re-exported so callers of [`Recorder::run`] need no direct tokio-util dependency.
pub use tokio_util::sync::CancellationToken;
