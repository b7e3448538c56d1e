//! Error types of the client core (the watch has its own, in `watch::error`).

use std::time::Duration;

/// A backoff configuration that cannot work, rejected by
/// [`FullJitter::try_new`](crate::backoff::FullJitter::try_new) instead of being silently clamped.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidBackoff {
    /// A zero base would make every envelope zero: a busy loop.
    #[error("backoff base must be greater than zero")]
    ZeroBase,
    /// The cap bounds every delay, so it cannot be below the first one.
    #[error("backoff cap ({cap:?}) must be at least the base ({base:?})")]
    CapBelowBase {
        /// The configured base.
        base: Duration,
        /// The configured cap.
        cap: Duration,
    },
    /// A factor below 1 would shrink delays; NaN or infinity make no envelope at all.
    #[error("backoff factor must be a finite number >= 1, got {0}")]
    Factor(f64),
}
