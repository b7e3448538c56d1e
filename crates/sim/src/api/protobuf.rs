//! Protobuf request bodies, for the create kubectl sends only as protobuf.
//!
//! Why: `kubectl create namespace` (client-go's typed client) sends
//! `application/vnd.kubernetes.protobuf` and nothing else, so without this a newcomer who makes a
//! namespace for `podline run -n` against the sim gets a 415. The sim still stores and serves
//! JSON: the body is transcoded on the way in. Only the kinds kubectl creates this way are
//! understood: Namespaces (`kubectl create namespace`), PodDisruptionBudgets (`kubectl create
//! poddisruptionbudget`), Secrets (`kubectl create secret`), ConfigMaps (`kubectl create
//! configmap`) and ServiceAccounts (`kubectl create serviceaccount`); every other kind kubectl
//! creates from JSON. Field numbers are those of k8s.io/api's core/v1/generated.proto. The messages below declare
//! just the fields such a create carries, and protobuf skips the rest.

use std::collections::BTreeMap;

use prost::Message;

use crate::status::ApiError;

/// The media type of Kubernetes' protobuf encoding.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Every protobuf-encoded object starts with this magic number ("k8s" and a zero byte).
const MAGIC: &[u8] = b"k8s\0";

/// `k8s.io.apimachinery.pkg.runtime.Unknown`: the envelope around the object.
#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMeta>,
    #[prost(bytes = "vec", tag = "2")]
    raw: Vec<u8>,
}

/// `k8s.io.apimachinery.pkg.runtime.TypeMeta`.
#[derive(Clone, PartialEq, Message)]
struct TypeMeta {
    #[prost(string, tag = "1")]
    api_version: String,
    #[prost(string, tag = "2")]
    kind: String,
}

/// `k8s.io.api.core.v1.Namespace` (metadata and spec; a create sends no status).
#[derive(Clone, PartialEq, Message)]
struct Namespace {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<NamespaceSpec>,
}

/// `k8s.io.api.core.v1.NamespaceSpec`.
#[derive(Clone, PartialEq, Message)]
struct NamespaceSpec {
    #[prost(string, repeated, tag = "1")]
    finalizers: Vec<String>,
}

/// `k8s.io.api.core.v1.Secret`.
#[derive(Clone, PartialEq, Message)]
struct Secret {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(btree_map = "string, bytes", tag = "2")]
    data: BTreeMap<String, Vec<u8>>,
    #[prost(string, optional, tag = "3")]
    type_: Option<String>,
    #[prost(btree_map = "string, string", tag = "4")]
    string_data: BTreeMap<String, String>,
    #[prost(bool, optional, tag = "5")]
    immutable: Option<bool>,
}

/// `k8s.io.api.core.v1.ConfigMap`.
#[derive(Clone, PartialEq, Message)]
struct ConfigMap {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(btree_map = "string, string", tag = "2")]
    data: BTreeMap<String, String>,
    #[prost(btree_map = "string, bytes", tag = "3")]
    binary_data: BTreeMap<String, Vec<u8>>,
    #[prost(bool, optional, tag = "4")]
    immutable: Option<bool>,
}

/// `k8s.io.api.core.v1.ServiceAccount` (metadata and `automountServiceAccountToken`; the
/// references `kubectl create serviceaccount` never sets are skipped).
#[derive(Clone, PartialEq, Message)]
struct ServiceAccount {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(bool, optional, tag = "4")]
    automount_service_account_token: Option<bool>,
}

/// `k8s.io.api.policy.v1.PodDisruptionBudget` (metadata and spec; a create sends no status).
#[derive(Clone, PartialEq, Message)]
struct PodDisruptionBudget {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<PodDisruptionBudgetSpec>,
}

/// `k8s.io.api.policy.v1.PodDisruptionBudgetSpec`.
#[derive(Clone, PartialEq, Message)]
struct PodDisruptionBudgetSpec {
    #[prost(message, optional, tag = "1")]
    min_available: Option<IntOrString>,
    #[prost(message, optional, tag = "2")]
    selector: Option<LabelSelector>,
    #[prost(message, optional, tag = "3")]
    max_unavailable: Option<IntOrString>,
    #[prost(string, optional, tag = "4")]
    unhealthy_pod_eviction_policy: Option<String>,
}

/// `k8s.io.apimachinery.pkg.util.intstr.IntOrString`: `type` 0 is the int, 1 the string.
#[derive(Clone, PartialEq, Message)]
struct IntOrString {
    #[prost(int64, tag = "1")]
    type_: i64,
    #[prost(int32, tag = "2")]
    int_val: i32,
    #[prost(string, tag = "3")]
    str_val: String,
}

