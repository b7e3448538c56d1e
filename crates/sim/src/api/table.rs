//! Content negotiation of reads: `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` answers
//! a `meta.k8s.io/v1` Table (what `kubectl get` asks for), and `as=PartialObjectMetadataList` /
//! `as=PartialObjectMetadata` answer metadata only, as kube-apiserver does. A middleware turns
//! the JSON the handlers answer (an object, a list, or a watch stream of one event per line)
//! into the negotiated form, so the handlers stay unaware of it.
//!
//! Tables carry kubectl's columns for pods (Name, Ready, Status, Restarts, Age, IP, Node,
//! Nominated Node, Readiness Gates), nodes, events (Last Seen, Type, Reason, Object, Message, and
//! five wide columns), disruption budgets (Name, Min Available, Max Unavailable, Allowed
//! Disruptions, Age), namespaces (Name, Status, Age), leases (Name, Holder, Age), secrets (Name,
//! Type, Data, Age), configmaps (Name, Data, Age), serviceaccounts (Name, Secrets, Age),
//! persistentvolumeclaims and storageclasses (printers.go's columns); other kinds
//! get kube-apiserver's default table (Name, Created At). Rows carry the
//! object as PartialObjectMetadata unless `includeObject=Object` (the whole object) or `None`.

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use http::{Method, StatusCode, header};
use http_body_util::BodyExt;
use jiff::Timestamp;
use serde_json::{Value, json};

use super::query::Query;

/// The largest non-watch body converted (bigger ones pass as they are).
const MAX_CONVERTED: usize = 512 * 1024 * 1024;

/// What the client negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum As {
    Table,
    PartialObjectMetadata,
    PartialObjectMetadataList,
}

/// What a table row carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Include {
    None,
    Metadata,
    Object,
}

/// The first media range of `accept` that asks for a meta.k8s.io/v1 transformation, if any.
fn negotiated(accept: &str) -> Option<As> {
    for range in accept.split(',') {
        let mut params = range.split(';').map(str::trim);
        let media = params.next().unwrap_or_default();
        if media != "application/json" {
            continue;
        }
        let (mut kind, mut group, mut version) = (None, None, None);
        for p in params {
            match p.split_once('=') {
                Some(("as", v)) => kind = Some(v),
                Some(("g", v)) => group = Some(v),
                Some(("v", v)) => version = Some(v),
                _ => {}
            }
        }
        if group != Some("meta.k8s.io") || !matches!(version, Some("v1") | Some("v1beta1")) {
            continue;
        }
        return match kind {
            Some("Table") => Some(As::Table),
            Some("PartialObjectMetadata") => Some(As::PartialObjectMetadata),
            Some("PartialObjectMetadataList") => Some(As::PartialObjectMetadataList),
            _ => None,
        };
    }
    None
}

fn is_watch(req: &Request) -> bool {
    let path = req.uri().path();
    path.starts_with("/api/v1/watch/")
        || path.split('/').nth(4) == Some("watch")
        || Query::new(req.uri().query()).flag("watch") == Some(true)
}

/// The middleware: converts successful JSON reads into the negotiated form.
pub async fn negotiate(req: Request, next: Next) -> Response {
    let wanted = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .and_then(negotiated);
    let Some(wanted) = wanted.filter(|_| req.method() == Method::GET) else {
        return next.run(req).await;
    };
    let watch = is_watch(&req);
    let query = Query::new(req.uri().query());
    let include = match query.get("includeObject") {
        Some("None") => Include::None,
        Some("Object") => Include::Object,
        _ => Include::Metadata,
    };
    let response = next.run(req).await;
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"));
    if response.status() != StatusCode::OK || !json {
        return response;
    }
    let (parts, body) = response.into_parts();
    if watch {
        // kube-apiserver's watch encoder sends a Table's column definitions with the first event
        // only: once it has encoded one object (of any type) it sets the table options'
        // NoHeaders, so later Tables carry `columnDefinitions: null` (kubectl keeps the header it
        // printed).
        let mut headers = Headers::First;
        let stream = body.into_data_stream().map(move |frame| {
            frame.map(|bytes| {
                convert_event_line(&bytes, wanted, include, &mut headers).unwrap_or(bytes)
            })
        });
        return Response::from_parts(parts, Body::from_stream(stream));
    }
    let bytes = match http_body_util::Limited::new(body, MAX_CONVERTED)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            tracing::warn!(error = %e, "could not read a response to convert");
            return Response::from_parts(parts, Body::empty());
        }
    };
    let converted = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|value| convert(&value, wanted, include))
        .map(|v| Bytes::from(v.to_string()))
        .unwrap_or(bytes);
    let mut parts = parts;
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(converted))
}

