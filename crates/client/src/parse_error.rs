//! Parse errors of a user's file, told without quoting the file.
//!
//! Why it exists: the files podline parses hold credentials (a kubeconfig's token and
//! `client-key-data`, a pod template's or tasks file's env values, an exec plugin's
//! ExecCredential), and the parsers' own messages quote them: serde-saphyr renders the lines
//! around the error, and serde's "invalid type" messages quote the value they found
//! (`string "hunter2"`, ``integer `1234` ``). These functions say where (line and column) and
//! what kind of error it was, and keep what is structure (field names, the expected type) but
//! never a value: a quoted string becomes `"…"`, a number or boolean its kind only. kubectl says
//! as little (`yaml: line 15: found a tab character`).

use std::fmt::Write as _;

/// A YAML (or JSON read as YAML) error: `line L column C: what was wrong`, with no text of the
/// document (see the module doc).
pub fn yaml(err: &serde_saphyr::Error) -> String {
    let what = yaml_kind(err);
    match err.location() {
        Some(at) if at.line() > 0 => format!("line {} column {}: {what}", at.line(), at.column()),
        _ => what,
    }
}

/// A serde_json error: `line L column C: what was wrong`, with no value of the document.
pub fn json(err: &serde_json::Error) -> String {
    // serde_json's Display ends with " at line L column C"; the position is added back below.
    let text = err.to_string();
    let message = text
        .rsplit_once(" at line ")
        .map_or(text.as_str(), |(message, _)| message);
    let what = serde_message(message);
    if err.line() > 0 {
        format!("line {} column {}: {what}", err.line(), err.column())
    } else {
        what
    }
}

/// The YAML error's kind, without its location (see [`yaml`]).
fn yaml_kind(err: &serde_saphyr::Error) -> String {
    use serde_saphyr::Error as E;
    match err {
        E::WithSnippet { error, .. } => yaml_kind(error),
        #[allow(deprecated)] // `msg` is the deprecated field; the inner error is what we read
        E::AliasError { error, .. } => yaml_kind(error),
        E::SerdeInvalidType {
            unexpected,
            expected,
            ..
        } => format!(
            "invalid type: {}, expected {}",
            kind_only(unexpected),
            serde_message(expected)
        ),
        E::SerdeInvalidValue {
            unexpected,
            expected,
            ..
        } => format!(
            "invalid value: {}, expected {}",
            kind_only(unexpected),
            serde_message(expected)
        ),
        E::SerdeUnknownField {
            field, expected, ..
        } => format!(
            "unknown field `{}`, expected one of {}",
            scrub(field),
            one_of(expected)
        ),
        E::SerdeUnknownVariant {
            variant, expected, ..
        } => format!(
            "unknown variant `{}`, expected one of {}",
            scrub(variant),
            one_of(expected)
        ),
        E::SerdeMissingField { field, .. } => format!("missing field `{field}`"),
        E::DuplicateMappingKey { key, .. } => match key {
            Some(key) => format!("duplicate mapping key `{}`", scrub(key)),
            None => "duplicate mapping key".to_owned(),
        },
        E::QuotingRequired { .. } => {
            "a value that reads as a number or boolean must be quoted to be a string".to_owned()
        }
        E::NonFiniteFloat { .. } => "a non-finite number (NaN or infinity)".to_owned(),
        E::Budget { breach, .. } => budget(breach),
        E::InvalidUtf8Input => "the file is not valid UTF-8".to_owned(),
        E::Eof { .. } => "unexpected end of the document".to_owned(),
        // Every other variant: the crate's own plain rendering (no snippet), scrubbed. Their
        // texts are fixed phrases ("tabs disallowed within this context", "did not find
        // expected ','"), but a custom serde message may quote a value.
        other => {
            let mut text = String::new();
            let mut options = serde_saphyr::RenderOptions::default();
            options.snippets = serde_saphyr::SnippetMode::Off;
            if other.render_to(&mut text, options).is_err() {
                return "not valid YAML".to_owned();
            }
            let message = text
                .strip_prefix("error: ")
                .unwrap_or(&text)
                .split('\n')
                .next()
                .unwrap_or_default();
            // The plain rendering names the position, before or after the message: the caller
            // adds it itself.
            let message = match message.split_once(": ") {
                Some((head, rest)) if head.starts_with("line ") => rest,
                _ => message,
            };
            let message = message
                .rsplit_once(" at line ")
                .map_or(message, |(message, _)| message);
            serde_message(message)
        }
    }
}

