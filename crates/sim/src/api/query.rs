//! Query parameters of list, watch, delete and log requests, decoded the way kube-apiserver's
//! parameter codec does it (`runtime.Convert_Slice_string_To_*`):
//!
//! - the first value of a repeated key wins, unknown keys are ignored;
//! - a boolean is false only for `0` or `false` in any case (`False`, `FALSE`); every other
//!   value, the empty one included, is true (`watch=maybe` is a watch, `follow=True` follows);
//! - an integer is Go's `strconv.ParseInt(v, 10, 64)`: an optional sign and decimal digits, and
//!   anything else is a 400 BadRequest worded like Go's error
//!   (`strconv.ParseInt: parsing "abc": invalid syntax`, `... value out of range`).

use crate::status::ApiError;

/// A query string split into its (first) values per key, percent-decoding done.
#[derive(Debug, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Splits `query` (`None` or empty: no parameters).
    pub fn new(query: Option<&str>) -> Self {
        // The query comes from a request URI, so it parses as one again.
        let pairs = query
            .filter(|q| !q.is_empty())
            .and_then(|q| format!("/?{q}").parse::<http::Uri>().ok())
            .and_then(|uri| {
                axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&uri)
                    .ok()
                    .map(|axum::extract::Query(pairs)| pairs)
            })
            .unwrap_or_default();
        Self(pairs)
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn string(&self, key: &str) -> Option<String> {
        self.get(key).map(str::to_owned)
    }

    /// `key` as kube-apiserver reads a boolean parameter (absent: None).
    pub fn flag(&self, key: &str) -> Option<bool> {
        self.get(key).map(go_query_bool)
    }

    /// `key` as kube-apiserver reads an int64 parameter; 400 BadRequest when it is not one.
    pub fn int(&self, key: &str) -> Result<Option<i64>, ApiError> {
        self.get(key)
            .map(|v| go_parse_int(v).map_err(ApiError::bad_request))
            .transpose()
    }
}

/// A boolean query parameter read the way kube-apiserver reads it (only `0` and `false`, in any
/// case, are false); `None` and a missing key are false. For the middleware outside this module.
pub fn query_flag(query: Option<&str>, key: &str) -> bool {
    Query::new(query).flag(key) == Some(true)
}

/// A query parameter struct decoded from a [`Query`].
pub trait FromQuery: Sized {
    /// Reads the struct's parameters; an error is the 400 the real server would answer.
    fn from_query(query: &Query) -> Result<Self, ApiError>;
}

/// Parameters of list and watch requests (`ListOptions`).
#[derive(Debug, Clone, Default)]
pub struct ListParams {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `limit` (page size).
    pub limit: Option<i64>,
    /// `continue` token from a previous page.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `timeoutSeconds` (watch).
    pub timeout_seconds: Option<i64>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: Option<bool>,
    /// `sendInitialEvents` (streaming lists).
    pub send_initial_events: Option<bool>,
}

impl FromQuery for ListParams {
    fn from_query(q: &Query) -> Result<Self, ApiError> {
        Ok(Self {
            label_selector: q.string("labelSelector"),
            field_selector: q.string("fieldSelector"),
            limit: q.int("limit")?,
            continue_token: q.string("continue"),
            resource_version: q.string("resourceVersion"),
            timeout_seconds: q.int("timeoutSeconds")?,
            allow_watch_bookmarks: q.flag("allowWatchBookmarks"),
            send_initial_events: q.flag("sendInitialEvents"),
        })
    }
}

/// Parameters of writes (`CreateOptions`, `UpdateOptions`, `PatchOptions`, `DeleteOptions`).
#[derive(Debug, Clone, Default)]
pub struct WriteParams {
    /// `dryRun`: `All` validates without storing.
    pub dry_run: Option<String>,
    /// `gracePeriodSeconds` (delete).
    pub grace_period_seconds: Option<i64>,
}

impl FromQuery for WriteParams {
    fn from_query(q: &Query) -> Result<Self, ApiError> {
        Ok(Self {
            dry_run: q.string("dryRun"),
            grace_period_seconds: q.int("gracePeriodSeconds")?,
        })
    }
}

/// Parameters of `pods/{name}/log` (`PodLogOptions`).
#[derive(Debug, Clone, Default)]
pub struct LogParams {
    /// Container name (may be omitted when the pod has one container).
    pub container: Option<String>,
    /// Stream until the container ends.
    pub follow: Option<bool>,
    /// Prefix lines with RFC3339Nano timestamps.
    pub timestamps: Option<bool>,
    /// RFC3339 time; only lines at or after it.
    pub since_time: Option<String>,
    /// Only lines from the last N seconds.
    pub since_seconds: Option<i64>,
    /// Only the last N lines.
    pub tail_lines: Option<i64>,
    /// Stop after N bytes.
    pub limit_bytes: Option<i64>,
    /// The previous (restarted) container's log.
    pub previous: Option<bool>,
}

