//! Parsing the `--db` / `PODLINE_DB` value into the database to open.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::StoreError;

/// Which database to open: one SQLite file (the embedded default) or a PostgreSQL server.
///
/// Parsed strictly from the `--db` value, so a typo fails at startup with a message naming the
/// value and what was expected instead of creating a file called `postgress://...`.
#[derive(Clone, PartialEq, Eq)]
pub enum DbTarget {
    /// A SQLite database file (created if missing; its directory must exist).
    Sqlite {
        /// Path of the database file.
        path: PathBuf,
    },
    /// A PostgreSQL database, as a libpq-style URL.
    Postgres {
        /// `postgres://user[:password]@host[:port]/database[?params]`.
        url: String,
    },
}

impl DbTarget {
    /// Parses a `--db` value: a plain path or `sqlite://PATH` / `sqlite:PATH` for SQLite,
    /// `postgres://...` or `postgresql://...` for PostgreSQL. Anything else is an error that
    /// says what was expected.
    pub fn parse(value: &str) -> Result<Self, StoreError> {
        let invalid = |reason: &str| StoreError::InvalidTarget {
            value: redact(value),
            reason: reason.to_owned(),
        };
        let trimmed = value.trim();
        if trimmed.is_empty() {
            return Err(invalid("the value is empty"));
        }
        if let Some(rest) = strip_scheme(trimmed, &["postgres://", "postgresql://"]) {
            if rest.is_empty() || rest == "/" {
                return Err(invalid("the PostgreSQL URL names no host or database"));
            }
            return Ok(DbTarget::Postgres {
                url: trimmed.to_owned(),
            });
        }
        if let Some(rest) = strip_scheme(trimmed, &["sqlite://", "sqlite:"]) {
            if rest.is_empty() {
                return Err(invalid("the SQLite URL names no file"));
            }
            if rest.starts_with(":memory:") {
                return Err(invalid(
                    "in-memory SQLite loses every record on exit; give a file path",
                ));
            }
            if rest.contains('?') {
                return Err(invalid(
                    "SQLite URL parameters are not supported; podline sets WAL and busy timeout itself",
                ));
            }
            return Ok(DbTarget::Sqlite {
                path: PathBuf::from(rest),
            });
        }
        if let Some((scheme, _)) = trimmed.split_once("://") {
            return Err(invalid(&format!("unsupported scheme {scheme:?}")));
        }
        Ok(DbTarget::Sqlite {
            path: PathBuf::from(trimmed),
        })
    }

    /// Which backend this target uses.
    pub fn backend(&self) -> Backend {
        match self {
            DbTarget::Sqlite { .. } => Backend::Sqlite,
            DbTarget::Postgres { .. } => Backend::Postgres,
        }
    }

    /// The URL handed to the driver. SQLite paths become absolute and percent-encoded so names
    /// with spaces, `?` or `#` work; `mode=rwc` creates the file on first use.
    #[cfg(test)]
    pub(crate) fn driver_url(&self) -> Result<String, StoreError> {
        self.driver_url_for(false)
    }

    /// [`driver_url`](Self::driver_url), or for reading only: SQLite `mode=ro` on a file that
    /// must already exist (a reader never creates an empty store by accident).
    pub(crate) fn driver_url_for(&self, read_only: bool) -> Result<String, StoreError> {
        match self {
            DbTarget::Postgres { url } => Ok(url.clone()),
            DbTarget::Sqlite { path } => {
                let absolute = absolute(path).map_err(|err| StoreError::InvalidTarget {
                    value: path.display().to_string(),
                    reason: format!("cannot resolve the path: {err}"),
                })?;
                if let Some(dir) = absolute.parent()
                    && !dir.is_dir()
                {
                    return Err(StoreError::InvalidTarget {
                        value: path.display().to_string(),
                        reason: format!("directory {} does not exist", dir.display()),
                    });
                }
                let text = absolute.to_str().ok_or_else(|| StoreError::InvalidTarget {
                    value: path.display().to_string(),
                    reason: "the path is not valid UTF-8".to_owned(),
                })?;
                if read_only && !absolute.is_file() {
                    return Err(StoreError::InvalidTarget {
                        value: path.display().to_string(),
                        reason: "no such store file (run `podline record` or `podline demo` to make one)"
                            .to_owned(),
                    });
                }
                let mode = if read_only { "ro" } else { "rwc" };
                Ok(format!(
                    "sqlite://{}?mode={mode}",
                    percent_encode_path(text)
                ))
            }
        }
    }
}

