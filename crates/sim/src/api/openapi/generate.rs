//! Generates the OpenAPI documents the sim serves, once, from k8s-openapi's schemas (built with
//! its `schemars` feature): the component schemas of the kinds the sim serves (and every type
//! they reference), kube's vendor extensions on them (`x-kubernetes-group-version-kind`, the
//! strategic-merge keys kubectl's client-side apply reads), and the paths of the resources the
//! sim serves, named and parameterized as kube-apiserver names them.
//!
//! Only built with the `openapi-gen` feature; `gen_main.rs` writes the files.

use k8s_openapi::schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

/// One served resource, as its paths and operations need it.
struct Resource {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    /// The component schema of the kind.
    schema: &'static str,
    /// Verbs of the main resource.
    verbs: &'static [&'static str],
    subresources: &'static [Sub],
}

/// A subresource: its path segment, verbs, and the kind its body and answer are.
struct Sub {
    name: &'static str,
    verbs: &'static [&'static str],
    /// (group, version, kind, schema) of its body, when it is not the resource's own kind.
    kind: Option<(&'static str, &'static str, &'static str, &'static str)>,
}

const ALL: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const STATUS: Sub = Sub {
    name: "status",
    verbs: &["get", "patch", "update"],
    kind: None,
};

const CORE: &[Resource] = &[
    Resource {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        namespaced: true,
        schema: "io.k8s.api.core.v1.Pod",
        verbs: ALL,
        subresources: &[
            Sub {
                name: "binding",
                verbs: &["create"],
                kind: Some(("", "v1", "Binding", "io.k8s.api.core.v1.Binding")),
            },
            Sub {
                name: "eviction",
                verbs: &["create"],
                kind: Some(("policy", "v1", "Eviction", "io.k8s.api.policy.v1.Eviction")),
            },
            Sub {
                name: "log",
                verbs: &["get"],
                kind: None,
            },
            STATUS,
        ],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        namespaced: false,
        schema: "io.k8s.api.core.v1.Namespace",
        verbs: &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ],
        subresources: &[
            Sub {
                name: "finalize",
                verbs: &["update"],
                kind: None,
            },
            STATUS,
        ],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        namespaced: false,
        schema: "io.k8s.api.core.v1.Node",
        verbs: ALL,
        subresources: &[STATUS],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Event",
        plural: "events",
        namespaced: true,
        schema: "io.k8s.api.core.v1.Event",
        verbs: ALL,
        subresources: &[],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
        namespaced: true,
        schema: "io.k8s.api.core.v1.PersistentVolumeClaim",
        verbs: ALL,
        subresources: &[STATUS],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        namespaced: true,
        schema: "io.k8s.api.core.v1.Secret",
        verbs: ALL,
        subresources: &[],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        namespaced: true,
        schema: "io.k8s.api.core.v1.ConfigMap",
        verbs: ALL,
        subresources: &[],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        namespaced: true,
        schema: "io.k8s.api.core.v1.ServiceAccount",
        verbs: ALL,
        subresources: &[],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Binding",
        plural: "bindings",
        namespaced: true,
        schema: "io.k8s.api.core.v1.Binding",
        verbs: &["create"],
        subresources: &[],
    },
];

const COORDINATION: &[Resource] = &[Resource {
    group: "coordination.k8s.io",
    version: "v1",
    kind: "Lease",
    plural: "leases",
    namespaced: true,
    schema: "io.k8s.api.coordination.v1.Lease",
    verbs: ALL,
    subresources: &[],
}];

const POLICY: &[Resource] = &[Resource {
    group: "policy",
    version: "v1",
    kind: "PodDisruptionBudget",
    plural: "poddisruptionbudgets",
    namespaced: true,
    schema: "io.k8s.api.policy.v1.PodDisruptionBudget",
    verbs: ALL,
    subresources: &[STATUS],
}];

const SCHEDULING: &[Resource] = &[Resource {
    group: "scheduling.k8s.io",
    version: "v1",
    kind: "PriorityClass",
    plural: "priorityclasses",
    namespaced: false,
    schema: "io.k8s.api.scheduling.v1.PriorityClass",
    verbs: ALL,
    subresources: &[],
}];

const STORAGE: &[Resource] = &[Resource {
    group: "storage.k8s.io",
    version: "v1",
    kind: "StorageClass",
    plural: "storageclasses",
    namespaced: false,
    schema: "io.k8s.api.storage.v1.StorageClass",
    verbs: ALL,
    subresources: &[],
}];

const ARGO: &[Resource] = &[Resource {
    group: "argoproj.io",
    version: "v1alpha1",
    kind: "WorkflowTaskResult",
    plural: "workflowtaskresults",
    namespaced: true,
    schema: "io.argoproj.workflow.v1alpha1.WorkflowTaskResult",
    verbs: ALL,
    subresources: &[],
}];

