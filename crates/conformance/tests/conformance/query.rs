//! Query parameters: how kube-apiserver reads booleans, selectors and resource versions.

use podline_conformance::{Target, assert_status, pod};

/// A boolean query parameter is false only for `0` or `false` in any case, and true for any
/// other value (apimachinery's `Convert_Slice_string_To_bool`): `watch=True` is a watch,
/// `watch=FALSE` is a list.
#[tokio::test]
async fn a_boolean_parameter_is_false_only_for_0_or_false_in_any_case() {
    let t = Target::new().await;
    assert!(t.create_pod(&pod("b")).await.status.is_success());
    let pods = t.core_path("pods");
    for value in ["false", "False", "FALSE", "0"] {
        let r = t.get(&format!("{pods}?watch={value}")).await;
        assert_eq!(r.status, 200, "watch={value}: {}", r.text());
        assert_eq!(r.json()["kind"], "PodList", "watch={value} must list");
    }
    for value in ["true", "True", "TRUE", "1", "t", "yes"] {
        let r = t
            .get(&format!("{pods}?watch={value}&timeoutSeconds=1"))
            .await;
        assert_eq!(r.status, 200, "watch={value}: {}", r.text());
        let first = r.text().lines().next().unwrap_or_default().to_owned();
        let event: serde_json::Value = serde_json::from_str(&first)
            .unwrap_or_else(|e| panic!("watch={value} is not a watch stream ({e}): {first}"));
        assert_eq!(event["type"], "ADDED", "watch={value}: {first}");
    }
}

/// An unparsable label selector is 400 BadRequest naming what the parser found and expected.
#[tokio::test]
async fn an_unparsable_label_selector_is_bad_request_with_the_parsers_message() {
    let t = Target::new().await;
    let r = t
        .get(&format!(
            "{}?labelSelector=app%3Dx%20value",
            t.core_path("pods")
        ))
        .await;
    let message = assert_status(&r, 400, "BadRequest");
    assert!(
        message.contains("found 'value', expected: ',' or 'end of string'"),
        "{message}"
    );
}
