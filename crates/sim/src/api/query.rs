//! Query parameters of list, watch, delete and log requests.

use serde::Deserialize;

use crate::status::ApiError;

/// Parameters of list/watch/get/delete requests (unknown ones are ignored, like the real server).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListParams {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `limit` (page size).
    pub limit: Option<i64>,
    /// `continue` token from a previous page.
    #[serde(rename = "continue")]
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `timeoutSeconds` (watch).
    pub timeout_seconds: Option<i64>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: Option<bool>,
    /// `sendInitialEvents` (streaming lists).
    pub send_initial_events: Option<bool>,
    /// `gracePeriodSeconds` (delete).
    pub grace_period_seconds: Option<i64>,
    /// `dryRun` (create/update/patch/delete): `All` validates without storing.
    pub dry_run: Option<String>,
}

/// Parameters of `pods/{name}/log`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
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

/// Parses the query string into `T`, answering 400 like the real server on bad values.
pub fn parse<T: for<'de> Deserialize<'de> + Default>(query: Option<&str>) -> Result<T, ApiError> {
    match query {
        None | Some("") => Ok(T::default()),
        Some(q) => serde_urlencoded_from_str(q),
    }
}

fn serde_urlencoded_from_str<T: for<'de> Deserialize<'de>>(q: &str) -> Result<T, ApiError> {
    let uri: http::Uri = format!("/?{q}")
        .parse()
        .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))?;
    axum::extract::Query::<T>::try_from_uri(&uri)
        .map(|axum::extract::Query(v)| v)
        .map_err(|e| ApiError::bad_request(e.body_text()))
}

/// Continue tokens: opaque to clients; here the list's resourceVersion and the last key, in hex.
pub mod continue_token {
    use crate::cluster::Key;

    /// Encodes a token.
    pub fn encode(rv: u64, last: &Key) -> String {
        let raw = format!("{rv}\u{0}{}\u{0}{}", last.0, last.1);
        raw.bytes().map(|b| format!("{b:02x}")).collect()
    }

    /// Decodes a token; None if it is not one of ours.
    pub fn decode(token: &str) -> Option<(u64, Key)> {
        if !token.len().is_multiple_of(2) {
            return None;
        }
        let bytes: Option<Vec<u8>> = (0..token.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok())
            .collect();
        let raw = String::from_utf8(bytes?).ok()?;
        let mut parts = raw.split('\u{0}');
        let rv = parts.next()?.parse().ok()?;
        let ns = parts.next()?.to_owned();
        let name = parts.next()?.to_owned();
        Some((rv, (ns, name)))
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn tokens_round_trip_and_garbage_is_rejected() {
            let key = ("ns".to_owned(), "pod-1".to_owned());
            let token = super::encode(42, &key);
            assert_eq!(super::decode(&token), Some((42, key)));
            assert_eq!(super::decode("zz"), None);
            assert_eq!(super::decode("abc"), None);
        }
    }
}
