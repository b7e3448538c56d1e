//! ConfigMaps (`v1`) as kube-apiserver 1.32 admits them.
//!
//! Why it exists: real pod specs read ConfigMaps (`envFrom`, `configMapKeyRef`, volumes), and
//! `kubectl create configmap` must work against the sim as against a cluster.
//!
//! `ValidateConfigMap` (pkg/apis/core/validation/validation.go): every key of `data` and
//! `binaryData` is a config key (`IsConfigMapKey`), no key is in both, and the values total at
//! most 1 MiB (`MaxSecretSize`, reported on the object as a whole). `ValidateConfigMapUpdate`
//! (run by pkg/registry/core/configmap/strategy.go on every update): once `immutable` is true,
//! neither it nor `data` nor `binaryData` may change.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::ApiKind;
use crate::cluster::{Cluster, Kind, Table};
use crate::part::Part;
use crate::validation::{Causes, validate_meta};

/// `core.MaxSecretSize`: the most bytes the values of a Secret or a ConfigMap may total.
pub(crate) const MAX_DATA_SIZE: usize = 1024 * 1024;

/// The detail of a change refused because the object is immutable.
pub(crate) const IMMUTABLE_MSG: &str = "field is immutable when `immutable` is set";

/// apimachinery's `IsConfigMapKey` wording of a key outside `[-._a-zA-Z0-9]+`.
const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// apimachinery's `IsConfigMapKey`: every problem of `key`, worded like it.
pub(crate) fn config_key_errors(key: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if key.len() > 253 {
        errors.push("must be no more than 253 characters".to_owned());
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        errors.push(CONFIG_KEY_MSG.to_owned());
    }
    // `hasChDirPrefix`: keys become file names in volumes.
    if key == "." {
        errors.push("must not be '.'".to_owned());
    } else if key == ".." {
        errors.push("must not be '..'".to_owned());
    } else if key.starts_with("..") {
        errors.push("must not start with '..'".to_owned());
    }
    errors
}

/// Adds a cause `<bag>[<key>]: Invalid value: "<key>": ...` per problem of `key`.
pub(crate) fn validate_config_key(causes: &mut Causes, bag: &str, key: &str) {
    for message in config_key_errors(key) {
        causes.invalid(&format!("{bag}[{key}]"), &format!("{key:?}"), &message);
    }
}

impl Kind for ConfigMap {
    const KIND: &'static str = "ConfigMap";
    const LIST_KIND: &'static str = "ConfigMapList";
    const API_VERSION: &'static str = "v1";
    const RESOURCE: &'static str = "configmaps";
    const NAMESPACED: bool = true;
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl ApiKind for ConfigMap {
    const GROUP: &'static str = "";
    fn table(cluster: &Cluster) -> &Table<Self> {
        cluster.config_map_table()
    }
    fn admit_create(&mut self) -> Causes {
        validate(self)
    }
    fn admit_update(&mut self, old: &Self, _part: Part) -> Causes {
        let mut causes = Causes::default();
        if old.immutable == Some(true) {
            if self.immutable != Some(true) {
                causes.forbidden("immutable", IMMUTABLE_MSG);
            }
            if self.data != old.data {
                causes.forbidden("data", IMMUTABLE_MSG);
            }
            if self.binary_data != old.binary_data {
                causes.forbidden("binaryData", IMMUTABLE_MSG);
            }
        }
        causes.0.extend(validate(self).0);
        causes
    }
}

/// `ValidateConfigMap`.
fn validate(config: &ConfigMap) -> Causes {
    let mut causes = Causes::default();
    validate_meta(&mut causes, &config.metadata);
    let mut total = 0usize;
    for (key, value) in config.data.iter().flatten() {
        validate_config_key(&mut causes, "data", key);
        if config
            .binary_data
            .as_ref()
            .is_some_and(|b| b.contains_key(key))
        {
            causes.invalid(
                &format!("data[{key}]"),
                &format!("{key:?}"),
                "duplicate of key present in binaryData",
            );
        }
        total = total.saturating_add(value.len());
    }
    for (key, value) in config.binary_data.iter().flatten() {
        validate_config_key(&mut causes, "binaryData", key);
        if config.data.as_ref().is_some_and(|d| d.contains_key(key)) {
            causes.invalid(
                &format!("binaryData[{key}]"),
                &format!("{key:?}"),
                "duplicate of key present in data",
            );
        }
        total = total.saturating_add(value.0.len());
    }
    if total > MAX_DATA_SIZE {
        // kube-apiserver names no field: the error is about the whole object.
        causes.too_long("", MAX_DATA_SIZE);
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn config(data: &[(&str, &str)], binary: &[(&str, &[u8])]) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".to_owned()),
                namespace: Some("default".to_owned()),
                ..ObjectMeta::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            binary_data: Some(
                binary
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                    .collect(),
            ),
            immutable: None,
        }
    }

    fn messages(causes: &Causes) -> Vec<String> {
        causes.0.iter().map(crate::status::cause_line).collect()
    }

    #[test]
    fn config_keys_are_checked_as_apimachinery_does() {
        assert!(config_key_errors("app.properties").is_empty());
        assert!(config_key_errors("KEY_name-1").is_empty());
        assert_eq!(config_key_errors(".."), ["must not be '..'"]);
        assert_eq!(config_key_errors("..x"), ["must not start with '..'"]);
        assert_eq!(config_key_errors("a b"), [CONFIG_KEY_MSG]);
        assert_eq!(config_key_errors(""), [CONFIG_KEY_MSG]);
        assert_eq!(
            config_key_errors(&"k".repeat(254)),
            ["must be no more than 253 characters"]
        );
    }

    #[test]
    fn duplicates_and_size_are_refused() {
        let both = config(&[("k", "v")], &[("k", b"\x00")]);
        assert_eq!(
            messages(&validate(&both)),
            [
                "data[k]: Invalid value: \"k\": duplicate of key present in binaryData",
                "binaryData[k]: Invalid value: \"k\": duplicate of key present in data",
            ]
        );
        let big = "x".repeat(MAX_DATA_SIZE);
        let too_big = config(&[("a", &big)], &[("b", b"1")]);
        assert_eq!(
            messages(&validate(&too_big)),
            [": Too long: may not be more than 1048576 bytes"]
        );
    }

    #[test]
    fn an_immutable_config_map_keeps_its_data() {
        let mut old = config(&[("k", "v")], &[]);
        old.immutable = Some(true);
        let mut relabelled = old.clone();
        relabelled.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
        assert!(relabelled.admit_update(&old, Part::Main).is_empty());
        let mut changed = config(&[("k", "w")], &[("b", b"1")]);
        changed.immutable = Some(true);
        assert_eq!(
            messages(&changed.admit_update(&old, Part::Main)),
            [
                "data: Forbidden: field is immutable when `immutable` is set",
                "binaryData: Forbidden: field is immutable when `immutable` is set",
            ]
        );
        // A mutable one may change anything.
        let mut mutable = config(&[("k", "w")], &[]);
        assert!(
            mutable
                .admit_update(&config(&[("k", "v")], &[]), Part::Main)
                .is_empty()
        );
    }
}
