//! The OpenAPI documents kube-apiserver serves, for the kinds the sim serves: `/openapi/v3` (the
//! index of group versions, each with its `?hash=`), `/openapi/v3/<group version>` and
//! `/openapi/v2`. kubectl reads them to learn that the server validates fields itself
//! (`fieldValidation` on every PATCH), so `kubectl create`/`apply` work with their default
//! `--validate=strict`, and client-side apply and `kubectl explain` read the schemas.
//!
//! The documents are generated once from k8s-openapi's schemas (`generate.rs`, behind the
//! `openapi-gen` feature) and embedded. Served as kube-openapi serves them: the hash is the
//! uppercase hex SHA-512 of the document, also its ETag; a request with the current hash is
//! cacheable for a year (`Cache-Control: public, immutable`), one with another hash is
//! redirected (301) to the current one; `If-None-Match` with the ETag is 304. JSON only: a
//! request that accepts only protobuf is 406 (kube-apiserver also serves protobuf).

#[cfg(feature = "openapi-gen")]
pub mod generate;
mod v2;

use std::sync::LazyLock;

use axum::extract::{Path, RawQuery};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use jiff::Timestamp;

/// The group versions the sim documents, with their embedded documents.
const SOURCES: [(&str, &str); 6] = [
    ("api/v1", include_str!("api__v1.json")),
    (
        "apis/argoproj.io/v1alpha1",
        include_str!("apis__argoproj.io__v1alpha1.json"),
    ),
    (
        "apis/coordination.k8s.io/v1",
        include_str!("apis__coordination.k8s.io__v1.json"),
    ),
    ("apis/policy/v1", include_str!("apis__policy__v1.json")),
    (
        "apis/scheduling.k8s.io/v1",
        include_str!("apis__scheduling.k8s.io__v1.json"),
    ),
    (
        "apis/storage.k8s.io/v1",
        include_str!("apis__storage.k8s.io__v1.json"),
    ),
];

/// A document as served: compact JSON and its hash.
struct Doc {
    bytes: Bytes,
    hash: String,
}

impl Doc {
    fn new(value: &serde_json::Value) -> Doc {
        // Invariant: a JSON value always serializes.
        let bytes = Bytes::from(serde_json::to_vec(value).expect("a JSON value serializes"));
        let hash = sha512_hex(&bytes);
        Doc { bytes, hash }
    }
}

