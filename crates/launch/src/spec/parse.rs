//! Parsing `KEY=VALUE` values, resource lists and pod templates (YAML or JSON).
//!
//! Each value parser takes the name its caller knows the value by (`flag`) and repeats it in
//! errors, so a message points at what the user typed without this crate naming it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::validate::is_quantity;
use crate::error::SpecError;

/// Parses `KEY=VALUE` (an env variable, label, annotation or node selector entry). The value
/// may be empty and may contain `=`; `example` is a valid value for the message.
pub fn parse_key_value(
    flag: &'static str,
    example: &'static str,
    s: &str,
) -> Result<(String, String), SpecError> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(SpecError::NotKeyValue {
            flag,
            value: s.to_owned(),
            example,
        }),
    }
}

/// Parses `cpu=500m,memory=1Gi`: resource requests or limits.
pub fn parse_resources(flag: &'static str, s: &str) -> Result<BTreeMap<String, String>, SpecError> {
    let mut out = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = parse_key_value(flag, "cpu=500m,memory=1Gi", part)?;
        if !is_quantity(&v) {
            return Err(SpecError::InvalidQuantity {
                flag,
                value: part.to_owned(),
            });
        }
        out.insert(k, v);
    }
    if out.is_empty() {
        return Err(SpecError::NotKeyValue {
            flag,
            value: s.to_owned(),
            example: "cpu=500m,memory=1Gi",
        });
    }
    Ok(out)
}

/// Parses a pod template from YAML or JSON text (JSON is valid YAML, but serde_json gives
/// better messages for JSON files, so it is tried first when the text looks like JSON).
///
/// An error names the position and the kind of error, never text of the file: a template holds
/// env values, and the parsers' own messages quote the lines around the error and the values
/// they found ([`podline_client::parse_error`]).
pub fn parse_template(path: &str, text: &str) -> Result<Pod, SpecError> {
    let parsed = if text.trim_start().starts_with('{') {
        serde_json::from_str::<Pod>(text).map_err(|e| podline_client::parse_error::json(&e))
    } else {
        serde_saphyr::from_str::<Pod>(text).map_err(|e| podline_client::parse_error::yaml(&e))
    };
    parsed.map_err(|message| SpecError::TemplateParse {
        path: path.to_owned(),
        message,
    })
}

/// Reads and parses a pod template file.
pub fn load_template(path: &std::path::Path) -> Result<Pod, SpecError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| SpecError::TemplateRead {
        path: shown.clone(),
        source,
    })?;
    parse_template(&shown, &text)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn json_template_should_parse_and_garbage_should_name_the_file() {
        let pod = parse_template(
            "t.json",
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#,
        )
        .unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("x"));
        let err = parse_template("bad.yaml", "spec: [1, 2")
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad.yaml"), "{err}");
    }

    /// A template holds env values: a parse error gives the position and kind, never a line
    /// of the file or a value (serde-saphyr's own message quotes the lines around the error).
    #[test]
    fn a_template_parse_error_should_quote_nothing_of_the_file() {
        const MARKER: &str = "Zq9EnvMarker";
        for text in [
            format!(
                "spec:\n  containers:\n  - name: c\n    env:\n    - name: A\n\t  value: {MARKER}\n"
            ),
            format!(
                "spec:\n  containers:\n  - name: c\n    env:\n    - name: A\n      value: [{MARKER}]\n"
            ),
            format!("spec:\n  containers:\n  - name: c\n    env: {MARKER}\n"),
            format!(
                r#"{{"spec": {{"containers": [{{"name": "c", "env": [{{"name": "A", "value": ["{MARKER}"]}}]}}]}}}}"#
            ),
            format!(r#"{{"spec": {{"containers": [{{"name": "c", "env": "{MARKER}"}}]}}}}"#),
            format!(
                r#"{{"spec": {{"containers": [{{"name": "c", "env": [{{"name": "A", "value": "{MARKER}"#
            ),
        ] {
            let err = parse_template("pod.yaml", &text).unwrap_err().to_string();
            assert!(!err.contains(MARKER), "{text:?}: {err}");
            assert!(
                err.starts_with("pod.yaml: ") && err.contains("line "),
                "{text:?}: {err}"
            );
        }
    }

    #[test]
    fn key_value_parsing_should_name_the_flag() {
        assert_eq!(
            parse_key_value("env", "K=V", "A=b=c").unwrap(),
            ("A".into(), "b=c".into())
        );
        assert_eq!(
            parse_key_value("env", "K=V", "A=").unwrap(),
            ("A".into(), String::new())
        );
        let err = parse_key_value("env", "K=V", "novalue")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("env: ") && err.contains("novalue"), "{err}");
        assert!(parse_key_value("labels", "k=v", "=v").is_err());
    }
}
