//! Secrets (`v1`) as kube-apiserver 1.32 admits them.
//!
//! Why it exists: real pod specs name Secrets (env, volumes, image pull secrets), and
//! `kubectl create secret` must work against the sim as against a cluster.
//!
//! What the real server does, and this unit does with it:
//! - `stringData` is merged into `data` on every write (its values win) and never stored or
//!   returned: the v1 -> internal conversion does it (`Convert_v1_Secret_To_core_Secret` in
//!   pkg/apis/core/v1/conversion.go), before validation.
//! - `type` defaults to `Opaque` (`SetDefaults_Secret`, pkg/apis/core/v1/defaults.go).
//! - `ValidateSecret` (pkg/apis/core/validation/validation.go): every key of `data` is a
//!   config key (`IsConfigMapKey`), the values total at most 1 MiB (`MaxSecretSize`), and the
//!   `kubernetes.io/*` types carry their required keys (service-account-token: the
//!   `kubernetes.io/service-account.name` annotation; dockercfg and dockerconfigjson: their key,
//!   holding a JSON object; basic-auth: a username or a password; ssh-auth: a private key; tls:
//!   both the certificate and the key).
//! - `ValidateSecretUpdate`: `type` cannot change, and once `immutable` is true neither it nor
//!   `data` can (pkg/registry/core/secret/strategy.go runs it on every update).
//!
//! Secret values never reach an error: the causes name keys, and a malformed docker config is
//! reported with `<secret contents redacted>` as its value, as kube-apiserver does.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::ApiKind;
use super::config_map::{IMMUTABLE_MSG, MAX_DATA_SIZE, validate_config_key};
use crate::cluster::{Cluster, Kind, Table};
use crate::part::Part;
use crate::validation::{Causes, validate_meta};

/// The default `type` (`core.SecretTypeOpaque`).
pub const OPAQUE: &str = "Opaque";

/// What a secret's value shows in a validation message (kube-apiserver's placeholder).
const REDACTED: &str = "\"<secret contents redacted>\"";

impl Kind for Secret {
    const KIND: &'static str = "Secret";
    const LIST_KIND: &'static str = "SecretList";
    const API_VERSION: &'static str = "v1";
    const RESOURCE: &'static str = "secrets";
    const NAMESPACED: bool = true;
    /// Secrets' selectable fields: the metadata's and `type` (`SelectableFields` in
    /// pkg/registry/core/secret/strategy.go).
    const FIELDS: &'static [&'static str] = &["metadata.name", "metadata.namespace", "type"];
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
    fn field(&self, field: &str) -> Option<String> {
        match field {
            "metadata.name" => Some(self.metadata.name.clone().unwrap_or_default()),
            "metadata.namespace" => Some(self.metadata.namespace.clone().unwrap_or_default()),
            "type" => Some(self.type_.clone().unwrap_or_default()),
            _ => None,
        }
    }
}

impl ApiKind for Secret {
    const GROUP: &'static str = "";
    fn table(cluster: &Cluster) -> &Table<Self> {
        cluster.secret_table()
    }
    fn admit_create(&mut self) -> Causes {
        normalize(self);
        validate(self)
    }
    fn admit_update(&mut self, old: &Self, _part: Part) -> Causes {
        normalize(self);
        let mut causes = Causes::default();
        if self.type_ != old.type_ {
            causes.invalid(
                "type",
                &format!("{:?}", self.type_.as_deref().unwrap_or_default()),
                "field is immutable",
            );
        }
        if old.immutable == Some(true) {
            if self.immutable != Some(true) {
                causes.forbidden("immutable", IMMUTABLE_MSG);
            }
            if self.data != old.data {
                causes.forbidden("data", IMMUTABLE_MSG);
            }
        }
        causes.0.extend(validate(self).0);
        causes
    }
}

/// The conversion and defaults every write goes through: `stringData` merged into `data` (and
/// dropped), `type` defaulted to `Opaque`.
fn normalize(secret: &mut Secret) {
    if let Some(strings) = secret.string_data.take() {
        let data = secret.data.get_or_insert_with(BTreeMap::new);
        for (key, value) in strings {
            data.insert(key, ByteString(value.into_bytes()));
        }
    }
    if secret.type_.as_deref().is_none_or(str::is_empty) {
        secret.type_ = Some(OPAQUE.to_owned());
    }
}