/// The documents: (file name, document) for each group version.
pub fn documents() -> Vec<(&'static str, Value)> {
    let kube_version = podline_sim_core::version::GIT_VERSION;
    let core = core_schemas();
    let coordination = coordination_schemas();
    let argo = argo_schemas();
    let policy = policy_schemas();
    let scheduling = scheduling_schemas();
    let storage = storage_schemas();
    let docs = [
        ("api__v1.json", "/api/v1", "core_v1", CORE, core),
        (
            "apis__coordination.k8s.io__v1.json",
            "/apis/coordination.k8s.io/v1",
            "coordination_v1",
            COORDINATION,
            coordination,
        ),
        (
            "apis__policy__v1.json",
            "/apis/policy/v1",
            "policy_v1",
            POLICY,
            policy,
        ),
        (
            "apis__scheduling.k8s.io__v1.json",
            "/apis/scheduling.k8s.io/v1",
            "scheduling_v1",
            SCHEDULING,
            scheduling,
        ),
        (
            "apis__storage.k8s.io__v1.json",
            "/apis/storage.k8s.io/v1",
            "storage_v1",
            STORAGE,
            storage,
        ),
        (
            "apis__argoproj.io__v1alpha1.json",
            "/apis/argoproj.io/v1alpha1",
            "argoprojIo_v1alpha1",
            ARGO,
            argo,
        ),
    ];
    let mut out = Vec::new();
    for (file, prefix, tag, resources, schemas) in docs {
        let mut paths = Map::new();
        paths.insert(format!("{prefix}/"), resources_path(tag, prefix));
        for r in resources {
            add_paths(&mut paths, prefix, tag, r);
        }
        out.push((
            file,
            json!({
                "openapi": "3.0.0",
                "info": {"title": "Kubernetes", "version": kube_version},
                "paths": paths,
                "components": {
                    "schemas": schemas,
                    "securitySchemes": security_schemes(),
                },
            }),
        ));
    }
    out
}

fn security_schemes() -> Value {
    json!({"BearerToken": {
        "type": "apiKey",
        "description": "Bearer Token authentication",
        "name": "authorization",
        "in": "header",
    }})
}

// ---- schemas ------------------------------------------------------------------------------

fn generator() -> SchemaGenerator {
    SchemaGenerator::new(SchemaSettings::openapi3().with(|s| s.meta_schema = None))
}

fn core_schemas() -> Map<String, Value> {
    use k8s_openapi::api::core::v1::{
        Binding, ConfigMap, Event, Namespace, Node, PersistentVolumeClaim, Pod, Secret,
        ServiceAccount,
    };
    use k8s_openapi::api::policy::v1::Eviction;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        APIResourceList, DeleteOptions, Patch, Status, WatchEvent,
    };
    let mut g = generator();
    g.subschema_for::<Pod>();
    g.subschema_for::<Namespace>();
    g.subschema_for::<Node>();
    g.subschema_for::<Event>();
    g.subschema_for::<Binding>();
    g.subschema_for::<Secret>();
    g.subschema_for::<ConfigMap>();
    g.subschema_for::<ServiceAccount>();
    g.subschema_for::<PersistentVolumeClaim>();
    g.subschema_for::<Eviction>();
    g.subschema_for::<Status>();
    g.subschema_for::<DeleteOptions>();
    g.subschema_for::<Patch>();
    g.subschema_for::<WatchEvent<Pod>>();
    g.subschema_for::<APIResourceList>();
    let mut schemas = g.take_definitions(true);
    for (list, item, what) in [
        ("PodList", "io.k8s.api.core.v1.Pod", "pods"),
        (
            "NamespaceList",
            "io.k8s.api.core.v1.Namespace",
            "Namespace objects",
        ),
        ("EventList", "io.k8s.api.core.v1.Event", "events"),
        ("NodeList", "io.k8s.api.core.v1.Node", "Node objects"),
        ("SecretList", "io.k8s.api.core.v1.Secret", "Secrets"),
        (
            "ConfigMapList",
            "io.k8s.api.core.v1.ConfigMap",
            "ConfigMaps",
        ),
        (
            "ServiceAccountList",
            "io.k8s.api.core.v1.ServiceAccount",
            "ServiceAccounts",
        ),
        (
            "PersistentVolumeClaimList",
            "io.k8s.api.core.v1.PersistentVolumeClaim",
            "PersistentVolumeClaims",
        ),
    ] {
        schemas.insert(
            format!("io.k8s.api.core.v1.{list}"),
            list_schema(list, item, what),
        );
    }
    finish(&mut schemas);
    schemas
}

fn coordination_schemas() -> Map<String, Value> {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        APIResourceList, DeleteOptions, Patch, Status, WatchEvent,
    };
    let mut g = generator();
    g.subschema_for::<Lease>();
    g.subschema_for::<Status>();
    g.subschema_for::<DeleteOptions>();
    g.subschema_for::<Patch>();
    g.subschema_for::<WatchEvent<Lease>>();
    g.subschema_for::<APIResourceList>();
    let mut schemas = g.take_definitions(true);
    schemas.insert(
        "io.k8s.api.coordination.v1.LeaseList".to_owned(),
        list_schema(
            "LeaseList",
            "io.k8s.api.coordination.v1.Lease",
            "Lease objects",
        ),
    );
    finish(&mut schemas);
    schemas
}

fn policy_schemas() -> Map<String, Value> {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        APIResourceList, DeleteOptions, Patch, Status, WatchEvent,
    };
    let mut g = generator();
    g.subschema_for::<PodDisruptionBudget>();
    g.subschema_for::<Status>();
    g.subschema_for::<DeleteOptions>();
    g.subschema_for::<Patch>();
    g.subschema_for::<WatchEvent<PodDisruptionBudget>>();
    g.subschema_for::<APIResourceList>();
    let mut schemas = g.take_definitions(true);
    schemas.insert(
        "io.k8s.api.policy.v1.PodDisruptionBudgetList".to_owned(),
        list_schema(
            "PodDisruptionBudgetList",
            "io.k8s.api.policy.v1.PodDisruptionBudget",
            "list of PodDisruptionBudgets",
        ),
    );
    finish(&mut schemas);
    schemas
}

