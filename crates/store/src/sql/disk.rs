//! Surviving a SQLite file that stops being writable: a full disk, a file system remounted
//! read-only, an I/O error, or the file deleted (or replaced) while open.
//!
//! SQLite keeps an open file per connection, and a connection that hit one of these can stay
//! unusable after the cause is gone (the recorder then retried forever on dead connections
//! until restarted). So the read-write SQLite store:
//! - reports the fault as [`StoreError::Disk`] naming it and the file ("database disk is full
//!   (SQLITE_FULL) at /var/lib/podline.db"), always retryable;
//! - marks every connection opened before the fault stale: the pool closes them instead of
//!   handing them out again (`before_acquire`), so the next attempt runs on a fresh connection
//!   and succeeds as soon as the disk does;
//! - checks before each write that the path still names the file it opened (device and inode).
//!   A deleted file is re-created and migrated (a replaced one just migrated), loudly: the data
//!   of the old file is gone with it, but the recorder goes on recording instead of writing into
//!   an unlinked inode nobody can read.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::disk_fault::DiskFault;
use crate::error::StoreError;

/// The identity of a file: device and inode on Unix (existence elsewhere).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    #[cfg(unix)]
    dev: u64,
    #[cfg(unix)]
    ino: u64,
}

fn file_id(path: &Path) -> Option<FileId> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some(FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        Some(FileId {})
    }
}

/// Shared between a read-write SQLite store and its pool's `before_acquire` hook.
#[derive(Debug)]
pub(crate) struct DiskGuard {
    path: PathBuf,
    /// The file the connections opened; `None` until known.
    opened: Mutex<Option<FileId>>,
    /// When the last fault was seen: connections older than that are closed, not reused.
    stale_before: Mutex<Option<Instant>>,
    /// The schema must be (re)created before the next write: the file was deleted or replaced.
    migrate: AtomicBool,
}

