//! Finalizers (opt-in): the recorder holds every pod it records with a finalizer, so a pod
//! deleted while no recorder runs waits in Terminating, its final state intact, until a recorder
//! has committed that state; then the recorder takes the finalizer off and the API server lets
//! the pod go.
//! Kubernetes' Job controller does the same with `batch.kubernetes.io/job-tracking`.
//!
//! - [`decide`](mod@decide): the pure rule for adding, holding and releasing (and its safety valve);
//! - `config`: [`FinalizeConfig`], the settings;
//! - `running`: the recorder's side while it runs (decides per observed pod, arms the valve's
//!   timers, hands committed tickets to the worker);
//! - `worker`: the add/remove calls, off the watch's and the writer's paths, retried;
//! - `sweep`: once per start, the pods' metadata: adds to the pods in scope without the
//!   finalizer, releases pods out of scope (a selector changed), and feeds pods in scope that wait
//!   in Terminating into the normal path (their last event may be older than the resume point).
//!
//! The ordering that makes it safe: a release ticket is queued *after* the observation that
//! shows the pod's final state, rides through the same coalescing queue, and is handed to the
//! worker only after the store transaction that contains (or follows) that observation
//! committed. A crash anywhere in between leaves the finalizer on, and the next start's sweep
//! finds the pod again.

mod config;
pub mod decide;
mod running;
mod sweep;
mod worker;

/// Re-exported for the recorder: the ticket and the slim metadata are the queue's (see
/// `crate::ticket`), named here with the rest of the finalizer's parts.
pub(crate) use crate::ticket::{Ticket, slim};
pub use config::FinalizeConfig;
pub(crate) use running::Finalize;
pub(crate) use sweep::sweep;
