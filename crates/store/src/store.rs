//! The store's two sides: [`StoreWrite`], what the recorder writes (and reads back of its own
//! writes) through, and [`StoreRead`], what queries and the UI read through. [`Store`] is both,
//! for the one implementation that is both ([`SqlStore`](crate::SqlStore)) and for callers that
//! open a store and hand each side to whoever needs it.
//!
//! Split so a wrapper (a test store that refuses or times writes) implements only the side it
//! wraps, and a reader is handed nothing that writes.

use futures::future::BoxFuture;
use jiff::Timestamp;

use crate::error::StoreError;
use crate::failures::{FailureFilter, FailureGroup};
use crate::model::{ApplyReport, Batch, ResumePoint, StoreOp};
use crate::records::{
    Changes, Counts, LivePod, LiveScope, MigrationReport, PodFilter, PodKey, PodRecord, RunFilter,
    RunSummary,
};

/// The writer's side of a pod lifecycle store: what the recorder needs, including what it
/// reads back of its own writes (its resume point, the pods it believes live, a pod's last
/// recorded state). Dyn-compatible, so the recorder holds one `Arc<dyn StoreWrite>` whatever
/// the backend (SQLite, PostgreSQL, or a future sink such as MLMD).
///
/// Contract every implementation keeps (the integration tests check it for each backend):
/// - [`apply`](StoreWrite::apply) is one transaction: ops and resume point commit together or
///   not at all;
/// - re-applying any batch changes nothing (idempotent), and an older or equal resourceVersion
///   never overwrites newer data (monotonic);
/// - transitions are unique per `(uid, phase)`, first time wins;
/// - a deletion is recorded once and never undone by a stale upsert.
pub trait StoreWrite: Send + Sync {
    /// Which backend this is (`sqlite`, `postgres`), for logs and metric labels.
    fn backend(&self) -> &'static str;

    /// Brings the schema to the version this build expects. Idempotent; run on every start.
    fn migrate(&self) -> BoxFuture<'_, Result<MigrationReport, StoreError>>;

    /// Applies a batch in one transaction, with its resume point. On error nothing was written;
    /// retry the same batch if [`StoreError::is_retryable`].
    fn apply<'a>(&'a self, batch: &'a Batch) -> BoxFuture<'a, Result<ApplyReport, StoreError>>;

    /// The stored resume point of a watch, to restart it without a relist or a gap.
    fn resume_point<'a>(
        &'a self,
        watch_key: &'a str,
    ) -> BoxFuture<'a, Result<Option<ResumePoint>, StoreError>>;

    /// Pods the store believes still exist in `scope`: after a relist, those missing from the
    /// list vanished in the gap and go to [`mark_vanished`](StoreWrite::mark_vanished).
    fn live_pods<'a>(
        &'a self,
        scope: &'a LiveScope,
    ) -> BoxFuture<'a, Result<Vec<LivePod>, StoreError>>;

    /// The last recorded state of the pod with this uid, or `None` if the store never saw it:
    /// the recorder reads it back to settle a pod that vanished while it held a finalizer.
    /// Same answer as [`StoreRead::pod`] with [`PodKey::Uid`].
    fn last_recorded<'a>(
        &'a self,
        uid: &'a str,
    ) -> BoxFuture<'a, Result<Option<PodRecord>, StoreError>>;

    /// Marks pods deleted with their final state unknown. Returns how many were newly marked
    /// (already-deleted pods are left alone). Same as applying `StoreOp::Vanished` ops.
    fn mark_vanished<'a>(
        &'a self,
        uids: &'a [String],
        at: Timestamp,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let batch = Batch::new(
                uids.iter()
                    .map(|uid| StoreOp::Vanished {
                        uid: uid.clone(),
                        at,
                    })
                    .collect(),
            );
            Ok(self.apply(&batch).await?.deletions_recorded)
        })
    }

    /// Proves the store is writable right now (a real write), for `/readyz`. Bounded in time
    /// (`PoolSettings::health_timeout` for the SQL store): a hung database reports an error.
    fn health(&self) -> BoxFuture<'_, Result<(), StoreError>>;
}

/// The readers' side of a pod lifecycle store: what queries (`podline runs`, `pods`, `show`),
/// the UI and the audit read. Nothing here writes.
pub trait StoreRead: Send + Sync {
    /// Runs (pods grouped by the run label), most recently created first.
    fn runs<'a>(
        &'a self,
        filter: &'a RunFilter,
    ) -> BoxFuture<'a, Result<Vec<RunSummary>, StoreError>>;

    /// Pods matching `filter`, most recently created first, with containers and transitions.
    fn pods<'a>(
        &'a self,
        filter: &'a PodFilter,
    ) -> BoxFuture<'a, Result<Vec<PodRecord>, StoreError>>;

    /// One pod with its timeline, or `None` if the store never saw it.
    fn pod<'a>(&'a self, key: &'a PodKey) -> BoxFuture<'a, Result<Option<PodRecord>, StoreError>>;

    /// Failed pods matching `filter`, grouped by why they failed (see
    /// [`classify_failure`](crate::classify_failure)): the failures view.
    fn failures<'a>(
        &'a self,
        filter: &'a FailureFilter,
    ) -> BoxFuture<'a, Result<Vec<FailureGroup>, StoreError>>;

    /// Pods written after `since` (at most `limit`, oldest write first) and the newest write
    /// mark: one indexed query, cheap enough for a live page to poll every second. `since:
    /// None` returns only the mark, the starting point of a live page.
    fn changes(
        &self,
        since: Option<Timestamp>,
        limit: u32,
    ) -> BoxFuture<'_, Result<Changes, StoreError>>;

    /// Totals, for summaries and metrics.
    fn counts(&self) -> BoxFuture<'_, Result<Counts, StoreError>>;
}

/// Both sides of a pod lifecycle store, as [`open`](crate::open) returns it: the binary opens
/// one and hands the recorder its [`StoreWrite`] side and queries its [`StoreRead`] side
/// (an `Arc<dyn Store>` coerces to either). Implemented for everything that is both.
pub trait Store: StoreWrite + StoreRead {}

impl<T: StoreWrite + StoreRead + ?Sized> Store for T {}