/// Everything served, built on first use.
struct Docs {
    groups: Vec<(&'static str, Doc)>,
    index: Doc,
    v2: Doc,
    /// When the documents were built: their `Last-Modified`.
    built: Timestamp,
}

static DOCS: LazyLock<Docs> = LazyLock::new(|| {
    // Invariant: the embedded documents are JSON (the unit tests parse each of them).
    let values: Vec<serde_json::Value> = SOURCES
        .iter()
        .map(|(_, src)| serde_json::from_str(src).expect("embedded OpenAPI document is JSON"))
        .collect();
    let groups: Vec<(&'static str, Doc)> = SOURCES
        .iter()
        .zip(&values)
        .map(|((gv, _), value)| (*gv, Doc::new(value)))
        .collect();
    let paths: serde_json::Map<String, serde_json::Value> = groups
        .iter()
        .map(|(gv, doc)| {
            (
                (*gv).to_owned(),
                serde_json::json!({"serverRelativeURL": relative_url(gv, &doc.hash)}),
            )
        })
        .collect();
    Docs {
        groups,
        index: Doc::new(&serde_json::json!({ "paths": paths })),
        v2: Doc::new(&v2::from_v3(&values)),
        built: Timestamp::now(),
    }
});

/// `/openapi/v3/<gv>?hash=<HASH>`, as the index names a document.
fn relative_url(gv: &str, hash: &str) -> String {
    format!("/openapi/v3/{gv}?hash={hash}")
}

/// The uppercase hex SHA-512 of `data` (kube-openapi's `computeETag`).
fn sha512_hex(data: &[u8]) -> String {
    use std::fmt::Write;
    let digest = ring::digest::digest(&ring::digest::SHA512, data);
    digest
        .as_ref()
        .iter()
        .fold(String::with_capacity(128), |mut out, b| {
            let _ = write!(out, "{b:02X}");
            out
        })
}

/// An HTTP date (`Mon, 02 Jan 2006 15:04:05 GMT`).
fn http_date(at: Timestamp) -> String {
    at.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// Whether the request accepts JSON (what the sim serves): no Accept, `*/*`, `application/*`
/// or `application/json`, with any parameters.
fn accepts_json(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    accept.split(',').any(|clause| {
        let media = clause.split(';').next().unwrap_or_default().trim();
        matches!(media, "" | "*/*" | "application/*" | "application/json")
    })
}

/// Serves `doc` as `http.ServeContent` does with an ETag: 304 when `If-None-Match` names it.
fn serve(doc: &Doc, headers: &HeaderMap, mut extra: Vec<(header::HeaderName, String)>) -> Response {
    let etag = format!("\"{}\"", doc.hash);
    extra.push((header::ETAG, etag.clone()));
    extra.push((header::LAST_MODIFIED, http_date(DOCS.built)));
    let not_modified = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut response = if not_modified {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = (StatusCode::OK, doc.bytes.clone()).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    };
    for (name, value) in extra {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// `GET /openapi/v3`: the index of group versions. kube-apiserver's aggregator serves it with
/// `http.ServeContent` and sets no content type, so Go sniffs the JSON as
/// `text/plain; charset=utf-8`, and it sends no ETag (kube-openapi `pkg/handler3/handler.go`
/// `HandleDiscovery`; measured on 1.32.13, see shared/reference/real-apiserver-facts.md).
pub async fn v3_index(headers: HeaderMap) -> Response {
    let mut response = serve(&DOCS.index, &headers, Vec::new());
    let r = response.headers_mut();
    r.remove(header::ETAG);
    if r.contains_key(header::CONTENT_TYPE) {
        r.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
    }
    response
}

/// `GET /openapi/v3/<group version>[?hash=...]`.
pub async fn v3_group_version(
    Path(gv): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let Some((gv, doc)) = DOCS.groups.iter().find(|(name, _)| *name == gv) else {
        return super::respond::page_not_found();
    };
    if !accepts_json(&headers) {
        return StatusCode::NOT_ACCEPTABLE.into_response();
    }
    let mut extra = vec![(header::VARY, "Accept".to_owned())];
    let hash = super::query::Query::new(query.as_deref())
        .get("hash")
        .map(str::to_owned);
    if let Some(hash) = hash.filter(|h| !h.is_empty()) {
        if hash != doc.hash {
            let mut r = StatusCode::MOVED_PERMANENTLY.into_response();
            if let Ok(location) = HeaderValue::from_str(&relative_url(gv, &doc.hash)) {
                r.headers_mut().insert(header::LOCATION, location);
            }
            return r;
        }
        extra.push((header::CACHE_CONTROL, "public, immutable".to_owned()));
        let year = Timestamp::now()
            .saturating_add(jiff::SignedDuration::from_hours(365 * 24))
            .unwrap_or_else(|_| Timestamp::now());
        extra.push((header::EXPIRES, http_date(year)));
    }
    serve(doc, &headers, extra)
}

/// `GET /openapi/v2`.
pub async fn v2(headers: HeaderMap) -> Response {
    if !accepts_json(&headers) {
        return StatusCode::NOT_ACCEPTABLE.into_response();
    }
    serve(&DOCS.v2, &headers, Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_document_is_json_with_its_schemas() {
        for (gv, source) in SOURCES {
            let doc: serde_json::Value = serde_json::from_str(source).expect(gv);
            assert_eq!(doc["openapi"], "3.0.0", "{gv}");
            assert_eq!(
                doc["info"]["version"],
                podline_sim_core::version::GIT_VERSION,
                "{gv}"
            );
            assert!(
                doc["components"]["schemas"]
                    .as_object()
                    .is_some_and(|s| !s.is_empty())
            );
        }
        let v2: serde_json::Value = serde_json::from_slice(&DOCS.v2.bytes).expect("v2");
        assert_eq!(v2["swagger"], "2.0");
        let pod = &v2["definitions"]["io.k8s.api.core.v1.Pod"];
        assert_eq!(
            pod["properties"]["spec"]["$ref"],
            "#/definitions/io.k8s.api.core.v1.PodSpec"
        );
        let patch = &v2["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert_eq!(patch["parameters"][0]["in"], "body", "{patch}");
        assert!(
            v2["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"].is_object()
        );
    }

    /// kubectl validates on the server when every PATCH of a kind lists `fieldValidation`.
    #[test]
    fn every_patch_of_the_served_kinds_takes_field_validation() {
        let mut kinds = std::collections::BTreeSet::new();
        for (gv, source) in SOURCES {
            let doc: serde_json::Value = serde_json::from_str(source).expect(gv);
            for (path, item) in doc["paths"].as_object().expect("paths") {
                let Some(patch) = item.get("patch") else {
                    continue;
                };
                let names: Vec<&str> = patch["parameters"]
                    .as_array()
                    .expect("parameters")
                    .iter()
                    .filter_map(|p| p["name"].as_str())
                    .collect();
                assert!(names.contains(&"fieldValidation"), "{path}: {names:?}");
                kinds.insert(patch["x-kubernetes-group-version-kind"]["kind"].to_string());
            }
        }
        for kind in [
            "Pod",
            "Namespace",
            "Event",
            "Lease",
            "PodDisruptionBudget",
            "WorkflowTaskResult",
            "Secret",
            "ConfigMap",
            "ServiceAccount",
            "PriorityClass",
            "PersistentVolumeClaim",
            "StorageClass",
        ] {
            assert!(kinds.contains(&format!("\"{kind}\"")), "{kind}: {kinds:?}");
        }
    }

    #[test]
    fn the_hash_is_the_uppercase_sha512_of_the_served_bytes() {
        assert_eq!(
            sha512_hex(b"abc"),
            "DDAF35A193617ABACC417349AE20413112E6FA4E89A97EA20A9EEEE64B55D39A2192992A274FC1A836BA3C23A3FEEBBD454D4423643CE80E2A9AC94FA54CA49F"
        );
        let index: serde_json::Value = serde_json::from_slice(&DOCS.index.bytes).expect("index");
        for (gv, doc) in &DOCS.groups {
            assert_eq!(
                index["paths"][gv]["serverRelativeURL"],
                format!("/openapi/v3/{gv}?hash={}", sha512_hex(&doc.bytes))
            );
        }
    }
}
