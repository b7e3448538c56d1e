//! What is wrong with a SQLite file that cannot be written ([`DiskFault`]), read from SQLite's
//! error codes. A leaf outside `sql`, so that `StoreError::Disk` can carry it and `sql`'s `disk`
//! module can act on it without `error` and `sql` depending on each other.

/// What is wrong with the database file, as SQLite reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskFault {
    /// `SQLITE_FULL`: the file system has no space left (or a size limit was reached).
    Full,
    /// `SQLITE_READONLY`: the file became unwritable (read-only remount, permissions).
    ReadOnly,
    /// `SQLITE_READONLY_DBMOVED`, or the path no longer names the opened file: deleted, moved
    /// or replaced while open.
    Moved,
    /// `SQLITE_IOERR`: the operating system failed a read or write.
    Io,
    /// `SQLITE_CANTOPEN`: a new connection could not open the file.
    CantOpen,
}

impl DiskFault {
    /// The fault behind a SQLite error code (extended or primary), if it is one.
    pub(crate) fn from_sqlite_code(code: i64) -> Option<Self> {
        match code & 0xff {
            _ if code == 1032 => Some(DiskFault::Moved),
            13 => Some(DiskFault::Full),
            8 => Some(DiskFault::ReadOnly),
            10 => Some(DiskFault::Io),
            14 => Some(DiskFault::CantOpen),
            _ => None,
        }
    }

    /// The fault behind a driver error, if it is a SQLite disk fault.
    pub(crate) fn of(err: &sqlx::Error) -> Option<Self> {
        let sqlx::Error::Database(db) = err else {
            return None;
        };
        db.try_downcast_ref::<sqlx::sqlite::SqliteError>()?;
        db.code()?
            .parse::<i64>()
            .ok()
            .and_then(Self::from_sqlite_code)
    }

    /// A short, stable label for metrics.
    pub fn reason(self) -> &'static str {
        match self {
            DiskFault::Full => "disk_full",
            DiskFault::ReadOnly => "disk_read_only",
            DiskFault::Moved => "db_file_moved",
            DiskFault::Io => "disk_io",
            DiskFault::CantOpen => "cannot_open",
        }
    }
}

impl std::fmt::Display for DiskFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DiskFault::Full => "database disk is full (SQLITE_FULL)",
            DiskFault::ReadOnly => {
                "database file is read-only (SQLITE_READONLY: file system remounted read-only or \
                 permissions changed)"
            }
            DiskFault::Moved => "database file was deleted or replaced while open",
            DiskFault::Io => "disk I/O error (SQLITE_IOERR)",
            DiskFault::CantOpen => "cannot open the database file (SQLITE_CANTOPEN)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_codes_should_map_to_faults() {
        assert_eq!(DiskFault::from_sqlite_code(13), Some(DiskFault::Full));
        assert_eq!(DiskFault::from_sqlite_code(8), Some(DiskFault::ReadOnly));
        assert_eq!(DiskFault::from_sqlite_code(1032), Some(DiskFault::Moved));
        assert_eq!(DiskFault::from_sqlite_code(778), Some(DiskFault::Io)); // IOERR_WRITE
        assert_eq!(DiskFault::from_sqlite_code(14), Some(DiskFault::CantOpen));
        for other in [1, 5, 6, 19, 2067] {
            assert_eq!(DiskFault::from_sqlite_code(other), None, "{other}");
        }
        assert_eq!(
            DiskFault::Full.to_string(),
            "database disk is full (SQLITE_FULL)"
        );
    }
}
