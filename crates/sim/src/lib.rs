//! An embedded, fault-injecting Kubernetes API server (pods, events, leases, watch, logs) with a
//! simulated kubelet, faithful enough to the real kube-apiserver that kubectl and kube-rs use it
//! as they would a cluster.
//!
//! # Overview
//! - [`Sim`] is the running server: [`Sim::start`] binds 127.0.0.1 (HTTPS with a fresh CA by
//!   default), requires a bearer token, and gives you a URL and a kubeconfig.
//! - [`Cluster`] is the object store behind it: one resourceVersion clock, a bounded watch
//!   history per resource, and the write path that keeps the [ground truth](Sim::ground_truth).
//! - The kubelet ([`kubelet`]) moves pods through their phases and writes their logs.
//! - Faults ([`FaultRule`]) make requests fail the way real servers and networks do: Status
//!   answers, latency, stalls, resets in the middle of a chunk, early ends, commit-then-drop;
//!   plus [`Sim::restart`] and [`Sim::compact`].
//! - [`app`] is the whole API as an axum router, for in-process tests.
//!
//! # Layout
//! Modules depend one way (`tests/sim/layering.rs` keeps it so): the vocabulary (`status`,
//! `error`, [`audit`], `counts`, [`logs`]) under [`cluster`] (state) and [`kubelet`]; [`api`]
//! (handlers) on the cluster; [`fault`] (a layer over the handlers) on the API; `app` (the
//! router) on both; [`server`] (transport), `config` and `gc` on top. Nothing names a module above
//! it: the API reaches its server through [`api::Transport`], the fault layer a request's
//! connection through [`fault::Connection`].
//!
//! # Example
//! ```no_run
//! # async fn demo() -> Result<(), podline_sim::SimError> {
//! use podline_sim::{FaultAction, FaultRule, FaultVerb, Sim, SimConfig};
//!
//! let sim = Sim::start(SimConfig::default().tls(false)).await?;
//! // Every second pod create answers the quota-style 409 Conflict.
//! sim.faults().push(
//!     FaultRule::new(FaultAction::status(409))
//!         .verb(FaultVerb::Create)
//!         .resource("pods")
//!         .probability(0.5),
//! );
//! std::fs::write("sim.kubeconfig", sim.kubeconfig_yaml())?;
//! // ... point a client at it, then check what really happened:
//! let creates = sim.counts().get("create", "pods");
//! let pods = sim.ground_truth();
//! # let _ = (creates, pods);
//! sim.shutdown().await;
//! # Ok(()) }
//! ```

pub mod api;
mod app;
pub mod audit;
mod config;
mod counts;
mod error;
pub mod fault;
pub mod server;
mod status;

pub use podline_sim_core::{cluster, kubelet, logs};

pub use api::{AppState, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_MAX_REQUEST_BODY};
pub use app::app;
pub use audit::AuditEntry;
pub use cluster::{ChangeKind, Cluster, DEFAULT_WATCH_BUFFER, PodChange, PodHistory, PodRef};
pub use config::{
    DEFAULT_BOOKMARK_INTERVAL, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_HISTORY_MAX_EVENTS,
    DEFAULT_HISTORY_WINDOW, DEFAULT_IDLE_TIMEOUT, SimConfig,
};
pub use counts::RequestCounts;
pub use error::SimError;
pub use fault::{FaultAction, FaultHandle, FaultPlan, FaultRule, FaultVerb};
pub use kubelet::KubeletConfig;
pub use server::Sim;
pub use status::ApiError;
