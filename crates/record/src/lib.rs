//! The recorder: watches pods and writes their lifecycle into a store, losing no event and writing
//! nothing twice.
//!
//! The pieces, each in its own module:
//! - [`lifecycle`]: the pure mapping from a `Pod` to what is stored (transitions derived from the
//!   object itself, so nothing depends on seeing every event).

pub mod error;
pub mod lifecycle;
mod store_shim;

pub use error::ObserveError;
pub use lifecycle::{LifecycleConfig, observe};
