//! The three patch types the real server accepts from kubectl and kube-rs: JSON merge patch
//! (RFC 7386), strategic merge patch (merge patch whose lists of objects merge by key, e.g.
//! `status.conditions` by `type`, containers by `name`), and JSON patch (RFC 6902).

use serde_json::{Map, Value};

use super::decode::FieldValidation;
use crate::status::ApiError;

/// A parsed patch body.
#[derive(Debug, Clone)]
pub enum Patch {
    /// `application/merge-patch+json`.
    Merge(Value),
    /// `application/strategic-merge-patch+json`.
    Strategic(Value),
    /// `application/json-patch+json`.
    Json(json_patch::Patch),
}

/// Merge keys of the lists of objects a strategic merge patch merges element-wise, by path (list
/// elements do not add a path segment).
const MERGE_KEYS: &[(&str, &str)] = &[
    ("metadata.ownerReferences", "uid"),
    ("spec.containers", "name"),
    ("spec.initContainers", "name"),
    ("spec.ephemeralContainers", "name"),
    ("spec.containers.env", "name"),
    ("spec.initContainers.env", "name"),
    ("spec.containers.ports", "containerPort"),
    ("spec.containers.volumeMounts", "mountPath"),
    ("spec.initContainers.volumeMounts", "mountPath"),
    ("spec.volumes", "name"),
    ("spec.imagePullSecrets", "name"),
    ("spec.readinessGates", "conditionType"),
    ("status.conditions", "type"),
    ("status.containerStatuses", "name"),
    ("status.initContainerStatuses", "name"),
    ("status.ephemeralContainerStatuses", "name"),
    ("status.podIPs", "ip"),
    ("status.hostIPs", "ip"),
];

/// The merge key of the list of objects at `path` (dotted, list elements add no segment), if it
/// is merged by key.
pub fn merge_key(path: &str) -> Option<&'static str> {
    MERGE_KEYS.iter().find(|(p, _)| *p == path).map(|(_, k)| *k)
}

/// Lists of scalars that a strategic merge patch unions instead of replacing.
const MERGE_SETS: &[&str] = &["metadata.finalizers"];

impl Patch {
    /// Parses a body of the given media type; 415 for other types, 400 for malformed bodies
    /// (worded like kube-apiserver's JSON decoders), and a JSON patch whose operations cannot be
    /// read is the 422 [`rejected`] answer its application would give.
    ///
    /// Under `fieldValidation` Warn (the default) or Strict, kube-apiserver first decodes a JSON
    /// or merge patch strictly into its own types and answers `error decoding patch: <Go's
    /// error>`; only with Ignore do the patch libraries' own messages show (apiserver
    /// `pkg/endpoints/handlers/patch.go`, `jsonPatcher.applyJSPatch`).
    pub fn parse(
        media_type: &str,
        body: &[u8],
        validation: FieldValidation,
    ) -> Result<Self, ApiError> {
        let syntax =
            |e: serde_json::Error| ApiError::bad_request(super::decode::go_syntax_error(&e, body));
        let strict = validation != FieldValidation::Ignore;
        // `kjson.UnmarshalStrict(patch, &v)` into `want` (a Go type name), as the handler does.
        let strictly = |is_ok: fn(&Value) -> bool, want: &str| -> Result<(), ApiError> {
            if !strict {
                return Ok(());
            }
            let decoding = |m: String| ApiError::bad_request(format!("error decoding patch: {m}"));
            let value: Value = serde_json::from_slice(body)
                .map_err(|e| decoding(super::decode::go_syntax_error(&e, body)))?;
            if !is_ok(&value) {
                return Err(decoding(format!(
                    "json: cannot unmarshal {} into Go value of type {want}",
                    go_json_type(&value)
                )));
            }
            Ok(())
        };
        match media_type {
            "application/merge-patch+json" => {
                strictly(|v| v.is_object() || v.is_null(), "map[string]interface {}")?;
                serde_json::from_slice(body)
                    .map(Patch::Merge)
                    // evanphx/json-patch's MergePatch: `errBadJSONPatch`.
                    .map_err(|_| ApiError::bad_request("Invalid JSON Patch"))
            }
            "application/strategic-merge-patch+json" => {
                let value: Value = serde_json::from_slice(body).map_err(syntax)?;
                if !value.is_object() && !value.is_null() {
                    return Err(ApiError::bad_request(format!(
                        "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                        go_json_type(&value)
                    )));
                }
                Ok(Patch::Strategic(value))
            }
            "application/json-patch+json" => {
                strictly(|v| v.is_array() || v.is_null(), "[]handlers.jsonPatchOp")?;
                let value: Value = serde_json::from_slice(body).map_err(syntax)?;
                if !value.is_array() && !value.is_null() {
                    return Err(ApiError::bad_request(format!(
                        "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
                        go_json_type(&value)
                    )));
                }
                if value.is_null() {
                    return Ok(Patch::Json(json_patch::Patch(Vec::new())));
                }
                serde_json::from_value(value)
                    .map(Patch::Json)
                    .map_err(|_| rejected())
            }
            _ => Err(ApiError::unsupported_patch_media_type()),
        }
    }

