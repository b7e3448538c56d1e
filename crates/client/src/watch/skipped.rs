//! What a watch yields for a watch line or LIST item it could not decode ([`Skipped`]), and how
//! it words what did not decode without quoting the object.
//!
//! One bad object must not stop a watch: kube-rs reads an undecodable watch line as a `Status`
//! (every field of which has a default, so any JSON object reads as one, with code 0) and a
//! consumer that treats in-stream statuses as fatal stops, and then resumes into the same event
//! after every restart. The watch decodes lines and LIST items itself instead, and yields each one
//! that does not decode as an [`Event::Skipped`](super::Event::Skipped) carrying what could still
//! be read (namespace, name, uid, resourceVersion) and what did not decode.

/// Where a skipped object came from: a LIST page or a watch event of this type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SkippedIn {
    /// An item of a LIST page (between `Init` and `InitDone`).
    List,
    /// An `ADDED` event.
    Added,
    /// A `MODIFIED` event.
    Modified,
    /// A `DELETED` event: the object is gone, whatever its last state was.
    Deleted,
    /// A `BOOKMARK` event without a resourceVersion.
    Bookmark,
    /// An `ERROR` event whose object is not a Status.
    Error,
    /// A line that is not a watch event at all (no or an unknown `type`, not JSON, too long).
    Stream,
}

impl SkippedIn {
    /// A short name for logs (`list`, `added`, `modified`, `deleted`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            SkippedIn::List => "list",
            SkippedIn::Added => "added",
            SkippedIn::Modified => "modified",
            SkippedIn::Deleted => "deleted",
            SkippedIn::Bookmark => "bookmark",
            SkippedIn::Error => "error",
            SkippedIn::Stream => "stream",
        }
    }
}

/// How a line or item failed to decode: the metric label of a skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SkipKind {
    /// A watch event or LIST item whose object does not decode as the watched type (a field of
    /// the wrong type, a timestamp out of range...).
    Object,
    /// A JSON line that is not a watch event (no `type`, an unknown `type`, no `object`).
    NotAnEvent,
    /// A line that is not JSON (or not UTF-8).
    NotJson,
    /// A line longer than [`WatchConfig::max_line_bytes`](super::WatchConfig::max_line_bytes),
    /// dropped without being read.
    TooLong,
}

impl SkipKind {
    /// The stable metric label: `object`, `not_an_event`, `not_json`, `too_long`.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipKind::Object => "object",
            SkipKind::NotAnEvent => "not_an_event",
            SkipKind::NotJson => "not_json",
            SkipKind::TooLong => "too_long",
        }
    }
}

impl std::fmt::Display for SkipKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A watch line or LIST item that did not decode and was skipped; the watch went on.
///
/// The identity fields are read leniently from the raw object (each only if it is a string), so
/// a consumer can log the object by name, keep it out of "vanished" after a re-list (see
/// [`Skipped::uid`]) and persist [`Skipped::resource_version`] as a resume point: the watch itself
/// resumes after a skipped event, never into it again. `error` says what did not decode (the
/// field path and serde's expectation) with every quoted value elided, so no field value of the
/// object (an env value, a secret) reaches a log through it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Where it came from.
    pub source: SkippedIn,
    /// How it failed.
    pub kind: SkipKind,
    /// `metadata.namespace`, if readable.
    pub namespace: Option<String>,
    /// `metadata.name`, if readable.
    pub name: Option<String>,
    /// `metadata.uid`, if readable.
    pub uid: Option<String>,
    /// `metadata.resourceVersion`, if readable.
    pub resource_version: Option<String>,
    /// What did not decode, e.g. `metadata.deletionTimestamp: ...`; never a field's value.
    pub error: String,
}

impl Skipped {
    /// A skip that could read nothing of the object.
    pub(crate) fn blind(source: SkippedIn, kind: SkipKind, error: String) -> Self {
        Skipped {
            source,
            kind,
            namespace: None,
            name: None,
            uid: None,
            resource_version: None,
            error,
        }
    }

    /// True for an object the server reported deleted (a `DELETED` event): it is gone, even
    /// though its last state could not be read.
    pub fn is_deletion(&self) -> bool {
        self.source == SkippedIn::Deleted
    }

    /// True for an item of a LIST page: the object exists, and a consumer reconciling at
    /// `InitDone` must count it as present (by [`Skipped::uid`], or by namespace and name).
    pub fn is_listed(&self) -> bool {
        self.source == SkippedIn::List
    }

    /// `namespace/name` (or whichever part could be read; `?` for neither), for log lines.
    pub fn object_name(&self) -> String {
        match (&self.namespace, &self.name) {
            (Some(ns), Some(name)) => format!("{ns}/{name}"),
            (None, Some(name)) => name.clone(),
            (Some(ns), None) => format!("{ns}/?"),
            (None, None) => "?".to_owned(),
        }
    }
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let source = match self.source {
            SkippedIn::List => "a LIST item",
            SkippedIn::Added => "an ADDED event",
            SkippedIn::Modified => "a MODIFIED event",
            SkippedIn::Deleted => "a DELETED event",
            SkippedIn::Bookmark => "a BOOKMARK event",
            SkippedIn::Error => "an ERROR event",
            SkippedIn::Stream => "a watch line",
        };
        match self.kind {
            SkipKind::Object => write!(
                f,
                "object {} in {source} does not decode: {}",
                self.object_name(),
                self.error
            ),
            SkipKind::NotAnEvent => write!(f, "{source} is not a watch event: {}", self.error),
            SkipKind::NotJson => write!(f, "{source} is not JSON: {}", self.error),
            SkipKind::TooLong => write!(f, "{source} was dropped: {}", self.error),
        }
    }
}

/// `message` with the content of every `"..."` and `` `...` `` elided: serde quotes the value it
/// found (`invalid type: string "s3cr3t", expected i32`), and an object's values may be secrets.
/// Public so that a consumer decoding further than the watch does (the recorder's typed pod out
/// of a `DynamicObject`) words its own serde errors without values too.
pub fn elide_values(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut chars = message.chars();
    while let Some(c) = chars.next() {
        if c != '"' && c != '`' {
            out.push(c);
            continue;
        }
        out.push(c);
        out.push('…');
        let mut escaped = false;
        let mut closed = false;
        for inner in chars.by_ref() {
            if escaped {
                escaped = false;
            } else if inner == '\\' && c == '"' {
                escaped = true;
            } else if inner == c {
                closed = true;
                break;
            }
        }
        if closed {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_values_should_be_elided() {
        assert_eq!(
            elide_values(r#"invalid type: string "s3cr3t \"x\"", expected i32 at line 1 column 9"#),
            r#"invalid type: string "…", expected i32 at line 1 column 9"#
        );
        assert_eq!(
            elide_values("invalid type: integer `4242`, expected a string"),
            "invalid type: integer `…`, expected a string"
        );
        assert_eq!(elide_values(r#"unterminated "abc"#), r#"unterminated "…"#);
        assert_eq!(elide_values("no quotes"), "no quotes");
    }

    #[test]
    fn a_skip_should_name_the_object_and_what_did_not_decode() {
        let skipped = Skipped {
            source: SkippedIn::Modified,
            kind: SkipKind::Object,
            namespace: Some("ns".into()),
            name: Some("p".into()),
            uid: None,
            resource_version: Some("7".into()),
            error: "metadata.deletionTimestamp: bad".into(),
        };
        assert_eq!(
            skipped.to_string(),
            "object ns/p in a MODIFIED event does not decode: metadata.deletionTimestamp: bad"
        );
        assert!(!skipped.is_deletion() && !skipped.is_listed());
    }
}
