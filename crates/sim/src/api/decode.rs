//! Decoding an object body (create, update) with kube-apiserver's error messages: a body that
//! is not JSON is `the object provided is unrecognized (must be of type Pod): couldn't get
//! version/kind; json parse error: ...`, a group/version/kind the server does not register is
//! `Pod in version "v2" cannot be handled as a Pod: no kind "Pod" is registered for version
//! "v2" in scheme "pkg/api/legacyscheme/scheme.go:30"`, and a field of the wrong type is Go's
//! `json: cannot unmarshal string into Go struct field PodSpec.spec.terminationGracePeriodSeconds
//! of type int64` behind the same `cannot be handled as` prefix.
//!
//! The parse errors are worded like Go's `encoding/json` for the common cases (an unexpected
//! end, an invalid character); Go's wording of some rarer syntax errors differs.

use podline_sim_core::kinds::ApiKind;
use serde_json::Value;

use super::body::JsonBody;
use crate::status::ApiError;

/// Where built-in kinds are registered, as kube-apiserver names its scheme in errors.
const SCHEME: &str = "pkg/api/legacyscheme/scheme.go:30";

/// What a write's `fieldValidation` asks the server to do about fields of the body that its
/// kind does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them with a warning each (the default).
    Warn,
    /// Refuse the write (400 `strict decoding error: unknown field "spec.x"`).
    Strict,
}

impl FieldValidation {
    /// The directive of a request's `fieldValidation` value (unset or unknown: the default,
    /// Warn).
    pub fn parse(value: Option<&str>) -> FieldValidation {
        match value {
            Some("Ignore") => FieldValidation::Ignore,
            Some("Strict") => FieldValidation::Strict,
            _ => FieldValidation::Warn,
        }
    }
}

/// Decodes an object of kind `K` and checks its fields as `validation` says: Strict refuses a
/// body with fields `K` does not have, as the strict decoder does (`Pod in version "v1" cannot
/// be handled as a Pod: strict decoding error: unknown field "spec.foo"`); Warn returns them
/// (as `unknown field "spec.foo"` warnings) for the caller to send. Custom resources keep every
/// field, so none is unknown.
pub fn decode_validated<K: ApiKind>(
    body: &JsonBody,
    validation: FieldValidation,
) -> Result<(K, Vec<String>), ApiError> {
    let expected = Expected {
        kind: K::KIND,
        api_versions: &[K::API_VERSION],
        any_kind: K::CUSTOM_RESOURCE,
    };
    if !K::CUSTOM_RESOURCE
        && body.media_type != "application/yaml"
        && let Some(obj) = decode_canonical::<K>(&body.bytes)
    {
        return Ok((obj, Vec::new()));
    }
    let value = parse_body(body, expected.kind)?;
    let obj: K = decode_value(&value, &expected)?;
    if validation == FieldValidation::Ignore || K::CUSTOM_RESOURCE {
        return Ok((obj, Vec::new()));
    }
    let known = serde_json::to_value(&obj)
        .map_err(|e| ApiError::internal(format!("re-encoding the object: {e}")))?;
    let mut unknown = Vec::new();
    unknown_fields(&value, &known, "", &mut unknown);
    let warnings: Vec<String> = unknown
        .iter()
        .map(|path| format!("unknown field {path:?}"))
        .collect();
    if validation == FieldValidation::Strict && !warnings.is_empty() {
        let version = K::API_VERSION.rsplit('/').next().unwrap_or(K::API_VERSION);
        return Err(ApiError::bad_request(format!(
            "{} in version {version:?} cannot be handled as a {}: strict decoding error: {}",
            K::KIND,
            K::KIND,
            warnings.join(", ")
        )));
    }
    Ok((obj, warnings))
}

