//! Argo's side of a KFP v1 pod: the template, artifact locations and outputs.
//!
//! Pure functions, kept in step with KFP's metadata-writer and the v1 DSL
//! compiler (the name sanitizer), plus what that writer lacked: more artifact
//! kinds, bucket/endpoint from the template's `archiveLocation`, and outputs
//! from `WorkflowTaskResult` objects.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::proto::Value;

/// Where the v1 compiler puts input artifacts: `/tmp/inputs/<name>/data`.
const INPUT_PREFIX: &str = "/tmp/inputs/";
const INPUT_SUFFIX: &str = "/data";

/// The parts of the Argo template (env `ARGO_TEMPLATE`) podline uses.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Template {
    /// Template name: the component identity when there is no component spec.
    pub name: String,
    /// `inputs.artifacts[]`, raw.
    pub input_artifacts: Vec<Json>,
    /// `archiveLocation`, used to fill bucket/endpoint of key-only artifacts.
    pub archive_location: Option<Json>,
}

impl Template {
    /// Parse the template JSON. Missing fields give empty values, like KFP.
    pub fn parse(text: &str) -> Result<Template, serde_json::Error> {
        let json: Json = serde_json::from_str(text)?;
        Ok(Template {
            name: json["name"].as_str().unwrap_or_default().to_owned(),
            input_artifacts: json["inputs"]["artifacts"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
            archive_location: json.get("archiveLocation").cloned(),
        })
    }
}

/// Why an artifact has no URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoUri {
    /// A kind that has no location by design (`raw`, inline data): skipped
    /// silently, as KFP does.
    Inline,
    /// A kind podline does not know: skipped with a warning.
    UnknownKind(String),
}

/// The MLMD URI of an Argo artifact. KFP's scheme for S3: `s3://bucket/key`
/// when the endpoint is AWS (`*s3*amazonaws.com*`), else `minio://bucket/key`.
/// Also gcs, oss, hdfs, http and artifactory locations. Missing S3
/// bucket/endpoint are taken from `archive_location` when given.
pub fn artifact_uri(artifact: &Json, archive_location: Option<&Json>) -> Result<String, NoUri> {
    let str_of = |v: &Json, k: &str| v.get(k).and_then(Json::as_str).map(str::to_owned);
    if let Some(s3) = artifact.get("s3") {
        let fallback = archive_location.and_then(|a| a.get("s3"));
        let pick = |k: &str| {
            str_of(s3, k)
                .filter(|v| !v.is_empty())
                .or_else(|| fallback.and_then(|f| str_of(f, k)))
                .unwrap_or_default()
        };
        let endpoint = pick("endpoint");
        let bucket = pick("bucket");
        let key = str_of(s3, "key").unwrap_or_default();
        let provider = if is_aws_s3(&endpoint) { "s3" } else { "minio" };
        return Ok(format!("{provider}://{bucket}/{key}"));
    }
    if let Some(gcs) = artifact.get("gcs") {
        let bucket = str_of(gcs, "bucket")
            .or_else(|| {
                archive_location
                    .and_then(|a| a.get("gcs"))
                    .and_then(|g| str_of(g, "bucket"))
            })
            .unwrap_or_default();
        let key = str_of(gcs, "key").unwrap_or_default();
        return Ok(format!("gs://{bucket}/{key}"));
    }
    if let Some(oss) = artifact.get("oss") {
        let bucket = str_of(oss, "bucket").unwrap_or_default();
        let key = str_of(oss, "key").unwrap_or_default();
        return Ok(format!("oss://{bucket}/{key}"));
    }
    if let Some(hdfs) = artifact.get("hdfs") {
        let path = str_of(hdfs, "path").unwrap_or_default();
        return Ok(format!("hdfs://{}", path.trim_start_matches('/')));
    }
    if let Some(azure) = artifact.get("azure") {
        let container = str_of(azure, "container").unwrap_or_default();
        let blob = str_of(azure, "blob").unwrap_or_default();
        return Ok(format!("azure://{container}/{blob}"));
    }
    for kind in ["http", "artifactory"] {
        if let Some(url) = artifact.get(kind).and_then(|h| str_of(h, "url")) {
            return Ok(url);
        }
    }
    if artifact.get("raw").is_some() {
        return Err(NoUri::Inline);
    }
    let known = [
        "name",
        "path",
        "mode",
        "from",
        "fromExpression",
        "globalName",
        "archive",
        "optional",
        "subPath",
        "recurseMode",
        "deleted",
        "archiveLogs",
    ];
    let kind = artifact
        .as_object()
        .and_then(|o| o.keys().find(|k| !known.contains(&k.as_str())).cloned())
        .unwrap_or_else(|| "none".to_owned());
    Err(NoUri::UnknownKind(kind))
}

