//! Writes: server-side apply, field ownership (`managedFields`), and decode errors.

use http::Method;
use podline_conformance::{Target, assert_status, pod};
use serde_json::{Value, json};

const APPLY: &str = "application/apply-patch+yaml";

async fn apply(t: &Target, path: &str, query: &str, config: &Value) -> podline_conformance::Raw {
    t.request(
        Method::PATCH,
        &format!("{path}?{query}"),
        Some(APPLY),
        Some("application/json"),
        config.to_string().into_bytes(),
    )
    .await
}

fn entry<'a>(obj: &'a Value, manager: &str) -> &'a Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .and_then(|entries| entries.iter().find(|e| e["manager"] == manager))
        .unwrap_or_else(|| panic!("no managedFields entry of {manager}: {obj}"))
}

/// A server-side apply of an object that does not exist creates it (201), and the manager owns
/// the fields it applied (operation Apply).
#[tokio::test]
async fn an_apply_creates_the_pod_and_records_the_manager() {
    let t = Target::new().await;
    let path = format!("{}/applied", t.core_path("pods"));
    let r = apply(&t, &path, "fieldManager=tester", &pod("applied")).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    let mine = entry(&created, "tester");
    assert_eq!(mine["operation"], "Apply", "{mine}");
    assert_eq!(mine["apiVersion"], "v1", "{mine}");
    assert_eq!(mine["fieldsType"], "FieldsV1", "{mine}");
    let image = &mine["fieldsV1"]["f:spec"]["f:containers"]["k:{\"name\":\"main\"}"]["f:image"];
    assert_eq!(image, &json!({}), "{mine}");
}

/// An apply that would change a field another manager applied is 409 naming the manager and
/// the field; with `force=true` it succeeds and takes the field over.
#[tokio::test]
async fn an_apply_over_another_managers_field_conflicts_unless_forced() {
    let t = Target::new().await;
    let path = format!("{}/contested", t.core_path("pods"));
    let mut config = pod("contested");
    let r = apply(&t, &path, "fieldManager=first", &config).await;
    assert_eq!(r.status, 201, "{}", r.text());
    config["metadata"]["labels"]["app"] = json!("changed");
    let r = apply(&t, &path, "fieldManager=second", &config).await;
    let message = assert_status(&r, 409, "Conflict");
    assert_eq!(
        message,
        r#"Apply failed with 1 conflict: conflict with "first": .metadata.labels.app"#
    );
    let cause = &r.json()["details"]["causes"][0];
    assert_eq!(cause["reason"], "FieldManagerConflict", "{cause}");
    assert_eq!(cause["field"], ".metadata.labels.app", "{cause}");
    let r = apply(&t, &path, "fieldManager=second&force=true", &config).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let forced = r.json();
    assert_eq!(forced["metadata"]["labels"]["app"], "changed");
    let first = entry(&forced, "first");
    assert!(
        first["fieldsV1"]["f:metadata"]["f:labels"]
            .get("f:app")
            .is_none(),
        "{first}"
    );
}

/// The same value applied by two managers is shared ownership, not a conflict.
#[tokio::test]
async fn applying_the_same_value_as_another_manager_is_not_a_conflict() {
    let t = Target::new().await;
    let path = format!("{}/shared", t.core_path("pods"));
    let config = pod("shared");
    assert_eq!(
        apply(&t, &path, "fieldManager=first", &config).await.status,
        201
    );
    let r = apply(&t, &path, "fieldManager=second", &config).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let both = r.json();
    entry(&both, "first");
    entry(&both, "second");
}

/// An apply without `fieldManager` is 422 on PatchOptions.
#[tokio::test]
async fn an_apply_without_a_field_manager_is_invalid() {
    let t = Target::new().await;
    let path = format!("{}/nomanager", t.core_path("pods"));
    let r = apply(&t, &path, "", &pod("nomanager")).await;
    let message = assert_status(&r, 422, "Invalid");
    assert_eq!(
        message,
        r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch"#
    );
}