/// `ValidateSecret`.
fn validate(secret: &Secret) -> Causes {
    let mut causes = Causes::default();
    validate_meta(&mut causes, &secret.metadata);
    let empty = BTreeMap::new();
    let data = secret.data.as_ref().unwrap_or(&empty);
    let mut total = 0usize;
    for (key, value) in data {
        validate_config_key(&mut causes, "data", key);
        total = total.saturating_add(value.0.len());
    }
    if total > MAX_DATA_SIZE {
        causes.too_long("data", MAX_DATA_SIZE);
    }
    let has = |key: &str| data.contains_key(key);
    let required = |causes: &mut Causes, key: &str| causes.required(&format!("data[{key}]"), "");
    match secret.type_.as_deref().unwrap_or(OPAQUE) {
        "kubernetes.io/service-account-token" => {
            let name = secret
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("kubernetes.io/service-account.name"));
            if name.is_none_or(String::is_empty) {
                causes.required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    "",
                );
            }
        }
        kind @ ("kubernetes.io/dockercfg" | "kubernetes.io/dockerconfigjson") => {
            let key = if kind == "kubernetes.io/dockercfg" {
                ".dockercfg"
            } else {
                ".dockerconfigjson"
            };
            match data.get(key) {
                None => required(&mut causes, key),
                Some(value) => {
                    // Like `json.Unmarshal` into a map: a JSON object. The detail is the
                    // decoder's, which words it differently from Go's (never the value).
                    let parsed = serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(
                        &value.0,
                    );
                    if let Err(e) = parsed {
                        let detail = e.to_string();
                        causes.invalid(&format!("data[{key}]"), REDACTED, &detail);
                    }
                }
            }
        }
        // Either may be empty, but one must be there.
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            required(&mut causes, "username");
            required(&mut causes, "password");
        }
        "kubernetes.io/ssh-auth" if data.get("ssh-privatekey").is_none_or(|v| v.0.is_empty()) => {
            required(&mut causes, "ssh-privatekey");
        }
        "kubernetes.io/tls" => {
            if !has("tls.crt") {
                required(&mut causes, "tls.crt");
            }
            if !has("tls.key") {
                required(&mut causes, "tls.key");
            }
        }
        _ => {}
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(type_: Option<&str>, data: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some("s".to_owned()),
                namespace: Some("default".to_owned()),
                ..ObjectMeta::default()
            },
            type_: type_.map(str::to_owned),
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    fn messages(causes: &Causes) -> Vec<String> {
        causes.0.iter().map(crate::status::cause_line).collect()
    }

    #[test]
    fn string_data_is_merged_into_data_and_dropped_and_the_type_defaults_to_opaque() {
        let mut s = secret(None, &[("a", "old"), ("b", "kept")]);
        s.string_data = Some([("a".to_owned(), "new".to_owned())].into());
        assert!(s.admit_create().is_empty());
        assert_eq!(s.string_data, None);
        assert_eq!(s.type_.as_deref(), Some("Opaque"));
        let data = s.data.expect("data");
        assert_eq!(data["a"].0, b"new");
        assert_eq!(data["b"].0, b"kept");
    }

    #[test]
    fn keys_sizes_and_the_kubernetes_types_are_validated_as_kube_apiserver_does() {
        let bad_key = secret(None, &[("no/slash", "x")]);
        assert_eq!(
            messages(&validate(&bad_key)),
            [
                "data[no/slash]: Invalid value: \"no/slash\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
            ]
        );
        let big = "x".repeat(MAX_DATA_SIZE / 2 + 1);
        let too_big = secret(None, &[("a", &big), ("b", &big)]);
        assert_eq!(
            messages(&validate(&too_big)),
            ["data: Too long: may not be more than 1048576 bytes"]
        );
        let tls = secret(Some("kubernetes.io/tls"), &[("tls.crt", "c")]);
        assert_eq!(messages(&validate(&tls)), ["data[tls.key]: Required value"]);
        let auth = secret(Some("kubernetes.io/basic-auth"), &[]);
        assert_eq!(
            messages(&validate(&auth)),
            [
                "data[username]: Required value",
                "data[password]: Required value"
            ]
        );
        let only_password = secret(Some("kubernetes.io/basic-auth"), &[("password", "")]);
        assert!(validate(&only_password).is_empty());
        let docker = secret(Some("kubernetes.io/dockerconfigjson"), &[]);
        assert_eq!(
            messages(&validate(&docker)),
            ["data[.dockerconfigjson]: Required value"]
        );
        let marker = "MARKER-not-json";
        let docker = secret(
            Some("kubernetes.io/dockerconfigjson"),
            &[(".dockerconfigjson", marker)],
        );
        let lines = messages(&validate(&docker));
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].starts_with(
                "data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": "
            ),
            "{lines:?}"
        );
        assert!(!lines[0].contains(marker), "the value is never shown");
        let fine = secret(
            Some("kubernetes.io/dockerconfigjson"),
            &[(".dockerconfigjson", "{\"auths\":{}}")],
        );
        assert!(validate(&fine).is_empty());
    }

    #[test]
    fn an_immutable_secret_keeps_its_data_and_no_secret_changes_its_type() {
        let mut old = secret(None, &[("a", "1")]);
        old.immutable = Some(true);
        assert!(old.admit_create().is_empty());

        let mut relabelled = old.clone();
        relabelled.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
        assert!(relabelled.admit_update(&old, Part::Main).is_empty());

        let mut changed = old.clone();
        changed.string_data = Some([("a".to_owned(), "2".to_owned())].into());
        changed.immutable = Some(false);
        assert_eq!(
            messages(&changed.admit_update(&old, Part::Main)),
            [
                "immutable: Forbidden: field is immutable when `immutable` is set",
                "data: Forbidden: field is immutable when `immutable` is set",
            ]
        );

        let mut retyped = secret(
            Some("kubernetes.io/tls"),
            &[("tls.crt", "c"), ("tls.key", "k")],
        );
        let plain = secret(Some("Opaque"), &[]);
        assert_eq!(
            messages(&retyped.admit_update(&plain, Part::Main)),
            ["type: Invalid value: \"kubernetes.io/tls\": field is immutable"]
        );
    }
}
