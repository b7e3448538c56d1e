//! Decoding of watch lines and LIST pages, one object at a time.
//!
//! The happy path is what kube-rs does (one serde pass into `WatchEvent<K>`, or the list's items
//! into `K`); only an object that fails gets a second, lenient look: the envelope as generic JSON,
//! the identity fields that are strings, and the path of what did not decode. So a bad object
//! costs a [`Skipped`] instead of the stream, and a good one costs what it always did.

use kube::api::WatchEvent;
use kube::core::{ListMeta, Status};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use super::lines::Frame;
use super::skipped::{SkipKind, Skipped, SkippedIn, elide_values};

/// What one framed line of a watch body holds.
#[derive(Debug)]
pub(super) enum Line<K> {
    /// A watch event (`ERROR` included: its Status).
    Event(WatchEvent<K>),
    /// A line that did not decode.
    Skipped(Skipped),
    /// Nothing to report: a blank line, or the start of an event cut by the end of the body (the
    /// event is read again after the resume, as its resourceVersion was never reached).
    Nothing,
}

/// Decodes one framed piece of a watch body; `max` is the line bound (for the message).
pub(super) fn decode_frame<K: DeserializeOwned>(frame: Frame, max: usize) -> Line<K> {
    match frame {
        Frame::Line(bytes) => decode_line(&bytes, false),
        Frame::Tail(bytes) => decode_line(&bytes, true),
        Frame::TooLong { bytes } => Line::Skipped(Skipped::blind(
            SkippedIn::Stream,
            SkipKind::TooLong,
            format!("a line of {bytes} bytes is over the bound of {max} bytes"),
        )),
    }
}

/// Decodes one line. `tail`: the body ended without a newline after it, so a document that stops
/// early was cut, not malformed.
pub(super) fn decode_line<K: DeserializeOwned>(line: &[u8], tail: bool) -> Line<K> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Line::Nothing;
    }
    let first = match serde_json::from_slice::<WatchEvent<K>>(line) {
        Ok(event) => return Line::Event(event),
        Err(err) => err,
    };
    if tail && first.is_eof() {
        return Line::Nothing;
    }
    let envelope = match serde_json::from_slice::<Value>(line) {
        Ok(value) => value,
        Err(err) if tail && err.is_eof() => return Line::Nothing,
        Err(err) => {
            return Line::Skipped(Skipped::blind(
                SkippedIn::Stream,
                SkipKind::NotJson,
                elide_values(&err.to_string()),
            ));
        }
    };
    decode_envelope(envelope)
}

