//! Field ownership (`metadata.managedFields`) and server-side apply, a subset of
//! kube-apiserver's structured-merge-diff that covers what clients of pods and leases use.
//!
//! Covered: every API write (create, update, patch, apply; the `status` subresource as its own
//! entry) records the fields it set per manager and operation; an apply
//! (`application/apply-patch+yaml`) merges its configuration into the live object (maps
//! recursively, the keyed lists of [`super::patch::MERGE_KEYS`] by key, other lists atomically),
//! creates the object when it does not exist, removes fields the manager applied before and no
//! longer applies (when no one else owns them), and answers 409 with kube's conflict message when
//! it would change a field another manager owns, unless `force=true` (which takes the field over).
//! Not covered: the kubelet's own status writes record no entry; sets of scalars (`v:` keys) and
//! positional (`i:`) list items are not tracked one by one (such a list is one field).

use std::collections::BTreeSet;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, Time};
use podline_sim_core::part::Part;
use serde_json::{Map, Value};

use crate::status::ApiError;

/// One field as a path of fieldsV1 keys (`f:spec`, `k:{"name":"main"}`, `f:image`); a path
/// ending in `.` names a keyed list item itself.
type FieldPath = Vec<String>;

/// The fields of an object.
pub type FieldSet = BTreeSet<FieldPath>;

/// Metadata fields the server owns, never recorded.
const SYSTEM_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generateName",
];

/// Who writes: the manager name and how.
#[derive(Debug, Clone)]
pub struct Writer {
    /// `fieldManager`, or the User-Agent's product as kube-apiserver derives it.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: &'static str,
    /// Which part of the object is written.
    pub part: Part,
}

impl Writer {
    /// The writer of a request: `fieldManager` if given, else the User-Agent up to its first `/`
    /// (kube-apiserver's default).
    pub fn new(field_manager: Option<&str>, user_agent: &str, apply: bool, part: Part) -> Self {
        let manager = field_manager
            .filter(|m| !m.is_empty())
            .map(str::to_owned)
            .unwrap_or_else(|| user_agent.split('/').next().unwrap_or_default().to_owned());
        Writer {
            manager,
            operation: if apply { "Apply" } else { "Update" },
            part,
        }
    }

    fn subresource(&self) -> Option<String> {
        (self.part == Part::Status).then(|| "status".to_owned())
    }

    fn owns(&self, entry: &ManagedFieldsEntry) -> bool {
        entry.manager.as_deref() == Some(self.manager.as_str())
            && entry.operation.as_deref() == Some(self.operation)
            && entry.subresource == self.subresource()
    }
}

/// The fields set in `obj` (a JSON object), without the system-owned metadata, and only the
/// part `part` addresses (status for the status subresource, the rest otherwise).
pub fn fields_of(obj: &Value, part: Part) -> FieldSet {
    let mut out = FieldSet::new();
    let Value::Object(map) = obj else {
        return out;
    };
    for (key, value) in map {
        let in_part = match part {
            Part::Status => key == "status",
            Part::Main => key != "status" || !has_status(map),
        };
        if key == "apiVersion" || key == "kind" || !in_part {
            continue;
        }
        let mut path = vec![format!("f:{key}")];
        if key == "metadata"
            && let Value::Object(meta) = value
        {
            for (k, v) in meta {
                if !SYSTEM_METADATA.contains(&k.as_str()) {
                    path.push(format!("f:{k}"));
                    walk(v, &format!("metadata.{k}"), &mut path, &mut out);
                    path.pop();
                }
            }
            continue;
        }
        walk(value, key, &mut path, &mut out);
    }
    out
}

/// Kinds with a status field keep it out of main-resource ownership (it is written through the
/// status subresource).
fn has_status(map: &Map<String, Value>) -> bool {
    map.contains_key("spec")
}

fn walk(value: &Value, dotted: &str, path: &mut FieldPath, out: &mut FieldSet) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                path.push(format!("f:{k}"));
                walk(v, &format!("{dotted}.{k}"), path, out);
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let merge_key = super::patch::merge_key(dotted);
            match merge_key {
                Some(key) if items.iter().all(|i| i.get(key).is_some()) => {
                    for item in items {
                        let mut id = Map::new();
                        id.insert(key.to_owned(), item[key].clone());
                        path.push(format!("k:{}", Value::Object(id)));
                        path.push(".".to_owned());
                        out.insert(path.clone());
                        path.pop();
                        walk(item, dotted, path, out);
                        path.pop();
                    }
                }
                _ => {
                    out.insert(path.clone());
                }
            }
        }
        _ => {
            out.insert(path.clone());
        }
    }
}

