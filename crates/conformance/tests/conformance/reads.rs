//! Reads: content negotiation (Table, PartialObjectMetadata) and the logs of an unscheduled pod.

use http::Method;
use podline_conformance::{Target, pod};
use serde_json::Value;

/// The Accept header `kubectl get` sends: a meta.k8s.io/v1 Table, else the object itself.
pub(crate) const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

async fn get_as(t: &Target, path: &str, accept: &str) -> Value {
    let r = t
        .request(Method::GET, path, None, Some(accept), Vec::new())
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn column_names(table: &Value) -> Vec<String> {
    table["columnDefinitions"]
        .as_array()
        .expect("columnDefinitions")
        .iter()
        .map(|c| c["name"].as_str().expect("a column name").to_owned())
        .collect()
}

/// Each column's priority (0 when absent): 1 marks the columns kubectl shows only with `-o wide`.
fn column_priorities(table: &Value) -> Vec<i64> {
    table["columnDefinitions"]
        .as_array()
        .expect("columnDefinitions")
        .iter()
        .map(|c| c["priority"].as_i64().unwrap_or(0))
        .collect()
}

/// `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` (what `kubectl get` sends) answers a
/// meta.k8s.io/v1 Table with kubectl's pod columns, priority 0 for the first five and 1 for the
/// `-o wide` ones; each row has one cell per column and carries the pod as
/// PartialObjectMetadata.
#[tokio::test]
async fn a_pod_list_as_table_has_kubectls_columns_and_partial_object_metadata_rows() {
    let t = Target::new().await;
    assert!(t.create_pod(&pod("tbl")).await.status.is_success());
    let table = get_as(&t, &t.core_path("pods"), TABLE).await;
    assert_eq!(table["kind"], "Table", "{table}");
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
    assert!(table["metadata"]["resourceVersion"].is_string(), "{table}");
    assert_eq!(
        column_names(&table),
        [
            "Name",
            "Ready",
            "Status",
            "Restarts",
            "Age",
            "IP",
            "Node",
            "Nominated Node",
            "Readiness Gates"
        ]
    );
    assert_eq!(column_priorities(&table), [0, 0, 0, 0, 0, 1, 1, 1, 1]);
    assert_eq!(table["columnDefinitions"][0]["format"], "name");
    let rows = table["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{table}");
    let cells = rows[0]["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 9);
    assert_eq!(cells[0], "tbl");
    assert_eq!(cells[1], "0/1");
    assert_eq!(rows[0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(rows[0]["object"]["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(rows[0]["object"]["metadata"]["name"], "tbl");
    assert!(rows[0]["object"].get("spec").is_none());
}

/// `includeObject=Object` puts the whole object in each row, `includeObject=None` none.
#[tokio::test]
async fn include_object_chooses_what_a_table_row_carries() {
    let t = Target::new().await;
    assert!(t.create_pod(&pod("inc")).await.status.is_success());
    let path = t.core_path("pods");
    let whole = get_as(&t, &format!("{path}?includeObject=Object"), TABLE).await;
    assert_eq!(whole["rows"][0]["object"]["kind"], "Pod", "{whole}");
    assert!(whole["rows"][0]["object"]["spec"].is_object());
    let none = get_as(&t, &format!("{path}?includeObject=None"), TABLE).await;
    let row = none["rows"][0].as_object().expect("a row");
    assert!(
        row.get("object").is_none_or(Value::is_null),
        "no object: {none}"
    );
}

/// One object as a Table is a table of one row.
#[tokio::test]
async fn a_single_pod_as_table_is_one_row() {
    let t = Target::new().await;
    assert!(t.create_pod(&pod("one")).await.status.is_success());
    let table = get_as(&t, &format!("{}/one", t.core_path("pods")), TABLE).await;
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["rows"].as_array().map(Vec::len), Some(1));
    assert_eq!(table["rows"][0]["cells"][0], "one");
}

/// `as=PartialObjectMetadataList` answers metadata only: a meta.k8s.io/v1
/// PartialObjectMetadataList whose items are PartialObjectMetadata with no spec or status.
#[tokio::test]
async fn a_list_as_partial_object_metadata_list_carries_metadata_only() {
    let t = Target::new().await;
    assert!(t.create_pod(&pod("meta")).await.status.is_success());
    let list = get_as(
        &t,
        &t.core_path("pods"),
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
    )
    .await;
    assert_eq!(list["kind"], "PartialObjectMetadataList", "{list}");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["kind"], "PartialObjectMetadata");
    assert_eq!(items[0]["metadata"]["name"], "meta");
    assert!(items[0].get("spec").is_none() && items[0].get("status").is_none());
    let one = get_as(
        &t,
        &format!("{}/meta", t.core_path("pods")),
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
    )
    .await;
    assert_eq!(one["kind"], "PartialObjectMetadata", "{one}");
    assert!(one.get("spec").is_none());
}

/// The log of a pod no node was assigned to is 204 No Content with an empty body (kube-apiserver
/// has no kubelet to ask). The pod names a scheduler that does not exist, so a cluster leaves it
/// unscheduled too.
#[tokio::test]
async fn the_log_of_an_unscheduled_pod_is_204_with_an_empty_body() {
    let t = Target::with_sim_config(podline_testkit::test_config().kubelet_enabled(false)).await;
    let mut unscheduled = pod("nolog");
    unscheduled["spec"]["schedulerName"] = "podline-no-such-scheduler".into();
    assert!(t.create_pod(&unscheduled).await.status.is_success());
    let r = t
        .request(
            Method::GET,
            &format!("{}/nolog/log", t.core_path("pods")),
            None,
            None,
            Vec::new(),
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text());
    assert!(r.body.is_empty());
}

/// A `continue` token serves the snapshot of the first page: a pod created between pages is not
/// in later pages (even where it sorts among them), and every page carries the first page's
/// resourceVersion.
#[tokio::test]
async fn a_continued_list_serves_the_snapshot_of_its_first_page() {
    let t = Target::new().await;
    for name in ["p1", "p2", "p3"] {
        assert!(t.create_pod(&pod(name)).await.status.is_success());
    }
    let pods = t.core_path("pods");
    let first = t.get(&format!("{pods}?limit=1")).await.json();
    assert_eq!(first["items"][0]["metadata"]["name"], "p1", "{first}");
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("a continue token")
        .to_owned();
    assert!(t.create_pod(&pod("p15")).await.status.is_success());
    let rest = t.get(&format!("{pods}?limit=10&continue={token}")).await;
    assert_eq!(rest.status, 200, "{}", rest.text());
    let rest = rest.json();
    let names: Vec<&str> = rest["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["p2", "p3"],
        "the snapshot of the first page: {rest}"
    );
    assert_eq!(
        rest["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"],
        "every page is at the first page's resourceVersion"
    );
}

/// A garbage `continue` token is 400 BadRequest `invalid continue token: continue key is not
/// valid: <why>`, the why being Go's: the base64 error, or for a token that decodes to bytes
/// that are not JSON the JSON scanner's (apiserver `pkg/storage/continue.go` `DecodeContinue`,
/// `pkg/storage/etcd3/store.go`; measured on 1.32.13).
#[tokio::test]
async fn a_garbage_continue_token_is_bad_request_invalid_continue_token() {
    let t = Target::new().await;
    let r = t
        .get(&format!("{}?limit=1&continue=ab!c", t.core_path("pods")))
        .await;
    let message = podline_conformance::assert_status(&r, 400, "BadRequest");
    assert_eq!(
        message,
        "invalid continue token: continue key is not valid: illegal base64 data at input byte 2"
    );
    // "gQ" is the byte 0x81.
    let r = t
        .get(&format!("{}?limit=1&continue=gQ", t.core_path("pods")))
        .await;
    let message = podline_conformance::assert_status(&r, 400, "BadRequest");
    assert_eq!(
        message,
        "invalid continue token: continue key is not valid: invalid character '\\u0081' looking for beginning of value"
    );
}

/// A LIST with `resourceVersion=0` is served from the watch cache, which does not page in 1.32:
/// `limit` is ignored (every item, no `continue`). A paged LIST with a label selector has no
/// `remainingItemCount`: etcd3's store counts what remains only for an unfiltered list
/// (apiserver `pkg/storage/cacher/cacher.go` and `pkg/storage/etcd3/store.go` `GetList`;
/// the API concepts doc, "Retrieving large results sets in chunks"; measured on 1.32.13).
#[tokio::test]
async fn a_list_from_the_cache_is_not_paged_and_a_selected_page_has_no_remaining_count() {
    let t = Target::new().await;
    for name in ["c1", "c2", "c3"] {
        assert!(t.create_pod(&pod(name)).await.status.is_success());
    }
    let pods = t.core_path("pods");
    let cached = t
        .get(&format!("{pods}?resourceVersion=0&limit=2"))
        .await
        .json();
    assert_eq!(
        cached["items"].as_array().map(Vec::len),
        Some(3),
        "{cached}"
    );
    assert!(cached["metadata"].get("continue").is_none(), "{cached}");
    let unselected = t.get(&format!("{pods}?limit=2")).await.json();
    assert_eq!(
        unselected["metadata"]["remainingItemCount"], 1,
        "{unselected}"
    );
    let selected = t
        .get(&format!("{pods}?limit=2&labelSelector=app%3Dconformance"))
        .await
        .json();
    assert_eq!(
        selected["items"].as_array().map(Vec::len),
        Some(2),
        "{selected}"
    );
    assert!(selected["metadata"]["continue"].is_string(), "{selected}");
    assert!(
        selected["metadata"].get("remainingItemCount").is_none(),
        "{selected}"
    );
}

/// Discovery gives each top-level resource its `storageVersionHash` (base64 of the first 8
/// bytes of the SHA-256 of `<group>/<version>/<Kind>`, so it is the same on every 1.32 server):
/// pods `xPOwRZ+Yhw8=`, namespaces `Q3oi5N2YM8M=`, nodes `XwShjMxG9Fs=`, leases
/// `gqkMMb/YqFM=`; subresources have none.
#[tokio::test]
async fn discovery_lists_storage_version_hashes() {
    let t = Target::new().await;
    let core = t.get("/api/v1").await.json();
    let find = |doc: &Value, name: &str| {
        doc["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {doc}"))
            .clone()
    };
    assert_eq!(find(&core, "pods")["storageVersionHash"], "xPOwRZ+Yhw8=");
    assert_eq!(
        find(&core, "namespaces")["storageVersionHash"],
        "Q3oi5N2YM8M="
    );
    assert!(
        find(&core, "pods/status")
            .get("storageVersionHash")
            .is_none()
    );
    assert_eq!(find(&core, "nodes")["storageVersionHash"], "XwShjMxG9Fs=");
    let coordination = t.get("/apis/coordination.k8s.io/v1").await.json();
    assert_eq!(
        find(&coordination, "leases")["storageVersionHash"],
        "gqkMMb/YqFM="
    );
}

/// `/version` is kube-apiserver 1.32's `version.Info`: major `1`, minor `32`, a `gitVersion` of
/// `v1.32.<patch>` (with any build metadata a distribution adds), and exactly its nine fields
/// (the emulation and min-compatibility fields came with 1.33), also at `/version/`. Its
/// `goVersion` is the Go release of that patch release (CHANGELOG/CHANGELOG-1.32.md: go1.23.x up
/// to v1.32.9, go1.24.x from v1.32.10). `kubectl
/// version` reads it.
#[tokio::test]
async fn version_is_kube_apiserver_1_32s_version_info() {
    let t = Target::new().await;
    let r = t.get("/version").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.content_type().starts_with("application/json"), "{r:?}");
    let info = r.json();
    let mut keys: Vec<&str> = info
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "buildDate",
            "compiler",
            "gitCommit",
            "gitTreeState",
            "gitVersion",
            "goVersion",
            "major",
            "minor",
            "platform"
        ],
        "{info}"
    );
    assert_eq!(info["major"], "1", "{info}");
    assert_eq!(info["minor"], "32", "{info}");
    let git_version = info["gitVersion"].as_str().expect("gitVersion");
    assert!(git_version.starts_with("v1.32."), "{git_version}");
    // The 1.32 changelog: Go 1.23 up to v1.32.9, Go 1.24 from v1.32.10.
    let patch: u32 = git_version["v1.32.".len()..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no patch release in {git_version}"));
    let go = if patch >= 10 { "go1.24." } else { "go1.23." };
    assert!(
        info["goVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with(go)),
        "{git_version} is built with {go}x: {info}"
    );

    // The Python client's VersionApi asks for `/version/`.
    let slash = t.get("/version/").await;
    assert_eq!(slash.status, 200, "{}", slash.text());
    assert_eq!(slash.json(), info);

    let out = t.kubectl(&["version", "-o", "json"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).expect("kubectl version -o json");
    assert_eq!(printed["serverVersion"]["gitVersion"], git_version);
    assert_eq!(printed["serverVersion"]["minor"], "32");
}

/// A cluster with a kubelet lists its nodes (cluster-scoped, short name `no`): at least one is
/// Ready, reports its kubelet's version and an InternalIP, and as a Table has kubectl's node
/// columns (Name, Status, Roles, Age, Version; Internal-IP, External-IP, OS-Image,
/// Kernel-Version, Container-Runtime at priority 1).
#[tokio::test]
async fn nodes_are_listed_ready_with_kubectls_node_columns() {
    let t = Target::new().await;
    let core = t.get("/api/v1").await.json();
    let nodes_resource = core["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "nodes")
        .cloned()
        .unwrap_or_else(|| panic!("nodes in {core}"));
    assert_eq!(nodes_resource["namespaced"], false);
    assert_eq!(nodes_resource["kind"], "Node");
    assert_eq!(nodes_resource["shortNames"], serde_json::json!(["no"]));

    let list = t.get("/api/v1/nodes").await;
    assert_eq!(list.status, 200, "{}", list.text());
    let list = list.json();
    assert_eq!(list["kind"], "NodeList");
    let items = list["items"].as_array().expect("items");
    let ready = items
        .iter()
        .find(|node| {
            node["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        })
        .unwrap_or_else(|| panic!("no Ready node in {list}"));
    let name = ready["metadata"]["name"].as_str().expect("a name");
    assert!(
        ready["status"]["nodeInfo"]["kubeletVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("v1.")),
        "{ready}"
    );
    assert!(
        ready["status"]["addresses"]
            .as_array()
            .is_some_and(|a| a.iter().any(|a| a["type"] == "InternalIP")),
        "{ready}"
    );
    let node = t.get(&format!("/api/v1/nodes/{name}")).await;
    assert_eq!(node.status, 200, "{}", node.text());
    assert_eq!(node.json()["kind"], "Node");

    let table = get_as(&t, "/api/v1/nodes", TABLE).await;
    assert_eq!(
        column_names(&table),
        [
            "Name",
            "Status",
            "Roles",
            "Age",
            "Version",
            "Internal-IP",
            "External-IP",
            "OS-Image",
            "Kernel-Version",
            "Container-Runtime"
        ]
    );
    let row = table["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["cells"][0] == name)
        .unwrap_or_else(|| panic!("{name} in {table}"));
    assert!(
        row["cells"][1]
            .as_str()
            .is_some_and(|s| s.starts_with("Ready")),
        "{row}"
    );
}

/// Every Ready node heartbeats through a Lease of its own name in `kube-node-lease` (the
/// kubelet's NodeLease): held by the node, owned by its Node and renewed within its duration.
#[tokio::test]
async fn each_ready_node_renews_a_lease_in_kube_node_lease() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    let t = Target::new().await;
    let nodes = t.get("/api/v1/nodes").await.json();
    let ready: Vec<&Value> = nodes["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|node| {
            node["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        })
        .collect();
    assert!(!ready.is_empty(), "no Ready node in {nodes}");
    for node in ready {
        let name = node["metadata"]["name"].as_str().expect("a name");
        let lease = t
            .get(&format!(
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
            ))
            .await;
        assert_eq!(lease.status, 200, "{name}: {}", lease.text());
        let lease = lease.json();
        assert_eq!(lease["spec"]["holderIdentity"], name, "{lease}");
        let duration = lease["spec"]["leaseDurationSeconds"]
            .as_i64()
            .unwrap_or_else(|| panic!("a duration in {lease}"));
        assert!(duration > 0, "{lease}");
        let owner = &lease["metadata"]["ownerReferences"][0];
        assert_eq!(
            (&owner["apiVersion"], &owner["kind"], &owner["name"]),
            (&Value::from("v1"), &Value::from("Node"), &Value::from(name)),
            "{lease}"
        );
        assert_eq!(owner["uid"], node["metadata"]["uid"], "{lease}");
        let renewed: MicroTime = serde_json::from_value(lease["spec"]["renewTime"].clone())
            .unwrap_or_else(|e| panic!("renewTime in {lease}: {e}"));
        let age = k8s_openapi::jiff::Timestamp::now().duration_since(renewed.0);
        // The lease duration, and a minute for the clocks of a real cluster's nodes.
        assert!(
            age.as_secs() < duration + 60,
            "{name}'s lease was renewed {age:?} ago: {lease}"
        );
    }
}

/// Events as a Table have kubectl's event columns (Last Seen, Type, Reason, Object, Message at
/// priority 0; Subobject, Source, First Seen, Count, Name for `-o wide`), and a pod's events
/// name it as `pod/<name>`.
#[tokio::test]
async fn events_as_table_have_kubectls_event_columns() {
    let t = Target::new().await;
    assert!(t.create_pod(&pod("evt")).await.status.is_success());
    let events = t.core_path("events");
    let has_event = podline_testkit::wait_until(std::time::Duration::from_secs(30), || async {
        t.get(&events).await.json()["items"]
            .as_array()
            .is_some_and(|items| items.iter().any(|e| e["involvedObject"]["name"] == "evt"))
    })
    .await;
    assert!(has_event, "no event about the pod");
    let table = get_as(&t, &events, TABLE).await;
    assert_eq!(
        column_names(&table),
        [
            "Last Seen",
            "Type",
            "Reason",
            "Object",
            "Subobject",
            "Source",
            "Message",
            "First Seen",
            "Count",
            "Name"
        ]
    );
    assert_eq!(column_priorities(&table), [0, 0, 0, 0, 1, 1, 0, 1, 1, 1]);
    let row = table["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["cells"][3] == "pod/evt")
        .unwrap_or_else(|| panic!("a row about pod/evt in {table}"));
    assert_eq!(row["cells"].as_array().map(Vec::len), Some(10), "{row}");
    assert!(row["cells"][8].is_i64(), "the count is a number: {row}");
}

/// `/version` is public to anonymous requests, but a request that sends a bearer token the
/// server does not accept is 401 there too: authentication runs before authorization on every
/// path, and a failed token is an error, not an anonymous request (apiserver
/// `pkg/endpoints/filters/authentication.go`; kube-apiserver's union authenticator with
/// anonymous fallback fails on a token error; measured on 1.32.13).
#[tokio::test]
async fn version_with_a_bad_bearer_token_is_unauthorized() {
    let t = Target::new().await;
    let r = t.get_with_token("not-a-valid-token", "/version").await;
    assert_eq!(r.status, 401, "{}", r.text());
    let r = t
        .get_with_token("not-a-valid-token", &t.core_path("pods"))
        .await;
    assert_eq!(r.status, 401, "{}", r.text());
}

/// Every JSON body kube-apiserver writes ends with `\n`: its JSON serializer encodes with Go's
/// `json.Encoder`, which writes a newline after each value (apimachinery
/// `pkg/runtime/serializer/json/json.go` `Encode`; measured on 1.32.13): objects, lists and
/// error Status bodies alike.
#[tokio::test]
async fn every_json_body_ends_with_a_newline() {
    let t = Target::new().await;
    let created = t.create_pod(&podline_conformance::pod("nl")).await;
    assert_eq!(created.status, 201, "{}", created.text());
    for r in [
        created,
        t.get(&format!("{}/nl", t.core_path("pods"))).await,
        t.get(&t.core_path("pods")).await,
        t.get(&format!("{}/missing", t.core_path("pods"))).await,
    ] {
        assert!(r.body.ends_with(b"}\n"), "{:?}", r.text());
    }
}
