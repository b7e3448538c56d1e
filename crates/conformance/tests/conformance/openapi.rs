//! The OpenAPI documents (`/openapi/v3`, `/openapi/v3/<group version>?hash=`, `/openapi/v2`),
//! server-side field validation, and what kubectl does with them: `kubectl create` and
//! `kubectl apply --server-side` with their default `--validate=strict`.

use http::Method;
use podline_conformance::{Target, assert_status, pod};
use serde_json::{Value, json};

/// The `serverRelativeURL` the v3 index gives a group version.
async fn v3_url(t: &Target, gv: &str) -> String {
    let index = t.get("/openapi/v3").await;
    assert_eq!(index.status, 200, "{}", index.text());
    index.json()["paths"][gv]["serverRelativeURL"]
        .as_str()
        .unwrap_or_else(|| panic!("no {gv} in {}", index.text()))
        .to_owned()
}

fn header<'a>(raw: &'a podline_conformance::Raw, name: &str) -> &'a str {
    raw.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// The v3 index is JSON served as `text/plain; charset=utf-8` without an ETag: the aggregator
/// serves it with Go's `http.ServeContent` and sets no content type, so Go sniffs one
/// (kube-openapi `pkg/handler3/handler.go` `HandleDiscovery`; net/http `sniff.go`).
#[tokio::test]
async fn the_v3_index_is_json_sniffed_as_plain_text_without_an_etag() {
    let t = Target::new().await;
    let index = t.get("/openapi/v3").await;
    assert_eq!(index.status, 200, "{}", index.text());
    assert_eq!(index.content_type(), "text/plain; charset=utf-8");
    assert!(index.headers.get("etag").is_none(), "{:?}", index.headers);
    assert!(index.json()["paths"]["api/v1"].is_object());
}

/// The v3 index names each group version's document by its hash; fetched with it, the document
/// is cacheable for good and its ETag is the hash; a stale hash redirects to the current one.
#[tokio::test]
async fn openapi_v3_documents_are_served_by_hash() {
    let t = Target::new().await;
    let url = v3_url(&t, "api/v1").await;
    let hash = url
        .strip_prefix("/openapi/v3/api/v1?hash=")
        .unwrap_or_else(|| panic!("{url}"))
        .to_owned();
    assert_eq!(hash.len(), 128, "a SHA-512 in hex: {hash}");
    assert!(
        hash.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase())
    );
    let doc = t.get(&url).await;
    assert_eq!(doc.status, 200, "{}", doc.text());
    assert_eq!(header(&doc, "cache-control"), "public, immutable");
    assert_eq!(header(&doc, "etag"), format!("\"{hash}\""));
    let moved = t.get("/openapi/v3/api/v1?hash=0123").await;
    assert_eq!(moved.status, 301);
    assert_eq!(header(&moved, "location"), url);
    let doc = doc.json();
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")));
    let pod = &doc["components"]["schemas"]["io.k8s.api.core.v1.Pod"];
    assert!(
        pod["x-kubernetes-group-version-kind"]
            .as_array()
            .is_some_and(|g| g.contains(&json!({"group": "", "kind": "Pod", "version": "v1"}))),
        "{pod}"
    );
    let containers =
        &doc["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
}

/// Every PATCH of pods names `fieldValidation` (what kubectl looks for before it leaves
/// validation to the server), and the subresources are documented with their own kinds.
#[tokio::test]
async fn the_core_document_describes_pod_patches_and_subresources() {
    let t = Target::new().await;
    let doc = t.get(&v3_url(&t, "api/v1").await).await.json();
    let paths = &doc["paths"];
    for path in [
        "/api/v1/namespaces/{namespace}/pods/{name}",
        "/api/v1/namespaces/{namespace}/pods/{name}/status",
    ] {
        let patch = &paths[path]["patch"];
        let names: Vec<&str> = patch["parameters"]
            .as_array()
            .unwrap_or_else(|| panic!("{path}: {patch}"))
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert!(names.contains(&"fieldValidation"), "{path}: {names:?}");
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "", "kind": "Pod", "version": "v1"})
        );
    }
    let binding = &paths["/api/v1/namespaces/{namespace}/pods/{name}/binding"]["post"];
    assert_eq!(
        binding["x-kubernetes-group-version-kind"]["kind"],
        "Binding"
    );
    let eviction = &paths["/api/v1/namespaces/{namespace}/pods/{name}/eviction"]["post"];
    assert_eq!(
        eviction["x-kubernetes-group-version-kind"],
        json!({"group": "policy", "kind": "Eviction", "version": "v1"})
    );
    let url = v3_url(&t, "apis/coordination.k8s.io/v1").await;
    let leases = t.get(&url).await.json();
    assert!(leases["components"]["schemas"]["io.k8s.api.coordination.v1.Lease"].is_object());
}