/// `bytes` decoded as `K` if they are exactly what `K` serializes back to: then every field of the
/// body is one `K` has (no unknown field to warn about or refuse), and `apiVersion` and `kind` are
/// `K`'s own, so the general path (a `Value` tree, a typed decode of it, and a re-encoded tree to
/// compare for unknown fields) would decode the same object with no warning. Clients that
/// serialize with the same types (kube-rs with k8s-openapi, podline itself) send such bodies,
/// which makes this the common create. None otherwise: the caller takes the general path, which
/// words the errors and warnings.
fn decode_canonical<K: ApiKind>(bytes: &[u8]) -> Option<K> {
    let obj: K = serde_json::from_slice(bytes).ok()?;
    let mut again = Vec::with_capacity(bytes.len());
    serde_json::to_writer(&mut again, &obj).ok()?;
    (again.as_slice() == bytes.trim_ascii_end()).then_some(obj)
}

/// The paths (`spec.containers[0].imagee`) of the fields of `input` that the typed object,
/// re-encoded as `known`, does not have. Nulls are skipped: they decode to absent fields.
fn unknown_fields(input: &Value, known: &Value, path: &str, out: &mut Vec<String>) {
    match (input, known) {
        (Value::Object(fields), Value::Object(kept)) => {
            for (key, value) in fields {
                if value.is_null() {
                    continue;
                }
                let at = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match kept.get(key) {
                    Some(known) => unknown_fields(value, known, &at, out),
                    None => out.push(at),
                }
            }
        }
        (Value::Array(items), Value::Array(kept)) => {
            for (i, (item, known)) in items.iter().zip(kept).enumerate() {
                unknown_fields(item, known, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// What a body must be to decode: its kind and the apiVersions it may be sent in (the first is
/// the default for a body that names none).
pub struct Expected<'a> {
    /// The Kind.
    pub kind: &'a str,
    /// The accepted apiVersions, the default first.
    pub api_versions: &'a [&'a str],
    /// Whether any kind and version goes (custom resources: the sim keeps them as sent).
    pub any_kind: bool,
}

/// Decodes a body as `T` of the [`Expected`] kind, with kube-apiserver's error messages (see
/// the module docs). Subresources use it for their own kinds (Binding, Eviction).
pub fn decode_as<T: serde::de::DeserializeOwned>(
    body: &JsonBody,
    expected: &Expected<'_>,
) -> Result<T, ApiError> {
    let value = parse_body(body, expected.kind)?;
    decode_value(&value, expected)
}

/// Parses a body (JSON, or YAML when the content type says so) as a JSON value.
fn parse_body(body: &JsonBody, kind: &str) -> Result<Value, ApiError> {
    if body.media_type == "application/yaml" {
        let text = std::str::from_utf8(&body.bytes)
            .map_err(|e| unrecognized(kind, &format!("the body is not UTF-8: {e}"), body))?;
        return serde_saphyr::from_str(text).map_err(|e| {
            unrecognized(
                kind,
                &format!("couldn't get version/kind; yaml parse error: {e}"),
                body,
            )
        });
    }
    serde_json::from_slice(&body.bytes).map_err(|e| {
        unrecognized(
            kind,
            &format!(
                "couldn't get version/kind; json parse error: {}",
                go_syntax_error(&e, &body.bytes)
            ),
            body,
        )
    })
}

/// Checks the kind and version a parsed body names, and decodes it.
fn decode_value<T: serde::de::DeserializeOwned>(
    value: &Value,
    expected: &Expected<'_>,
) -> Result<T, ApiError> {
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let sent_kind = if kind.is_empty() { expected.kind } else { kind };
    let default_version = expected.api_versions.first().copied().unwrap_or("v1");
    let sent_version = if api_version.is_empty() {
        default_version
    } else {
        api_version
    };
    let version = sent_version.rsplit('/').next().unwrap_or(sent_version);
    let handled = |detail: String| {
        ApiError::bad_request(format!(
            "{sent_kind} in version {version:?} cannot be handled as a {}: {detail}",
            expected.kind
        ))
    };
    if !expected.any_kind
        && (sent_kind != expected.kind || !expected.api_versions.contains(&sent_version))
    {
        // A kind the scheme registers decodes into its own type, and the conversion to the
        // expected kind's internal type is what fails (apimachinery `pkg/runtime/scheme.go`
        // `convertToVersion`/`Convert`: `converting (v1.Service) to (core.Pod): unknown
        // conversion`).
        if registered(sent_version, sent_kind) {
            let internal = internal_package(expected.api_versions.first().copied().unwrap_or(""));
            return Err(handled(format!(
                "converting ({version}.{sent_kind}) to ({internal}.{}): unknown conversion",
                expected.kind
            )));
        }
        return Err(handled(format!(
            "no kind {sent_kind:?} is registered for version {sent_version:?} in scheme {SCHEME:?}"
        )));
    }
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let path = e.path().to_string();
        handled(go_type_error(value, &path, e.inner(), expected.kind))
    })
}

/// Whether kube-apiserver 1.32's scheme registers `kind` in the group version `api_version`:
/// the core v1 kinds (`pkg/apis/core/v1/register.go` via k8s.io/api `core/v1/register.go`) and
/// the kinds of the other group versions the sim serves.
fn registered(api_version: &str, kind: &str) -> bool {
    const CORE_V1: &[&str] = &[
        "Pod",
        "PodList",
        "PodStatusResult",
        "PodTemplate",
        "PodTemplateList",
        "ReplicationController",
        "ReplicationControllerList",
        "Service",
        "ServiceList",
        "ServiceProxyOptions",
        "Endpoints",
        "EndpointsList",
        "Node",
        "NodeList",
        "NodeProxyOptions",
        "Binding",
        "Event",
        "EventList",
        "LimitRange",
        "LimitRangeList",
        "ResourceQuota",
        "ResourceQuotaList",
        "Namespace",
        "NamespaceList",
        "Secret",
        "SecretList",
        "ServiceAccount",
        "ServiceAccountList",
        "PersistentVolume",
        "PersistentVolumeList",
        "PersistentVolumeClaim",
        "PersistentVolumeClaimList",
        "PodAttachOptions",
        "PodLogOptions",
        "PodExecOptions",
        "PodPortForwardOptions",
        "PodProxyOptions",
        "ComponentStatus",
        "ComponentStatusList",
        "SerializedReference",
        "RangeAllocation",
        "ConfigMap",
        "ConfigMapList",
        "List",
    ];
    match api_version {
        "v1" => CORE_V1.contains(&kind),
        "coordination.k8s.io/v1" => matches!(kind, "Lease" | "LeaseList"),
        "policy/v1" => matches!(
            kind,
            "PodDisruptionBudget" | "PodDisruptionBudgetList" | "Eviction"
        ),
        _ => false,
    }
}

/// The Go package of a group's internal types, as conversion errors name them: `core` for the
/// core group, else the group's first label (`coordination`, `policy`).
fn internal_package(api_version: &str) -> &str {
    match api_version.rsplit_once('/') {
        None => "core",
        Some((group, _)) => group.split('.').next().unwrap_or(group),
    }
}

/// `the object provided is unrecognized (must be of type Pod): <detail> (<summary>)`.
fn unrecognized(kind: &str, detail: &str, body: &JsonBody) -> ApiError {
    ApiError::bad_request(format!(
        "the object provided is unrecognized (must be of type {kind}): {detail} ({})",
        summarize(&body.bytes)
    ))
}

/// The start of a body as kube-apiserver quotes it: JSON-looking bodies as text, others in hex,
/// cut at 30 bytes with ` ...`.
fn summarize(data: &[u8]) -> String {
    const MAX: usize = 30;
    let cut = &data[..data.len().min(MAX)];
    let more = if data.len() > MAX { " ..." } else { "" };
    match data.first() {
        None => "<empty>".to_owned(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(cut)),
        Some(_) => {
            let hex: String = cut.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{more}")
        }
    }
}

/// A serde_json syntax error worded like Go's `encoding/json`.
pub(super) fn go_syntax_error(err: &serde_json::Error, data: &[u8]) -> String {
    if let Some(go) = super::gojson::syntax_error(data) {
        return go;
    }
    if err.is_eof() {
        return "unexpected end of JSON input".to_owned();
    }
    // The byte serde stopped at: its line and column are 1-based.
    let offset = data
        .split_inclusive(|b| *b == b'\n')
        .take(err.line().saturating_sub(1))
        .map(<[u8]>::len)
        .sum::<usize>()
        + err.column().saturating_sub(1);
    match data.get(offset) {
        Some(b) if b.is_ascii_graphic() => {
            format!(
                "invalid character '{}' looking for beginning of value",
                *b as char
            )
        }
        Some(b) => format!(
            "invalid character {:?} looking for beginning of value",
            *b as char
        ),
        None => "unexpected end of JSON input".to_owned(),
    }
}

/// Go's `json: cannot unmarshal <json type> into Go struct field <Struct>.<path> of type <type>`
/// for a field of the wrong type at `path` (serde's dotted path, with list indices).
fn go_type_error(value: &Value, path: &str, err: &serde_json::Error, kind: &str) -> String {
    let segments: Vec<&str> = path.split('.').filter(|s| !s.is_empty()).collect();
    let mut node = Some(value);
    let mut go_path = Vec::new();
    for seg in &segments {
        match seg.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            Some(index) => node = node.and_then(|n| n.get(index.parse::<usize>().ok()?)),
            None => {
                // serde_path_to_error writes `spec.containers[0].image` as separate segments.
                let (name, index) = match seg.split_once('[') {
                    Some((name, rest)) => (name, rest.trim_end_matches(']').parse::<usize>().ok()),
                    None => (*seg, None),
                };
                go_path.push(name);
                node = node.and_then(|n| n.get(name));
                if let Some(i) = index {
                    node = node.and_then(|n| n.get(i));
                }
            }
        }
    }
    let json_type = match node {
        Some(Value::String(_)) => "string".to_owned(),
        Some(Value::Number(n)) if n.is_f64() => format!("number {n}"),
        Some(Value::Number(_)) => "number".to_owned(),
        Some(Value::Bool(_)) => "bool".to_owned(),
        Some(Value::Array(_)) => "array".to_owned(),
        Some(Value::Object(_)) => "object".to_owned(),
        Some(Value::Null) | None => {
            return format!("json: {err}");
        }
    };
    let Some((_, parents)) = go_path.split_last() else {
        return format!("json: cannot unmarshal {json_type} into Go value of type {kind}");
    };
    let go_struct = go_struct_name(&parents.join("."), kind);
    let go_type = go_type_name(&err.to_string());
    format!(
        "json: cannot unmarshal {json_type} into Go struct field {go_struct}.{} of type {go_type}",
        go_path.join(".")
    )
}