/// The lenient look at a line that is JSON but not a `WatchEvent<K>`.
fn decode_envelope<K: DeserializeOwned>(mut envelope: Value) -> Line<K> {
    let kind = envelope
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let object = envelope.get_mut("object").map(Value::take);
    let source = match kind.as_deref() {
        Some("ADDED") => SkippedIn::Added,
        Some("MODIFIED") => SkippedIn::Modified,
        Some("DELETED") => SkippedIn::Deleted,
        Some("BOOKMARK") => SkippedIn::Bookmark,
        Some("ERROR") => SkippedIn::Error,
        Some(_) => {
            let mut skipped = identify(object.as_ref(), SkippedIn::Stream, SkipKind::NotAnEvent);
            skipped.error = "an unknown event type".into();
            return Line::Skipped(skipped);
        }
        None => {
            // kube-rs reads a bare Status line as an error from the server; so does this, but
            // only when the line says it is one (every field of a Status has a default, so any
            // JSON object would read as one, with code 0).
            if envelope.get("kind").and_then(Value::as_str) == Some("Status")
                && let Ok(status) = Status::deserialize(&envelope)
            {
                return Line::Event(WatchEvent::Error(Box::new(status)));
            }
            return Line::Skipped(Skipped::blind(
                SkippedIn::Stream,
                SkipKind::NotAnEvent,
                "no event `type`".into(),
            ));
        }
    };
    let Some(object) = object.filter(Value::is_object) else {
        let mut skipped = Skipped::blind(source, SkipKind::NotAnEvent, String::new());
        skipped.error = "no `object` in the event".into();
        return Line::Skipped(skipped);
    };
    match source {
        SkippedIn::Bookmark => {
            let mut skipped = identify(Some(&object), source, SkipKind::NotAnEvent);
            match skipped.resource_version.take() {
                Some(resource_version) => {
                    Line::Event(WatchEvent::Bookmark(bookmark(resource_version)))
                }
                None => {
                    skipped.error = "a bookmark without a resourceVersion".into();
                    Line::Skipped(skipped)
                }
            }
        }
        SkippedIn::Error => {
            let mut skipped = identify(Some(&object), source, SkipKind::NotAnEvent);
            skipped.error = match Status::deserialize(&object) {
                Ok(_) => "an ERROR event the client could not read".into(),
                Err(err) => format!(
                    "its object is not a Status: {}",
                    elide_values(&err.to_string())
                ),
            };
            Line::Skipped(skipped)
        }
        _ => match decode_object::<K>(&object) {
            Ok(obj) => Line::Event(match source {
                SkippedIn::Added => WatchEvent::Added(obj),
                SkippedIn::Deleted => WatchEvent::Deleted(obj),
                _ => WatchEvent::Modified(obj),
            }),
            Err(error) => {
                let mut skipped = identify(Some(&object), source, SkipKind::Object);
                skipped.error = error;
                Line::Skipped(skipped)
            }
        },
    }
}

/// `K` from a JSON object, or what did not decode: the field path and serde's message, with the
/// values it quotes elided.
fn decode_object<K: DeserializeOwned>(object: &Value) -> Result<K, String> {
    serde_path_to_error::deserialize::<_, K>(object).map_err(|err| {
        let path = err.path().to_string();
        let message = elide_values(&err.inner().to_string());
        if path.is_empty() || path == "." {
            message
        } else {
            format!("{path}: {message}")
        }
    })
}

/// A skip of `object` carrying the identity fields that are strings.
fn identify(object: Option<&Value>, source: SkippedIn, kind: SkipKind) -> Skipped {
    let text = |field: &str| {
        object
            .and_then(|o| o.get("metadata"))
            .and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    Skipped {
        source,
        kind,
        namespace: text("namespace"),
        name: text("name"),
        uid: text("uid"),
        resource_version: text("resourceVersion"),
        error: String::new(),
    }
}

fn bookmark(resource_version: String) -> kube::core::watch::Bookmark {
    kube::core::watch::Bookmark {
        types: kube::core::TypeMeta::default(),
        metadata: kube::core::watch::BookmarkMeta {
            resource_version,
            annotations: Default::default(),
        },
    }
}

/// One LIST page, its items decoded one by one.
#[derive(Debug)]
pub(crate) struct Page<K> {
    /// Each item, or what could be read of it if it did not decode.
    pub(crate) items: Vec<Result<K, Box<Skipped>>>,
    /// The list's metadata (`continue`, `resourceVersion`).
    pub(crate) metadata: ListMeta,
}

/// The page's envelope: its metadata decoded, its items left raw.
#[derive(Deserialize)]
struct RawPage<'a> {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(borrow, default)]
    items: Option<Vec<&'a RawValue>>,
}