impl DiskGuard {
    /// A guard for the SQLite file at `path` (as the store was given it).
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            opened: Mutex::new(None),
            stale_before: Mutex::new(None),
            migrate: AtomicBool::new(false),
        }
    }

    /// The file, for error messages.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether a pooled connection opened `age` ago may be used: not if a fault came since.
    pub(crate) fn keeps(&self, age: Duration) -> bool {
        let Ok(stale) = self.stale_before.lock() else {
            return true;
        };
        match *stale {
            // Opened at now - age; stale if that is not after the fault.
            Some(fault) => Instant::now().checked_sub(age).is_some_and(|t| t > fault),
            None => true,
        }
    }

    /// Every connection opened until now is to be replaced.
    fn retire_connections(&self) {
        if let Ok(mut stale) = self.stale_before.lock() {
            *stale = Some(Instant::now());
        }
    }

    /// Records `fault`: every connection opened until now is to be replaced.
    pub(crate) fn fault(&self, fault: DiskFault) {
        self.retire_connections();
        if matches!(fault, DiskFault::Moved | DiskFault::CantOpen) {
            self.migrate.store(true, Ordering::Relaxed);
        }
    }

    /// Remembers the file the first connection opened.
    pub(crate) fn opened(&self) {
        if let Ok(mut opened) = self.opened.lock() {
            *opened = file_id(&self.path);
        }
    }

    /// Before a write: whether the path still names the opened file. If not (deleted, moved,
    /// replaced), the connections are marked stale and the schema is to be created again. A
    /// deleted file's `-wal` and `-shm` are removed too: they belong to the deleted database,
    /// and a new file opened next to them would replay the old database's pages into itself.
    pub(crate) fn check_file(&self) {
        let now = file_id(&self.path);
        let Ok(mut opened) = self.opened.lock() else {
            return;
        };
        if *opened == now {
            return;
        }
        match (*opened, now) {
            (None, Some(_)) => {
                // Not known yet (or re-created by the last migration): remember it.
                *opened = now;
                return;
            }
            (_, None) => {
                for suffix in ["-wal", "-shm"] {
                    let mut side = self.path.clone().into_os_string();
                    side.push(suffix);
                    let _ = std::fs::remove_file(PathBuf::from(side));
                }
                tracing::error!(
                    db = %self.path.display(),
                    "the database file was deleted while podline had it open: re-creating it \
                     empty; everything recorded in the deleted file is gone with it"
                );
            }
            (Some(_), Some(_)) => tracing::warn!(
                db = %self.path.display(),
                "the database file was replaced while podline had it open: reopening it"
            ),
        }
        *opened = None;
        drop(opened);
        self.fault(DiskFault::Moved);
    }

    /// Takes the "migrate before writing" flag.
    pub(crate) fn take_migrate(&self) -> bool {
        self.migrate.swap(false, Ordering::Relaxed)
    }

    /// The schema is in place again: remember the file it is in (or retry the migration).
    pub(crate) fn migrated(&self, ok: bool) {
        if ok {
            self.opened();
        } else {
            self.migrate.store(true, Ordering::Relaxed);
        }
    }

    /// `err` as a [`StoreError::Disk`] if its driver error is a disk fault (recording it, so
    /// the connections are replaced); otherwise unchanged.
    pub(crate) fn classify(&self, err: StoreError) -> StoreError {
        let fault = match &err {
            StoreError::Query { source, .. }
            | StoreError::Unavailable { source, .. }
            | StoreError::Migrate { source, .. } => DiskFault::of(source),
            _ => None,
        };
        let Some(fault) = fault else {
            // A connection whose failed COMMIT/ROLLBACK left sqlx believing it is still inside
            // a transaction refuses every BEGIN with this: without replacing it the store
            // answered "no usable database connection" until restarted.
            if let StoreError::Unavailable {
                source: sqlx::Error::InvalidSavePointStatement,
                ..
            } = &err
            {
                self.retire_connections();
            }
            return err;
        };
        self.fault(fault);
        let (op, source) = match err {
            StoreError::Query { op, source } | StoreError::Unavailable { op, source } => {
                (op, source)
            }
            StoreError::Migrate { source, .. } => ("migrate", source),
            other => return other,
        };
        StoreError::Disk {
            op,
            fault,
            path: self.path.display().to_string(),
            source,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_should_retire_older_connections_only() {
        let dir = tempfile::tempdir().unwrap();
        let guard = DiskGuard::new(dir.path().join("x.db"));
        assert!(guard.keeps(Duration::from_secs(3600)));
        guard.fault(DiskFault::Full);
        assert!(!guard.keeps(Duration::from_millis(1)), "opened before");
        std::thread::sleep(Duration::from_millis(5));
        assert!(guard.keeps(Duration::ZERO), "opened after");
        assert!(!guard.take_migrate(), "a full disk loses no table");
        guard.fault(DiskFault::Moved);
        assert!(guard.take_migrate());
    }

    #[test]
    fn a_connection_stuck_in_a_transaction_should_be_retired() {
        let dir = tempfile::tempdir().unwrap();
        let guard = DiskGuard::new(dir.path().join("x.db"));
        let err = guard.classify(StoreError::Unavailable {
            op: "apply",
            source: sqlx::Error::InvalidSavePointStatement,
        });
        assert!(matches!(err, StoreError::Unavailable { .. }), "{err:?}");
        assert!(err.is_retryable());
        assert!(
            !guard.keeps(Duration::from_millis(1)),
            "replaced, not reused"
        );
        assert!(!guard.take_migrate());
        // Other errors change nothing.
        let dir2 = tempfile::tempdir().unwrap();
        let other = DiskGuard::new(dir2.path().join("y.db"));
        let err = other.classify(StoreError::Query {
            op: "apply",
            source: sqlx::Error::RowNotFound,
        });
        assert!(matches!(err, StoreError::Query { .. }), "{err:?}");
        assert!(other.keeps(Duration::from_secs(60)));
    }
}