impl FromStr for DbTarget {
    type Err = StoreError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DbTarget::parse(s)
    }
}

/// Shows the target with any password replaced by `***`, safe for logs and error messages.
impl fmt::Display for DbTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbTarget::Sqlite { path } => write!(f, "sqlite://{}", path.display()),
            DbTarget::Postgres { url } => f.write_str(&redact(url)),
        }
    }
}

/// Debug is the redacted form too: a target may end up in a `{:?}` log line.
impl fmt::Debug for DbTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DbTarget({self})")
    }
}

/// The two SQL dialects the store speaks; statements are shared, a few details differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Embedded, one file, one writer at a time.
    Sqlite,
    /// Server database for scale-out and dashboards.
    Postgres,
}

impl Backend {
    /// Name for logs and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

fn strip_scheme<'a>(value: &'a str, schemes: &[&str]) -> Option<&'a str> {
    schemes.iter().find_map(|scheme| {
        value
            .get(..scheme.len())
            .filter(|head| head.eq_ignore_ascii_case(scheme))
            .map(|_| &value[scheme.len()..])
    })
}

/// Replaces the password of `scheme://user:password@host` with `***`.
fn redact(value: &str) -> String {
    let Some((scheme, rest)) = value.split_once("://") else {
        return value.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match authority.rfind('@') {
        Some(at) => match authority[..at].split_once(':') {
            Some((user, _password)) => {
                format!("{scheme}://{user}:***@{}", &rest[at + 1..])
            }
            None => value.to_owned(),
        },
        None => value.to_owned(),
    }
}

fn absolute(path: &Path) -> std::io::Result<PathBuf> {
    if path.is_absolute() {
        Ok(path.to_path_buf())
    } else {
        Ok(std::env::current_dir()?.join(path))
    }
}

fn percent_encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for ch in path.chars() {
        match ch {
            '%' => out.push_str("%25"),
            '?' => out.push_str("%3F"),
            '#' => out.push_str("%23"),
            ' ' => out.push_str("%20"),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_sqlite_urls_should_parse_as_sqlite() {
        for (value, path) in [
            ("podline.db", "podline.db"),
            ("/var/lib/podline/p.db", "/var/lib/podline/p.db"),
            ("sqlite://p.db", "p.db"),
            ("sqlite:///abs/p.db", "/abs/p.db"),
            ("sqlite:p.db", "p.db"),
            ("  p.db ", "p.db"),
        ] {
            assert_eq!(
                DbTarget::parse(value).unwrap(),
                DbTarget::Sqlite {
                    path: PathBuf::from(path)
                },
                "{value}"
            );
        }
    }

    #[test]
    fn postgres_urls_should_parse_as_postgres() {
        for value in [
            "postgres://root@127.0.0.1:5432/test",
            "postgresql://u:p@db/podline?sslmode=require",
            "POSTGRES://db/x",
        ] {
            assert_eq!(DbTarget::parse(value).unwrap().backend(), Backend::Postgres);
        }
    }

    #[test]
    fn bad_values_should_name_the_value_and_what_was_expected() {
        for value in [
            "",
            "   ",
            "mysql://db/x",
            "sqlite://",
            "postgres://",
            "sqlite::memory:",
        ] {
            let err = DbTarget::parse(value).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, StoreError::InvalidTarget { .. }), "{value}");
            assert!(msg.contains("expected a file path"), "{msg}");
        }
        let msg = DbTarget::parse("mysql://db/x").unwrap_err().to_string();
        assert!(msg.contains("\"mysql\""), "{msg}");
    }

    #[test]
    fn passwords_should_never_be_displayed() {
        let target = DbTarget::parse("postgres://app:s3cret@db:5432/podline").unwrap();
        assert_eq!(target.to_string(), "postgres://app:***@db:5432/podline");
        assert!(!format!("{target:?}").contains("s3cret"));
        let err = DbTarget::parse("mysql://app:s3cret@db/x").unwrap_err();
        assert!(!err.to_string().contains("s3cret"));
    }

    #[test]
    fn sqlite_driver_url_should_be_absolute_and_encoded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a b?#%.db");
        let url = DbTarget::Sqlite { path }.driver_url().unwrap();
        assert!(url.starts_with("sqlite:///"), "{url}");
        assert!(url.ends_with("a%20b%3F%23%25.db?mode=rwc"), "{url}");
    }

    #[test]
    fn sqlite_in_a_missing_directory_should_fail_clearly() {
        let err = DbTarget::parse("/definitely/not/here/p.db")
            .unwrap()
            .driver_url()
            .unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
    }
}
