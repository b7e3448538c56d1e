//! podline's Kubernetes client core: retry policy, full-jitter backoff, bounded timeouts and a
//! watch that never hangs.
//!
//! The launcher (`podline run`) and the recorder (`podline record`) share this crate, so both
//! retry the same errors the same way and both survive the same faults.
//!
//! - [`backoff`]: full-jitter exponential backoff ([`backoff::FullJitter`]), usable by backon,
//!   plus [`backoff::ResetAfterHealthy`] for long-running loops.
//! - [`retry`]: [`retry::classify`] says whether an error is worth retrying (a pure table), and
//!   [`retry::retry`] retries a call with a bounded, logged [`retry::RetryPolicy`].
//!
//! ```no_run
//! use podline_client::retry::{retry, RetryPolicy};
//! # async fn demo(api: kube::Api<k8s_openapi::api::core::v1::Pod>, pod: k8s_openapi::api::core::v1::Pod) -> Result<(), kube::Error> {
//! let policy = RetryPolicy::default();
//! let params = kube::api::PostParams::default();
//! let created = retry(&policy, "create pod", || api.create(&params, &pod)).await?;
//! # Ok(()) }
//! ```

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod backoff;
pub mod connect;
pub mod error;
pub mod retry;
pub mod timeouts;

pub use error::InvalidBackoff;