/// The value at `path` in `obj`, if set.
fn value_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut node = obj;
    for seg in path {
        if seg == "." {
            return Some(node);
        }
        if let Some(name) = seg.strip_prefix("f:") {
            node = node.get(name)?;
        } else if let Some(id) = seg.strip_prefix("k:") {
            let id: Map<String, Value> = serde_json::from_str(id).ok()?;
            node = node
                .as_array()?
                .iter()
                .find(|item| id.iter().all(|(k, v)| item.get(k) == Some(v)))?;
        } else {
            return None;
        }
    }
    Some(node)
}

/// Removes the field at `path` from `obj` (a keyed list item when the path ends in `.`).
fn remove_at(obj: &mut Value, path: &[String]) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    if last == "." {
        if let Some((item, list_path)) = parent.split_last()
            && let Some(id) = item.strip_prefix("k:")
            && let Ok(id) = serde_json::from_str::<Map<String, Value>>(id)
            && let Some(Value::Array(items)) = value_at_mut(obj, list_path)
        {
            items.retain(|i| !id.iter().all(|(k, v)| i.get(k) == Some(v)));
        }
        return;
    }
    if let Some(name) = last.strip_prefix("f:")
        && let Some(Value::Object(map)) = value_at_mut(obj, parent)
    {
        map.remove(name);
    }
}

fn value_at_mut<'a>(obj: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut node = obj;
    for seg in path {
        if let Some(name) = seg.strip_prefix("f:") {
            node = node.get_mut(name)?;
        } else if let Some(id) = seg.strip_prefix("k:") {
            let id: Map<String, Value> = serde_json::from_str(id).ok()?;
            node = node
                .as_array_mut()?
                .iter_mut()
                .find(|item| id.iter().all(|(k, v)| item.get(k) == Some(v)))?;
        } else {
            return None;
        }
    }
    Some(node)
}

/// The fieldsV1 tree of a set.
fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for seg in path {
            let child = node
                .entry(seg.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(child) = child else {
                break;
            };
            node = child;
        }
    }
    Value::Object(root)
}

/// The set a fieldsV1 tree holds.
fn from_fields_v1(tree: &Value) -> FieldSet {
    fn go(node: &Value, path: &mut FieldPath, out: &mut FieldSet) {
        let Value::Object(map) = node else {
            return;
        };
        if map.is_empty() && !path.is_empty() {
            out.insert(path.clone());
        }
        for (k, v) in map {
            path.push(k.clone());
            go(v, path, out);
            path.pop();
        }
    }
    let mut out = FieldSet::new();
    go(tree, &mut Vec::new(), &mut out);
    out
}

fn entry_set(entry: &ManagedFieldsEntry) -> FieldSet {
    entry
        .fields_v1
        .as_ref()
        .map(|f| from_fields_v1(&f.0))
        .unwrap_or_default()
}

/// A path as kube prints it in conflicts: `.spec.containers[name="main"].image`.
fn print_path(path: &[String]) -> String {
    let mut out = String::new();
    for seg in path {
        if let Some(name) = seg.strip_prefix("f:") {
            out.push('.');
            out.push_str(name);
        } else if let Some(id) = seg.strip_prefix("k:")
            && let Ok(id) = serde_json::from_str::<Map<String, Value>>(id)
        {
            let keys: Vec<String> = id.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("[{}]", keys.join(",")));
        }
    }
    out
}

fn print_manager(entry: &ManagedFieldsEntry) -> String {
    let mut out = format!("{:?}", entry.manager.clone().unwrap_or_default());
    if let Some(sub) = entry.subresource.as_deref().filter(|s| !s.is_empty()) {
        out.push_str(&format!(" with subresource {sub:?}"));
    }
    if entry.operation.as_deref() == Some("Update") {
        let version = entry.api_version.clone().unwrap_or_default();
        match &entry.time {
            Some(t) => out.push_str(&format!(
                " using {version} at {}",
                t.0.strftime("%Y-%m-%dT%H:%M:%SZ")
            )),
            None => out.push_str(&format!(" using {version}")),
        }
    }
    out
}

fn now() -> Time {
    // Managed field times have second precision (RFC 3339 without fractions).
    let now = Timestamp::now();
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
}

/// Records a non-apply write of `new` over `old` (None for a create) by `writer` in `new`'s
/// `metadata.managedFields`: the fields it changed become the writer's, and no longer anyone
/// else's; fields it removed are no one's.
#[cfg(test)]
pub fn record_update(
    new: &mut Value,
    old: Option<&Value>,
    old_entries: &[ManagedFieldsEntry],
    writer: &Writer,
    api_version: &str,
) {
    let entries = entries_after_update(new, old, old_entries, writer, api_version);
    put_entries(new, entries);
}

