//! Store errors, classified so the recorder knows whether to retry ([`StoreError::is_retryable`]).

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store target (as the user gave it) is not something we can open.
    #[error(
        "invalid database {value:?}: {reason} (expected a file path, sqlite://PATH, or postgres://USER@HOST/DB)"
    )]
    InvalidTarget {
        /// The value as given (passwords redacted).
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A reader was pointed at a SQLite file that does not exist (readers never create one: a
    /// typo must not leave an empty store behind and report "no runs").
    #[error("the SQLite store {path} does not exist (a reader never creates one)")]
    Missing {
        /// The file looked for, absolute.
        path: String,
    },
    /// A reader could not open a SQLite store in WAL mode because it cannot create the
    /// shared-memory file next to it (`<file>-shm`): the directory is not writable for this
    /// user (a read-only mount, another owner). SQLite needs that file even to read.
    #[error(
        "cannot read the SQLite store {path}: it is in WAL mode, and even a reader must create \
         {path}-shm next to it, but the directory {dir} is not writable for this user; make the \
         directory writable, run as a user who may write there, or copy the store (with its \
         -wal file) to a writable directory ({detail})"
    )]
    SharedMemory {
        /// The database file.
        path: String,
        /// Its directory.
        dir: String,
        /// What SQLite said.
        detail: String,
    },
    /// Connecting to the database failed.
    #[error("cannot open {target}")]
    Connect {
        /// Which database (passwords redacted).
        target: String,
        /// Driver error.
        #[source]
        source: sqlx::Error,
    },
    /// A schema migration failed; the database is left at the previous version.
    #[error("schema migration {version} ({description}) failed")]
    Migrate {
        /// Migration version that failed.
        version: i64,
        /// What the migration does.
        description: &'static str,
        /// Driver error.
        #[source]
        source: sqlx::Error,
    },
    /// The database was migrated by a newer podline than this one.
    #[error(
        "database schema version {found} is newer than this podline understands ({known}); upgrade podline"
    )]
    SchemaTooNew {
        /// Version found in the database.
        found: i64,
        /// Newest version this build knows.
        known: i64,
    },
    /// No connection could be had to run `op` on (the pool could not connect, or `BEGIN`
    /// failed): the server is down, restarting or refusing connections. Nothing of the batch ran,
    /// so it cannot be the batch's fault, whatever the server answered: always retryable.
    #[error("store {op} failed: no usable database connection")]
    Unavailable {
        /// The store operation, a metric label.
        op: &'static str,
        /// Driver error.
        #[source]
        source: sqlx::Error,
    },
    /// A read-only reader found a schema older than this build reads; a writer (`podline
    /// record`, `podline demo`) migrates it on start.
    #[error(
        "database schema version {found} is older than this podline reads ({needed}); start `podline record` on it once to migrate it"
    )]
    SchemaTooOld {
        /// Version found in the database (0: not a podline store yet).
        found: i64,
        /// Version this build reads.
        needed: i64,
    },
    /// A statement failed.
    #[error("store {op} failed")]
    Query {
        /// The store operation (`apply`, `pods`, `health`, ...), a metric label.
        op: &'static str,
        /// Driver error.
        #[source]
        source: sqlx::Error,
    },
    /// An operation did not finish in time (the database hangs or a lock is held).
    #[error("store {op} did not finish within {after:?}")]
    Timeout {
        /// The store operation, a metric label.
        op: &'static str,
        /// The limit that expired.
        after: std::time::Duration,
    },
    /// The SQLite file cannot be written right now: disk full, read-only file system, I/O
    /// error, or the file deleted while open. Retryable: the store replaces its connections
    /// (re-creating a deleted file), so a retry succeeds as soon as the disk does.
    #[error("store {op} failed: {fault} at {path}")]
    Disk {
        /// The store operation, a metric label.
        op: &'static str,
        /// What is wrong with the file.
        fault: crate::disk_fault::DiskFault,
        /// The database file.
        path: String,
        /// Driver error.
        #[source]
        source: sqlx::Error,
    },
    /// A stored value could not be decoded (a hand edit, or a row from a newer writer).
    #[error("stored {what} is invalid: {value:?}")]
    Corrupt {
        /// Which field.
        what: &'static str,
        /// The offending value.
        value: String,
    },
}

impl StoreError {
    pub(crate) fn query(op: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
        move |source| StoreError::Query { op, source }
    }

