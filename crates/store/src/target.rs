//! Parsing a store target (the text a user gives to name the store) into the database to open.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::StoreError;

/// Which database to open: one SQLite file (the embedded default) or a PostgreSQL server.
///
/// Parsed strictly from the target's text, so a typo fails at startup with a message naming the
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
    /// Parses a target: a plain path or `sqlite://PATH` / `sqlite:PATH` for SQLite,
    /// `postgres://...` or `postgresql://...` for PostgreSQL. Anything else is an error that
    /// says what was expected.
    pub fn parse(value: &str) -> Result<Self, StoreError> {
        let invalid = |reason: &str| StoreError::InvalidTarget {
            value: Redacted::new(value).to_string(),
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
            if let Some(reason) = unsupported_postgres_param(rest) {
                return Err(invalid(&reason));
            }
            return Ok(DbTarget::Postgres {
                url: trimmed.to_owned(),
            });
        }
        if strip_scheme(trimmed, &["postgresql:", "postgres:"]).is_some() {
            // `postgres:/user:pass@host/db` (a `/` missing) would otherwise be a SQLite file
            // named after the password; shown with the password hidden ([`Redacted`]).
            return Err(StoreError::InvalidTarget {
                value: Redacted::new(trimmed).to_string(),
                reason: "a malformed PostgreSQL URL: expected postgres://user[:password]@host[:port]/database".to_owned(),
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
        if Redacted::new(trimmed).hides_anything() {
            // `host=db password=...`: libpq's keyword/value form, which would otherwise become a
            // SQLite file named after the password.
            return Err(invalid(
                "this looks like a libpq keyword/value connection string with a secret in it; \
                 give a postgres:// URL instead",
            ));
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
                let shown = || Redacted::new(&path.to_string_lossy()).to_string();
                let absolute = absolute(path).map_err(|err| StoreError::InvalidTarget {
                    value: shown(),
                    reason: format!("cannot resolve the path: {err}"),
                })?;
                if let Some(dir) = absolute.parent()
                    && !dir.is_dir()
                {
                    return Err(StoreError::InvalidTarget {
                        value: shown(),
                        reason: format!(
                            "directory {} does not exist",
                            Redacted::new(&dir.to_string_lossy())
                        ),
                    });
                }
                let text = absolute.to_str().ok_or_else(|| StoreError::InvalidTarget {
                    value: shown(),
                    reason: "the path is not valid UTF-8".to_owned(),
                })?;
                if read_only && !absolute.is_file() {
                    return Err(StoreError::Missing {
                        path: Redacted::new(&absolute.to_string_lossy()).to_string(),
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

/// Shows the target through [`Redacted`], safe for logs and error messages.
impl fmt::Display for DbTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbTarget::Sqlite { path } => {
                write!(f, "sqlite://{}", Redacted::new(&path.to_string_lossy()))
            }
            DbTarget::Postgres { url } => Redacted::new(url).fmt(f),
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

/// A `postgres:` value without `//`, redacted as the URL it was meant to be: `rest` read as
/// what follows `postgres://` (its user info and password parameters hidden).
fn malformed_postgres_shown(value: &str, rest: &str) -> String {
    let scheme = &value[..value.len() - rest.len()];
    let slashes = rest.len() - rest.trim_start_matches('/').len();
    let redacted = Redacted::new(&format!("postgres://{}", &rest[slashes..])).to_string();
    let tail = redacted.strip_prefix("postgres://").unwrap_or_default();
    format!("{scheme}{}{tail}", &rest[..slashes])
}

fn strip_scheme<'a>(value: &'a str, schemes: &[&str]) -> Option<&'a str> {
    schemes.iter().find_map(|scheme| {
        value
            .get(..scheme.len())
            .filter(|head| head.eq_ignore_ascii_case(scheme))
            .map(|_| &value[scheme.len()..])
    })
}

/// A store target (path, `sqlite://`, `postgres://` URL, or whatever the user typed) made
/// safe to show. The ONE way a target reaches a log line, an error or a page.
///
/// Hidden as `***`: the password of `scheme://user:password@host` (everything between the first
/// `:` of the userinfo and its last `@`, so an unencoded `@`, `/` or `?` in a password is hidden
/// too), and the value of every secret-like parameter (`is_secret_key`: `password`,
/// `sslpassword`, `token`, ... in any case, percent-encoded or not), both as URL query
/// parameters (`?password=...&...`) and in libpq's keyword/value form (`password = '...'`).
/// Over-hiding is preferred to leaking: an odd URL may show less than it could.
#[derive(Clone, Copy)]
pub struct Redacted<'a>(&'a str);

impl<'a> Redacted<'a> {
    /// Wraps a raw target for display.
    pub fn new(value: &'a str) -> Self {
        Redacted(value)
    }

    /// Whether displaying hides any part of the value.
    pub fn hides_anything(&self) -> bool {
        self.to_string() != self.0
    }
}

impl fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = self.0;
        if strip_scheme(value, &["postgresql://", "postgres://"]).is_none()
            && let Some(rest) = strip_scheme(value, &["postgresql:", "postgres:"])
        {
            return f.write_str(&malformed_postgres_shown(value, rest));
        }
        let Some(scheme_end) = value.find("://").map(|at| at + 3) else {
            return write_keyword_params(value, f);
        };
        f.write_str(&value[..scheme_end])?;
        let mut rest = &value[scheme_end..];
        if let Some(at) = rest.rfind('@')
            && let Some(colon) = rest[..at].find(':')
        {
            f.write_str(&rest[..colon])?;
            f.write_str(":***@")?;
            rest = &rest[at + 1..];
        }
        match rest.split_once('?') {
            Some((before, query)) => {
                f.write_str(before)?;
                f.write_str("?")?;
                write_query_params(query, f)
            }
            None => f.write_str(rest),
        }
    }
}

/// Debug is the redacted text, quoted.
impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), f)
    }
}