/// The managed fields [`record_update`] writes into `new`, for a caller that sets them on the
/// typed object instead of decoding the whole `new` tree back (the create path).
pub fn entries_after_update(
    new: &Value,
    old: Option<&Value>,
    old_entries: &[ManagedFieldsEntry],
    writer: &Writer,
    api_version: &str,
) -> Vec<ManagedFieldsEntry> {
    let new_fields = fields_of(new, writer.part);
    if old.is_none() && old_entries.is_empty() {
        // A create: every field is the writer's (what the general case below comes to, without
        // copying the set three times).
        let mut entries = Vec::new();
        let changed = !new_fields.is_empty();
        set_entry(&mut entries, writer, new_fields, api_version, changed);
        return entries;
    }
    let old_fields = old.map(|o| fields_of(o, writer.part)).unwrap_or_default();
    let changed: FieldSet = new_fields
        .iter()
        .filter(|p| {
            // A keyed list item itself changes hands only when it is new.
            !old_fields.contains(*p)
                || p.last().is_none_or(|s| s != ".")
                    && old.and_then(|o| value_at(o, p)) != value_at(new, p)
        })
        .cloned()
        .collect();
    let removed: FieldSet = old_fields.difference(&new_fields).cloned().collect();
    let mut entries: Vec<ManagedFieldsEntry> = old_entries.to_vec();
    let mut mine = FieldSet::new();
    for entry in &mut entries {
        let mut set = entry_set(entry);
        if writer.owns(entry) {
            mine = set.clone();
        }
        let before = set.len();
        set.retain(|p| !changed.contains(p) && !removed.contains(p));
        if set.len() != before {
            entry.fields_v1 = Some(FieldsV1(to_fields_v1(&set)));
        }
    }
    mine.extend(changed.iter().cloned());
    mine.retain(|p| new_fields.contains(p));
    set_entry(&mut entries, writer, mine, api_version, !changed.is_empty());
    entries
}

/// Sets `writer`'s entry to `set` (dropping it when empty), stamping the time when it changed.
fn set_entry(
    entries: &mut Vec<ManagedFieldsEntry>,
    writer: &Writer,
    set: FieldSet,
    api_version: &str,
    changed: bool,
) {
    let position = entries.iter().position(|e| writer.owns(e));
    if set.is_empty() {
        if let Some(i) = position {
            entries.remove(i);
        }
    } else {
        let entry = ManagedFieldsEntry {
            manager: Some(writer.manager.clone()),
            operation: Some(writer.operation.to_owned()),
            api_version: Some(api_version.to_owned()),
            time: Some(now()),
            fields_type: Some("FieldsV1".to_owned()),
            fields_v1: Some(FieldsV1(to_fields_v1(&set))),
            subresource: writer.subresource(),
        };
        match position {
            Some(i) if changed || entries[i].fields_v1 != entry.fields_v1 => entries[i] = entry,
            Some(_) => {}
            None => entries.push(entry),
        }
    }
    entries.retain(|e| {
        e.fields_v1
            .as_ref()
            .is_some_and(|f| f.0 != Value::Object(Map::new()))
    });
}

fn put_entries(obj: &mut Value, entries: Vec<ManagedFieldsEntry>) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if entries.is_empty() {
            meta.remove("managedFields");
        } else if let Ok(value) = serde_json::to_value(entries) {
            meta.insert("managedFields".to_owned(), value);
        }
    }
}

/// The managed fields of a stored object.
pub fn entries_of(obj: &Value) -> Vec<ManagedFieldsEntry> {
    obj.get("metadata")
        .and_then(|m| m.get("managedFields"))
        .and_then(|m| serde_json::from_value(m.clone()).ok())
        .unwrap_or_default()
}

/// Applies `config` (the applied configuration, a JSON object) to `live` (None: the object does
/// not exist yet and is created from `config`) for `writer`; `force` takes over fields other
/// managers own. Answers the new object with its managed fields, or the 409 conflict.
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    writer: &Writer,
    force: bool,
    api_version: &str,
) -> Result<Value, ApiError> {
    let applied = fields_of(config, writer.part);
    let entries = live.map(entries_of).unwrap_or_default();
    let mut conflicts: Vec<(String, &ManagedFieldsEntry)> = Vec::new();
    if let Some(live) = live {
        for entry in entries.iter().filter(|e| !writer.owns(e)) {
            for path in entry_set(entry).intersection(&applied) {
                if path.last().is_some_and(|s| s == ".") {
                    continue;
                }
                if value_at(live, path) != value_at(config, path) {
                    conflicts.push((print_path(path), entry));
                }
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(&conflicts));
    }
    let mut merged = live.cloned().unwrap_or_else(|| Value::Object(Map::new()));
    let previous: FieldSet = entries
        .iter()
        .find(|e| writer.owns(e))
        .map(entry_set)
        .unwrap_or_default();
    let others: FieldSet = entries
        .iter()
        .filter(|e| !writer.owns(e))
        .flat_map(entry_set)
        .collect();
    // Fields this manager applied before and no longer applies go, unless someone else has them.
    for path in previous.difference(&applied) {
        if !others.contains(path) {
            remove_at(&mut merged, path);
        }
    }
    let mut body = config.clone();
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        meta.remove("resourceVersion");
    }
    super::patch::Patch::Strategic(body).apply(&mut merged)?;
    let mut entries = entries.clone();
    if force {
        for entry in &mut entries {
            if writer.owns(entry) {
                continue;
            }
            let mut set = entry_set(entry);
            let before = set.len();
            set.retain(|p| !applied.contains(p) || p.last().is_some_and(|s| s == "."));
            if set.len() != before {
                entry.fields_v1 = Some(FieldsV1(to_fields_v1(&set)));
            }
        }
    }
    set_entry(&mut entries, writer, applied, api_version, true);
    put_entries(&mut merged, entries);
    Ok(merged)
}

