//! KFP v1 SDK annotations: the component spec and the parameter arguments.

use std::collections::BTreeMap;

use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use super::argo::sanitize_name;
use crate::proto::Value;

/// What the `pipelines.kubeflow.org/component_spec` annotation tells.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ComponentSpec {
    /// `spec.name`: the component name (`component_id`).
    pub name: String,
    /// `<name>@sha256=<hex of the annotation text>`: the execution type suffix,
    /// so each version of a component gets its own type.
    pub version: String,
    /// Output type by sanitized output name (only outputs that have a type).
    pub output_types: BTreeMap<String, String>,
}

/// Why a component spec could not be fully read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The annotation is not JSON (or not an object).
    #[error("not a JSON object: {0}")]
    NotJson(String),
    /// The spec has no string `name`.
    #[error("has no string \"name\"")]
    NoName,
}

impl ComponentSpec {
    /// Parse the annotation text. Output types that are objects (v1 specs
    /// allow `{"GCSPath": {...}}`) use their single key as the type name.
    pub fn parse(text: &str) -> Result<ComponentSpec, SpecError> {
        let json: Json =
            serde_json::from_str(text).map_err(|e| SpecError::NotJson(e.to_string()))?;
        if !json.is_object() {
            return Err(SpecError::NotJson("expected an object".into()));
        }
        let name = json["name"].as_str().ok_or(SpecError::NoName)?.to_owned();
        let digest = Sha256::digest(text.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        let mut output_types = BTreeMap::new();
        for output in json["outputs"].as_array().into_iter().flatten() {
            let Some(out_name) = output["name"].as_str() else {
                continue;
            };
            let ty = match &output["type"] {
                Json::String(s) if !s.is_empty() => Some(s.clone()),
                Json::Object(o) if o.len() == 1 => o.keys().next().cloned(),
                _ => None,
            };
            if let Some(ty) = ty {
                output_types.insert(sanitize_name(out_name), ty);
            }
        }
        Ok(ComponentSpec {
            version: format!("{name}@sha256={hex}"),
            name,
            output_types,
        })
    }
}

/// Parse `pipelines.kubeflow.org/arguments.parameters` into `input:<name>`
/// custom properties, typed like KFP's `value_to_mlmd_value`: integers as
/// int, other numbers as double, null as an empty value, strings as they
/// are, anything else as its text (booleans as Python prints them).
pub fn parameters(text: &str) -> Result<BTreeMap<String, Value>, String> {
    let json: Json = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let Json::Object(map) = json else {
        return Err("expected a JSON object of parameter name to value".into());
    };
    Ok(map
        .into_iter()
        .map(|(k, v)| {
            let value = match v {
                Json::Number(n) => match n.as_i64() {
                    Some(i) => Value::int(i),
                    None => Value::double(n.as_f64().unwrap_or(f64::NAN)),
                },
                Json::Null => Value::default(),
                Json::String(s) => Value::string(s),
                Json::Bool(b) => Value::string(if b { "True" } else { "False" }),
                other => Value::string(other.to_string()),
            };
            (format!("input:{k}"), value)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_version_should_hash_the_raw_annotation_text() {
        let text = r#"{"name": "Train", "outputs": [{"name": "Output Model", "type": "Model"}, {"name": "log"}]}"#;
        let spec = ComponentSpec::parse(text).expect("valid");
        assert_eq!(spec.name, "Train");
        // printf '%s' "$text" | sha256sum
        let hex: String = Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(spec.version, format!("Train@sha256={hex}"));
        assert_eq!(hex.len(), 64);
        assert_eq!(
            spec.output_types.get("Output-Model").map(String::as_str),
            Some("Model")
        );
        assert!(
            !spec.output_types.contains_key("log"),
            "untyped outputs are left out"
        );
    }

    #[test]
    fn dict_output_types_should_use_their_key() {
        let spec = ComponentSpec::parse(
            r#"{"name":"c","outputs":[{"name":"p","type":{"GCSPath":{"data_type":"CSV"}}}]}"#,
        )
        .expect("valid");
        assert_eq!(spec.output_types["p"], "GCSPath");
    }

    #[test]
    fn bad_specs_should_be_errors_not_panics() {
        assert!(matches!(
            ComponentSpec::parse("{nope"),
            Err(SpecError::NotJson(_))
        ));
        assert!(matches!(
            ComponentSpec::parse("[1]"),
            Err(SpecError::NotJson(_))
        ));
        assert_eq!(
            ComponentSpec::parse(r#"{"outputs":[]}"#),
            Err(SpecError::NoName)
        );
    }

    #[test]
    fn parameters_should_be_typed_like_kfp() {
        let p = parameters(r#"{"lr": 0.1, "epochs": 3, "name": "x", "none": null, "flag": true}"#)
            .expect("valid");
        assert_eq!(p["input:lr"], Value::double(0.1));
        assert_eq!(p["input:epochs"], Value::int(3));
        assert_eq!(p["input:name"], Value::string("x"));
        assert_eq!(p["input:none"], Value::default());
        assert_eq!(p["input:flag"], Value::string("True"));
        assert!(parameters("[1,2]").is_err());
        assert!(parameters("{").is_err());
    }
}