/// `a=1&password=x&b=2` with secret values hidden. A segment without `=` after a secret one is
/// taken as part of its value (an unencoded `&` in a password).
fn write_query_params(query: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let mut hiding = false;
    let mut first = true;
    for segment in query.split('&') {
        let key = segment.split_once('=').map(|(key, _)| key);
        if hiding && key.is_none() {
            continue;
        }
        if !first {
            f.write_str("&")?;
        }
        first = false;
        match key {
            Some(key) if is_secret_key(key) => {
                hiding = true;
                write!(f, "{key}=***")?;
            }
            _ => {
                hiding = false;
                f.write_str(segment)?;
            }
        }
    }
    Ok(())
}

/// libpq's `key = value key='quoted value'` form with secret values hidden; anything else is
/// written as it is.
fn write_keyword_params(text: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let bytes = text.as_bytes();
    let mut written = 0;
    let mut i = 0;
    while i < bytes.len() {
        let at_word_start = i == 0 || bytes[i - 1].is_ascii_whitespace();
        if !at_word_start || bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let key_end = i + text[i..]
            .find(|c: char| c == '=' || c.is_ascii_whitespace())
            .unwrap_or(text.len() - i);
        let mut eq = key_end;
        while eq < bytes.len() && bytes[eq].is_ascii_whitespace() {
            eq += 1;
        }
        if eq >= bytes.len() || bytes[eq] != b'=' || !is_secret_key(&text[i..key_end]) {
            i = key_end.max(i + 1);
            continue;
        }
        let mut value_start = eq + 1;
        while value_start < bytes.len() && bytes[value_start].is_ascii_whitespace() {
            value_start += 1;
        }
        let value_end = if bytes.get(value_start) == Some(&b'\'') {
            // Quoted: up to the closing quote that is not escaped by a backslash (or the end).
            let mut j = value_start + 1;
            while j < bytes.len() && bytes[j] != b'\'' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            (j + 1).min(bytes.len())
        } else {
            value_start
                + text[value_start..]
                    .find(|c: char| c.is_ascii_whitespace())
                    .unwrap_or(text.len() - value_start)
        };
        f.write_str(&text[written..value_start])?;
        f.write_str("***")?;
        written = value_end;
        i = value_end.max(i + 1);
    }
    f.write_str(&text[written.min(text.len())..])
}

