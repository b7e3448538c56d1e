//! The sim's cluster, without HTTP: what `podline sim` serves and runs, for the API server in
//! `podline-sim` (which adds the HTTP API, the faults and the transport on top) and for tests
//! that drive the cluster directly. Modeled on kube's `kube-core` / `kube-client` split: the
//! state and its rules here, the wire in the crate above.
//!
//! # Crate map
//! Lowest first; a module names only modules above it in this list (the workspace's
//! no-module-cycle test, crates/testkit/tests/no_module_cycles.rs, reads this crate too).
//!
//! - The vocabulary: [`status`] ([`ApiError`]: a failed call as the `Status` kube-apiserver
//!   sends; `podline-sim` renders it as an HTTP answer), [`validation`] (apimachinery's rules
//!   and wording), [`part::Part`] (main resource or `status`), [`quantity`] (resource
//!   quantities in canonical form), [`version`] (the Kubernetes version the sim reports) and
//!   [`logs`] (per-container logs the kubelet writes and the API's log endpoint reads, with
//!   kubelet's `sinceTime`/`tailLines`/`timestamps`).
//! - [`cluster`]: the object store. [`Cluster`] holds one [`Table`](cluster::Table) per
//!   resource kind (each object as its serialized JSON plus the few facts selectors need), one
//!   resourceVersion clock, the bounded watch history and live fan-out of each table, the
//!   ground-truth ledger of every pod, and the pod write path ([`Cluster::write_pod`]) the
//!   kubelet follows. [`cluster::Kind`] is what a stored kind must provide.
//! - [`kinds`]: one unit per resource kind behind [`kinds::ApiKind`] (its table and its
//!   admission: defaults and validation on create, what an update may change); pods
//!   (`kinds/pod`: defaults, QoS class, what a pod update may change) and disruption budgets
//!   have modules of their own. Their kubectl printer columns are the API's
//!   (`podline-sim`'s `api/table.rs`).
//! - [`delete`]: deletion as kube-apiserver's generic registry does it (preconditions, graceful
//!   pod deletion, finalizers, propagation policies), shared by the API and the controllers.
//! - [`controllers`]: the parts of kube-controller-manager the API's behaviour rests on
//!   (garbage collector, namespace deletion, node lifecycle, disruption budgets), each a task
//!   following the cluster's tables; [`controllers::spawn_all`] starts those that run for the
//!   cluster's life.
//! - [`kubelet`]: the simulated kubelet and scheduler on one node (scripted or exec
//!   containers, taints and tolerations, the node's heartbeat Lease), driven by the pod table's
//!   changes and writing through [`Cluster::write_pod`]. It names the node lifecycle
//!   controller's taint, nothing else above the cluster.
//!
//! Nothing here speaks HTTP: Cargo keeps this crate from naming `podline-sim`, and
//! `tests/no_http.rs` keeps HTTP crates out of its dependency graph.

pub mod cluster;
pub mod controllers;
pub mod delete;
pub mod go_time;
pub mod kinds;
pub mod kubelet;
pub mod logs;
pub mod part;
pub mod quantity;
pub mod status;
pub mod validation;
pub mod version;

pub use cluster::{ChangeKind, Cluster, DEFAULT_WATCH_BUFFER, PodChange, PodHistory, PodRef};
pub use kubelet::KubeletConfig;
pub use status::ApiError;