/// Server-side apply works on leases too, and a re-apply by the same manager updates them.
#[tokio::test]
async fn an_apply_creates_and_updates_a_lease() {
    let t = Target::new().await;
    let path = format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases/applied",
        t.namespace()
    );
    let mut lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "applied"},
        "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}
    });
    let r = apply(&t, &path, "fieldManager=elector", &lease).await;
    assert_eq!(r.status, 201, "{}", r.text());
    lease["spec"]["holderIdentity"] = json!("you");
    let r = apply(&t, &path, "fieldManager=elector", &lease).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let updated = r.json();
    assert_eq!(updated["spec"]["holderIdentity"], "you");
    assert_eq!(entry(&updated, "elector")["operation"], "Apply");
}

/// A create records its fields for its `fieldManager` (operation Update), and a write of the
/// status subresource gets an entry of its own with `subresource: status`.
#[tokio::test]
async fn writes_record_managed_fields_per_manager_operation_and_subresource() {
    let t = Target::new().await;
    let r = t
        .send_json(
            Method::POST,
            &format!("{}?fieldManager=creator", t.core_path("pods")),
            &pod("owned"),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    let creator = entry(&created, "creator");
    assert_eq!(creator["operation"], "Update", "{creator}");
    assert!(creator.get("subresource").is_none(), "{creator}");
    assert!(
        creator["fieldsV1"]["f:spec"]["f:containers"].is_object(),
        "{creator}"
    );
    let patch = json!({"status": {"conditions": [{"type": "Example", "status": "True"}]}});
    let r = t
        .request(
            Method::PATCH,
            &format!("{}/owned/status?fieldManager=reporter", t.core_path("pods")),
            Some("application/merge-patch+json"),
            Some("application/json"),
            patch.to_string().into_bytes(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let patched = r.json();
    let reporter = entry(&patched, "reporter");
    assert_eq!(reporter["operation"], "Update", "{reporter}");
    assert_eq!(reporter["subresource"], "status", "{reporter}");
    assert!(reporter["fieldsV1"]["f:status"].is_object(), "{reporter}");
}

/// A pod of an apiVersion the server does not register is 400, worded like the scheme's error.
#[tokio::test]
async fn a_pod_of_an_unknown_version_cannot_be_handled() {
    let t = Target::new().await;
    let mut p = pod("v2");
    p["apiVersion"] = json!("v2");
    let r = t.create_pod(&p).await;
    let message = assert_status(&r, 400, "BadRequest");
    assert!(
        message.starts_with(
            r#"Pod in version "v2" cannot be handled as a Pod: no kind "Pod" is registered for version "v2" in scheme ""#
        ),
        "{message}"
    );
}

/// A field of the wrong JSON type is Go's unmarshal error, with the Go struct and field path.
#[tokio::test]
async fn a_field_of_the_wrong_type_is_a_go_unmarshal_error() {
    let t = Target::new().await;
    let mut p = pod("typed");
    p["spec"]["terminationGracePeriodSeconds"] = json!("30");
    let r = t.create_pod(&p).await;
    let message = assert_status(&r, 400, "BadRequest");
    assert_eq!(
        message,
        r#"Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go struct field PodSpec.spec.terminationGracePeriodSeconds of type int64"#
    );
}

/// A body that is not JSON is unrecognized: the parse error and the body's start.
#[tokio::test]
async fn a_body_that_is_not_json_is_unrecognized() {
    let t = Target::new().await;
    let r = t
        .request(
            Method::POST,
            &t.core_path("pods"),
            Some("application/json"),
            Some("application/json"),
            br#"{"apiVersion":"v1","kind":"Pod""#.to_vec(),
        )
        .await;
    let message = assert_status(&r, 400, "BadRequest");
    assert_eq!(
        message,
        r#"the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: unexpected end of JSON input ({"apiVersion":"v1","kind":"Pod ...)"#
    );
}

/// A body that is not JSON at all is reported with Go's JSON scanner's words for the first byte
/// it cannot take (`encoding/json/scanner.go`), behind the decoder's `couldn't get version/kind`
/// and the body's start in hex (apiserver `pkg/endpoints/handlers/create.go`
/// `transformDecodeError`, `summarizeData`; measured on 1.32.13).
#[tokio::test]
async fn a_body_of_plain_words_is_reported_with_gos_scanner_message() {
    let t = Target::new().await;
    for (body, why) in [
        (
            "not json at all",
            "invalid character 'o' in literal null (expecting 'u')",
        ),
        (
            "this is not json",
            "invalid character 'h' in literal true (expecting 'r')",
        ),
    ] {
        let r = t
            .request(
                Method::POST,
                &t.core_path("pods"),
                Some("application/json"),
                Some("application/json"),
                body.as_bytes().to_vec(),
            )
            .await;
        let message = assert_status(&r, 400, "BadRequest");
        let hex: String = body.bytes().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            message,
            format!(
                "the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: {why} ({hex})"
            )
        );
    }
}

/// An object of another registered kind sent to pods decodes as that kind, and its conversion
/// to a Pod fails (apimachinery `pkg/runtime/scheme.go` `Convert`; apiserver
/// `pkg/endpoints/handlers/create.go` `transformDecodeError`; measured on 1.32.13).
#[tokio::test]
async fn a_service_posted_to_pods_cannot_be_converted() {
    let t = Target::new().await;
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "svc"},
        "spec": {"ports": [{"port": 80}]}
    });
    let r = t.create_pod(&service).await;
    let message = assert_status(&r, 400, "BadRequest");
    assert_eq!(
        message,
        r#"Service in version "v1" cannot be handled as a Pod: converting (v1.Service) to (core.Pod): unknown conversion"#
    );
}

