//! The pod lifecycle store: idempotent, monotonic records of what every pod did, in SQLite (the
//! embedded default) or PostgreSQL (scale-out).
//!
//! Depends on no other podline crate and has no Kubernetes types: it must stay usable by the
//! UI and queries without a cluster client.
//!
//! The recorder watches pods, maps each version into a [`PodObservation`] (this crate has no
//! Kubernetes types) and writes [`Batch`]es through the [`StoreWrite`] trait. Queries (`podline
//! runs`, `pods`, `show`) and the UI read [`PodRecord`]s and [`RunSummary`]s back through
//! [`StoreRead`]. [`Store`] is both sides, as [`open`] returns it.
//!
//! What the store guarantees, whatever order or how often ops arrive:
//! - **One transaction per batch**, including the watch's [`ResumePoint`]: after a crash (even
//!   `kill -9`) the stored position always matches the stored data, so the watch resumes with no
//!   gap and nothing applied twice.
//! - **Idempotent and monotonic**: pods are keyed by uid; an older or equal resourceVersion never
//!   overwrites newer data; transitions are unique per `(uid, phase)`, first time wins; a deletion
//!   is recorded once and a stale upsert never undoes it.
//! - **Errors say whether to retry** ([`StoreError::is_retryable`]): a lost PostgreSQL connection
//!   or a busy SQLite file is retried by the caller with backoff; the pool reconnects.
//! - **Any text is stored exactly.** Every free-text value (names, phases, reasons, messages,
//!   images, the watch key) is escaped on write and unescaped on read, losslessly: NUL (U+0000)
//!   is stored as `␀0`, the escape character `␀` (U+2400) as `␀␀`, everything else unchanged. So
//!   a termination message full of NULs is neither refused (PostgreSQL forbids NUL in TEXT) nor
//!   cut (SQLite stopped at it), and no content makes a batch fail. Labels and annotations are
//!   stored as JSON, which writes NUL as `\u0000`. Tools reading the tables directly see the
//!   escaped form; migration 3 escaped the `␀` of rows written before.
//! - **A SQLite file that stops being writable is survived**: a full disk, a read-only file
//!   system or an I/O error is [`StoreError::Disk`] ("database disk is full (SQLITE_FULL) at
//!   PATH"), retryable, and the connections that saw it are replaced, so the first retry after
//!   the disk recovers succeeds; a database file deleted while open is noticed before the next
//!   write and re-created and migrated (its old content is gone with it; a warning says so).
//!
//! Main types: [`DbTarget`] (parses a store target), [`open`] (connect + migrate), [`SqlStore`]
//! (the one SQL implementation, both backends through sqlx's `Any` driver), [`StoreWrite`] and
//! [`StoreRead`] (the traits).
//!
//! ```no_run
//! use podline_store::{Batch, PodObservation, PhaseTransition, StoreOp, StoreWrite, open};
//!
//! # async fn demo() -> Result<(), podline_store::StoreError> {
//! let store = open("podline.db").await?; // or "postgres://user@host/db"
//! let now = jiff::Timestamp::now();
//! let pod = PodObservation {
//!     uid: "0b7c...".into(),
//!     namespace: "default".into(),
//!     name: "train-1".into(),
//!     resource_version: 42,
//!     phase: "Running".into(),
//!     transitions: vec![PhaseTransition::new("Pending", now), PhaseTransition::new("Running", now)],
//!     ..Default::default()
//! };
//! let batch = Batch::new(vec![StoreOp::Upsert(pod)]).with_resume("cluster/default", 42);
//! store.apply(&batch).await?; // applying it again changes nothing
//! assert_eq!(store.resume_point("cluster/default").await?.unwrap().resource_version, 42);
//! # Ok(())
//! # }
//! ```

#[cfg(feature = "bench")]
pub mod bench;
mod disk_fault;
mod error;
mod failures;
mod model;
mod plan;
mod records;
mod sql;
mod store;
mod target;

use std::sync::Arc;

pub use disk_fault::DiskFault;
pub use error::StoreError;
pub use failures::{
    FailedPod, Failure, FailureFilter, FailureGroup, IMAGE_PULL_REASONS,
    classify as classify_failure, group as group_failures,
};
pub use model::{
    ApplyReport, Batch, ContainerObservation, ContainerState, PhaseTransition, PodObservation,
    RejectedOp, ResumePoint, StoreOp,
};
pub use records::{
    ChangedPod, Changes, Counts, LivePod, LiveScope, MigrationReport, PodFilter, PodKey, PodRecord,
    RunFilter, RunStatus, RunSummary,
};
pub use sql::{PoolSettings, SqlStore};
pub use store::{Store, StoreRead, StoreWrite};
pub use target::{Backend, DbTarget, Redacted};

/// Opens the store named by a target (path, `sqlite://`, `postgres://`), runs migrations,
/// and returns it ready for the recorder and queries. The one call the binary needs.
pub async fn open(db: &str) -> Result<Arc<dyn Store>, StoreError> {
    let target = DbTarget::parse(db)?;
    open_with(&target, &PoolSettings::for_read_write(target.backend())).await
}

/// Opens a store for reading only (the UI, queries): nothing is created, migrated or written,
/// and only the read side is handed out. See [`SqlStore::connect_read_only`].
pub async fn open_read_only(db: &str) -> Result<Arc<dyn StoreRead>, StoreError> {
    let store =
        SqlStore::connect_read_only(&DbTarget::parse(db)?, &PoolSettings::default()).await?;
    Ok(Arc::new(store))
}

/// [`open`] with an already parsed target and explicit pool settings.
pub async fn open_with(
    target: &DbTarget,
    settings: &PoolSettings,
) -> Result<Arc<dyn Store>, StoreError> {
    let store = SqlStore::connect(target, settings).await?;
    let report = store.migrate().await?;
    tracing::debug!(
        db = %target,
        from = report.from_version,
        to = report.to_version,
        "store ready"
    );
    Ok(Arc::new(store))
}