/// Whether a Table carries its column definitions: a read's always does, a watch's only in its
/// first event.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Headers {
    /// The first (or only) Table of the answer: with column definitions.
    First,
    /// A later watch event: `columnDefinitions: null`.
    Omitted,
}

/// One watch line (`{"type":..,"object":..}\n`) with its object converted; ERROR passes.
/// `headers` is the stream's state: the first event encoded (ERROR included) takes the column
/// definitions, and later ones go without.
fn convert_event_line(
    line: &[u8],
    wanted: As,
    include: Include,
    headers: &mut Headers,
) -> Option<Bytes> {
    let mut event: Value = serde_json::from_slice(line).ok()?;
    let these = std::mem::replace(headers, Headers::Omitted);
    if event["type"] == "ERROR" {
        return None;
    }
    let object = &event["object"];
    // A watch event carries one object: a Table of one row, or its PartialObjectMetadata.
    let converted = match wanted {
        As::Table => table_of(
            object_kind(object)?,
            std::slice::from_ref(object),
            object,
            include,
            these,
        ),
        As::PartialObjectMetadata | As::PartialObjectMetadataList => partial(object),
    };
    event["object"] = converted;
    Some(Bytes::from(format!("{event}\n")))
}

fn object_kind(object: &Value) -> Option<&str> {
    object["kind"].as_str()
}

/// Converts a read's answer (an object or a list); None leaves it as it is (a Status, say).
fn convert(value: &Value, wanted: As, include: Include) -> Option<Value> {
    let kind = value["kind"].as_str()?;
    if kind == "Status" {
        return None;
    }
    let list_kind = kind.strip_suffix("List");
    match (wanted, list_kind) {
        (As::Table, Some(item_kind)) => {
            let items = value["items"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            Some(table_of(item_kind, items, value, include, Headers::First))
        }
        (As::Table, None) => Some(table_of(
            kind,
            std::slice::from_ref(value),
            value,
            include,
            Headers::First,
        )),
        (As::PartialObjectMetadataList | As::PartialObjectMetadata, Some(_)) => {
            let items: Vec<Value> = value["items"]
                .as_array()
                .map(|items| items.iter().map(partial).collect())
                .unwrap_or_default();
            Some(json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": value["metadata"].clone(),
                "items": items,
            }))
        }
        (As::PartialObjectMetadata | As::PartialObjectMetadataList, None) => Some(partial(value)),
    }
}

fn partial(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object["metadata"].clone(),
    })
}

fn column(name: &str, format: &str, description: &str, priority: u32) -> Value {
    json!({
        "name": name,
        "type": "string",
        "format": format,
        "description": description,
        "priority": priority,
    })
}

const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const NODE_ADDRESSES_DOC: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";
const SECRET_TYPE_DOC: &str = "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types";
const SECRET_DATA_DOC: &str = "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4";
const CONFIG_MAP_DATA_DOC: &str = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";
const SERVICE_ACCOUNT_SECRETS_DOC: &str = "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret";
const CREATED_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

