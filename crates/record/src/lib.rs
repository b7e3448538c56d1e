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
#[allow(dead_code)] // wired into the recorder once the watch and store crates land
mod queue;
mod store_shim;

pub use error::ObserveError;
pub use health::Health;
pub use lifecycle::{LifecycleConfig, observe};
pub use metrics::Metrics;
