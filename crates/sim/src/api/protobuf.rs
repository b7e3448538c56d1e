//! Protobuf request bodies, for the create kubectl sends only as protobuf.
//!
//! Why: `kubectl create namespace` (client-go's typed client) sends
//! `application/vnd.kubernetes.protobuf` and nothing else, so without this a newcomer who makes a
//! namespace for `podline run -n` against the sim gets a 415. The sim still stores and serves
//! JSON: the body is transcoded on the way in. Only Namespaces are understood (every other kind
//! kubectl creates from JSON); the messages below declare just the fields a Namespace create
//! carries, and protobuf skips the rest.

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

/// The JSON of the Namespace a protobuf create body carries; 400 when the body is not a
/// protobuf-encoded v1 Namespace.
pub fn namespace_json(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let bad = |what: String| ApiError::bad_request(format!("protobuf body: {what}"));
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("it does not start with the \"k8s\\0\" magic number".into()))?;
    let unknown = Unknown::decode(envelope).map_err(|e| bad(e.to_string()))?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    if (type_meta.api_version.as_str(), type_meta.kind.as_str()) != ("v1", "Namespace") {
        return Err(bad(format!(
            "expected a v1 Namespace, got kind {:?} of apiVersion {:?}",
            type_meta.kind, type_meta.api_version
        )));
    }
    let namespace = Namespace::decode(unknown.raw.as_slice()).map_err(|e| bad(e.to_string()))?;
    let meta = namespace.metadata.unwrap_or_default();
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
    let mut object = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": metadata,
    });
    if let Some(spec) = namespace.spec.filter(|s| !s.finalizers.is_empty()) {
        object["spec"] = serde_json::json!({ "finalizers": spec.finalizers });
    }
    serde_json::to_vec(&object).map_err(|e| ApiError::internal(e.to_string()))
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