/// `^.*s3.*amazonaws.com.*$` without a regex engine: "s3" appears, and
/// "amazonaws" followed by any character and "com" appears after it.
fn is_aws_s3(endpoint: &str) -> bool {
    let Some(s3) = endpoint.find("s3") else {
        return false;
    };
    let rest = &endpoint[s3 + 2..];
    let mut from = 0;
    while let Some(i) = rest[from..].find("amazonaws") {
        let after = &rest[from + i + "amazonaws".len()..];
        let mut chars = after.chars();
        if chars.next().is_some() && chars.as_str().starts_with("com") {
            return true;
        }
        from += i + 1;
    }
    false
}

/// The v1 DSL compiler's name sanitizer: runs of characters outside
/// `[-_0-9A-Za-z]` become `-`, runs of `-` collapse, `-` is trimmed.
pub fn sanitize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let c = if c == '-' || c == '_' || c.is_ascii_alphanumeric() {
            c
        } else {
            '-'
        };
        if c == '-' && out.ends_with('-') {
            continue;
        }
        out.push(c);
    }
    out.trim_matches('-').to_owned()
}

/// The input name of an input artifact: its path without the v1 layout's
/// `/tmp/inputs/` prefix and `/data` suffix, else the artifact name.
pub fn input_name(artifact: &Json) -> String {
    let path = artifact
        .get("path")
        .and_then(Json::as_str)
        .unwrap_or_default();
    match path
        .strip_prefix(INPUT_PREFIX)
        .and_then(|p| p.strip_suffix(INPUT_SUFFIX))
    {
        Some(name) if !name.is_empty() => name.to_owned(),
        _ => artifact
            .get("name")
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_owned(),
    }
}

/// The output name of an output artifact: its Argo name without the
/// `<template>-` prefix the v1 compiler adds.
pub fn output_name(artifact_name: &str, template_name: &str) -> String {
    artifact_name
        .strip_prefix(template_name)
        .and_then(|rest| rest.strip_prefix('-'))
        .filter(|_| !template_name.is_empty())
        .unwrap_or(artifact_name)
        .to_owned()
}

/// The output artifacts listed in an Argo outputs document
/// (`{"artifacts": [...], "parameters": [...]}`), from the pod annotation
/// `workflows.argoproj.io/outputs` or a WorkflowTaskResult's `outputs`.
pub fn output_artifacts(outputs: &Json) -> Vec<Json> {
    outputs["artifacts"].as_array().cloned().unwrap_or_default()
}

/// The output parameters of an Argo outputs document as `output:<name>`
/// custom properties (name without the `<template>-` prefix, value as the
/// string Argo holds). Parameters without a value yet are left out.
///
/// KFP's v1 writer ignores output parameters (reference, section 5, phase 2),
/// so the KFP UI reads none from MLMD; it shows an execution's custom
/// properties, though, so `output:<name>` sits next to the `input:<name>`
/// properties KFP writes, without changing anything KFP reads. Kept as
/// execution properties rather than artifacts: a parameter has no URI, and
/// artifacts without one would be linked to inputs by an empty URI.
pub fn output_parameters(outputs: &Json, template_name: &str) -> BTreeMap<String, Value> {
    let mut result = BTreeMap::new();
    for parameter in outputs["parameters"].as_array().into_iter().flatten() {
        let (Some(name), Some(value)) = (parameter["name"].as_str(), parameter.get("value")) else {
            continue;
        };
        let value = match value {
            Json::String(s) => s.clone(),
            Json::Null => continue,
            other => other.to_string(),
        };
        result.insert(
            format!("output:{}", output_name(name, template_name)),
            Value::string(value),
        );
    }
    result
}

/// The artifact as KFP stores it in `argo_artifact`: Python's
/// `json.dumps(value, sort_keys=True)`, i.e. sorted keys, `", "` and `": "`
/// separators and non-ASCII escaped as `\uXXXX`.
pub fn python_json(value: &Json) -> String {
    let mut out = String::new();
    write_python_json(value, &mut out);
    out
}

fn write_python_json(value: &Json, out: &mut String) {
    match value {
        Json::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python_str(k, out);
                out.push_str(": ");
                write_python_json(&map[k], out);
            }
            out.push('}');
        }
        Json::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python_json(v, out);
            }
            out.push(']');
        }
        Json::String(s) => write_python_str(s, out),
        other => out.push_str(&other.to_string()),
    }
}