/// Whether the YAML reader refused the document for having more nodes than
/// [`MAX_YAML_NODES`] (the error may come wrapped with its position).
pub fn is_node_limit(err: &serde_saphyr::Error) -> bool {
    use serde_saphyr::Error as E;
    match err {
        E::WithSnippet { error, .. } => is_node_limit(error),
        #[allow(deprecated)] // `msg` is the deprecated field; the inner error is what we read
        E::AliasError { error, .. } => is_node_limit(error),
        E::Budget {
            breach: serde_saphyr::budget::BudgetBreach::Nodes { .. },
            ..
        } => true,
        _ => false,
    }
}

/// The YAML reader's resource limits, named: a file that breaks one is refused as a whole.
fn budget(breach: &serde_saphyr::budget::BudgetBreach) -> String {
    use serde_saphyr::budget::BudgetBreach as B;
    match breach {
        B::Nodes { .. } => format!(
            "the document has more than {} YAML nodes (values, lists and mappings), the YAML reader's limit",
            MAX_YAML_NODES
        ),
        B::Depth { .. } => "the document nests lists and mappings too deeply".to_owned(),
        other => format!("the document breaks a limit of the YAML reader ({other:?})"),
    }
}

/// How many nodes serde-saphyr's default budget lets a document have (its `max_nodes`).
pub const MAX_YAML_NODES: usize = 250_000;