/// `k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector`.
#[derive(Clone, PartialEq, Message)]
struct LabelSelector {
    #[prost(btree_map = "string, string", tag = "1")]
    match_labels: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "2")]
    match_expressions: Vec<LabelSelectorRequirement>,
}

/// `k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement`.
#[derive(Clone, PartialEq, Message)]
struct LabelSelectorRequirement {
    #[prost(string, tag = "1")]
    key: String,
    #[prost(string, tag = "2")]
    operator: String,
    #[prost(string, repeated, tag = "3")]
    values: Vec<String>,
}

/// The fields of `k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta` a create may set.
#[derive(Clone, PartialEq, Message)]
struct ObjectMeta {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    generate_name: String,
    #[prost(btree_map = "string, string", tag = "11")]
    labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    annotations: BTreeMap<String, String>,
}

fn bad(what: String) -> ApiError {
    ApiError::bad_request(format!("protobuf body: {what}"))
}

/// The object inside a protobuf body, if it is a `kind` of `api_version`.
fn unwrap(body: &[u8], api_version: &str, kind: &str) -> Result<Vec<u8>, ApiError> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("it does not start with the \"k8s\\0\" magic number".into()))?;
    let unknown = Unknown::decode(envelope).map_err(|e| bad(e.to_string()))?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    if (type_meta.api_version.as_str(), type_meta.kind.as_str()) != (api_version, kind) {
        return Err(bad(format!(
            "expected a {api_version} {kind}, got kind {:?} of apiVersion {:?}",
            type_meta.kind, type_meta.api_version
        )));
    }
    Ok(unknown.raw)
}

/// The JSON of the object of `kind` (a Namespace or a PodDisruptionBudget) a protobuf create
/// body carries; 400 when the body is not a protobuf-encoded object of that kind.
pub fn object_json(kind: &str, body: &[u8]) -> Result<Vec<u8>, ApiError> {
    match kind {
        "PodDisruptionBudget" => budget_json(body),
        "Secret" => secret_json(body),
        "ConfigMap" => config_map_json(body),
        "ServiceAccount" => service_account_json(body),
        _ => namespace_json(body),
    }
}

/// The base64 of bytes, as JSON carries `[]byte`.
fn base64_map(map: BTreeMap<String, Vec<u8>>) -> serde_json::Value {
    use base64::Engine;
    let engine = base64::engine::general_purpose::STANDARD;
    map.into_iter()
        .map(|(k, v)| (k, serde_json::Value::String(engine.encode(v))))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// A Secret's JSON (its values never reach an error: a decode error names no field value).
fn secret_json(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let raw = unwrap(body, "v1", "Secret")?;
    let secret = Secret::decode(raw.as_slice()).map_err(|e| bad(e.to_string()))?;
    let mut object = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata_json(secret.metadata.unwrap_or_default()),
    });
    if !secret.data.is_empty() {
        object["data"] = base64_map(secret.data);
    }
    if !secret.string_data.is_empty() {
        object["stringData"] = serde_json::json!(secret.string_data);
    }
    if let Some(type_) = secret.type_ {
        object["type"] = type_.into();
    }
    if let Some(immutable) = secret.immutable {
        object["immutable"] = immutable.into();
    }
    serde_json::to_vec(&object).map_err(|e| ApiError::internal(e.to_string()))
}

/// A ConfigMap's JSON.
fn config_map_json(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let raw = unwrap(body, "v1", "ConfigMap")?;
    let config = ConfigMap::decode(raw.as_slice()).map_err(|e| bad(e.to_string()))?;
    let mut object = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata_json(config.metadata.unwrap_or_default()),
    });
    if !config.data.is_empty() {
        object["data"] = serde_json::json!(config.data);
    }
    if !config.binary_data.is_empty() {
        object["binaryData"] = base64_map(config.binary_data);
    }
    if let Some(immutable) = config.immutable {
        object["immutable"] = immutable.into();
    }
    serde_json::to_vec(&object).map_err(|e| ApiError::internal(e.to_string()))
}

/// A ServiceAccount's JSON.
fn service_account_json(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let raw = unwrap(body, "v1", "ServiceAccount")?;
    let account = ServiceAccount::decode(raw.as_slice()).map_err(|e| bad(e.to_string()))?;
    let mut object = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata_json(account.metadata.unwrap_or_default()),
    });
    if let Some(automount) = account.automount_service_account_token {
        object["automountServiceAccountToken"] = automount.into();
    }
    serde_json::to_vec(&object).map_err(|e| ApiError::internal(e.to_string()))
}

