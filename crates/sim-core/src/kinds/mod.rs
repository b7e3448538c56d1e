//! One unit per resource kind: [`ApiKind`] (in `api_kind.rs`, with the impls of the kinds that
//! need no more) is how the API's generic handlers reach a kind's table and admission; a kind
//! with more to it has its own module ([`pod`], `disruption_budget`, `secret`, `config_map`,
//! [`service_account`], [`priority_class`], [`storage_class`], [`volume_claim`]).
//!
//! The trait is defined in a child of this module, not here, so the kinds' modules name a
//! sibling, not their parent (the workspace's no-module-cycle test counts a child naming its
//! parent's items as a cycle).

mod api_kind;
mod config_map;
mod disruption_budget;
pub mod pod;
pub mod priority_class;
mod secret;
pub mod service_account;
pub mod storage_class;
pub mod volume_claim;

pub use api_kind::ApiKind;