/// Whether a parameter name names a credential: contains `pass`, `pwd`, `secret`, `token`,
/// `key`, `auth` or `cred`, compared case-insensitively after percent-decoding (`PassWord`,
/// `pass%77ord`, `sslpassword`, `api_key` all count). Hiding a harmless one (`sslkey`, a path)
/// costs nothing.
fn is_secret_key(key: &str) -> bool {
    const SECRET: [&str; 7] = ["pass", "pwd", "secret", "token", "key", "auth", "cred"];
    let key = percent_decode_lossy(key.trim()).to_ascii_lowercase();
    SECRET.iter().any(|word| key.contains(word))
}

fn percent_decode_lossy(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).and_then(|b| hex(*b)),
                bytes.get(i + 2).and_then(|b| hex(*b)),
            )
        {
            // Two hex digits: at most 255, so the cast cannot truncate.
            out.push((hi * 16 + lo) as u8);
            i += 3;
            continue;
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Query parameters the PostgreSQL driver understands (sqlx's URL parser; `options[NAME]` too).
/// It logs any other parameter WITH its value at WARN and then ignores it, so an unknown one
/// (`Password=`, `sslpassword=`, a typo of `sslmode`) would both leak and be silently dropped.
const POSTGRES_PARAMS: [&str; 18] = [
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "application_name",
    "options",
];

/// Why the URL's query (after `?` in `rest`) cannot be handed to the driver, if it cannot:
/// a parameter the driver would ignore after logging its value. Names the parameter, never
/// its value.
fn unsupported_postgres_param(rest: &str) -> Option<String> {
    // What the driver's URL parser takes as the query: after the first `?`, before a `#`.
    let before_fragment = rest.split_once('#').map_or(rest, |(before, _)| before);
    let (_, query) = before_fragment.split_once('?')?;
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let Some((key, _)) = pair.split_once('=') else {
            // Never named: it may be the tail of a password with an unencoded `&`.
            return Some(
                "a PostgreSQL URL parameter has no `=VALUE` (percent-encode `&` in values as %26)"
                    .to_owned(),
            );
        };
        let key = percent_decode_lossy(key);
        let known = POSTGRES_PARAMS.contains(&key.as_str())
            || (key.starts_with("options[") && key.ends_with(']'));
        if !known {
            let shown: String = key.chars().take(40).collect();
            let hint = if POSTGRES_PARAMS.contains(&key.to_ascii_lowercase().as_str()) {
                format!(
                    " (parameter names are case-sensitive: {:?})",
                    key.to_ascii_lowercase()
                )
            } else {
                String::new()
            };
            return Some(format!(
                "the PostgreSQL URL parameter {shown:?} is not supported{hint}; supported: \
                 sslmode, sslrootcert, sslcert, sslkey, host, hostaddr, port, dbname, user, \
                 password, application_name, options, statement-cache-capacity"
            ));
        }
    }
    None
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

    /// `postgres:/` (a `/` missing) is refused, not opened as a SQLite file, and the password
    /// is hidden in the message.
    #[test]
    fn a_malformed_postgres_url_should_be_refused_redacted() {
        for value in [
            "postgres:/app:Zq9pw@db/podline",
            "postgres:app:Zq9pw@db/podline",
            "postgresql:/app:Zq9pw@db/podline",
            "POSTGRES:/db/podline?password=Zq9pw",
        ] {
            let err = DbTarget::parse(value).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, StoreError::InvalidTarget { .. }), "{value}");
            assert!(!msg.contains("Zq9pw"), "{value}: {msg}");
            assert!(msg.contains("malformed PostgreSQL URL"), "{value}: {msg}");
        }
        let msg = DbTarget::parse("postgres:/app:Zq9pw@db/podline")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("postgres:/app:***@db/podline"), "{msg}");
        assert_eq!(
            Redacted::new("postgres:/app:Zq9pw@db/podline").to_string(),
            "postgres:/app:***@db/podline"
        );
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
    fn redacted_should_hide_every_form_of_password() {
        for (raw, shown) in [
            (
                "postgres://app:Zq9@db:5432/p",
                "postgres://app:***@db:5432/p",
            ),
            ("postgres://app:Z@q/9?x@db/p", "postgres://app:***@db/p"),
            (
                "postgres://app@db/p?password=Zq9",
                "postgres://app@db/p?password=***",
            ),
            (
                "postgresql://db/p?sslmode=require&PassWord=Zq9&application_name=x",
                "postgresql://db/p?sslmode=require&PassWord=***&application_name=x",
            ),
            (
                "postgres://db/p?PASSWORD=Zq9",
                "postgres://db/p?PASSWORD=***",
            ),
            (
                "postgres://db/p?sslpassword=Zq9",
                "postgres://db/p?sslpassword=***",
            ),
            (
                "postgres://db/p?pass%77ord=Zq9",
                "postgres://db/p?pass%77ord=***",
            ),
            (
                "postgres://db/p?password=Zq&9&port=1",
                "postgres://db/p?password=***&port=1",
            ),
            (
                "postgres://db/p?auth_token=Zq9",
                "postgres://db/p?auth_token=***",
            ),
            (
                "host=db password=Zq9 dbname=p",
                "host=db password=*** dbname=p",
            ),
            (
                "host=db password = 'Z q\\'9' user=u",
                "host=db password = *** user=u",
            ),
            (
                "postgres://root@127.0.0.1:5432/test",
                "postgres://root@127.0.0.1:5432/test",
            ),
            ("/var/lib/podline/p.db", "/var/lib/podline/p.db"),
        ] {
            let got = Redacted::new(raw).to_string();
            assert_eq!(got, shown, "{raw}");
            assert!(
                !got.contains("Zq9") && !got.contains("9'"),
                "{raw} -> {got}"
            );
            assert_eq!(Redacted::new(raw).hides_anything(), raw != shown, "{raw}");
        }
        // An `@` in the query after a port: over-hidden rather than leaked.
        let odd = Redacted::new("postgres://db:5432/p?password=Zq9&application_name=a@b");
        assert!(!odd.to_string().contains("Zq9"), "{odd}");
        assert!(!format!("{odd:?}").contains("Zq9"));
    }

    #[test]
    fn postgres_params_the_driver_would_log_should_be_refused_without_their_value() {
        for value in [
            "postgres://u@db/p?sslpassword=Zq9Marker",
            "postgres://u@db/p?Password=Zq9Marker",
            "postgres://u@db/p?sslmod=require",
            "postgres://u@db/p?password=Zq9&Marker",
        ] {
            let err = DbTarget::parse(value).unwrap_err().to_string();
            assert!(!err.contains("Zq9") && !err.contains("Marker"), "{err}");
            assert!(err.contains("parameter"), "{err}");
        }
        let err = DbTarget::parse("postgres://u@db/p?Password=x").unwrap_err();
        assert!(err.to_string().contains("case-sensitive"), "{err}");
        for value in [
            "postgres://u@db/p?password=Zq9&sslmode=disable&options[statement_timeout]=5s",
            "postgres://u:p%3Fw@db/p",
        ] {
            DbTarget::parse(value).unwrap();
        }
    }

    #[test]
    fn a_libpq_keyword_string_with_a_password_should_not_become_a_sqlite_file() {
        let err = DbTarget::parse("host=db user=u password=Zq9 dbname=p").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("postgres://"), "{msg}");
        assert!(!msg.contains("Zq9"), "{msg}");
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