    /// For a failed `BEGIN`: normally [`StoreError::Unavailable`] (no usable connection, e.g.
    /// PostgreSQL restarting answers 55000/57P03 there). But SQLite answers from the local file,
    /// so a non-transient SQLite code at `BEGIN` (SQLITE_READONLY, ...) is the store's own state,
    /// which no retry fixes: [`StoreError::Query`], reported as fatal.
    pub(crate) fn begin_failed(op: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
        move |source| {
            let permanent_sqlite = matches!(&source, sqlx::Error::Database(db)
                if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some()
                    && !is_transient(&source));
            if permanent_sqlite {
                StoreError::Query { op, source }
            } else {
                StoreError::Unavailable { op, source }
            }
        }
    }

    /// Whether retrying the same call later may succeed: lost connections, pool exhaustion,
    /// database restarts, lock contention, serialization failures, a full disk. The recorder
    /// retries these with backoff and keeps its queue; anything else is reported as fatal.
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Connect { source, .. }
            | StoreError::Query { source, .. }
            | StoreError::Migrate { source, .. } => is_transient(source),
            StoreError::Timeout { .. }
            | StoreError::Unavailable { .. }
            | StoreError::Disk { .. } => true,
            StoreError::InvalidTarget { .. }
            | StoreError::Missing { .. }
            | StoreError::SharedMemory { .. }
            | StoreError::SchemaTooNew { .. }
            | StoreError::SchemaTooOld { .. }
            | StoreError::Corrupt { .. } => false,
        }
    }

    /// A short, stable label for metrics (`reason` in `store_errors_total{reason=...}`).
    pub fn reason(&self) -> &'static str {
        match self {
            StoreError::InvalidTarget { .. } => "invalid_target",
            StoreError::Missing { .. } => "missing",
            StoreError::SharedMemory { .. } => "shared_memory",
            StoreError::Connect { .. } => "connect",
            StoreError::Migrate { .. } => "migrate",
            StoreError::SchemaTooNew { .. } => "schema_too_new",
            StoreError::SchemaTooOld { .. } => "schema_too_old",
            StoreError::Query { source, .. } if is_transient(source) => "transient",
            StoreError::Query { .. } => "query",
            StoreError::Timeout { .. } => "timeout",
            StoreError::Disk { fault, .. } => fault.reason(),
            StoreError::Unavailable { .. } => "unavailable",
            StoreError::Corrupt { .. } => "corrupt",
        }
    }
}

/// Transient driver failures: the connection or the server, not the statement.
fn is_transient(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::BeginFailed
        | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(db) => {
            if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
                transient_sqlstate(pg.code())
            } else if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                db.code()
                    .and_then(|code| code.parse::<i64>().ok())
                    .is_some_and(transient_sqlite_code)
            } else {
                false
            }
        }
        _ => false,
    }
}

/// PostgreSQL SQLSTATEs that mean "try again": class 08 (connection exception), 57P01-03
/// (shutdown, crash shutdown, cannot connect now), 40001/40P01 (serialization failure,
/// deadlock), class 53 (insufficient resources), 55P03 (lock not available).
fn transient_sqlstate(code: &str) -> bool {
    code.starts_with("08")
        || code.starts_with("53")
        || matches!(
            code,
            "57P01" | "57P02" | "57P03" | "40001" | "40P01" | "55P03"
        )
}

/// SQLite result codes that mean "try again": BUSY, LOCKED, IOERR, FULL. SQLite reports
/// extended codes; the primary code is the low byte.
fn transient_sqlite_code(code: i64) -> bool {
    matches!(code & 0xff, 5 | 6 | 10 | 13)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sqlstate_classes_should_be_classified() {
        for code in ["08006", "08003", "57P01", "40001", "40P01", "53300"] {
            assert!(transient_sqlstate(code), "{code} should be transient");
        }
        for code in ["23505", "42P01", "22P02", "42601"] {
            assert!(!transient_sqlstate(code), "{code} should be fatal");
        }
        for code in [5, 517, 6, 262, 10, 13] {
            assert!(transient_sqlite_code(code), "{code} should be transient");
        }
        for code in [1, 19, 2067, 11] {
            assert!(!transient_sqlite_code(code), "{code} should be fatal");
        }
    }

    #[test]
    fn io_errors_should_be_retryable_and_config_errors_not() {
        let io = StoreError::Query {
            op: "apply",
            source: sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
        };
        assert!(io.is_retryable());
        assert_eq!(io.reason(), "transient");
        let bad = StoreError::InvalidTarget {
            value: "x".into(),
            reason: "y".into(),
        };
        assert!(!bad.is_retryable());
        // "database is not currently accepting connections" (55000) while opening a transaction.
        let refused = StoreError::Unavailable {
            op: "apply",
            source: sqlx::Error::PoolTimedOut,
        };
        assert!(refused.is_retryable());
        assert_eq!(refused.reason(), "unavailable");
        let row = StoreError::Query {
            op: "pod",
            source: sqlx::Error::RowNotFound,
        };
        assert!(!row.is_retryable());
    }
}