fn columns(kind: &str) -> Vec<Value> {
    match kind {
        "Pod" => vec![
            column("Name", "name", NAME_DOC, 0),
            column(
                "Ready",
                "",
                "The aggregate readiness state of this pod for accepting traffic.",
                0,
            ),
            column(
                "Status",
                "",
                "The aggregate status of the containers in this pod.",
                0,
            ),
            column(
                "Restarts",
                "",
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                0,
            ),
            column("Age", "", CREATED_DOC, 0),
            column(
                "IP",
                "",
                "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
                1,
            ),
            column(
                "Node",
                "",
                "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
                1,
            ),
            column(
                "Nominated Node",
                "",
                "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.",
                1,
            ),
            column(
                "Readiness Gates",
                "",
                "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
                1,
            ),
        ],
        "Namespace" => vec![
            column("Name", "name", NAME_DOC, 0),
            column("Status", "", "The status of the namespace", 0),
            column("Age", "", CREATED_DOC, 0),
        ],
        "Node" => vec![
            column("Name", "name", NAME_DOC, 0),
            column("Status", "", "The status of the node", 0),
            column("Roles", "", "The roles of the node", 0),
            column("Age", "", CREATED_DOC, 0),
            column("Version", "", "Kubelet Version reported by the node.", 0),
            column("Internal-IP", "", NODE_ADDRESSES_DOC, 1),
            column("External-IP", "", NODE_ADDRESSES_DOC, 1),
            column(
                "OS-Image",
                "",
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
                1,
            ),
            column(
                "Kernel-Version",
                "",
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
                1,
            ),
            column(
                "Container-Runtime",
                "",
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
                1,
            ),
        ],
        "Lease" => vec![
            column("Name", "name", NAME_DOC, 0),
            column(
                "Holder",
                "",
                "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
                0,
            ),
            column("Age", "", CREATED_DOC, 0),
        ],
        "Event" => vec![
            column(
                "Last Seen",
                "",
                "The time at which the most recent occurrence of this event was recorded.",
                0,
            ),
            column(
                "Type",
                "",
                "Type of this event (Normal, Warning), new types could be added in the future",
                0,
            ),
            column(
                "Reason",
                "",
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
                0,
            ),
            column("Object", "", "The object that this event is about.", 0),
            column(
                "Subobject",
                "",
                "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.",
                1,
            ),
            column(
                "Source",
                "",
                "The component reporting this event. Should be a short machine understandable string.",
                1,
            ),
            column(
                "Message",
                "",
                "A human-readable description of the status of this operation.",
                0,
            ),
            column(
                "First Seen",
                "",
                "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
                1,
            ),
            column(
                "Count",
                "",
                "The number of times this event has occurred.",
                1,
            ),
            column("Name", "name", NAME_DOC, 1),
        ],
        "PodDisruptionBudget" => vec![
            column("Name", "name", NAME_DOC, 0),
            column(
                "Min Available",
                "",
                "The minimum number or percentage of available pods this budget requires.",
                0,
            ),
            column(
                "Max Unavailable",
                "",
                "The maximum number or percentage of unavailable pods this budget requires.",
                0,
            ),
            json!({
                "name": "Allowed Disruptions",
                "type": "integer",
                "format": "",
                "description": "Calculated number of pods that may be disrupted at this time.",
                "priority": 0,
            }),
            column("Age", "", CREATED_DOC, 0),
        ],
        // pkg/printers/internalversion/printers.go: secretColumnDefinitions,
        // configMapColumnDefinitions, serviceAccountColumnDefinitions (each count a string
        // column, though its cells are integers).
        "Secret" => vec![
            column("Name", "name", NAME_DOC, 0),
            column("Type", "", SECRET_TYPE_DOC, 0),
            column("Data", "", SECRET_DATA_DOC, 0),
            column("Age", "", CREATED_DOC, 0),
        ],
        "ConfigMap" => vec![
            column("Name", "name", NAME_DOC, 0),
            column("Data", "", CONFIG_MAP_DATA_DOC, 0),
            column("Age", "", CREATED_DOC, 0),
        ],
        // printers.go: priorityClassColumnDefinitions.
        "PriorityClass" => vec![
            column("Name", "name", NAME_DOC, 0),
            json!({"name": "Value", "type": "integer", "format": "", "description": "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.", "priority": 0}),
            json!({"name": "Global-Default", "type": "boolean", "format": "", "description": "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority.", "priority": 0}),
            column("Age", "", CREATED_DOC, 0),
            column(
                "PreemptionPolicy",
                "",
                "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.",
                0,
            ),
        ],
        // printers.go: persistentVolumeClaimColumnDefinitions, storageClassColumnDefinitions.
        "PersistentVolumeClaim" => vec![
            column("Name", "name", NAME_DOC, 0),
            column(
                "Status",
                "",
                "phase represents the current phase of PersistentVolumeClaim.",
                0,
            ),
            column(
                "Volume",
                "",
                "volumeName is the binding reference to the PersistentVolume backing this claim.",
                0,
            ),
            column(
                "Capacity",
                "",
                "capacity represents the actual resources of the underlying volume.",
                0,
            ),
            column(
                "Access Modes",
                "",
                "accessModes contains the actual access modes the volume backing the PVC has.",
                0,
            ),
            column(
                "StorageClass",
                "",
                "storageClassName is the name of the StorageClass required by the claim.",
                0,
            ),
            column(
                "VolumeAttributesClass",
                "",
                "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim.",
                0,
            ),
            column("Age", "", CREATED_DOC, 0),
            column(
                "VolumeMode",
                "",
                "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.",
                1,
            ),
        ],
        "StorageClass" => vec![
            column("Name", "name", NAME_DOC, 0),
            column(
                "Provisioner",
                "",
                "provisioner indicates the type of the provisioner.",
                0,
            ),
            column(
                "ReclaimPolicy",
                "",
                "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.",
                0,
            ),
            column(
                "VolumeBindingMode",
                "",
                "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature.",
                0,
            ),
            column(
                "AllowVolumeExpansion",
                "",
                "allowVolumeExpansion shows whether the storage class allow volume expand.",
                0,
            ),
            column("Age", "", CREATED_DOC, 0),
        ],
        "ServiceAccount" => vec![
            column("Name", "name", NAME_DOC, 0),
            column("Secrets", "", SERVICE_ACCOUNT_SECRETS_DOC, 0),
            column("Age", "", CREATED_DOC, 0),
        ],
        _ => vec![
            column("Name", "name", NAME_DOC, 0),
            json!({"name": "Created At", "type": "date", "format": "", "description": CREATED_DOC, "priority": 0}),
        ],
    }
}