/// The Go struct that holds the fields under `parent` (a dotted path without indices).
fn go_struct_name(parent: &str, kind: &str) -> String {
    let known = match (kind, parent) {
        (_, "") => kind,
        (_, "metadata") => "ObjectMeta",
        ("Pod", "spec") => "PodSpec",
        ("Pod", "status") => "PodStatus",
        ("Lease", "spec") => "LeaseSpec",
        ("Namespace", "spec") => "NamespaceSpec",
        (_, "spec.containers" | "spec.initContainers") => "Container",
        (_, "spec.ephemeralContainers") => "EphemeralContainer",
        (_, "spec.containers.resources" | "spec.initContainers.resources") => {
            "ResourceRequirements"
        }
        (_, "spec.containers.env" | "spec.initContainers.env") => "EnvVar",
        (_, "spec.containers.ports" | "spec.initContainers.ports") => "ContainerPort",
        (_, "spec.containers.securityContext" | "spec.initContainers.securityContext") => {
            "SecurityContext"
        }
        (_, "spec.securityContext") => "PodSecurityContext",
        (_, "spec.tolerations") => "Toleration",
        (_, "spec.volumes") => "Volume",
        (_, "metadata.ownerReferences") => "OwnerReference",
        _ => "",
    };
    if !known.is_empty() {
        return known.to_owned();
    }
    // Otherwise the field's name, capitalized: close to Go's type names for most fields.
    let last = parent.rsplit('.').next().unwrap_or(parent);
    let mut chars = last.chars();
    chars.next().map_or_else(String::new, |c| {
        c.to_uppercase().collect::<String>() + chars.as_str()
    })
}