/// `/openapi/v2` is one Swagger 2.0 document with every kind's definition.
#[tokio::test]
async fn openapi_v2_is_one_swagger_document() {
    let t = Target::new().await;
    let doc = t.get("/openapi/v2").await;
    assert_eq!(doc.status, 200, "{}", doc.text());
    assert!(!header(&doc, "etag").is_empty());
    let doc = doc.json();
    assert_eq!(doc["swagger"], "2.0");
    for name in [
        "io.k8s.api.core.v1.Pod",
        "io.k8s.api.coordination.v1.Lease",
        "io.k8s.api.policy.v1.Eviction",
    ] {
        assert!(doc["definitions"][name].is_object(), "{name}");
    }
    assert_eq!(
        doc["definitions"]["io.k8s.api.core.v1.Pod"]["properties"]["spec"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.PodSpec"
    );
}

fn with_unknown_field(name: &str) -> Value {
    let mut body = pod(name);
    body["spec"]["containers"][0]["imagee"] = json!("busybox");
    body
}

async fn create_with(t: &Target, query: &str, body: &Value) -> podline_conformance::Raw {
    t.send_json(
        Method::POST,
        &format!("{}{query}", t.core_path("pods")),
        body,
    )
    .await
}

/// `fieldValidation=Strict` refuses an unknown field with the strict decoder's words; the
/// default (Warn) creates the object and says so in a Warning header; Ignore says nothing.
#[tokio::test]
async fn unknown_fields_are_refused_warned_about_or_ignored_as_asked() {
    let t = Target::new().await;
    let r = create_with(&t, "?fieldValidation=Strict", &with_unknown_field("strict")).await;
    assert_eq!(
        assert_status(&r, 400, "BadRequest"),
        r#"Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.containers[0].imagee""#
    );
    let r = create_with(&t, "", &with_unknown_field("warned")).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        header(&r, "warning"),
        r#"299 - "unknown field \"spec.containers[0].imagee\"""#
    );
    let r = create_with(
        &t,
        "?fieldValidation=Ignore",
        &with_unknown_field("ignored"),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert!(r.headers.get("warning").is_none());
}

fn stdout_or_panic(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "kubectl failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// kubectl creates and server-side applies a pod with its default validation (it reads the
/// OpenAPI documents and leaves validation to the server), and an unknown field fails on the
/// server's strict decoding.
#[tokio::test]
async fn kubectl_creates_and_applies_with_default_validation() {
    // kubectl sends credentials over TLS only (client-go's clientcmd), so the sim serves HTTPS.
    let t = Target::with_sim_config(podline_testkit::test_config().tls(true)).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = |name: &str, extra: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  restartPolicy: Never\n  schedulerName: podline-conformance-scheduler\n  containers:\n  - name: main\n    image: busybox:1.36\n{extra}"
        )
    };
    let write = |file: &str, text: String| {
        let path = dir.path().join(file);
        std::fs::write(&path, text).expect("write the manifest");
        path.to_string_lossy().into_owned()
    };
    let created = write("created.yaml", manifest("created", ""));
    let out = stdout_or_panic(&t.kubectl(&["create", "-f", &created]).await);
    assert!(out.contains("pod/created created"), "{out}");
    let applied = write("applied.yaml", manifest("applied", ""));
    let out = stdout_or_panic(&t.kubectl(&["apply", "--server-side", "-f", &applied]).await);
    assert!(out.contains("pod/applied serverside-applied"), "{out}");
    let bad = write("bad.yaml", manifest("bad", "    imagee: busybox\n"));
    let refused = t.kubectl(&["create", "-f", &bad]).await;
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains(r#"strict decoding error: unknown field "spec.containers[0].imagee""#),
        "{stderr}"
    );
}