/// printPersistentVolumeClaim: capacity and access modes only once bound to a volume;
/// `Terminating` while deleted; `<unset>` for no VolumeAttributesClass or volume mode.
fn claim_cells(object: &Value, name: Value, age: Value) -> Vec<Value> {
    let phase = if object["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else {
        object["status"]["phase"].as_str().unwrap_or_default()
    };
    let volume = object["spec"]["volumeName"].as_str().unwrap_or_default();
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        let modes: Vec<&str> = object["status"]["accessModes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| match m.as_str()? {
                "ReadWriteOnce" => Some("RWO"),
                "ReadOnlyMany" => Some("ROX"),
                "ReadWriteMany" => Some("RWX"),
                "ReadWriteOncePod" => Some("RWOP"),
                _ => None,
            })
            .collect();
        (
            object["status"]["capacity"]["storage"]
                .as_str()
                .unwrap_or("0")
                .to_owned(),
            modes.join(","),
        )
    };
    let unset = |v: &Value| json!(v.as_str().unwrap_or("<unset>"));
    vec![
        name,
        json!(phase),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(
            object["spec"]["storageClassName"]
                .as_str()
                .unwrap_or_default()
        ),
        unset(&object["spec"]["volumeAttributesClassName"]),
        age,
        unset(&object["spec"]["volumeMode"]),
    ]
}

fn cells(kind: &str, object: &Value, now: Timestamp) -> Vec<Value> {
    let name = json!(object["metadata"]["name"].as_str().unwrap_or_default());
    let created = object["metadata"]["creationTimestamp"].as_str();
    let age = json!(age(created, now));
    match kind {
        "Pod" => pod_cells(object, name, age, now),
        "Node" => node_cells(object, name, age),
        "Event" => event_cells(object, name, now),
        "PodDisruptionBudget" => {
            // An IntOrString as Go's `String()` prints it; `N/A` when unset.
            let bound = |field: &str| match &object["spec"][field] {
                Value::Number(n) => json!(n.to_string()),
                Value::String(s) => json!(s),
                _ => json!("N/A"),
            };
            vec![
                name,
                bound("minAvailable"),
                bound("maxUnavailable"),
                json!(object["status"]["disruptionsAllowed"].as_i64().unwrap_or(0)),
                age,
            ]
        }
        "Namespace" => vec![
            name,
            json!(object["status"]["phase"].as_str().unwrap_or_default()),
            age,
        ],
        "Lease" => vec![
            name,
            json!(
                object["spec"]["holderIdentity"]
                    .as_str()
                    .unwrap_or("<none>")
            ),
            age,
        ],
        // printSecret, printConfigMap, printServiceAccount: counts of entries.
        "Secret" => vec![
            name,
            json!(object["type"].as_str().unwrap_or_default()),
            json!(object["data"].as_object().map_or(0, serde_json::Map::len)),
            age,
        ],
        "ConfigMap" => {
            let count = |field: &str| object[field].as_object().map_or(0, serde_json::Map::len);
            vec![name, json!(count("data") + count("binaryData")), age]
        }
        "PriorityClass" => vec![
            name,
            json!(object["value"].as_i64().unwrap_or(0)),
            json!(object["globalDefault"].as_bool().unwrap_or(false)),
            age,
            json!(object["preemptionPolicy"].as_str().unwrap_or_default()),
        ],
        "PersistentVolumeClaim" => claim_cells(object, name, age),
        "StorageClass" => {
            // printStorageClass: the default class's name says so.
            let default =
                object["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"]
                    .as_str()
                    == Some("true");
            let name = match (default, name.as_str()) {
                (true, Some(n)) => json!(format!("{n} (default)")),
                _ => name,
            };
            vec![
                name,
                json!(object["provisioner"].as_str().unwrap_or_default()),
                json!(object["reclaimPolicy"].as_str().unwrap_or_default()),
                json!(object["volumeBindingMode"].as_str().unwrap_or_default()),
                json!(object["allowVolumeExpansion"].as_bool().unwrap_or(false)),
                age,
            ]
        }
        "ServiceAccount" => vec![
            name,
            json!(object["secrets"].as_array().map_or(0, Vec::len)),
            age,
        ],
        _ => vec![name, json!(created)],
    }
}

