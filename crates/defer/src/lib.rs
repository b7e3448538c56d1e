//! A deferred launch, without Python: the two halves Airflow's deferrable operator splits a
//! task into.
//!
//! - [`start`]: the worker's half. Creates the task's pod with the launcher's guarantees
//!   (409/429/5xx retried with full-jitter backoff, a lost response adopted by launch id), or
//!   finds the task's live pod to reattach to, and returns what the waiting half needs
//!   ([`Started`]).
//! - [`Waiters`]: the triggerer's half. Every wait for a pod of one cluster and namespace in a
//!   process shares ONE watch (the launcher's `SharedPodWatches` over podline's watch core: no
//!   hang, resume without re-list, re-list on 410) and one connection; [`Waiters::wait`]
//!   resolves with the pod's [`Outcome`], judged on its base container.
//!
//! The Python extension (`podline-pyext`) exposes both to asyncio; this crate has no Python
//! in it so that its behaviour is tested against the sim in Rust.

pub mod clusters;
pub mod error;
pub mod outcome;
pub mod ownership;
pub mod results;
pub mod start;
pub mod waiters;

pub use clusters::{Cluster, ClusterKey, Clusters};
pub use error::DeferError;
pub use outcome::{Outcome, judge};
pub use start::{StartRequest, Started, start};
pub use waiters::{StartLimits, WaitOptions, Waiters};
