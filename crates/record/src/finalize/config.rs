//! How a recorder with finalizers works: the settings, with their defaults.

use std::time::Duration;

use podline_client::backoff::FullJitter;
use podline_client::finalizer::{RECORD_FINALIZER, ShardNameError, shard_finalizer};

/// How a recorder with finalizers works. Build with [`FinalizeConfig::default`] (an unsharded
/// recorder) or [`FinalizeConfig::for_shard`].
#[derive(Debug, Clone)]
pub struct FinalizeConfig {
    /// The finalizer this recorder holds pods with and is the only one to release: its scope's
    /// own (default [`RECORD_FINALIZER`]). Recorders of different scopes (label shards) need
    /// one each, or one's start-up sweep would release the pods the other has not recorded; two
    /// independent consumers of the same pods (a store recorder and a KFP writer) too.
    pub finalizer: String,
    /// A finalizer put on pods by someone who cannot know their scope (the launcher's
    /// [`RECORD_FINALIZER`]), which a sharded recorder counts as a hold on the
    /// pods *of its own scope* and takes off with its own once their final state is committed.
    /// It is never added by this recorder and never released from a pod outside its scope.
    /// `None` for an unsharded recorder (its own finalizer is that one).
    pub adopt: Option<String>,
    /// The safety valve: a pod being deleted that never shows a final state is released this
    /// long after its deletionTimestamp (the end of its grace period). Default 2 minutes.
    pub margin: Duration,
    /// Add/remove calls in flight at most (default 8).
    pub workers: usize,
    /// Delays between retries of a failed call (default 200 ms doubling to 30 s).
    pub backoff: FullJitter,
}

impl FinalizeConfig {
    /// The settings of the recorder shard `shard`: it holds pods with
    /// `podline.io/record-<shard>` and adopts [`RECORD_FINALIZER`] on the pods of its scope.
    pub fn for_shard(shard: &str) -> Result<Self, ShardNameError> {
        Ok(Self {
            finalizer: shard_finalizer(shard)?,
            adopt: Some(RECORD_FINALIZER.to_owned()),
            ..Self::default()
        })
    }

    /// The finalizers this recorder may take off a pod of its scope: its own, then the adopted
    /// one.
    pub fn releases(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.finalizer.as_str()).chain(self.adopt.as_deref())
    }
}

impl Default for FinalizeConfig {
    fn default() -> Self {
        let backoff =
            const { FullJitter::doubling(Duration::from_millis(200), Duration::from_secs(30)) };
        Self {
            finalizer: RECORD_FINALIZER.to_owned(),
            adopt: None,
            margin: Duration::from_secs(120),
            workers: 8,
            backoff,
        }
    }
}