/// A Table of `items` of `kind`; `source` is the list (or object) whose resourceVersion and
/// continue token the table carries.
fn table_of(
    kind: &str,
    items: &[Value],
    source: &Value,
    include: Include,
    headers: Headers,
) -> Value {
    let now = Timestamp::now();
    let rows: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut row = json!({"cells": cells(kind, item, now)});
            match include {
                Include::None => {}
                Include::Metadata => row["object"] = partial(item),
                Include::Object => {
                    // Encoded on its own, the object carries its kind (list items do not).
                    let mut object = item.clone();
                    if let Some(fields) = object.as_object_mut() {
                        fields.entry("kind").or_insert_with(|| json!(kind));
                        if let Some(version) = source["apiVersion"].as_str() {
                            fields.entry("apiVersion").or_insert_with(|| json!(version));
                        }
                    }
                    row["object"] = object;
                }
            }
            row
        })
        .collect();
    let mut metadata = json!({});
    if let Some(rv) = source["metadata"]["resourceVersion"].as_str() {
        metadata["resourceVersion"] = json!(rv);
    }
    if let Some(token) = source["metadata"]["continue"].as_str() {
        metadata["continue"] = json!(token);
    }
    if let Some(count) = source["metadata"]["remainingItemCount"].as_i64() {
        metadata["remainingItemCount"] = json!(count);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": match headers {
            Headers::First => Value::Array(columns(kind)),
            Headers::Omitted => Value::Null,
        },
        "rows": rows,
    })
}

/// The string, or `<none>` when it is missing or empty (kubectl's printers' placeholder).
fn or_none(value: &Value) -> Value {
    non_empty_or(value, "<none>")
}

/// The string, or `placeholder` when it is missing or empty.
fn non_empty_or(value: &Value, placeholder: &str) -> Value {
    match value.as_str() {
        Some(s) if !s.is_empty() => json!(s),
        _ => json!(placeholder),
    }
}