    /// Applies the patch to `doc`.
    pub fn apply(&self, doc: &mut Value) -> Result<(), ApiError> {
        match self {
            Patch::Merge(patch) => {
                json_patch::merge(doc, patch);
                Ok(())
            }
            Patch::Strategic(patch) => {
                if patch.is_object() {
                    strategic_merge(doc, patch, "");
                }
                Ok(())
            }
            Patch::Json(patch) => json_patch::patch(doc, patch).map_err(|_| rejected()),
        }
    }
}

/// kube-apiserver's answer to a JSON patch that cannot be applied (a missing path, a failed
/// `test`, an unknown op): `NewGenericServerResponse(422, ...)`, which keeps none of the
/// patch library's message and sends empty details.
fn rejected() -> ApiError {
    let mut err = ApiError::new(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    );
    err.details = Some(Box::default());
    err
}

/// A JSON value's type as Go's `encoding/json` names it in unmarshal errors.
fn go_json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Strategic merge of `patch` into `target` at `path`.
fn strategic_merge(target: &mut Value, patch: &Value, path: &str) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if patch_map.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut clean = patch_map.clone();
        clean.remove("$patch");
        *target = Value::Object(clean);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target_map) = target else {
        return;
    };
    for (key, value) in patch_map {
        if key.starts_with('$') {
            continue;
        }
        let sub = child_path(path, key);
        match value {
            Value::Null => {
                target_map.remove(key);
            }
            Value::Object(_) => {
                let entry = target_map.entry(key.clone()).or_insert(Value::Null);
                strategic_merge(entry, value, &sub);
            }
            Value::Array(items) => {
                if let Some((_, merge_key)) = MERGE_KEYS.iter().find(|(p, _)| *p == sub) {
                    let entry = target_map
                        .entry(key.clone())
                        .or_insert_with(|| Value::Array(Vec::new()));
                    merge_list(entry, items, merge_key, &sub);
                } else if MERGE_SETS.contains(&sub.as_str()) {
                    let entry = target_map
                        .entry(key.clone())
                        .or_insert_with(|| Value::Array(Vec::new()));
                    if let Value::Array(existing) = entry {
                        for item in items {
                            if !existing.contains(item) {
                                existing.push(item.clone());
                            }
                        }
                    }
                } else {
                    target_map.insert(key.clone(), value.clone());
                }
            }
            _ => {
                target_map.insert(key.clone(), value.clone());
            }
        }
    }
}

fn merge_list(target: &mut Value, items: &[Value], merge_key: &str, path: &str) {
    if !target.is_array() {
        *target = Value::Array(Vec::new());
    }
    let Value::Array(existing) = target else {
        return;
    };
    for item in items {
        let key_value = item.get(merge_key);
        let position =
            key_value.and_then(|k| existing.iter().position(|e| e.get(merge_key) == Some(k)));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(i), true) => {
                existing.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => strategic_merge(&mut existing[i], item, path),
            (None, false) => {
                let mut fresh = Value::Null;
                strategic_merge(&mut fresh, item, path);
                existing.push(fresh);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_merges_conditions_by_type_and_keeps_others() {
        let mut doc = json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "False"}
        ]}});
        let patch = Patch::Strategic(json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"}
        ], "$setElementOrder/conditions": [{"type": "PodScheduled"}, {"type": "Ready"}]}}));
        patch.apply(&mut doc).expect("apply");
        assert_eq!(doc["status"]["phase"], "Running");
        assert_eq!(doc["status"]["conditions"][0]["status"], "True");
        assert_eq!(doc["status"]["conditions"][0]["type"], "PodScheduled");
        assert_eq!(doc["status"]["conditions"][1]["status"], "True");
        assert_eq!(
            doc["status"]["conditions"].as_array().map(Vec::len),
            Some(2)
        );
    }

    #[test]
    fn merge_patch_replaces_lists_and_deletes_nulls() {
        let mut doc = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "list": [1, 2]});
        Patch::Merge(json!({"metadata": {"labels": {"a": null}}, "list": [3]}))
            .apply(&mut doc)
            .expect("apply");
        assert_eq!(
            doc,
            json!({"metadata": {"labels": {"b": "2"}}, "list": [3]})
        );
    }

    #[test]
    fn strategic_merge_deletes_list_items_with_the_directive() {
        let mut doc = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
        Patch::Strategic(json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}, {"name": "b", "image": "z"}]}}))
            .apply(&mut doc)
            .expect("apply");
        assert_eq!(
            doc,
            json!({"spec": {"containers": [{"name": "b", "image": "z"}]}})
        );
    }
}