fn scheduling_schemas() -> Map<String, Value> {
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        APIResourceList, DeleteOptions, Patch, Status, WatchEvent,
    };
    let mut g = generator();
    g.subschema_for::<PriorityClass>();
    g.subschema_for::<Status>();
    g.subschema_for::<DeleteOptions>();
    g.subschema_for::<Patch>();
    g.subschema_for::<WatchEvent<PriorityClass>>();
    g.subschema_for::<APIResourceList>();
    let mut schemas = g.take_definitions(true);
    schemas.insert(
        "io.k8s.api.scheduling.v1.PriorityClassList".to_owned(),
        list_schema(
            "PriorityClassList",
            "io.k8s.api.scheduling.v1.PriorityClass",
            "PriorityClasses",
        ),
    );
    finish(&mut schemas);
    schemas
}

fn storage_schemas() -> Map<String, Value> {
    use k8s_openapi::api::storage::v1::StorageClass;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        APIResourceList, DeleteOptions, Patch, Status, WatchEvent,
    };
    let mut g = generator();
    g.subschema_for::<StorageClass>();
    g.subschema_for::<Status>();
    g.subschema_for::<DeleteOptions>();
    g.subschema_for::<Patch>();
    g.subschema_for::<WatchEvent<StorageClass>>();
    g.subschema_for::<APIResourceList>();
    let mut schemas = g.take_definitions(true);
    schemas.insert(
        "io.k8s.api.storage.v1.StorageClassList".to_owned(),
        list_schema(
            "StorageClassList",
            "io.k8s.api.storage.v1.StorageClass",
            "StorageClasses",
        ),
    );
    finish(&mut schemas);
    schemas
}

/// Argo's CRD has no structural schema for its results: everything but the metadata is kept
/// as sent, as `x-kubernetes-preserve-unknown-fields` says.
fn argo_schemas() -> Map<String, Value> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        APIResourceList, DeleteOptions, Patch, Status, WatchEvent,
    };
    let mut g = generator();
    g.subschema_for::<Status>();
    g.subschema_for::<DeleteOptions>();
    g.subschema_for::<Patch>();
    g.subschema_for::<WatchEvent<Status>>();
    g.subschema_for::<APIResourceList>();
    let mut schemas = g.take_definitions(true);
    let meta = "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
    schemas.insert(
        "io.argoproj.workflow.v1alpha1.WorkflowTaskResult".to_owned(),
        json!({
            "type": "object",
            "required": ["metadata"],
            "properties": {
                "apiVersion": {"type": "string", "description": API_VERSION_DOC},
                "kind": {"type": "string", "description": KIND_DOC},
                "metadata": {"allOf": [{"$ref": meta}], "description": METADATA_DOC},
            },
            "x-kubernetes-preserve-unknown-fields": true,
        }),
    );
    schemas.insert(
        "io.argoproj.workflow.v1alpha1.WorkflowTaskResultList".to_owned(),
        list_schema(
            "WorkflowTaskResultList",
            "io.argoproj.workflow.v1alpha1.WorkflowTaskResult",
            "workflowtaskresults",
        ),
    );
    finish(&mut schemas);
    schemas
}

const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DOC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// A `<Kind>List` (k8s-openapi has no schema for its generic list).
fn list_schema(list: &str, item: &str, what: &str) -> Value {
    let kind = list.trim_end_matches("List");
    json!({
        "description": format!("{list} is a list of {kind} objects."),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": API_VERSION_DOC},
            "items": {
                "description": format!("Items is the list of {what}."),
                "type": "array",
                "items": {"allOf": [{"$ref": format!("#/components/schemas/{item}")}], "default": {}},
            },
            "kind": {"type": "string", "description": KIND_DOC},
            "metadata": {
                "allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"}],
                "default": {},
                "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
            },
        },
    })
}