/// kubectl's node columns, computed the way its node printer does: the Ready condition as
/// `Ready`/`NotReady` (`Unknown` without one) plus `SchedulingDisabled` when cordoned, the
/// roles from `node-role.kubernetes.io/<role>` and `kubernetes.io/role` labels.
fn node_cells(node: &Value, name: Value, age: Value) -> Vec<Value> {
    let ready = node["status"]["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == "Ready"));
    let mut status = vec![match ready {
        Some(c) if c["status"] == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if node["spec"]["unschedulable"] == true {
        status.push("SchedulingDisabled");
    }
    let mut roles = std::collections::BTreeSet::new();
    if let Some(labels) = node["metadata"]["labels"].as_object() {
        for (key, value) in labels {
            if let Some(role) = key.strip_prefix("node-role.kubernetes.io/")
                && !role.is_empty()
            {
                roles.insert(role.to_owned());
            } else if key == "kubernetes.io/role"
                && let Some(role) = value.as_str()
                && !role.is_empty()
            {
                roles.insert(role.to_owned());
            }
        }
    }
    let roles = if roles.is_empty() {
        "<none>".to_owned()
    } else {
        roles.into_iter().collect::<Vec<_>>().join(",")
    };
    let info = &node["status"]["nodeInfo"];
    let address = |kind: &str| {
        let found = node["status"]["addresses"]
            .as_array()
            .and_then(|all| all.iter().find(|a| a["type"] == kind));
        or_none(found.map_or(&Value::Null, |a| &a["address"]))
    };
    let or_unknown = |value: &Value| non_empty_or(value, "<unknown>");
    vec![
        name,
        json!(status.join(",")),
        json!(roles),
        age,
        json!(info["kubeletVersion"].as_str().unwrap_or_default()),
        address("InternalIP"),
        address("ExternalIP"),
        or_unknown(&info["osImage"]),
        or_unknown(&info["kernelVersion"]),
        or_unknown(&info["containerRuntimeVersion"]),
    ]
}

/// kubectl's pod columns, computed the way its pod printer does.
fn pod_cells(pod: &Value, name: Value, age: Value, now: Timestamp) -> Vec<Value> {
    let empty = Vec::new();
    let spec = &pod["spec"];
    let status = &pod["status"];
    let containers = spec["containers"].as_array().unwrap_or(&empty);
    let statuses = status["containerStatuses"].as_array().unwrap_or(&empty);
    let mut reason = status["phase"].as_str().unwrap_or_default().to_owned();
    if let Some(r) = status["reason"].as_str().filter(|r| !r.is_empty()) {
        reason = r.to_owned();
    }
    let mut restarts = 0i64;
    let mut last_restart: Option<Timestamp> = None;
    let mut ready = 0usize;
    let mut has_running = false;
    // Init containers first: a pod still initializing says so.
    let init_statuses = status["initContainerStatuses"].as_array().unwrap_or(&empty);
    let mut initializing = false;
    for (i, c) in init_statuses.iter().enumerate() {
        restarts += c["restartCount"].as_i64().unwrap_or(0);
        let state = &c["state"];
        if let Some(t) = state.get("terminated").filter(|t| t.is_object()) {
            if t["exitCode"].as_i64() == Some(0) {
                continue;
            }
            reason = match t["reason"].as_str().filter(|r| !r.is_empty()) {
                Some(r) => format!("Init:{r}"),
                None => match t["signal"].as_i64().filter(|s| *s != 0) {
                    Some(s) => format!("Init:Signal:{s}"),
                    None => format!("Init:ExitCode:{}", t["exitCode"].as_i64().unwrap_or(0)),
                },
            };
        } else if let Some(r) = state["waiting"]["reason"]
            .as_str()
            .filter(|r| !r.is_empty() && *r != "PodInitializing")
        {
            reason = format!("Init:{r}");
        } else {
            let total = spec["initContainers"].as_array().map_or(0, Vec::len);
            reason = format!("Init:{i}/{total}");
        }
        initializing = true;
        break;
    }
    if !initializing {
        for c in statuses.iter().rev() {
            restarts += c["restartCount"].as_i64().unwrap_or(0);
            if let Some(at) = c["lastState"]["terminated"]["finishedAt"]
                .as_str()
                .and_then(|s| s.parse::<Timestamp>().ok())
            {
                last_restart = Some(last_restart.map_or(at, |l| l.max(at)));
            }
            let state = &c["state"];
            if let Some(r) = state["waiting"]["reason"]
                .as_str()
                .filter(|r| !r.is_empty())
            {
                reason = r.to_owned();
            } else if let Some(t) = state.get("terminated").filter(|t| t.is_object()) {
                reason = match t["reason"].as_str().filter(|r| !r.is_empty()) {
                    Some(r) => r.to_owned(),
                    None => match t["signal"].as_i64().filter(|s| *s != 0) {
                        Some(s) => format!("Signal:{s}"),
                        None => format!("ExitCode:{}", t["exitCode"].as_i64().unwrap_or(0)),
                    },
                };
            } else if c["ready"].as_bool() == Some(true) && state["running"].is_object() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = status["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
            reason = if pod_ready { "Running" } else { "NotReady" }.to_owned();
        }
    }
    if pod["metadata"]["deletionTimestamp"].is_string() {
        reason = if status["reason"] == "NodeLost" {
            "Unknown".to_owned()
        } else {
            "Terminating".to_owned()
        };
    }
    let restarts = match last_restart {
        Some(at) if restarts > 0 => format!("{restarts} ({} ago)", human_duration(now, at)),
        _ => restarts.to_string(),
    };
    let gates = match spec["readinessGates"].as_array() {
        Some(gates) if !gates.is_empty() => {
            let conditions = status["conditions"].as_array().unwrap_or(&empty);
            let met = gates
                .iter()
                .filter(|g| {
                    conditions
                        .iter()
                        .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
                })
                .count();
            format!("{met}/{}", gates.len())
        }
        _ => "<none>".to_owned(),
    };
    vec![
        name,
        json!(format!("{ready}/{}", containers.len())),
        json!(reason),
        json!(restarts),
        age,
        or_none(&status["podIP"]),
        or_none(&spec["nodeName"]),
        or_none(&status["nominatedNodeName"]),
        json!(gates),
    ]
}

/// kubectl's event columns, computed the way its event printer does (always wide on the
/// server; kubectl hides the priority-1 columns without `-o wide`): first and last seen from
/// `firstTimestamp`/`lastTimestamp`, else `eventTime`, else `series`; the count 1 for a
/// singleton; the object as `kind/name` in lower case; the source as `component, host`.
fn event_cells(event: &Value, name: Value, now: Timestamp) -> Vec<Value> {
    let first = event["firstTimestamp"]
        .as_str()
        .or_else(|| event["eventTime"].as_str());
    let first_seen = age(first, now);
    let series = &event["series"];
    let (last_seen, count) = if series.is_object() {
        (
            age(series["lastObservedTime"].as_str(), now),
            series["count"].as_i64().unwrap_or_default(),
        )
    } else {
        let last = match event["lastTimestamp"].as_str() {
            Some(last) => age(Some(last), now),
            None => first_seen.clone(),
        };
        let count = event["count"].as_i64().filter(|&n| n != 0).unwrap_or(1);
        (last, count)
    };
    let involved = &event["involvedObject"];
    let kind = involved["kind"].as_str().unwrap_or_default().to_lowercase();
    let target = match involved["name"].as_str() {
        Some(object) if !object.is_empty() => format!("{kind}/{object}"),
        _ => kind,
    };
    fn non_empty(value: &Value) -> Option<&str> {
        value.as_str().filter(|s| !s.is_empty())
    }
    let component = non_empty(&event["source"]["component"])
        .or_else(|| non_empty(&event["reportingComponent"]))
        .unwrap_or_default();
    let source = match non_empty(&event["source"]["host"])
        .or_else(|| non_empty(&event["reportingInstance"]))
    {
        Some(instance) => format!("{component}, {instance}"),
        None => component.to_owned(),
    };
    let text = |field: &str| json!(event[field].as_str().unwrap_or_default());
    vec![
        json!(last_seen),
        text("type"),
        text("reason"),
        json!(target),
        json!(involved["fieldPath"].as_str().unwrap_or_default()),
        json!(source),
        json!(event["message"].as_str().unwrap_or_default().trim()),
        json!(first_seen),
        json!(count),
        name,
    ]
}

fn age(created: Option<&str>, now: Timestamp) -> String {
    match created.and_then(|s| s.parse::<Timestamp>().ok()) {
        Some(at) => human_duration(now, at),
        None => "<unknown>".to_owned(),
    }
}

/// apimachinery's `duration.HumanDuration` of `now - since`: `45s`, `2m5s`, `3h`, `5d`, `2y10d`.
fn human_duration(now: Timestamp, since: Timestamp) -> String {
    let secs = now.as_second() - since.as_second();
    if secs < -1 {
        return "<invalid>".to_owned();
    }
    if secs < 0 {
        return "0s".to_owned();
    }
    if secs < 60 * 2 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = hours / 24;
        let d = days % 365;
        return if d == 0 {
            format!("{}y", days / 365)
        } else {
            format!("{}y{d}d", days / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_match_apimachinery() {
        let now: Timestamp = "2026-01-10T00:00:00Z".parse().expect("ts");
        let ago = |s: i64| {
            human_duration(
                now,
                Timestamp::from_second(now.as_second() - s).expect("ts"),
            )
        };
        assert_eq!(ago(5), "5s");
        assert_eq!(ago(119), "119s");
        assert_eq!(ago(125), "2m5s");
        assert_eq!(ago(600), "10m");
        assert_eq!(ago(3 * 3600 + 60), "3h1m");
        assert_eq!(ago(10 * 3600), "10h");
        assert_eq!(ago(3 * 86400 + 3600), "3d1h");
        assert_eq!(ago(30 * 86400), "30d");
        assert_eq!(ago(3 * 365 * 86400 + 86400), "3y1d");
    }

    #[test]
    fn a_watch_sends_column_definitions_with_its_first_event_only() {
        let line = |kind: &str| {
            let object = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}});
            format!("{}\n", json!({"type": kind, "object": object})).into_bytes()
        };
        let error = format!(
            "{}\n",
            json!({"type": "ERROR", "object": {"kind": "Status", "code": 410}})
        )
        .into_bytes();
        let mut headers = Headers::First;
        let mut next = |line: &[u8]| {
            convert_event_line(line, As::Table, Include::Metadata, &mut headers)
                .map(|b| serde_json::from_slice::<Value>(&b).expect("JSON"))
        };
        let first = next(&line("ADDED")).expect("converted");
        assert_eq!(first["object"]["kind"], "Table");
        assert_eq!(first["object"]["columnDefinitions"][0]["name"], "Name");
        let second = next(&line("MODIFIED")).expect("converted");
        assert!(second["object"]["columnDefinitions"].is_null(), "{second}");
        assert_eq!(second["object"]["rows"][0]["cells"][0], "p");

        // An ERROR first takes the headers too (kube-apiserver encodes the Status through the
        // same encoder) and passes unconverted.
        let mut headers = Headers::First;
        assert!(convert_event_line(&error, As::Table, Include::Metadata, &mut headers).is_none());
        assert_eq!(headers, Headers::Omitted);
        // A read's Table always has them.
        let list = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []});
        let table = convert(&list, As::Table, Include::Metadata).expect("a table");
        assert!(table["columnDefinitions"].is_array());
    }

    #[test]
    fn event_rows_read_like_kubectls() {
        let now: Timestamp = "2026-01-10T00:10:00Z".parse().expect("ts");
        let old_api = json!({
            "metadata": {"name": "p.1"},
            "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{main}"},
            "reason": "Pulled", "type": "Normal", "message": "done \n",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2026-01-10T00:00:00Z", "lastTimestamp": "2026-01-10T00:09:00Z",
            "count": 3,
        });
        assert_eq!(
            event_cells(&old_api, json!("p.1"), now),
            [
                json!("60s"),
                json!("Normal"),
                json!("Pulled"),
                json!("pod/p"),
                json!("spec.containers{main}"),
                json!("kubelet, node-1"),
                json!("done"),
                json!("10m"),
                json!(3),
                json!("p.1"),
            ]
        );
        let new_api = json!({
            "metadata": {"name": "n.2"},
            "involvedObject": {"kind": "Node"},
            "reason": "Starting", "type": "Normal",
            "reportingComponent": "kube-proxy",
            "eventTime": "2026-01-10T00:09:30.000000Z",
        });
        let cells = event_cells(&new_api, json!("n.2"), now);
        assert_eq!(cells[0], "30s", "last seen falls back to the first");
        assert_eq!(cells[3], "node");
        assert_eq!(cells[5], "kube-proxy");
        assert_eq!(cells[7], "30s");
        assert_eq!(cells[8], 1, "a singleton counts once");
        let series = json!({
            "metadata": {"name": "s"}, "involvedObject": {"kind": "Pod", "name": "q"},
            "eventTime": "2026-01-10T00:00:00.000000Z",
            "series": {"count": 7, "lastObservedTime": "2026-01-10T00:09:55.000000Z"},
        });
        let cells = event_cells(&series, json!("s"), now);
        assert_eq!((&cells[0], &cells[8]), (&json!("5s"), &json!(7)));
        assert_eq!(columns("Event").len(), cells.len());
        let without_times = event_cells(&json!({}), json!(""), now);
        assert_eq!(
            (&without_times[0], &without_times[7]),
            (&json!("<unknown>"), &json!("<unknown>"))
        );
    }

    #[test]
    fn only_meta_k8s_io_v1_transformations_are_negotiated() {
        assert_eq!(
            negotiated("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
            Some(As::Table)
        );
        assert_eq!(
            negotiated("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
            Some(As::PartialObjectMetadataList)
        );
        assert_eq!(negotiated("application/json"), None);
        assert_eq!(
            negotiated("application/json;as=Table;v=v1;g=other.io"),
            None
        );
    }
}
