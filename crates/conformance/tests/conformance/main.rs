//! kube-apiserver 1.32's behaviour, one test per statement, run against the target of
//! [`podline_conformance::Target`]: the sim by default, a real cluster when
//! `PODLINE_CONFORMANCE_KUBECONFIG` is set.
//!
//! A test marked `#[ignore = "sim gap: ..."]` states a behaviour the sim does not have yet (see
//! docs/sim.md); it runs against a cluster with `--run-ignored all`, and its marker goes when
//! the sim learns it.

mod config_kinds;
mod deletes;
mod exec;
mod openapi;
mod pods;
mod query;
mod reads;
mod requests;
mod storage;
mod subresources;
mod watch;
mod writes;