/// A group, version and kind.
type Gvk = (&'static str, &'static str, &'static str);

/// The kinds each schema is (`x-kubernetes-group-version-kind`).
const KINDS: &[(&str, &[Gvk])] = &[
    ("io.k8s.api.core.v1.Pod", &[("", "v1", "Pod")]),
    ("io.k8s.api.core.v1.PodList", &[("", "v1", "PodList")]),
    ("io.k8s.api.core.v1.Namespace", &[("", "v1", "Namespace")]),
    (
        "io.k8s.api.core.v1.NamespaceList",
        &[("", "v1", "NamespaceList")],
    ),
    ("io.k8s.api.core.v1.Event", &[("", "v1", "Event")]),
    ("io.k8s.api.core.v1.EventList", &[("", "v1", "EventList")]),
    ("io.k8s.api.core.v1.Binding", &[("", "v1", "Binding")]),
    ("io.k8s.api.core.v1.Secret", &[("", "v1", "Secret")]),
    ("io.k8s.api.core.v1.SecretList", &[("", "v1", "SecretList")]),
    ("io.k8s.api.core.v1.ConfigMap", &[("", "v1", "ConfigMap")]),
    (
        "io.k8s.api.core.v1.ConfigMapList",
        &[("", "v1", "ConfigMapList")],
    ),
    (
        "io.k8s.api.core.v1.ServiceAccount",
        &[("", "v1", "ServiceAccount")],
    ),
    (
        "io.k8s.api.core.v1.ServiceAccountList",
        &[("", "v1", "ServiceAccountList")],
    ),
    (
        "io.k8s.api.policy.v1.Eviction",
        &[("policy", "v1", "Eviction")],
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudget",
        &[("policy", "v1", "PodDisruptionBudget")],
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetList",
        &[("policy", "v1", "PodDisruptionBudgetList")],
    ),
    (
        "io.k8s.api.coordination.v1.Lease",
        &[("coordination.k8s.io", "v1", "Lease")],
    ),
    (
        "io.k8s.api.scheduling.v1.PriorityClass",
        &[("scheduling.k8s.io", "v1", "PriorityClass")],
    ),
    (
        "io.k8s.api.scheduling.v1.PriorityClassList",
        &[("scheduling.k8s.io", "v1", "PriorityClassList")],
    ),
    (
        "io.k8s.api.storage.v1.StorageClass",
        &[("storage.k8s.io", "v1", "StorageClass")],
    ),
    (
        "io.k8s.api.storage.v1.StorageClassList",
        &[("storage.k8s.io", "v1", "StorageClassList")],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaim",
        &[("", "v1", "PersistentVolumeClaim")],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimList",
        &[("", "v1", "PersistentVolumeClaimList")],
    ),
    (
        "io.k8s.api.coordination.v1.LeaseList",
        &[("coordination.k8s.io", "v1", "LeaseList")],
    ),
    (
        "io.argoproj.workflow.v1alpha1.WorkflowTaskResult",
        &[("argoproj.io", "v1alpha1", "WorkflowTaskResult")],
    ),
    (
        "io.argoproj.workflow.v1alpha1.WorkflowTaskResultList",
        &[("argoproj.io", "v1alpha1", "WorkflowTaskResultList")],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
        &[("", "v1", "Status")],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
        &[
            ("", "v1", "DeleteOptions"),
            ("coordination.k8s.io", "v1", "DeleteOptions"),
            ("policy", "v1", "DeleteOptions"),
            ("scheduling.k8s.io", "v1", "DeleteOptions"),
            ("storage.k8s.io", "v1", "DeleteOptions"),
        ],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
        &[
            ("", "v1", "WatchEvent"),
            ("coordination.k8s.io", "v1", "WatchEvent"),
            ("policy", "v1", "WatchEvent"),
            ("scheduling.k8s.io", "v1", "WatchEvent"),
            ("storage.k8s.io", "v1", "WatchEvent"),
        ],
    ),
];

/// Strategic-merge and list-type extensions of list fields (schema, field, merge key, strategy,
/// list type, list map keys), as kube's types declare them.
type ListField = (
    &'static str,
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
    &'static str,
    &'static [&'static str],
);
const LISTS: &[ListField] = &[
    (
        "io.k8s.api.core.v1.ServiceAccount",
        "secrets",
        Some("name"),
        Some("merge"),
        "",
        &[],
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
        "conditions",
        Some("type"),
        Some("merge"),
        "map",
        &["type"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "containers",
        Some("name"),
        Some("merge"),
        "",
        &[],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "initContainers",
        Some("name"),
        Some("merge"),
        "",
        &[],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "ephemeralContainers",
        Some("name"),
        Some("merge"),
        "",
        &[],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "volumes",
        Some("name"),
        Some("merge,retainKeys"),
        "",
        &[],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "imagePullSecrets",
        Some("name"),
        Some("merge"),
        "",
        &[],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "hostAliases",
        Some("ip"),
        Some("merge"),
        "",
        &[],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "topologySpreadConstraints",
        Some("topologyKey"),
        Some("merge"),
        "map",
        &["topologyKey", "whenUnsatisfiable"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "schedulingGates",
        Some("name"),
        Some("merge"),
        "map",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "resourceClaims",
        Some("name"),
        Some("merge,retainKeys"),
        "map",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "tolerations",
        None,
        None,
        "atomic",
        &[],
    ),
    (
        "io.k8s.api.core.v1.Container",
        "env",
        Some("name"),
        Some("merge"),
        "",
        &[],
    ),
    (
        "io.k8s.api.core.v1.Container",
        "ports",
        Some("containerPort"),
        Some("merge"),
        "map",
        &["containerPort", "protocol"],
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeMounts",
        Some("mountPath"),
        Some("merge"),
        "",
        &[],
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeDevices",
        Some("devicePath"),
        Some("merge"),
        "",
        &[],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "env",
        Some("name"),
        Some("merge"),
        "",
        &[],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeMounts",
        Some("mountPath"),
        Some("merge"),
        "",
        &[],
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "conditions",
        Some("type"),
        Some("merge"),
        "",
        &[],
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "podIPs",
        Some("ip"),
        Some("merge"),
        "",
        &[],
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "hostIPs",
        Some("ip"),
        Some("merge"),
        "",
        &[],
    ),
    (
        "io.k8s.api.core.v1.NamespaceStatus",
        "conditions",
        Some("type"),
        Some("merge"),
        "",
        &[],
    ),
    (
        "io.k8s.api.core.v1.NamespaceSpec",
        "finalizers",
        None,
        None,
        "atomic",
        &[],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "finalizers",
        None,
        Some("merge"),
        "set",
        &[],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "ownerReferences",
        Some("uid"),
        Some("merge"),
        "",
        &[],
    ),
];

/// Adds kube's vendor extensions to the generated schemas.
fn finish(schemas: &mut Map<String, Value>) {
    for (name, kinds) in KINDS {
        if let Some(schema) = schemas.get_mut(*name) {
            let gvks: Vec<Value> = kinds
                .iter()
                .map(|(g, v, k)| json!({"group": g, "kind": k, "version": v}))
                .collect();
            schema["x-kubernetes-group-version-kind"] = Value::Array(gvks);
        }
    }
    for (schema, field, key, strategy, list_type, map_keys) in LISTS {
        let Some(prop) = schemas
            .get_mut(*schema)
            .and_then(|s| s.get_mut("properties"))
            .and_then(|p| p.get_mut(*field))
        else {
            continue;
        };
        if let Some(key) = key {
            prop["x-kubernetes-patch-merge-key"] = json!(key);
        }
        if let Some(strategy) = strategy {
            prop["x-kubernetes-patch-strategy"] = json!(strategy);
        }
        if !list_type.is_empty() {
            prop["x-kubernetes-list-type"] = json!(list_type);
        }
        if !map_keys.is_empty() {
            prop["x-kubernetes-list-map-keys"] = json!(map_keys);
        }
    }
}

// ---- paths --------------------------------------------------------------------------------

/// A query or path parameter (v3 form).
fn param(name: &str, location: &str, kind: &str, description: &str) -> Value {
    let mut p = json!({
        "name": name,
        "in": location,
        "description": description,
        "schema": {"type": kind, "uniqueItems": true},
    });
    if location == "path" {
        p["required"] = json!(true);
    }
    p
}

fn q(name: &str) -> Value {
    let (kind, description) = match name {
        "allowWatchBookmarks" => (
            "boolean",
            "allowWatchBookmarks requests watch events with type \"BOOKMARK\". Servers that do not implement bookmarks may ignore this flag and bookmarks are sent at the server's discretion. Clients should not assume bookmarks are returned at any specific interval, nor may they assume the server will send any BOOKMARK event during a session. If this is not a watch, this field is ignored.",
        ),
        "continue" => (
            "string",
            "The continue option should be set when retrieving more results from the server. Since this value is server defined, clients may only use the continue value from a previous query result with identical query parameters (except for the value of continue) and the server may reject a continue value it does not recognize.",
        ),
        "fieldSelector" => (
            "string",
            "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
        ),
        "labelSelector" => (
            "string",
            "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
        ),
        "limit" => (
            "integer",
            "limit is a maximum number of responses to return for a list call. If more items exist, the server will set the `continue` field on the list metadata to a value that can be used with the same initial query to retrieve the next set of results.",
        ),
        "resourceVersion" => (
            "string",
            "resourceVersion sets a constraint on what resource versions a request may be served from. See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset",
        ),
        "resourceVersionMatch" => (
            "string",
            "resourceVersionMatch determines how resourceVersion is applied to list calls. It is highly recommended that resourceVersionMatch be set for list calls where resourceVersion is set See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset",
        ),
        "sendInitialEvents" => (
            "boolean",
            "`sendInitialEvents=true` may be set together with `watch=true`. In that case, the watch stream will begin with synthetic events to produce the current state of objects in the collection. Once all such events have been sent, a synthetic \"Bookmark\" event will be sent. The bookmark will report the ResourceVersion (RV) corresponding to the set of objects, and be marked with `\"k8s.io/initial-events-end\": \"true\"` annotation.",
        ),
        "timeoutSeconds" => (
            "integer",
            "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity.",
        ),
        "watch" => (
            "boolean",
            "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications. Specify resourceVersion.",
        ),
        "dryRun" => (
            "string",
            "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed",
        ),
        "fieldManager" => (
            "string",
            "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.",
        ),
        "fieldValidation" => (
            "string",
            "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.",
        ),
        "force" => (
            "boolean",
            "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.",
        ),
        "gracePeriodSeconds" => (
            "integer",
            "The duration in seconds before the object should be deleted. Value must be non-negative integer. The value zero indicates delete immediately. If this value is nil, the default grace period for the specified type will be used. Defaults to a per object value if not specified. zero means delete immediately.",
        ),
        "ignoreStoreReadErrorWithClusterBreakingPotential" => (
            "boolean",
            "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow fails with a corrupt object error. A resource is considered corrupt if it can not be retrieved from the underlying storage successfully because of a) its data can not be transformed e.g. decryption failure, or b) it fails to decode into an object. NOTE: unsafe deletion ignores finalizer constraints, skips precondition checks, and removes the object from the storage. WARNING: This may potentially break the cluster if the workload associated with the resource being unsafe-deleted relies on normal deletion flow. Use only if you REALLY know what you are doing. The default value is false, and the user must opt in to enable it",
        ),
        "orphanDependents" => (
            "boolean",
            "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7. Should the dependent objects be orphaned. If true/false, the \"orphan\" finalizer will be added to/removed from the object's finalizers list. Either this field or PropagationPolicy may be set, but not both.",
        ),
        "propagationPolicy" => (
            "string",
            "Whether and how garbage collection will be performed. Either this field or OrphanDependents may be set, but not both. The default policy is decided by the existing finalizer set in the metadata.finalizers and the resource-specific default policy. Acceptable values are: 'Orphan' - orphan the dependents; 'Background' - allow the garbage collector to delete the dependents in the background; 'Foreground' - a cascading policy that deletes all dependents in the foreground.",
        ),
        "pretty" => (
            "string",
            "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).",
        ),
        "container" => (
            "string",
            "The container for which to stream logs. Defaults to only container if there is one container in the pod.",
        ),
        "follow" => (
            "boolean",
            "Follow the log stream of the pod. Defaults to false.",
        ),
        "insecureSkipTLSVerifyBackend" => (
            "boolean",
            "insecureSkipTLSVerifyBackend indicates that the apiserver should not confirm the validity of the serving certificate of the backend it is connecting to.  This will make the HTTPS connection between the apiserver and the backend insecure. This means the apiserver cannot verify the log data it is receiving came from the real kubelet.  If the kubelet is configured to verify the apiserver's TLS credentials, it does not mean the connection to the real kubelet is vulnerable to a man in the middle attack (e.g. an attacker could not intercept the actual log data coming from the real kubelet).",
        ),
        "limitBytes" => (
            "integer",
            "If set, the number of bytes to read from the server before terminating the log output. This may not display a complete final line of logging, and may return slightly more or slightly less than the specified limit.",
        ),
        "previous" => (
            "boolean",
            "Return previous terminated container logs. Defaults to false.",
        ),
        "sinceSeconds" => (
            "integer",
            "A relative time in seconds before the current time from which to show logs. If this value precedes the time a pod was started, only logs since the pod start will be returned. If this value is in the future, no logs will be returned. Only one of sinceSeconds or sinceTime may be specified.",
        ),
        "stream" => (
            "string",
            "Specify which container log stream to return to the client. Acceptable values are \"All\", \"Stdout\" and \"Stderr\". If not specified, \"All\" is used, and both stdout and stderr are returned interleaved. Note that when \"TailLines\" is specified, \"Stream\" can only be set to nil or \"All\".",
        ),
        "tailLines" => (
            "integer",
            "If set, the number of lines from the end of the logs to show. If not specified, logs are shown from the creation of the container or sinceSeconds or sinceTime. Note that when \"TailLines\" is specified, \"Stream\" can only be set to nil or \"All\".",
        ),
        "timestamps" => (
            "boolean",
            "If true, add an RFC3339 or RFC3339Nano timestamp at the beginning of every line of log output. Defaults to false.",
        ),
        other => panic!("no description for parameter {other}"),
    };
    param(name, "query", kind, description)
}

const LIST_PARAMS: &[&str] = &[
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
];
const WRITE_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];
const PATCH_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force"];
const DELETE_PARAMS: &[&str] = &[
    "dryRun",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "orphanDependents",
    "propagationPolicy",
];
const DELETE_COLLECTION_PARAMS: &[&str] = &[
    "continue",
    "dryRun",
    "fieldSelector",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "labelSelector",
    "limit",
    "orphanDependents",
    "propagationPolicy",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
];
const LOG_PARAMS: &[&str] = &[
    "container",
    "follow",
    "insecureSkipTLSVerifyBackend",
    "limitBytes",
    "previous",
    "sinceSeconds",
    "stream",
    "tailLines",
    "timestamps",
];

fn reference(schema: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{schema}")})
}

fn content(schema: &str, watch: bool) -> Value {
    let mut c = json!({
        "application/json": {"schema": reference(schema)},
    });
    if watch {
        c["application/json;stream=watch"] = json!({"schema": reference(schema)});
    }
    c
}

fn responses(codes: &[&str], schema: &str, watch: bool) -> Value {
    let mut r = Map::new();
    for code in codes {
        let description = match *code {
            "200" => "OK",
            "201" => "Created",
            "202" => "Accepted",
            _ => "",
        };
        r.insert(
            (*code).to_owned(),
            json!({"description": description, "content": content(schema, watch)}),
        );
    }
    r.insert("401".to_owned(), json!({"description": "Unauthorized"}));
    Value::Object(r)
}

/// The name kube gives a group in operation ids (`Core`, `Coordination`, `ArgoprojIo`).
fn group_camel(group: &str) -> String {
    if group.is_empty() {
        return "Core".to_owned();
    }
    let base = group.strip_suffix(".k8s.io").unwrap_or(group);
    base.split('.').map(capitalize).collect()
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map_or_else(String::new, |c| {
        c.to_uppercase().collect::<String>() + chars.as_str()
    })
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

/// An operation.
#[allow(clippy::too_many_arguments)]
fn op(
    tag: &str,
    description: String,
    id: String,
    action: &str,
    params: &[&str],
    body: Option<Value>,
    responses: Value,
    kind: Value,
) -> Value {
    let mut o = json!({
        "tags": [tag],
        "description": description,
        "operationId": id,
        "responses": responses,
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": kind,
    });
    if !params.is_empty() {
        o["parameters"] = Value::Array(params.iter().map(|p| q(p)).collect());
    }
    if let Some(body) = body {
        o["requestBody"] = body;
    }
    o
}

fn body(schema: &str) -> Value {
    json!({"content": {"*/*": {"schema": reference(schema)}}, "required": true})
}

fn patch_body() -> Value {
    let patch = reference("io.k8s.apimachinery.pkg.apis.meta.v1.Patch");
    json!({"content": {
        "application/apply-patch+yaml": {"schema": patch},
        "application/json-patch+json": {"schema": patch},
        "application/merge-patch+json": {"schema": patch},
        "application/strategic-merge-patch+json": {"schema": patch},
    }, "required": true})
}

fn path_params(namespaced: bool, named: Option<&str>) -> Value {
    let mut params = Vec::new();
    if let Some(kind) = named {
        params.push(param(
            "name",
            "path",
            "string",
            &format!("name of the {kind}"),
        ));
    }
    if namespaced {
        params.push(param(
            "namespace",
            "path",
            "string",
            "object name and auth scope, such as for teams and projects",
        ));
    }
    params.push(q("pretty"));
    Value::Array(params)
}

/// `GET /api/v1/` and the like: the group version's resources.
fn resources_path(tag: &str, prefix: &str) -> Value {
    let (group, version) = match prefix.strip_prefix("/apis/") {
        Some(gv) => gv.split_once('/').unwrap_or((gv, "")),
        None => ("", "v1"),
    };
    json!({"get": {
        "tags": [tag],
        "description": "get available resources",
        "operationId": format!("get{}{}APIResources", group_camel(group), capitalize(version)),
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": reference("io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList")}}},
            "401": {"description": "Unauthorized"},
        },
    }})
}

fn add_paths(paths: &mut Map<String, Value>, prefix: &str, tag: &str, r: &Resource) {
    let g = group_camel(r.group);
    let v = capitalize(r.version);
    let scope = if r.namespaced { "Namespaced" } else { "" };
    let ns = if r.namespaced {
        "/namespaces/{namespace}"
    } else {
        ""
    };
    let kind = gvk(r.group, r.version, r.kind);
    let list_schema = format!("{}List", r.schema);
    let has = |verb: &str| r.verbs.contains(&verb);
    let status = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
    let lower = r.kind.to_ascii_lowercase();

    let mut collection = Map::new();
    if has("list") {
        collection.insert(
            "get".into(),
            op(
                tag,
                format!("list or watch objects of kind {}", r.kind),
                format!("list{g}{v}{scope}{}", r.kind),
                "list",
                LIST_PARAMS,
                None,
                responses(&["200"], &list_schema, true),
                kind.clone(),
            ),
        );
    }
    if has("create") {
        collection.insert(
            "post".into(),
            op(
                tag,
                format!("create {}", article(r.kind)),
                format!("create{g}{v}{scope}{}", r.kind),
                "post",
                WRITE_PARAMS,
                Some(body(r.schema)),
                responses(&["200", "201", "202"], r.schema, false),
                kind.clone(),
            ),
        );
    }
    if has("deletecollection") {
        collection.insert(
            "delete".into(),
            op(
                tag,
                format!("delete collection of {}", r.kind),
                format!("delete{g}{v}Collection{scope}{}", r.kind),
                "deletecollection",
                DELETE_COLLECTION_PARAMS,
                Some(body("io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions")),
                responses(&["200"], status, false),
                kind.clone(),
            ),
        );
    }
    collection.insert("parameters".into(), path_params(r.namespaced, None));
    paths.insert(
        format!("{prefix}{ns}/{}", r.plural),
        Value::Object(collection),
    );

    if has("get") {
        let mut item = Map::new();
        item.insert(
            "get".into(),
            op(
                tag,
                format!("read the specified {}", r.kind),
                format!("read{g}{v}{scope}{}", r.kind),
                "get",
                &[],
                None,
                responses(&["200"], r.schema, false),
                kind.clone(),
            ),
        );
        if has("update") {
            item.insert(
                "put".into(),
                op(
                    tag,
                    format!("replace the specified {}", r.kind),
                    format!("replace{g}{v}{scope}{}", r.kind),
                    "put",
                    WRITE_PARAMS,
                    Some(body(r.schema)),
                    responses(&["200", "201"], r.schema, false),
                    kind.clone(),
                ),
            );
        }
        if has("delete") {
            // Pods (and namespaces) answer a delete with the object; other kinds with a Status.
            let answer = if matches!(r.kind, "Pod" | "Namespace") {
                r.schema
            } else {
                status
            };
            item.insert(
                "delete".into(),
                op(
                    tag,
                    format!("delete {}", article(r.kind)),
                    format!("delete{g}{v}{scope}{}", r.kind),
                    "delete",
                    DELETE_PARAMS,
                    Some(body("io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions")),
                    responses(&["200", "202"], answer, false),
                    kind.clone(),
                ),
            );
        }
        if has("patch") {
            item.insert(
                "patch".into(),
                op(
                    tag,
                    format!("partially update the specified {}", r.kind),
                    format!("patch{g}{v}{scope}{}", r.kind),
                    "patch",
                    PATCH_PARAMS,
                    Some(patch_body()),
                    responses(&["200", "201"], r.schema, false),
                    kind.clone(),
                ),
            );
        }
        item.insert("parameters".into(), path_params(r.namespaced, Some(r.kind)));
        paths.insert(
            format!("{prefix}{ns}/{}/{{name}}", r.plural),
            Value::Object(item),
        );
    }

    for sub in r.subresources {
        let mut item = Map::new();
        let sub_camel = capitalize(sub.name);
        let (sub_kind, sub_schema) = match sub.kind {
            Some((group, version, kind, schema)) => (gvk(group, version, kind), schema),
            None => (kind.clone(), r.schema),
        };
        for verb in sub.verbs {
            let (method, entry) = match (*verb, sub.name) {
                ("get", "log") => (
                    "get",
                    json!({
                        "tags": [tag],
                        "description": format!("read log of the specified {}", r.kind),
                        "operationId": format!("read{g}{v}{scope}{}Log", r.kind),
                        "parameters": LOG_PARAMS.iter().map(|p| q(p)).collect::<Vec<_>>(),
                        "responses": {
                            "200": {"description": "OK", "content": {"text/plain": {"schema": {"type": "string"}}}},
                            "401": {"description": "Unauthorized"},
                        },
                        "x-kubernetes-action": "get",
                        "x-kubernetes-group-version-kind": kind.clone(),
                    }),
                ),
                ("get", _) => (
                    "get",
                    op(
                        tag,
                        format!("read {} of the specified {}", sub.name, r.kind),
                        format!("read{g}{v}{scope}{}{sub_camel}", r.kind),
                        "get",
                        &[],
                        None,
                        responses(&["200"], sub_schema, false),
                        sub_kind.clone(),
                    ),
                ),
                ("update", _) => (
                    "put",
                    op(
                        tag,
                        format!("replace {} of the specified {}", sub.name, r.kind),
                        format!("replace{g}{v}{scope}{}{sub_camel}", r.kind),
                        "put",
                        WRITE_PARAMS,
                        Some(body(sub_schema)),
                        responses(&["200", "201"], sub_schema, false),
                        sub_kind.clone(),
                    ),
                ),
                ("patch", _) => (
                    "patch",
                    op(
                        tag,
                        format!("partially update {} of the specified {}", sub.name, r.kind),
                        format!("patch{g}{v}{scope}{}{sub_camel}", r.kind),
                        "patch",
                        PATCH_PARAMS,
                        Some(patch_body()),
                        responses(&["200", "201"], sub_schema, false),
                        sub_kind.clone(),
                    ),
                ),
                ("create", _) => (
                    "post",
                    op(
                        tag,
                        format!("create {} of {}", sub.name, article(r.kind)),
                        format!("create{g}{v}{scope}{}{sub_camel}", r.kind),
                        "post",
                        WRITE_PARAMS,
                        Some(body(sub_schema)),
                        responses(&["200", "201", "202"], sub_schema, false),
                        sub_kind.clone(),
                    ),
                ),
                (other, _) => panic!("no operation for verb {other}"),
            };
            item.insert(method.to_owned(), entry);
        }
        let name_of = format!(
            "name of the {}",
            sub_kind["kind"].as_str().unwrap_or(r.kind)
        );
        let mut params = vec![param("name", "path", "string", &name_of)];
        if r.namespaced {
            params.push(param(
                "namespace",
                "path",
                "string",
                "object name and auth scope, such as for teams and projects",
            ));
        }
        params.push(q("pretty"));
        item.insert("parameters".into(), Value::Array(params));
        paths.insert(
            format!("{prefix}{ns}/{}/{{name}}/{}", r.plural, sub.name),
            Value::Object(item),
        );
    }

    if !has("watch") {
        return;
    }
    // Lists across namespaces, and the deprecated watch paths.
    let watch_event = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";
    let watch_op = |id: String, action: &str, description: String| {
        json!({"get": op(
            tag,
            description,
            id,
            action,
            &[],
            None,
            responses(&["200"], watch_event, true),
            kind.clone(),
        ), "parameters": LIST_PARAMS.iter().map(|p| q(p)).chain(std::iter::once(q("pretty"))).collect::<Vec<_>>()})
    };
    if r.namespaced {
        paths.insert(
            format!("{prefix}/{}", r.plural),
            json!({"get": op(
                tag,
                format!("list or watch objects of kind {}", r.kind),
                format!("list{g}{v}{}ForAllNamespaces", r.kind),
                "list",
                &[],
                None,
                responses(&["200"], &list_schema, true),
                kind.clone(),
            ), "parameters": LIST_PARAMS.iter().map(|p| q(p)).chain(std::iter::once(q("pretty"))).collect::<Vec<_>>()}),
        );
        paths.insert(
            format!("{prefix}/watch/{}", r.plural),
            watch_op(
                format!("watch{g}{v}{}ListForAllNamespaces", r.kind),
                "watchlist",
                format!("watch individual changes to a list of {}. deprecated: use the 'watch' parameter with a list operation instead.", r.kind),
            ),
        );
    }
    let mut list_watch = watch_op(
        format!("watch{g}{v}{scope}{}List", r.kind),
        "watchlist",
        format!(
            "watch individual changes to a list of {}. deprecated: use the 'watch' parameter with a list operation instead.",
            r.kind
        ),
    );
    if r.namespaced {
        prepend_namespace(&mut list_watch);
    }
    paths.insert(format!("{prefix}/watch{ns}/{}", r.plural), list_watch);
    let mut one_watch = watch_op(
        format!("watch{g}{v}{scope}{}", r.kind),
        "watch",
        format!(
            "watch changes to an object of kind {}. deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter.",
            r.kind
        ),
    );
    if r.namespaced {
        prepend_namespace(&mut one_watch);
    }
    if let Some(Value::Array(params)) = one_watch.get_mut("parameters") {
        params.insert(
            0,
            param("name", "path", "string", &format!("name of the {}", r.kind)),
        );
    }
    paths.insert(
        format!("{prefix}/watch{ns}/{}/{{name}}", r.plural),
        one_watch,
    );
    let _ = lower;
}

fn prepend_namespace(item: &mut Value) {
    if let Some(Value::Array(params)) = item.get_mut("parameters") {
        params.insert(
            0,
            param(
                "namespace",
                "path",
                "string",
                "object name and auth scope, such as for teams and projects",
            ),
        );
    }
}

/// `a Pod`, `an Eviction`.
fn article(kind: &str) -> String {
    match kind.chars().next() {
        Some('A' | 'E' | 'I' | 'O' | 'U') => format!("an {kind}"),
        _ => format!("a {kind}"),
    }
}