impl FromQuery for LogParams {
    fn from_query(q: &Query) -> Result<Self, ApiError> {
        Ok(Self {
            container: q.string("container"),
            follow: q.flag("follow"),
            timestamps: q.flag("timestamps"),
            since_time: q.string("sinceTime"),
            since_seconds: q.int("sinceSeconds")?,
            tail_lines: q.int("tailLines")?,
            limit_bytes: q.int("limitBytes")?,
            previous: q.flag("previous"),
        })
    }
}

/// Parses the query string into `T`, answering 400 like the real server on bad values.
pub fn parse<T: FromQuery>(query: Option<&str>) -> Result<T, ApiError> {
    T::from_query(&Query::new(query))
}

/// A boolean query value as kube-apiserver reads it: only `0` and `false` (any case) are false.
pub fn go_query_bool(value: &str) -> bool {
    !(value == "0" || value.eq_ignore_ascii_case("false"))
}

/// Go's `strconv.Quote` for the values error messages quote (JSON's quoting, which agrees with
/// it on printable text).
pub fn go_quote(value: &str) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| format!("\"{value}\""))
}

/// Go's `strconv.ParseInt(value, 10, 64)`, with its error text.
pub fn go_parse_int(value: &str) -> Result<i64, String> {
    let digits = value.strip_prefix(['+', '-']).unwrap_or(value);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "strconv.ParseInt: parsing {}: invalid syntax",
            go_quote(value)
        ));
    }
    value.parse::<i64>().map_err(|_| {
        format!(
            "strconv.ParseInt: parsing {}: value out of range",
            go_quote(value)
        )
    })
}

/// Go's `strconv.ParseUint(value, 10, 64)` (no sign allowed), with its error text.
pub fn go_parse_uint(value: &str) -> Result<u64, String> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "strconv.ParseUint: parsing {}: invalid syntax",
            go_quote(value)
        ));
    }
    value.parse::<u64>().map_err(|_| {
        format!(
            "strconv.ParseUint: parsing {}: value out of range",
            go_quote(value)
        )
    })
}

/// How long a watch lasts, as kube-apiserver computes it (`GetTimeoutForWatch`):
/// `timeoutSeconds` times a second in Go's wrapping int64 nanoseconds; 0 or absent picks a
/// random 30-60 min (`--min-request-timeout` 1800 s, times 1 to 2); a negative result (a
/// negative value, or one so large the multiplication wraps) ends the watch at once.
pub fn watch_timeout(timeout_seconds: Option<i64>) -> std::time::Duration {
    use std::time::Duration;
    let nanos = timeout_seconds.unwrap_or(0).wrapping_mul(1_000_000_000);
    match u64::try_from(nanos) {
        Ok(0) => Duration::from_secs(rand::random_range(1800..3600)),
        Ok(nanos) => Duration::from_nanos(nanos),
        Err(_) => Duration::ZERO,
    }
}

/// A get's or list's `resourceVersion` checked like kube-apiserver 1.32 does: empty, `0` and
/// decimal numbers are fine; anything else is the storage layer's `Invalid value` error,
/// answered as 400 BadRequest (`invalid resource version: ...`) when the list is served from
/// etcd (it has a `limit`) and as a bare 500 when the watch cache serves it (a get with a
/// resourceVersion, a list without a limit).
pub fn check_resource_version(rv: Option<&str>, from_etcd: bool) -> Result<(), ApiError> {
    let Some(rv) = rv.filter(|rv| !rv.is_empty() && *rv != "0") else {
        return Ok(());
    };
    let Err(why) = go_parse_uint(rv) else {
        return Ok(());
    };
    let detail = format!("resourceVersion: Invalid value: {}: {why}", go_quote(rv));
    Err(if from_etcd {
        ApiError::bad_request(format!("invalid resource version: {detail}"))
    } else {
        ApiError::new(500, "", detail)
    })
}

#[cfg(test)]
mod parse_tests {
    use super::*;

    #[test]
    fn booleans_should_parse_like_the_apiservers_parameter_codec() {
        for yes in ["true", "True", "TRUE", "1", "t", "yes", "maybe", ""] {
            assert!(go_query_bool(yes), "{yes:?} is true");
        }
        for no in ["false", "False", "FALSE", "fAlSe", "0"] {
            assert!(!go_query_bool(no), "{no:?} is false");
        }
        let q = Query::new(Some("follow=True&watch=maybe&previous=0&timestamps="));
        assert_eq!(q.flag("follow"), Some(true));
        assert_eq!(q.flag("watch"), Some(true));
        assert_eq!(q.flag("previous"), Some(false));
        assert_eq!(q.flag("timestamps"), Some(true));
        assert_eq!(q.flag("absent"), None);
    }

    #[test]
    fn integers_should_parse_like_go_strconv() {
        assert_eq!(go_parse_int("42"), Ok(42));
        assert_eq!(go_parse_int("+7"), Ok(7));
        assert_eq!(go_parse_int("-3"), Ok(-3));
        assert_eq!(go_parse_int("9223372036854775807"), Ok(i64::MAX));
        assert_eq!(
            go_parse_int("abc"),
            Err("strconv.ParseInt: parsing \"abc\": invalid syntax".to_owned())
        );
        assert_eq!(
            go_parse_int(" 1"),
            Err("strconv.ParseInt: parsing \" 1\": invalid syntax".to_owned())
        );
        assert_eq!(
            go_parse_int("9223372036854775808"),
            Err("strconv.ParseInt: parsing \"9223372036854775808\": value out of range".to_owned())
        );
        assert!(go_parse_uint("+1").is_err(), "ParseUint takes no sign");
        let q = Query::new(Some("limit=1&limit=x"));
        assert_eq!(q.int("limit"), Ok(Some(1)), "the first value wins");
    }