/// The Go type serde expected, from its message (`invalid type: ..., expected i64`).
fn go_type_name(message: &str) -> &'static str {
    let expected = message
        .split("expected ")
        .nth(1)
        .unwrap_or_default()
        .split(" at line")
        .next()
        .unwrap_or_default();
    match expected {
        "i64" => "int64",
        "i32" => "int32",
        "u64" => "uint64",
        "u32" => "uint32",
        "f64" => "float64",
        "a boolean" => "bool",
        "a string" => "string",
        e if e.starts_with("a sequence") => "[]interface {}",
        e if e.starts_with("a map") || e.starts_with("struct") => "map[string]interface {}",
        _ => "string",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn body(text: &str) -> JsonBody {
        JsonBody {
            bytes: bytes::Bytes::copy_from_slice(text.as_bytes()),
            media_type: "application/json".to_owned(),
        }
    }

    fn message(text: &str) -> String {
        decode_validated::<Pod>(&body(text), FieldValidation::Ignore)
            .expect_err("an error")
            .message
    }

    /// A body exactly as k8s-openapi serializes it takes the direct decode, and gives what the
    /// general path gives; one that differs in any way (an unknown field, a null) does not.
    #[test]
    fn a_canonical_body_decodes_directly_to_what_the_general_path_gives() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("x".into());
        pod.metadata.labels = Some([("app".into(), "web".into())].into());
        let text = serde_json::to_string(&pod).expect("serializes");
        let direct = decode_canonical::<Pod>(text.as_bytes()).expect("canonical");
        assert_eq!(direct, pod);
        let (obj, warnings) =
            decode_validated::<Pod>(&body(&text), FieldValidation::Strict).expect("decodes");
        assert_eq!((obj, warnings), (pod, Vec::new()));
        for other in [
            text.replacen("\"metadata\":{", "\"metadata\":{\"bogus\":1,", 1),
            text.replacen("\"metadata\":{", "\"metadata\":{\"namespace\":null,", 1),
            text.replacen("\"v1\"", "\"v2\"", 1),
            format!(" {text}"),
        ] {
            assert!(
                decode_canonical::<Pod>(other.as_bytes()).is_none(),
                "{other}"
            );
        }
    }

    #[test]
    fn unknown_fields_are_refused_by_strict_and_reported_by_warn() {
        let text = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","creationTimestamp":null},"spec":{"bogus":1,"containers":[{"name":"a","image":"i","imagee":"j","resources":{}}]}}"#;
        let err =
            decode_validated::<Pod>(&body(text), FieldValidation::Strict).expect_err("strict");
        assert_eq!(
            err.message,
            r#"Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.bogus", unknown field "spec.containers[0].imagee""#
        );
        let (_, warnings) =
            decode_validated::<Pod>(&body(text), FieldValidation::Warn).expect("warn");
        assert_eq!(
            warnings,
            [
                r#"unknown field "spec.bogus""#,
                r#"unknown field "spec.containers[0].imagee""#
            ]
        );
        let clean = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","labels":{"a":"b"}},"spec":{"containers":[{"name":"a","image":"i","ports":[{"containerPort":80}],"env":[{"name":"E","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}]}],"securityContext":{}}}"#;
        let (_, warnings) =
            decode_validated::<Pod>(&body(clean), FieldValidation::Strict).expect("clean");
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn decode_errors_are_worded_like_kube_apiserver() {
        assert_eq!(
            message(r#"{"apiVersion":"v2","kind":"Pod","metadata":{"name":"x"}}"#),
            r#"Pod in version "v2" cannot be handled as a Pod: no kind "Pod" is registered for version "v2" in scheme "pkg/api/legacyscheme/scheme.go:30""#
        );
        assert_eq!(
            message(
                r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"terminationGracePeriodSeconds":"30","containers":[]}}"#
            ),
            r#"Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go struct field PodSpec.spec.terminationGracePeriodSeconds of type int64"#
        );
        assert_eq!(
            message(
                r#"{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"a","image":5}]}}"#
            ),
            r#"Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number into Go struct field Container.spec.containers.image of type string"#
        );
        assert_eq!(
            message(r#"{"apiVersion":"v1","kind":"Pod""#),
            r#"the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: unexpected end of JSON input ({"apiVersion":"v1","kind":"Pod ...)"#
        );
        assert_eq!(
            message("hello"),
            "the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: invalid character 'h' looking for beginning of value (68656c6c6f)"
        );
    }
}