/// `a`, `b` or `c` for serde's list of expected names.
fn one_of(expected: &[&str]) -> String {
    if expected.is_empty() {
        return "nothing (no fields)".to_owned();
    }
    expected
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// serde's description of a value it did not expect (`string "x"`, ``integer `5` ``, `map`),
/// as its kind only.
fn kind_only(unexpected: &str) -> String {
    let kind = unexpected
        .split(['"', '`'])
        .next()
        .unwrap_or_default()
        .trim();
    if kind.is_empty() {
        "a value".to_owned()
    } else {
        kind.to_owned()
    }
}

/// A serde message with every value taken out: a double-quoted string (escapes included)
/// becomes `"…"`, and the backquoted value after `integer`, `floating point`, `boolean` or
/// `character` (serde's spelling of an unexpected scalar) becomes `` `…` ``. Backquoted names
/// elsewhere (`missing field `image``) are structure and stay.
pub fn serde_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(['"', '`']) {
        let (head, tail) = rest.split_at(at);
        out.push_str(head);
        let quote = tail.chars().next().unwrap_or('"');
        let body = &tail[1..];
        let end = closing(body, quote);
        let inner = &body[..end.unwrap_or(body.len())];
        let after = end.map_or("", |end| &body[end + 1..]);
        let is_value = quote == '"'
            || ["integer ", "floating point ", "boolean ", "character "]
                .iter()
                .any(|kind| out.ends_with(kind));
        if is_value {
            let _ = write!(out, "{quote}…{quote}");
        } else {
            let _ = write!(out, "{quote}{}{quote}", scrub(inner));
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Where the quote that opened `body` closes (a backslash escapes the next character inside
/// double quotes, as serde's `Debug` of a string writes it).
fn closing(body: &str, quote: char) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' && quote == '"' {
            escaped = true;
        } else if c == quote {
            return Some(i);
        }
    }
    None
}

/// A name (field, key, variant) as shown: control characters dropped, at most 64 characters.
fn scrub(name: &str) -> String {
    let mut shown: String = name.chars().filter(|c| !c.is_control()).take(64).collect();
    if name.chars().count() > 64 {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARKER: &str = "Zq9Marker";

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        name: String,
        count: Option<u32>,
        tags: Option<Vec<String>>,
    }

    fn yaml_error(text: &str) -> String {
        let err = serde_saphyr::from_str::<Doc>(text).unwrap_err();
        let full = err.to_string();
        let told = yaml(&err);
        eprintln!("{text:?}: {told}");
        assert!(
            !told.contains(MARKER),
            "{text:?} (kube's text: {full}): {told}"
        );
        told
    }

    #[test]
    fn a_yaml_syntax_error_should_give_the_position_and_kind_and_no_line_of_the_file() {
        let text = format!("name: a\ntags:\n\t- \"{MARKER}\"\n  - x: \"{MARKER}\"\n");
        let told = yaml_error(&text);
        assert!(told.starts_with("line 3 column "), "{told}");
        assert!(told.contains("tab"), "{told}");
    }

    #[test]
    fn a_yaml_type_error_should_name_the_kind_of_value_only() {
        let told = yaml_error(&format!("name: [\"{MARKER}\"]\n"));
        assert_eq!(told, "line 1 column 7: expected string scalar");
        for count in [MARKER.to_owned(), format!("\"{MARKER}\"")] {
            let told = yaml_error(&format!("name: a\ncount: {count}\n"));
            assert_eq!(told, "line 2 column 8: invalid u32");
        }
        let told = yaml_error(&format!("name: a\ntags: {{a: \"{MARKER}\"}}\n"));
        assert_eq!(told, "line 2 column 7: expected sequence start");
    }

    #[test]
    fn a_yaml_unknown_field_should_be_named_with_the_expected_ones() {
        let told = yaml_error(&format!("name: \"{MARKER}\"\nnmae: x\n"));
        assert!(
            told.contains("unknown field `nmae`") && told.contains("`name`"),
            "{told}"
        );
    }

    #[test]
    fn json_errors_should_keep_the_position_and_drop_every_value() {
        for (text, want) in [
            (
                format!(r#"{{"name": ["{MARKER}"]}}"#),
                "invalid type: sequence",
            ),
            (
                format!(r#"{{"name": "a", "count": "{MARKER}"}}"#),
                "invalid type: string",
            ),
            (
                format!(r#"{{"name": "a", "count": 4294967296{MARKER}}}"#),
                "line 1 column",
            ),
            (
                format!(r#"{{"name": "{MARKER}", "tags": [1]}}"#),
                "invalid type: integer `…`",
            ),
            (format!(r#"{{"name": "{MARKER}\""#), "EOF"),
        ] {
            let err = serde_json::from_str::<Doc>(&text).unwrap_err();
            let told = json(&err);
            assert!(!told.contains(MARKER), "{text}: {told}");
            assert!(told.contains(want), "{text}: {told}");
            assert!(told.starts_with("line 1 column "), "{text}: {told}");
        }
    }

    #[test]
    fn serde_messages_should_lose_values_and_keep_names() {
        assert_eq!(
            serde_message(r#"invalid type: string "a\"b", expected a sequence"#),
            r#"invalid type: string "…", expected a sequence"#
        );
        assert_eq!(
            serde_message("invalid type: integer `1234`, expected a string"),
            "invalid type: integer `…`, expected a string"
        );
        assert_eq!(
            serde_message("invalid type: boolean `true`, expected a string"),
            "invalid type: boolean `…`, expected a string"
        );
        assert_eq!(
            serde_message("unknown field `imgae`, expected one of `image`, `name`"),
            "unknown field `imgae`, expected one of `image`, `name`"
        );
        assert_eq!(serde_message(r#"unterminated "abc"#), r#"unterminated "…""#);
    }
}