/// A PodDisruptionBudget's JSON.
fn budget_json(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let raw = unwrap(body, "policy/v1", "PodDisruptionBudget")?;
    let budget = PodDisruptionBudget::decode(raw.as_slice()).map_err(|e| bad(e.to_string()))?;
    let mut object = serde_json::json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata_json(budget.metadata.unwrap_or_default()),
    });
    let Some(spec) = budget.spec else {
        return serde_json::to_vec(&object).map_err(|e| ApiError::internal(e.to_string()));
    };
    let int_or_string = |v: IntOrString| match v.type_ {
        1 => serde_json::json!(v.str_val),
        _ => serde_json::json!(v.int_val),
    };
    let mut out = serde_json::Map::new();
    if let Some(min) = spec.min_available {
        out.insert("minAvailable".into(), int_or_string(min));
    }
    if let Some(max) = spec.max_unavailable {
        out.insert("maxUnavailable".into(), int_or_string(max));
    }
    if let Some(selector) = spec.selector {
        let mut sel = serde_json::Map::new();
        if !selector.match_labels.is_empty() {
            sel.insert(
                "matchLabels".into(),
                serde_json::json!(selector.match_labels),
            );
        }
        if !selector.match_expressions.is_empty() {
            let terms: Vec<serde_json::Value> = selector
                .match_expressions
                .into_iter()
                .map(|t| {
                    let mut term = serde_json::json!({"key": t.key, "operator": t.operator});
                    if !t.values.is_empty() {
                        term["values"] = serde_json::json!(t.values);
                    }
                    term
                })
                .collect();
            sel.insert("matchExpressions".into(), serde_json::json!(terms));
        }
        out.insert("selector".into(), serde_json::Value::Object(sel));
    }
    if let Some(policy) = spec.unhealthy_pod_eviction_policy {
        out.insert("unhealthyPodEvictionPolicy".into(), policy.into());
    }
    object["spec"] = serde_json::Value::Object(out);
    serde_json::to_vec(&object).map_err(|e| ApiError::internal(e.to_string()))
}

/// The JSON of the Namespace a protobuf create body carries; 400 when the body is not a
/// protobuf-encoded v1 Namespace.
pub fn namespace_json(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let raw = unwrap(body, "v1", "Namespace")?;
    let namespace = Namespace::decode(raw.as_slice()).map_err(|e| bad(e.to_string()))?;
    let mut object = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": metadata_json(namespace.metadata.unwrap_or_default()),
    });
    if let Some(spec) = namespace.spec.filter(|s| !s.finalizers.is_empty()) {
        object["spec"] = serde_json::json!({ "finalizers": spec.finalizers });
    }
    serde_json::to_vec(&object).map_err(|e| ApiError::internal(e.to_string()))
}

