//! How a recorder with finalizers works: the settings, with their defaults.

use std::time::Duration;

use podline_client::backoff::FullJitter;
use podline_client::finalizer::RECORD_FINALIZER;

/// How a recorder with finalizers works. Build with [`FinalizeConfig::default`].
#[derive(Debug, Clone)]
pub struct FinalizeConfig {
    /// The finalizer (default [`RECORD_FINALIZER`]). Two independent consumers of the same pods
    /// (say a store recorder and a KFP writer) need one each, or one would release pods the
    /// other has not recorded.
    pub finalizer: String,
    /// The safety valve: a pod being deleted that never shows a final state is released this
    /// long after its deletionTimestamp (the end of its grace period). Default 2 minutes.
    pub margin: Duration,
    /// Add/remove calls in flight at most (default 8).
    pub workers: usize,
    /// Delays between retries of a failed call (default 200 ms doubling to 30 s).
    pub backoff: FullJitter,
}

impl Default for FinalizeConfig {
    fn default() -> Self {
        // Proven invariant: base > 0, cap >= base, factor >= 1.
        #[allow(clippy::unwrap_used)]
        let backoff =
            FullJitter::try_new(Duration::from_millis(200), Duration::from_secs(30), 2.0).unwrap();
        Self {
            finalizer: RECORD_FINALIZER.to_owned(),
            margin: Duration::from_secs(120),
            workers: 8,
            backoff,
        }
    }
}