fn write_python_str(s: &str, out: &mut String) {
    use std::fmt::Write;
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn s3_uri_should_use_minio_scheme_unless_the_endpoint_is_aws() {
        let minio = json!({"s3": {"endpoint": "minio-service.kubeflow:9000", "bucket": "mlpipeline", "key": "a/b.tgz"}});
        assert_eq!(
            artifact_uri(&minio, None).as_deref(),
            Ok("minio://mlpipeline/a/b.tgz")
        );
        let aws = json!({"s3": {"endpoint": "s3.amazonaws.com", "bucket": "b", "key": "k"}});
        assert_eq!(artifact_uri(&aws, None).as_deref(), Ok("s3://b/k"));
        let regional = json!({"s3": {"endpoint": "bucket.s3.us-west-2.amazonaws.com", "bucket": "b", "key": "k"}});
        assert_eq!(artifact_uri(&regional, None).as_deref(), Ok("s3://b/k"));
        let gcs_interop =
            json!({"s3": {"endpoint": "storage.googleapis.com", "bucket": "b", "key": "k"}});
        assert_eq!(
            artifact_uri(&gcs_interop, None).as_deref(),
            Ok("minio://b/k")
        );
    }

    #[test]
    fn key_only_s3_artifact_should_take_bucket_and_endpoint_from_archive_location() {
        let key_only = json!({"s3": {"key": "runs/x/out.tgz"}});
        // KFP's writer produced minio:///key here.
        assert_eq!(
            artifact_uri(&key_only, None).as_deref(),
            Ok("minio:///runs/x/out.tgz")
        );
        let archive =
            json!({"s3": {"endpoint": "minio-service.kubeflow:9000", "bucket": "mlpipeline"}});
        assert_eq!(
            artifact_uri(&key_only, Some(&archive)).as_deref(),
            Ok("minio://mlpipeline/runs/x/out.tgz")
        );
    }

    #[test]
    fn other_artifact_kinds_should_map_to_their_schemes() {
        let gcs = json!({"gcs": {"bucket": "b", "key": "k"}});
        assert_eq!(artifact_uri(&gcs, None).as_deref(), Ok("gs://b/k"));
        let http = json!({"http": {"url": "https://example.com/x"}});
        assert_eq!(
            artifact_uri(&http, None).as_deref(),
            Ok("https://example.com/x")
        );
        let raw = json!({"name": "r", "raw": {"data": "hello"}});
        assert_eq!(artifact_uri(&raw, None), Err(NoUri::Inline));
        let weird = json!({"name": "w", "path": "/x", "ftp": {"host": "h"}});
        assert_eq!(
            artifact_uri(&weird, None),
            Err(NoUri::UnknownKind("ftp".into()))
        );
    }

    #[test]
    fn sanitizer_should_match_the_v1_compiler() {
        assert_eq!(sanitize_name("Output Model"), "Output-Model");
        assert_eq!(sanitize_name("  a//b__c--d  "), "a-b__c-d");
        assert_eq!(sanitize_name("--x--"), "x");
        assert_eq!(
            sanitize_name("mlpipeline-ui-metadata"),
            "mlpipeline-ui-metadata"
        );
        assert_eq!(sanitize_name("é!"), "");
    }

    #[test]
    fn input_and_output_names_should_strip_the_compiler_layout() {
        assert_eq!(
            input_name(&json!({"name": "t-data", "path": "/tmp/inputs/data/data"})),
            "data"
        );
        assert_eq!(
            input_name(&json!({"name": "fallback", "path": "/elsewhere"})),
            "fallback"
        );
        assert_eq!(output_name("train-model", "train"), "model");
        assert_eq!(output_name("other-model", "train"), "other-model");
        assert_eq!(output_name("model", ""), "model");
    }

    #[test]
    fn template_should_parse_name_inputs_and_archive_location() {
        let t = Template::parse(
            r#"{"name":"train","inputs":{"artifacts":[{"name":"train-data","path":"/tmp/inputs/data/data","s3":{"key":"k"}}]},"archiveLocation":{"s3":{"bucket":"b"}}}"#,
        )
        .expect("valid");
        assert_eq!(t.name, "train");
        assert_eq!(t.input_artifacts.len(), 1);
        assert!(t.archive_location.is_some());
        assert_eq!(Template::parse("{}").expect("empty").name, "");
        assert!(Template::parse("{not json").is_err());
    }

    #[test]
    fn python_json_should_match_json_dumps_sort_keys() {
        // python3 -c 'import json; print(json.dumps({"b":[1,"x"],"a":{"d":2.5,"c":"é\\n"}}, sort_keys=True))'
        let v: Json =
            serde_json::from_str(r#"{"b":[1,"x"],"a":{"d":2.5,"c":"é\n"}}"#).expect("json");
        assert_eq!(
            python_json(&v),
            r#"{"a": {"c": "\u00e9\n", "d": 2.5}, "b": [1, "x"]}"#
        );
    }
}