/// Decodes a LIST answer. Fails only when the page itself is not a list (not JSON, or its
/// metadata does not decode); a bad item is one [`Skipped`] among the items.
pub(crate) fn decode_page<K: DeserializeOwned>(text: &str) -> Result<Page<K>, serde_json::Error> {
    let raw: RawPage<'_> = serde_json::from_str(text)?;
    let items = raw
        .items
        .unwrap_or_default()
        .into_iter()
        .map(|item| {
            serde_json::from_str::<K>(item.get()).map_err(|_| {
                let value = serde_json::from_str::<Value>(item.get()).unwrap_or(Value::Null);
                let mut skipped = identify(Some(&value), SkippedIn::List, SkipKind::Object);
                skipped.error = match decode_object::<K>(&value) {
                    Err(error) => error,
                    // Decodes from the generic form but not from the text: say so, no more.
                    Ok(_) => "the item does not decode".into(),
                };
                Box::new(skipped)
            })
        })
        .collect();
    Ok(Page {
        items,
        metadata: raw.metadata,
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::*;

    fn line(value: &Value) -> Line<Pod> {
        decode_line(value.to_string().as_bytes(), false)
    }

    fn skipped(line: Line<Pod>) -> Skipped {
        match line {
            Line::Skipped(s) => s,
            other => panic!("expected a skip, got {other:?}"),
        }
    }

    fn pod(name: &str, rv: &str) -> Value {
        json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":name,"namespace":"ns","uid":format!("uid-{name}"),"resourceVersion":rv}})
    }

    #[test]
    fn good_events_should_decode_as_kube_decodes_them() {
        assert!(matches!(
            line(&json!({"type":"ADDED","object":pod("a","1")})),
            Line::Event(WatchEvent::Added(_))
        ));
        assert!(matches!(
            line(&json!({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":410,"reason":"Expired"}})),
            Line::Event(WatchEvent::Error(s)) if s.code == 410
        ));
        assert!(matches!(line(&json!({})), Line::Skipped(_)));
        assert!(matches!(decode_line::<Pod>(b"   ", false), Line::Nothing));
    }

    /// The issue's case: a deletionTimestamp no client decodes. The skip names the object, keeps
    /// its resourceVersion (to resume past it) and says which field failed, not its value.
    #[test]
    fn an_undecodable_object_should_be_skipped_with_its_identity_and_the_failing_field() {
        let mut bad = pod("bad", "42");
        bad["metadata"]["deletionTimestamp"] = json!("10000-01-01T00:00:00Z");
        let s = skipped(line(&json!({"type":"MODIFIED","object":bad})));
        assert_eq!(s.source, SkippedIn::Modified);
        assert_eq!(s.kind, SkipKind::Object);
        assert_eq!(s.object_name(), "ns/bad");
        assert_eq!(s.uid.as_deref(), Some("uid-bad"));
        assert_eq!(s.resource_version.as_deref(), Some("42"));
        assert!(
            s.error.starts_with("metadata.deletionTimestamp: "),
            "{}",
            s.error
        );
        assert!(!s.error.contains("10000"), "no value quoted: {}", s.error);
    }

    /// A value serde would quote (here an env value where a list belongs) is not in the message.
    #[test]
    fn a_skip_should_not_quote_the_objects_values() {
        let mut bad = pod("leaky", "5");
        bad["spec"] = json!({"containers":[{"name":"c","env":"SECRET=hunter2"}]});
        let s = skipped(line(&json!({"type":"ADDED","object":bad})));
        assert!(
            s.error.starts_with("spec.containers[0].env: "),
            "{}",
            s.error
        );
        assert!(!s.error.contains("hunter2"), "{}", s.error);
        assert!(!s.to_string().contains("hunter2"), "{s}");
    }

    /// Metadata that is not an object: nothing to identify, the failure still named.
    #[test]
    fn bad_metadata_should_be_skipped_without_an_identity() {
        let s = skipped(line(
            &json!({"type":"DELETED","object":{"kind":"Pod","metadata":"garbled"}}),
        ));
        assert!(s.is_deletion());
        assert_eq!(
            (s.name.as_deref(), s.resource_version.as_deref()),
            (None, None)
        );
        assert!(s.error.starts_with("metadata: "), "{}", s.error);
        let mut wrong = pod("n", "9");
        wrong["metadata"]["name"] = json!(17);
        let s = skipped(line(&json!({"type":"ADDED","object":wrong})));
        assert_eq!(s.name, None, "a name that is not a string is not read");
        assert_eq!(s.resource_version.as_deref(), Some("9"));
        assert!(s.error.starts_with("metadata.name: "), "{}", s.error);
    }

    #[test]
    fn lines_that_are_not_events_should_be_skipped_by_kind() {
        let s = skipped(decode_line::<Pod>(b"<html>proxy error</html>", false));
        assert_eq!((s.source, s.kind), (SkippedIn::Stream, SkipKind::NotJson));
        let s = skipped(decode_line::<Pod>(b"\xff\xfe{}", false));
        assert_eq!(s.kind, SkipKind::NotJson);
        let s = skipped(line(&json!({"type":"SYNC","object":pod("x","3")})));
        assert_eq!(
            (s.kind, s.resource_version.as_deref()),
            (SkipKind::NotAnEvent, Some("3"))
        );
        let s = skipped(line(&json!({"type":"ADDED"})));
        assert_eq!((s.source, s.kind), (SkippedIn::Added, SkipKind::NotAnEvent));
        let s = skipped(line(&json!({"type":"ERROR","object":{"code":"x"}})));
        assert_eq!(s.source, SkippedIn::Error);
        // Not a Status by its own word: not read as one with code 0.
        let s = skipped(line(&json!({"code":"x","message":"m"})));
        assert_eq!(s.kind, SkipKind::NotAnEvent);
        assert!(matches!(
            line(&json!({"kind":"Status","apiVersion":"v1","code":500,"message":"m"})),
            Line::Event(WatchEvent::Error(s)) if s.code == 500
        ));
    }

    /// A body cut in the middle of an event is a cut (the event comes again after the resume),
    /// not an undecodable line; a complete event without its newline is read.
    #[test]
    fn a_cut_tail_should_be_nothing_and_a_whole_tail_an_event() {
        let event = json!({"type":"ADDED","object":pod("a","1")}).to_string();
        let cut = &event.as_bytes()[..event.len() / 2];
        assert!(matches!(decode_line::<Pod>(cut, true), Line::Nothing));
        assert!(matches!(decode_line::<Pod>(cut, false), Line::Skipped(_)));
        assert!(matches!(
            decode_line::<Pod>(event.as_bytes(), true),
            Line::Event(WatchEvent::Added(_))
        ));
    }

    #[test]
    fn a_bookmark_should_need_only_its_resource_version() {
        assert!(matches!(
            line(&json!({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"77"}}})),
            Line::Event(WatchEvent::Bookmark(b)) if b.metadata.resource_version == "77"
        ));
        let s = skipped(line(&json!({"type":"BOOKMARK","object":{"metadata":{}}})));
        assert_eq!(s.source, SkippedIn::Bookmark);
    }

    #[test]
    fn a_list_page_should_decode_item_by_item() {
        let mut bad = pod("bad", "2");
        bad["status"] = json!({"containerStatuses":"garbled"});
        let text = json!({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"tok"},"items":[pod("a","1"), bad, pod("c","3")]}).to_string();
        let page = decode_page::<Pod>(&text).unwrap();
        assert_eq!(page.metadata.resource_version.as_deref(), Some("9"));
        assert_eq!(page.metadata.continue_.as_deref(), Some("tok"));
        let names: Vec<String> = page
            .items
            .iter()
            .map(|item| match item {
                Ok(p) => p.metadata.name.clone().unwrap(),
                Err(s) => format!(
                    "skipped {} {}",
                    s.object_name(),
                    s.error.split(':').next().unwrap()
                ),
            })
            .collect();
        assert_eq!(names, ["a", "skipped ns/bad status.containerStatuses", "c"]);
        let skip = page.items[1].as_ref().unwrap_err();
        assert!(skip.is_listed() && skip.uid.as_deref() == Some("uid-bad"));
        assert!(decode_page::<Pod>("not json").is_err());
        assert!(decode_page::<Pod>(r#"{"metadata":{"resourceVersion":5}}"#).is_err());
        let empty =
            decode_page::<Pod>(r#"{"metadata":{"resourceVersion":"5"},"items":null}"#).unwrap();
        assert!(empty.items.is_empty());
    }
}
