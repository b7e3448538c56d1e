//! Why a reader could not open a SQLite store: when SQLite cannot create the shared-memory file
//! next to a WAL-mode database (the directory is not writable), the driver's error says only
//! "unable to open"; [`explain_unreadable`] turns it into [`StoreError::SharedMemory`], which
//! says what to do.

use crate::error::StoreError;
use crate::target::{DbTarget, Redacted};

/// A read-only SQLite open that failed because SQLite cannot create the `-shm` file (the
/// directory is not writable) as [`StoreError::SharedMemory`]; anything else unchanged.
pub(super) fn explain_unreadable(target: &DbTarget, err: StoreError) -> StoreError {
    let DbTarget::Sqlite { path } = target else {
        return err;
    };
    let StoreError::Query { source, .. } = &err else {
        return err;
    };
    let sqlx::Error::Database(db) = source else {
        return err;
    };
    // CANTOPEN (14), READONLY_CANTINIT (8 | 5 << 8), READONLY_DIRECTORY (8 | 6 << 8): the
    // -shm file could not be made.
    let code = db.code().and_then(|code| code.parse::<i64>().ok());
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.clone());
    let Some(dir) = absolute.parent() else {
        return err;
    };
    // The file exists (a reader checks first), so an open failing with no -shm file next to
    // it is SQLite failing to create that file.
    let mut shm = absolute.clone().into_os_string();
    shm.push("-shm");
    if !matches!(code, Some(14 | 1288 | 1544)) || std::path::Path::new(&shm).exists() {
        return err;
    }
    let shown = |p: &std::path::Path| Redacted::new(&p.to_string_lossy()).to_string();
    StoreError::SharedMemory {
        path: shown(&absolute),
        dir: shown(dir),
        detail: db.message().to_owned(),
    }
}