/// The JSON of the metadata a create sets.
fn metadata_json(meta: ObjectMeta) -> serde_json::Value {
    let mut metadata = serde_json::Map::new();
    if !meta.name.is_empty() {
        metadata.insert("name".into(), meta.name.into());
    }
    if !meta.generate_name.is_empty() {
        metadata.insert("generateName".into(), meta.generate_name.into());
    }
    if !meta.labels.is_empty() {
        metadata.insert("labels".into(), serde_json::json!(meta.labels));
    }
    if !meta.annotations.is_empty() {
        metadata.insert("annotations".into(), serde_json::json!(meta.annotations));
    }
    serde_json::Value::Object(metadata)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(kind: &str, namespace: &Namespace) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: "v1".into(),
                kind: kind.into(),
            }),
            raw: namespace.encode_to_vec(),
        };
        [MAGIC, unknown.encode_to_vec().as_slice()].concat()
    }

    #[test]
    fn a_protobuf_namespace_becomes_its_json() {
        let namespace = Namespace {
            metadata: Some(ObjectMeta {
                name: "team-a".into(),
                labels: [("team".to_owned(), "a".to_owned())].into(),
                ..ObjectMeta::default()
            }),
            spec: None,
        };
        let json = namespace_json(&encoded("Namespace", &namespace)).expect("a namespace");
        let json: serde_json::Value = serde_json::from_slice(&json).expect("JSON");
        assert_eq!(
            json,
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "team-a", "labels": {"team": "a"}}
            })
        );
    }

    #[test]
    fn a_protobuf_secret_and_config_map_become_their_json() {
        let secret = Secret {
            metadata: Some(ObjectMeta {
                name: "creds".into(),
                ..ObjectMeta::default()
            }),
            data: [("key".to_owned(), b"\x00v".to_vec())].into(),
            type_: Some("Opaque".into()),
            string_data: [("s".to_owned(), "t".to_owned())].into(),
            immutable: Some(true),
        };
        let body = [
            MAGIC,
            Unknown {
                type_meta: Some(TypeMeta {
                    api_version: "v1".into(),
                    kind: "Secret".into(),
                }),
                raw: secret.encode_to_vec(),
            }
            .encode_to_vec()
            .as_slice(),
        ]
        .concat();
        let json: serde_json::Value =
            serde_json::from_slice(&object_json("Secret", &body).expect("a secret")).expect("JSON");
        assert_eq!(
            json,
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "creds"},
                "data": {"key": "AHY="},
                "stringData": {"s": "t"},
                "type": "Opaque",
                "immutable": true,
            })
        );
        let config = ConfigMap {
            metadata: Some(ObjectMeta {
                name: "settings".into(),
                ..ObjectMeta::default()
            }),
            data: [("a".to_owned(), "b".to_owned())].into(),
            binary_data: [("bin".to_owned(), vec![0xff])].into(),
            immutable: None,
        };
        let body = [
            MAGIC,
            Unknown {
                type_meta: Some(TypeMeta {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                }),
                raw: config.encode_to_vec(),
            }
            .encode_to_vec()
            .as_slice(),
        ]
        .concat();
        let json: serde_json::Value =
            serde_json::from_slice(&object_json("ConfigMap", &body).expect("a config map"))
                .expect("JSON");
        assert_eq!(
            json,
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "settings"},
                "data": {"a": "b"},
                "binaryData": {"bin": "/w=="},
            })
        );
    }

    #[test]
    fn a_protobuf_disruption_budget_becomes_its_json() {
        let budget = PodDisruptionBudget {
            metadata: Some(ObjectMeta {
                name: "web".into(),
                ..ObjectMeta::default()
            }),
            spec: Some(PodDisruptionBudgetSpec {
                min_available: Some(IntOrString {
                    type_: 1,
                    int_val: 0,
                    str_val: "50%".into(),
                }),
                selector: Some(LabelSelector {
                    match_labels: [("app".to_owned(), "web".to_owned())].into(),
                    match_expressions: vec![LabelSelectorRequirement {
                        key: "tier".into(),
                        operator: "Exists".into(),
                        values: Vec::new(),
                    }],
                }),
                max_unavailable: None,
                unhealthy_pod_eviction_policy: Some("AlwaysAllow".into()),
            }),
        };
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: "policy/v1".into(),
                kind: "PodDisruptionBudget".into(),
            }),
            raw: budget.encode_to_vec(),
        };
        let body = [MAGIC, unknown.encode_to_vec().as_slice()].concat();
        let json = object_json("PodDisruptionBudget", &body).expect("a budget");
        let json: serde_json::Value = serde_json::from_slice(&json).expect("JSON");
        assert_eq!(
            json,
            serde_json::json!({
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "web"},
                "spec": {
                    "minAvailable": "50%",
                    "selector": {
                        "matchLabels": {"app": "web"},
                        "matchExpressions": [{"key": "tier", "operator": "Exists"}]
                    },
                    "unhealthyPodEvictionPolicy": "AlwaysAllow"
                }
            })
        );
        let int = IntOrString {
            type_: 0,
            int_val: 2,
            str_val: String::new(),
        };
        let unknown = Unknown {
            type_meta: unknown.type_meta.clone(),
            raw: PodDisruptionBudget {
                metadata: None,
                spec: Some(PodDisruptionBudgetSpec {
                    min_available: Some(int),
                    ..PodDisruptionBudgetSpec::default()
                }),
            }
            .encode_to_vec(),
        };
        let body = [MAGIC, unknown.encode_to_vec().as_slice()].concat();
        let json: serde_json::Value =
            serde_json::from_slice(&object_json("PodDisruptionBudget", &body).expect("a budget"))
                .expect("JSON");
        assert_eq!(json["spec"], serde_json::json!({"minAvailable": 2}));
    }

    #[test]
    fn anything_but_a_protobuf_namespace_is_a_bad_request_naming_what_it_got() {
        let err = namespace_json(b"{\"kind\":\"Namespace\"}").expect_err("JSON is not protobuf");
        assert_eq!(err.code, 400);
        assert!(err.message.contains("magic number"), "{}", err.message);
        let err = namespace_json(&encoded("Secret", &Namespace::default()))
            .expect_err("a Secret is not a Namespace");
        assert!(
            err.message.contains("expected a v1 Namespace") && err.message.contains("Secret"),
            "{}",
            err.message
        );
    }
}
