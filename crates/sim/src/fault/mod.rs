//! Fault injection, a layer over the API's handlers: declarative rules ([`plan`]) held live by a
//! [`FaultHandle`] and changeable at runtime (Rust, or `/_sim/faults` over HTTP: [`control`]),
//! applied by a middleware ([`layer`]) to every resource request. The faults that act on the
//! transport reach it through [`Connection`] and [`ResetStream`], which the server implements
//! and honours, so this module never names the server.

pub mod control;
mod handle;
pub mod layer;
pub mod plan;
mod transport;

pub use handle::FaultHandle;
pub use plan::{FaultAction, FaultPlan, FaultRule, FaultVerb, MalformField};
pub use transport::{Connection, ResetStream};