/// An invalid `generateName` is reported on `metadata.generateName` with the prefix as the value.
#[tokio::test]
async fn an_invalid_generate_name_is_reported_on_generate_name() {
    let t = Target::new().await;
    let mut p = pod("");
    p["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("name");
    p["metadata"]["generateName"] = json!("Bad_");
    let r = t.create_pod(&p).await;
    let message = assert_status(&r, 422, "Invalid");
    assert!(
        message.contains(
            r#"metadata.generateName: Invalid value: "Bad_": a lowercase RFC 1123 subdomain"#
        ),
        "{message}"
    );
    let causes = r.json()["details"]["causes"].clone();
    assert_eq!(causes[0]["field"], "metadata.generateName", "{causes}");
}

/// A JSON patch that cannot be applied is 422 Invalid with the generic message and empty
/// details (the patch library's own message is not sent).
#[tokio::test]
async fn a_json_patch_that_cannot_be_applied_is_rejected_with_empty_details() {
    let t = Target::new().await;
    assert!(t.create_pod(&pod("jsonpatch")).await.status.is_success());
    let patch = json!([{"op": "replace", "path": "/metadata/labels/missing/deeper", "value": "x"}]);
    let r = t
        .request(
            Method::PATCH,
            &format!("{}/jsonpatch", t.core_path("pods")),
            Some("application/json-patch+json"),
            Some("application/json"),
            patch.to_string().into_bytes(),
        )
        .await;
    let message = assert_status(&r, 422, "Invalid");
    assert_eq!(
        message,
        "the server rejected our request due to an error in our request"
    );
    assert_eq!(r.json()["details"], json!({}), "{}", r.text());
}

/// Malformed patch bodies are 400 BadRequest. Under the default `fieldValidation` (Warn, which
/// decodes strictly) kube-apiserver first decodes a JSON or merge patch into its own types and
/// answers `error decoding patch: <Go's error>`; with `fieldValidation=Ignore` the patch
/// libraries' own messages show. A strategic merge patch is decoded the same way under both
/// (apiserver `pkg/endpoints/handlers/patch.go`: `jsonPatcher.applyJSPatch`,
/// `strategicPatchObject`; measured on 1.32.13).
#[tokio::test]
async fn malformed_patch_bodies_are_bad_requests_with_the_decoders_messages() {
    let t = Target::new().await;
    assert!(t.create_pod(&pod("badpatch")).await.status.is_success());
    let path = format!("{}/badpatch", t.core_path("pods"));
    for (query, content_type, body, expected) in [
        (
            "",
            "application/json-patch+json",
            r#"{"op": "add"}"#,
            "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
        ),
        (
            "",
            "application/merge-patch+json",
            "{nope",
            "error decoding patch: invalid character 'n' looking for beginning of object key string",
        ),
        (
            "?fieldValidation=Ignore",
            "application/json-patch+json",
            r#"{"op": "add"}"#,
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ),
        (
            "?fieldValidation=Ignore",
            "application/merge-patch+json",
            "{nope",
            "Invalid JSON Patch",
        ),
        (
            "",
            "application/strategic-merge-patch+json",
            "[1]",
            "json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
    ] {
        let r = t
            .request(
                Method::PATCH,
                &format!("{path}{query}"),
                Some(content_type),
                Some("application/json"),
                body.as_bytes().to_vec(),
            )
            .await;
        let message = assert_status(&r, 400, "BadRequest");
        assert_eq!(message, expected, "{content_type}{query}");
    }
}

/// A status merge-patch answers the pod as kube-apiserver stores it: `podIPs` follow `podIP`
/// (`Convert_v1_PodStatus_To_core_PodStatus`, `pkg/apis/core/v1/conversion.go`), a container
/// status has `state` and `lastState` as `{}` and a condition's unset `lastProbeTime` and
/// `lastTransitionTime` are `null` (Go structs that `omitempty` never omits: k8s.io/api
/// `core/v1/types.go`; metav1 `Time.MarshalJSON`); measured on 1.32.13.
#[tokio::test]
async fn a_status_merge_patch_answers_the_status_as_stored() {
    let t = Target::new().await;
    let mut p = pod("status");
    // No scheduler places it, so no kubelet writes its status meanwhile.
    p["spec"]["schedulerName"] = json!("podline-no-such-scheduler");
    assert!(t.create_pod(&p).await.status.is_success());
    let patch = json!({"status": {
        "podIP": "10.1.2.3",
        "conditions": [{"type": "Example", "status": "True"}],
        "containerStatuses": [{
            "name": "main", "ready": false, "restartCount": 0,
            "image": "busybox:1.36", "imageID": ""
        }]
    }});
    let r = t
        .request(
            Method::PATCH,
            &format!("{}/status/status", t.core_path("pods")),
            Some("application/merge-patch+json"),
            Some("application/json"),
            patch.to_string().into_bytes(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let status = &r.json()["status"];
    assert_eq!(status["podIPs"], json!([{"ip": "10.1.2.3"}]), "{status}");
    let container = &status["containerStatuses"][0];
    assert_eq!(container["lastState"], json!({}), "{container}");
    assert_eq!(container["state"], json!({}), "{container}");
    let condition = &status["conditions"][0];
    assert_eq!(
        condition.get("lastProbeTime"),
        Some(&Value::Null),
        "{condition}"
    );
    assert_eq!(
        condition.get("lastTransitionTime"),
        Some(&Value::Null),
        "{condition}"
    );
}

/// A negative resource quantity and a request above its limit are 422 Invalid with
/// `ValidateResourceRequirements`' words: the negative one on its keyed path, the inverted one
/// on `requests` itself (pkg/apis/core/validation/validation.go).
#[tokio::test]
async fn negative_or_inverted_resources_are_invalid() {
    let t = Target::new().await;
    let mut negative = pod("negative");
    negative["spec"]["containers"][0]["resources"] = json!({"requests": {"memory": "-1Gi"}});
    let r = t.create_pod(&negative).await;
    let message = assert_status(&r, 422, "Invalid");
    assert_eq!(
        message,
        r#"Pod "negative" is invalid: spec.containers[0].resources.requests[memory]: Invalid value: "-1Gi": must be greater than or equal to 0"#
    );
    let mut inverted = pod("inverted");
    inverted["spec"]["containers"][0]["resources"] =
        json!({"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}});
    let r = t.create_pod(&inverted).await;
    let message = assert_status(&r, 422, "Invalid");
    assert_eq!(
        message,
        r#"Pod "inverted" is invalid: spec.containers[0].resources.requests: Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi"#
    );
}