    #[test]
    fn watch_timeouts_should_follow_go_duration_arithmetic() {
        use std::time::Duration;
        assert_eq!(watch_timeout(Some(10)), Duration::from_secs(10));
        assert_eq!(watch_timeout(Some(-1)), Duration::ZERO);
        // 2^63-1 s in int64 nanoseconds wraps to -1 s: the real server ends the watch at once.
        assert_eq!(watch_timeout(Some(i64::MAX)), Duration::ZERO);
        let default = watch_timeout(None);
        assert!((1800..3600).contains(&default.as_secs()), "{default:?}");
        assert_eq!(watch_timeout(Some(0)).as_secs() / 1800, 1);
    }
}

/// Continue tokens, shaped like kube-apiserver's: base64 (URL alphabet, unpadded) of
/// `{"v":"meta.k8s.io/v1","rv":<list resourceVersion>,"start":"<namespace>/<name>"}`, the last
/// key served (exclusive). A bad token is reported in kube's words.
pub mod continue_token {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use serde::{Deserialize, Serialize};

    use podline_sim_core::cluster::Key;

    #[derive(Serialize, Deserialize)]
    struct Token {
        #[serde(default)]
        v: String,
        #[serde(default)]
        rv: i64,
        #[serde(default)]
        start: String,
    }

    /// Encodes a token.
    pub fn encode(rv: u64, last: &Key) -> String {
        let start = if last.0.is_empty() {
            last.1.clone()
        } else {
            format!("{}/{}", last.0, last.1)
        };
        let token = Token {
            v: "meta.k8s.io/v1".to_owned(),
            rv: i64::try_from(rv).unwrap_or(i64::MAX),
            start,
        };
        // Invariant: a struct of strings and an integer always serializes.
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&token).expect("token serializes"))
    }

    /// Decodes a token; the error is the storage layer's reason (kube prefixes it with
    /// `invalid continue token: `).
    pub fn decode(token: &str) -> Result<(u64, Key), String> {
        let generic = "continue key is not valid";
        // Go's `base64.RawURLEncoding` is not strict: it ignores the unused bits of the last
        // symbol, so any token of the URL alphabet decodes (apiserver `pkg/storage/continue.go`).
        let go_raw_url = base64::engine::GeneralPurpose::new(
            &base64::alphabet::URL_SAFE,
            base64::engine::GeneralPurposeConfig::new()
                .with_encode_padding(false)
                .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireNone)
                .with_decode_allow_trailing_bits(true),
        );
        let data = go_raw_url.decode(token).map_err(|e| match e {
            base64::DecodeError::InvalidByte(at, _)
            | base64::DecodeError::InvalidLastSymbol(at, _) => {
                format!("{generic}: illegal base64 data at input byte {at}")
            }
            _ => format!(
                "{generic}: illegal base64 data at input byte {}",
                token.len()
            ),
        })?;
        // `json.Unmarshal`: Go's scanner words a syntax error (`invalid character '\u0081'
        // looking for beginning of value`).
        if let Some(go) = crate::api::gojson::syntax_error(&data) {
            return Err(format!("{generic}: {go}"));
        }
        let token: Token = serde_json::from_slice(&data).map_err(|e| format!("{generic}: {e}"))?;
        if token.v != "meta.k8s.io/v1" {
            return Err(format!(
                "{generic}: server does not recognize this encoded version {}",
                token.v
            ));
        }
        if token.rv <= 0 {
            return Err(format!(
                "{generic}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
            ));
        }
        if token.start.is_empty() {
            return Err(format!("{generic}: encoded start key empty"));
        }
        let key = match token.start.split_once('/') {
            Some((ns, name)) => (ns.to_owned(), name.to_owned()),
            None => (String::new(), token.start),
        };
        Ok((token.rv as u64, key))
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn tokens_round_trip_and_garbage_is_rejected() {
            let key = ("ns".to_owned(), "pod-1".to_owned());
            let token = super::encode(42, &key);
            assert_eq!(super::decode(&token), Ok((42, key)));
            let cluster_scoped = (String::new(), "default".to_owned());
            assert_eq!(
                super::decode(&super::encode(7, &cluster_scoped)),
                Ok((7, cluster_scoped))
            );
            assert_eq!(
                super::decode("ab!c"),
                Err("continue key is not valid: illegal base64 data at input byte 2".to_owned())
            );
            assert!(super::decode("abc").is_err());
            assert_eq!(
                super::decode("gQ"),
                Err("continue key is not valid: invalid character '\\u0081' looking for beginning of value".to_owned())
            );
        }
    }
}
