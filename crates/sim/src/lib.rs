//! An embedded, fault-injecting Kubernetes API server (pods, events, leases, watch, logs) with a
//! simulated kubelet, faithful enough to the real kube-apiserver that kubectl and kube-rs use it
//! as they would a cluster.
//!
//! # Overview
//! - [`Sim`] is the running server: [`Sim::start`] binds 127.0.0.1 (HTTPS with a fresh CA by
//!   default), requires a bearer token, and gives you a URL and a kubeconfig.
//! - [`Cluster`] is the object store behind it: one resourceVersion clock, a bounded watch
//!   history per resource, and the write path that keeps the [ground truth](Sim::ground_truth).
//!   It lives in the crate `podline-sim-core` (re-exported here as [`cluster`], with
//!   [`kubelet`] and [`logs`]), which has no HTTP in it.
//! - The kubelet ([`kubelet`]) moves pods through their phases and writes their logs.
//! - Faults ([`FaultRule`]) make requests fail the way real servers and networks do: Status
//!   answers, latency, stalls, resets in the middle of a chunk, early ends, commit-then-drop;
//!   plus [`Sim::restart`] and [`Sim::compact`].
//! - [`app`] is the whole API as an axum router, for in-process tests.
//!
//! # The request path
//! What a request meets, in order, and where each step is (the answer goes back through the
//! same steps outwards):
//!
//! 1. **Listener** (`server/mod.rs`, `accept_loop`): accepts the TCP connection and spawns
//!    `serve_connection` for it.
//! 2. **Connection** (`server/mod.rs`, `serve_connection`; `server/conn.rs`): registers the
//!    connection ([`server::ConnCtl`], so restarts, resets and freezes are real TCP events), does
//!    the TLS handshake (`server/tls.rs`, ALPN `h2` then `http/1.1`), serves HTTP/2 or HTTP/1.1
//!    with kube-apiserver's limits and timeouts (`server/timer.rs`: the header and idle timers),
//!    and puts the connection into each request's extensions as a [`fault::Connection`]. It
//!    then calls the router [`app`] (`app.rs`), which stacks the layers below.
//! 3. **Probes** (`api/front.rs`, `probes`): `/healthz`, `/livez`, `/readyz` and `/version`
//!    answer here, without a token.
//! 4. **Authentication** (`api/front.rs`, `authenticate`): 401 without the bearer token.
//! 5. **Classification** (`api/front.rs`, `classify_and_count`): parses the method, path and
//!    query into an [`api::RequestInfo`] (`api/request_info.rs`: verb, group, version,
//!    resource, subresource, namespace, name, as kube-apiserver's RequestInfoFactory does),
//!    attaches it, counts resource requests ([`RequestCounts`]) and, on the way back, audits
//!    them ([`audit`]).
//! 6. **Fault layer** (`fault/layer.rs`, `fault_layer`): the [`FaultPlan`]'s rules are matched
//!    against the `RequestInfo` (`fault/plan.rs`, through the shared [`FaultHandle`]); a match
//!    answers a Status itself, delays, or lets the request through and then stalls, cuts,
//!    ends early or corrupts the answer's body, or kills, freezes or resets the connection or
//!    the stream through [`fault::Connection`] (`fault/transport.rs`). The `/_sim/faults`
//!    routes that edit the plan are `fault/control.rs`.
//! 7. **Negotiation** (`api/table.rs`, `negotiate`): for a GET asking for `as=Table` or
//!    `PartialObjectMetadata` (kubectl), converts the JSON answer (each watch event too) on its
//!    way out, with each kind's printer columns.
//! 8. **Routes** (`api/mod.rs`, `routes`): discovery (`api/discovery.rs`), OpenAPI
//!    (`api/openapi/`), the `/_sim` control endpoints (`api/control.rs`), and for every other
//!    path the resource dispatcher.
//! 9. **Dispatch** (`api/resources.rs`, `dispatch`): picks the kind from the `RequestInfo`'s
//!    group, version and resource and calls the generic handler `handle::<K>` for it
//!    ([`podline_sim_core::kinds::ApiKind`]); it routes on the subresource and verb.
//! 10. **Per-kind handler** (`api/resources.rs`: get, list, create, replace, delete,
//!     deletecollection; `api/patch.rs` and `api/apply.rs`: patches and server-side apply;
//!     `api/watch.rs`: watch; `api/logs.rs`: pod logs; `api/binding.rs`, `api/eviction.rs`:
//!     pod subresources; `api/namespaces.rs`, `api/delete.rs`: the HTTP side of deletion):
//!     reads the body (`api/body.rs`, bounded in size and time; `api/decode.rs` with
//!     `fieldValidation`, `api/protobuf.rs`), parses the query (`api/query.rs`,
//!     `api/selector.rs`, `api/filter.rs`), admits the object through its kind's
//!     `admit_create`/`admit_update` (defaults and validation, in sim-core's `kinds`), and
//!     answers JSON (`api/respond.rs`) or an [`ApiError`] as its `Status` (`status.rs`).
//! 11. **Cluster store** ([`podline_sim_core::cluster`]): the handler reads a
//!     [`Table`](cluster::Table)'s snapshot, or writes through `Table::write` (pods through
//!     [`Cluster::write_pod`], which also feeds the kubelet and the ground truth; deletions
//!     through [`podline_sim_core::delete`]). A write takes the next resourceVersion from the
//!     shared clock under the table's lock, serializes the object once into a watch-event line,
//!     keeps it in the table and the bounded history, and broadcasts it.
//! 12. **Watch fan-out** (sim-core's `cluster/table.rs`, `Table::start_watch`; this crate's
//!     `api/watch.rs`): a watch starts from its resourceVersion (replaying the history, or 410
//!     Expired in-stream when it is gone) and then receives each broadcast event, the same
//!     reference-counted bytes for every watcher; it filters them by its selectors, sends
//!     bookmarks, and ends at its timeout. The kubelet and the controllers
//!     ([`podline_sim_core::controllers`]) follow the same tables, and their writes come back
//!     to every watcher the same way.
//!
//! The answer then goes back out: negotiation converts it, the fault layer may change its body,
//! classification audits it, and `server/stream.rs` sends it (or resets its HTTP/2 stream when
//! the fault layer marked it [`server::ResetStream`]), counting the stream open until its body
//! ends.
//!
//! # Layout
//! The cluster (state, kinds, kubelet, logs, controllers) is the crate `podline-sim-core`,
//! which cannot name this crate (Cargo forbids the cycle) and speaks no HTTP
//! (`crates/sim-core/tests/no_http.rs`). This crate's modules depend one way
//! (`tests/sim/layering.rs` keeps it so): the vocabulary (`status`, `error`, [`Verb`], [`audit`],
//! `counts`) under [`api`] (handlers); [`fault`] (a layer over the handlers) on the API; `app`
//! (the router) on both; [`server`] (transport) and `config` on top. Nothing names a module above
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
mod verb;

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
pub use verb::Verb;