fn conflict_error(conflicts: &[(String, &ManagedFieldsEntry)]) -> ApiError {
    let message = if let [(path, entry)] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {path}",
            print_manager(entry)
        )
    } else {
        let mut by_manager: Vec<(String, Vec<&str>)> = Vec::new();
        for (path, entry) in conflicts {
            let manager = print_manager(entry);
            match by_manager.iter_mut().find(|(m, _)| *m == manager) {
                Some((_, paths)) => paths.push(path),
                None => by_manager.push((manager, vec![path])),
            }
        }
        by_manager.sort();
        let mut lines = Vec::new();
        for (manager, paths) in by_manager {
            lines.push(format!("conflicts with {manager}:"));
            lines.extend(paths.iter().map(|p| format!("- {p}")));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    let mut err = ApiError::new(409, "Conflict", message);
    let causes = conflicts
        .iter()
        .map(
            |(path, entry)| k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusCause {
                reason: Some("FieldManagerConflict".to_owned()),
                message: Some(format!("conflict with {}", print_manager(entry))),
                field: Some(path.clone()),
            },
        )
        .collect();
    err.details = Some(Box::new(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusDetails {
            causes: Some(causes),
            ..Default::default()
        },
    ));
    err
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn writer(manager: &str, apply: bool) -> Writer {
        Writer::new(Some(manager), "", apply, Part::Main)
    }

    #[test]
    fn an_apply_owns_what_it_sets_and_conflicts_with_another_manager() {
        let config = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "main", "image": "x"}]}});
        let created = apply(None, &config, &writer("one", true), false, "v1").expect("apply");
        let fields = &created["metadata"]["managedFields"][0];
        assert_eq!(fields["manager"], "one");
        assert_eq!(fields["operation"], "Apply");
        assert_eq!(
            fields["fieldsV1"],
            json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:containers": {
                "k:{\"name\":\"main\"}": {".": {}, "f:image": {}, "f:name": {}}}}})
        );
        let mut other = config.clone();
        other["spec"]["containers"][0]["image"] = json!("y");
        let err =
            apply(Some(&created), &other, &writer("two", true), false, "v1").expect_err("conflict");
        assert_eq!(err.code, 409);
        assert_eq!(
            err.message,
            "Apply failed with 1 conflict: conflict with \"one\": .spec.containers[name=\"main\"].image"
        );
        let forced =
            apply(Some(&created), &other, &writer("two", true), true, "v1").expect("force");
        assert_eq!(forced["spec"]["containers"][0]["image"], "y");
        // The same value is shared ownership, not a conflict.
        apply(Some(&created), &config, &writer("two", true), false, "v1").expect("shared");
    }

    #[test]
    fn an_apply_removes_what_the_manager_no_longer_applies() {
        let config = json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}}});
        let created = apply(None, &config, &writer("one", true), false, "v1").expect("apply");
        let fewer = json!({"metadata": {"name": "p", "labels": {"a": "1"}}});
        let next = apply(Some(&created), &fewer, &writer("one", true), false, "v1").expect("apply");
        assert_eq!(next["metadata"]["labels"], json!({"a": "1"}));
    }

    #[test]
    fn an_update_takes_the_fields_it_changes() {
        let mut old = json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}}});
        record_update(&mut old, None, &[], &writer("creator", false), "v1");
        let mut new = old.clone();
        new["metadata"]["labels"]["a"] = json!("changed");
        let entries = entries_of(&old);
        record_update(
            &mut new,
            Some(&old),
            &entries,
            &writer("editor", false),
            "v1",
        );
        let entries = entries_of(&new);
        assert_eq!(entries.len(), 2, "{new}");
        assert_eq!(
            entries[0].fields_v1.as_ref().map(|f| f.0.clone()),
            Some(json!({"f:metadata": {"f:labels": {"f:b": {}}}}))
        );
        assert_eq!(
            entries[1].fields_v1.as_ref().map(|f| f.0.clone()),
            Some(json!({"f:metadata": {"f:labels": {"f:a": {}}}}))
        );
    }
}
