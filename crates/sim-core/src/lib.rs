//! The sim's cluster, without HTTP: what `podline sim` serves and runs, for the API server in
//! `podline-sim` (which adds the HTTP API, the faults and the transport on top) and for tests
//! that drive the cluster directly.
//!
//! # Map
//! - [`cluster`]: the object store. One [`Table`](cluster::Table) per resource kind holding each
//!   object as its serialized JSON, one resourceVersion clock, bounded watch history, the
//!   ground-truth ledger of every pod, and the pod write path the kubelet follows.
//! - [`kinds`]: one unit per resource kind ([`kinds::ApiKind`]): its table, its admission
//!   (defaults and validation), its special cases, and its kubectl printer columns.
//! - [`delete`]: deletion as kube-apiserver's generic registry does it (graceful pod deletion,
//!   finalizers, propagation policies), shared by the API and the controllers.
//! - [`kubelet`]: the simulated kubelet and scheduler (one node; scripted or exec containers).
//! - [`logs`]: per-container logs the kubelet writes and the API's log endpoint reads.
//! - [`controllers`]: the parts of kube-controller-manager the API's behaviour rests on (garbage
//!   collector, namespace deletion, node lifecycle, disruption budgets), each a task following
//!   the cluster's tables.
//! - The vocabulary under them: [`status::ApiError`] (a failed call as its `Status`),
//!   [`validation`] (apimachinery's rules and wording), [`part::Part`], [`quantity`],
//!   [`version`].
//!
//! Nothing here speaks HTTP: Cargo keeps it so (this crate has no HTTP dependency), and the
//! API server reaches the cluster only through these modules' public items.

pub mod cluster;
pub mod controllers;
pub mod delete;
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
