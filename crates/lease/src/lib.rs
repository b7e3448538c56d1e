//! Leader election on a `coordination.k8s.io/v1` Lease, so several replicas of the recorder can
//! run for availability while only one of them writes.
//!
//! Depends on podline-client only (the sim and testkit in its tests); it knows nothing of what
//! the leader does, so it must not depend on the recorder or the store.
//!
//! # How it works
//! Every replica runs a [`LeaderElector`] on the same Lease with its own identity (its pod name).
//! The loop is client-go's, written small: followers poll the Lease every `retry_period` and take
//! it (a conditional update guarded by `resourceVersion`, so two followers can't both win) once it
//! is free, or once its record has not changed for `lease_duration` on the follower's own clock.
//! Unlike client-go, followers also watch the Lease, so they see each renewal when it is written
//! rather than at their next poll: a dead leader is replaced within the lease duration of its
//! death, and a released lease is taken at once. Polling remains the fallback.
//! The leader renews every `retry_period`; if it can't renew within `renew_deadline` (shorter
//! than the lease) it steps down *before* any follower may take over. On SIGTERM it clears the
//! Lease so the next leader starts at once. See [`ElectionConfig`] for the timing argument.
//!
//! - [`LeaderElector`]: what to compete for, and as whom; [`LeaderElector::lead`] runs work
//!   only while this replica leads (the loop a leader-elected daemon needs: stand by, work, stop
//!   the work when leadership is lost, release on shutdown), [`LeaderElector::run`] just starts
//!   the election.
//! - [`Ended`] and [`LeadError`]: how [`LeaderElector::lead`] ended.
//! - [`Leadership`]: the running election: [`Leadership::is_leader`], a `watch` receiver,
//!   [`Leadership::release`] for shutdown.
//! - [`ElectionConfig`]: the three durations, validated together.
//!
//! Why not `kube-lease-manager`: it takes the lease with server-side apply and relies on the
//! server's field-manager conflict detection, which our fault-injecting sim does not model; and
//! it exposes no "renew deadline" after which a leader steps down before its lease can expire.
//! This loop needs only get/create/update on one Lease, which every API server (and the sim)
//! serves the same way.
//!
//! # Example
//! ```no_run
//! # async fn record(stop: tokio_util::sync::CancellationToken) -> Result<(), std::io::Error> { Ok(()) }
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use podline_lease::{ElectionConfig, Ended, LeaderElector};
//! use tokio_util::sync::CancellationToken;
//!
//! let elector = LeaderElector::new(client, "podline", "podline-recorder", "recorder-0", ElectionConfig::default())?;
//! let shutdown = CancellationToken::new(); // cancelled on SIGTERM
//! // `record` starts only once this replica holds the Lease, is dropped if it loses it, and is
//! // asked to finish (its token cancelled) on shutdown; then the Lease is released.
//! match elector.lead(&shutdown, |stop| record(stop)).await? {
//!     Ended::ShutdownBeforeLeading => println!("stopped while standing by"),
//!     Ended::WorkFinished(()) => println!("recorded, flushed, released"),
//!     _ => {}
//! }
//! # Ok(())
//! # }
//! ```

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod backend;
mod config;
mod decide;
mod elector;
mod error;
mod lead;
mod leadership;
mod record;

pub use config::ElectionConfig;
pub use elector::{LeaderElector, takeover_bound};
pub use error::{CallError, ConfigError, ElectionError};
pub use lead::{Ended, LeadError};
pub use leadership::Leadership;

#[cfg(test)]
mod tests;
