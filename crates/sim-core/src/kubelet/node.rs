//! The Node object the simulated kubelet registers, as a real kubelet does when it starts
//! (`registerWithAPIServer`): its name, the well-known labels, a Ready condition and the system
//! info `kubectl get nodes -o wide` prints. So `kubectl get nodes`, `kubectl describe node` and
//! a client that picks a node to bind to (the conformance suite against an external sim) see
//! one, where a sim without a kubelet, like a control plane without nodes, lists none.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::cluster::{Cluster, Write, now_time};
use crate::controllers::node_lifecycle::UNSCHEDULABLE_TAINT;
use crate::version::GIT_VERSION;

/// The node's IP address: its `InternalIP`, and the `status.hostIP` of its pods.
pub(crate) const HOST_IP: &str = "172.18.0.2";

/// The node's architecture (Go's `GOARCH`): amd64 whatever the host, as `/version`'s
/// `platform` and the labels a pod's `nodeSelector` is matched against (`pod.rs`) say.
const ARCH: &str = "amd64";

/// The node's well-known labels besides its hostname: what a pod's `nodeSelector` is matched
/// against (`pod.rs`), and what its Node object carries (with the older `beta.` forms).
pub(super) const NODE_LABELS: [(&str, &str); 2] =
    [("kubernetes.io/os", "linux"), ("kubernetes.io/arch", ARCH)];

/// What the node says it has, in the units a kubelet reports them in.
pub(super) const CAPACITY: [(&str, &str); 6] = [
    ("cpu", "8"),
    ("ephemeral-storage", "104857600Ki"),
    ("hugepages-1Gi", "0"),
    ("hugepages-2Mi", "0"),
    ("memory", "16777216Ki"),
    ("pods", "110"),
];

/// Registers the node named `node_name` unless it exists (a kubelet restarted on the same
/// cluster finds its node registered, as a real one does).
pub(crate) fn register(cluster: &Cluster, node_name: &str) {
    let node = node(node_name);
    // A node that exists already is kept: `Write::Unchanged`, so this cannot fail.
    let _ = cluster.node_table().write(
        (String::new(), node_name.to_owned()),
        |current| -> Result<_, std::convert::Infallible> {
            Ok(match current {
                Some(_) => (Write::Unchanged, ()),
                None => (Write::Create(node), ()),
            })
        },
        |_, _| {},
    );
}

/// kube-scheduler's FailedScheduling message for a one-node cluster whose node is cordoned.
const CORDONED: &str = "0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.";

/// kube-scheduler's FailedScheduling message when the cluster has no node.
const NO_NODE: &str = "no nodes available to schedule pods";

/// The index of `spec.unschedulable` in Node's field-selector fields (`Kind::FIELDS`).
const UNSCHEDULABLE_FIELD: usize = 1;

/// Why the scheduler can place no new pod with these `tolerations` on the node now, in
/// kube-scheduler's words: the node is cordoned (`spec.unschedulable`), it has a NoSchedule or
/// NoExecute taint the pod does not tolerate (its TaintToleration plugin; PreferNoSchedule
/// only steers a choice this one-node scheduler does not have), or its Node object was
/// deleted. None when it takes the pod. `tolerations` is called only for a cordoned or tainted
/// node, so a plain node costs no pod decode.
pub(crate) fn refusal(
    cluster: &Cluster,
    node_name: &str,
    tolerations: impl FnOnce() -> Vec<Toleration>,
) -> Option<Arc<str>> {
    let Some(stored) = cluster.node_table().get("", node_name) else {
        return Some(NO_NODE.into());
    };
    // Read from the stored field-selector facts and bytes, not by decoding the Node: this
    // runs once per pod the scheduler places.
    let cordoned = stored.facts.field(UNSCHEDULABLE_FIELD) == "true";
    let tainted = contains(&stored.json(), b"\"taints\"");
    if !cordoned && !tainted {
        return None;
    }
    let tolerations = tolerations();
    let unschedulable = Taint {
        key: UNSCHEDULABLE_TAINT.to_owned(),
        effect: "NoSchedule".to_owned(),
        ..Taint::default()
    };
    // Cordoned means this taint, whether or not the node-lifecycle controller wrote it yet
    // (kube-scheduler's NodeUnschedulable plugin): a pod tolerating it, as DaemonSets' pods
    // do, may go on a cordoned node.
    if cordoned && !tolerated(&tolerations, &unschedulable) {
        return Some(CORDONED.into());
    }
    let taints = stored.decode().spec.and_then(|spec| spec.taints);
    let untolerated = taints.iter().flatten().find(|taint| {
        matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !tolerated(&tolerations, taint)
    })?;
    Some(
        format!(
            "0/1 nodes are available: 1 node(s) had untolerated taint {{{}: {}}}. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
            untolerated.key,
            untolerated.value.as_deref().unwrap_or_default()
        )
        .into(),
    )
}

/// Whether one of `tolerations` tolerates `taint` (the API's `Toleration.ToleratesTaint`): the
/// effect matches or is empty, the key matches or is empty, and the operator is `Exists` or
/// `Equal` (the default) with the same value.
fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| {
        let effect = t.effect.as_deref().unwrap_or_default();
        let key = t.key.as_deref().unwrap_or_default();
        (effect.is_empty() || effect == taint.effect)
            && (key.is_empty() || key == taint.key)
            && match t.operator.as_deref().unwrap_or_default() {
                "" | "Equal" => {
                    t.value.as_deref().unwrap_or_default()
                        == taint.value.as_deref().unwrap_or_default()
                }
                "Exists" => true,
                _ => false,
            }
    })
}

/// Whether `haystack` contains `needle`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}

/// The Node object of a freshly registered, ready node.
fn node(name: &str) -> Node {
    let now = now_time();
    let labels: BTreeMap<String, String> = NODE_LABELS
        .iter()
        .flat_map(|(key, value)| {
            let beta = key.replacen("kubernetes.io/", "beta.kubernetes.io/", 1);
            [
                ((*key).to_owned(), (*value).to_owned()),
                (beta, (*value).to_owned()),
            ]
        })
        .chain([("kubernetes.io/hostname".to_owned(), name.to_owned())])
        .collect();
    let condition = |type_: &str, status: &str, reason: &str, message: &str| NodeCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_heartbeat_time: Some(now.clone()),
        last_transition_time: Some(now.clone()),
    };
    let resources: BTreeMap<String, Quantity> = CAPACITY
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
        .collect();
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            uid: Some(uuid::Uuid::new_v4().to_string()),
            creation_timestamp: Some(now.clone()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([
                ("node.alpha.kubernetes.io/ttl".to_owned(), "0".to_owned()),
                (
                    "volumes.kubernetes.io/controller-managed-attach-detach".to_owned(),
                    "true".to_owned(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            pod_cidr: Some("10.244.0.0/24".to_owned()),
            pod_cidrs: Some(vec!["10.244.0.0/24".to_owned()]),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".to_owned(),
                    address: HOST_IP.to_owned(),
                },
                NodeAddress {
                    type_: "Hostname".to_owned(),
                    address: name.to_owned(),
                },
            ]),
            allocatable: Some(resources.clone()),
            capacity: Some(resources),
            conditions: Some(vec![
                condition(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                ),
                condition(
                    "DiskPressure",
                    "False",
                    "KubeletHasNoDiskPressure",
                    "kubelet has no disk pressure",
                ),
                condition(
                    "PIDPressure",
                    "False",
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                ),
                condition(
                    "Ready",
                    "True",
                    "KubeletReady",
                    "kubelet is posting ready status",
                ),
            ]),
            daemon_endpoints: Some(NodeDaemonEndpoints {
                kubelet_endpoint: Some(DaemonEndpoint { port: 10250 }),
            }),
            node_info: Some(NodeSystemInfo {
                architecture: ARCH.to_owned(),
                boot_id: uuid::Uuid::new_v4().to_string(),
                container_runtime_version: concat!("podline-sim://", env!("CARGO_PKG_VERSION"))
                    .to_owned(),
                kernel_version: kernel_version(),
                kube_proxy_version: String::new(),
                kubelet_version: GIT_VERSION.to_owned(),
                machine_id: uuid::Uuid::new_v4().simple().to_string(),
                operating_system: "linux".to_owned(),
                os_image: "podline sim".to_owned(),
                system_uuid: uuid::Uuid::new_v4().to_string(),
                ..NodeSystemInfo::default()
            }),
            ..NodeStatus::default()
        }),
    }
}

/// The host's kernel release (`uname -r`), or `unknown` off Linux.
fn kernel_version() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_node_is_ready_refuses_pods_only_when_cordoned_or_gone_and_is_kept() {
        let cluster = Cluster::new(crate::cluster::HistoryLimits {
            window: std::time::Duration::from_secs(75),
            max_events: 1000,
        });
        register(&cluster, "node-a");
        let first = cluster.node_table().get("", "node-a").expect("registered");
        let node = first.decode();
        let status = node.status.as_ref().expect("status");
        let ready = status
            .conditions
            .as_ref()
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .expect("a Ready condition");
        assert_eq!(ready.status, "True");
        assert_eq!(
            status
                .node_info
                .as_ref()
                .map(|i| i.kubelet_version.as_str()),
            Some(GIT_VERSION)
        );
        assert_eq!(
            node.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("kubernetes.io/hostname"))
                .map(String::as_str),
            Some("node-a")
        );
        let labels = node.metadata.labels.as_ref().expect("labels");
        for key in ["kubernetes.io/arch", "beta.kubernetes.io/arch"] {
            assert_eq!(labels.get(key).map(String::as_str), Some("amd64"), "{key}");
        }
        for key in ["kubernetes.io/os", "beta.kubernetes.io/os"] {
            assert_eq!(labels.get(key).map(String::as_str), Some("linux"), "{key}");
        }
        assert_eq!(refusal(&cluster, "node-a", Vec::new).as_deref(), None);
        assert_eq!(
            refusal(&cluster, "node-b", Vec::new).as_deref(),
            Some(NO_NODE)
        );
        let mut cordoned = node.clone();
        cordoned
            .spec
            .get_or_insert_with(Default::default)
            .unschedulable = Some(true);
        let _ = cluster.node_table().write(
            (String::new(), "node-a".to_owned()),
            |_| -> Result<_, std::convert::Infallible> { Ok((Write::Replace(cordoned), ())) },
            |_, _| {},
        );
        assert_eq!(
            refusal(&cluster, "node-a", Vec::new).as_deref(),
            Some(CORDONED)
        );
        let daemon = || {
            vec![Toleration {
                key: Some(UNSCHEDULABLE_TAINT.to_owned()),
                operator: Some("Exists".to_owned()),
                effect: Some("NoSchedule".to_owned()),
                ..Toleration::default()
            }]
        };
        assert_eq!(
            refusal(&cluster, "node-a", daemon).as_deref(),
            None,
            "a pod tolerating the unschedulable taint goes on a cordoned node"
        );
        register(&cluster, "node-a");
        let again = cluster.node_table().get("", "node-a").expect("kept");
        assert_eq!(
            again.decode().spec.and_then(|s| s.unschedulable),
            Some(true),
            "registering again writes nothing"
        );
    }
    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.to_owned(),
            value: value.map(str::to_owned),
            effect: effect.to_owned(),
            ..Taint::default()
        }
    }

    fn toleration(key: &str, operator: &str, value: Option<&str>, effect: &str) -> Toleration {
        Toleration {
            key: (!key.is_empty()).then(|| key.to_owned()),
            operator: (!operator.is_empty()).then(|| operator.to_owned()),
            value: value.map(str::to_owned),
            effect: (!effect.is_empty()).then(|| effect.to_owned()),
            ..Toleration::default()
        }
    }

    #[test]
    fn tolerations_match_taints_as_the_api_defines_it() {
        let gpu = taint("gpu", Some("a100"), "NoSchedule");
        let cases = [
            (toleration("gpu", "Equal", Some("a100"), "NoSchedule"), true),
            (toleration("gpu", "", Some("a100"), ""), true),
            (
                toleration("gpu", "Equal", Some("h100"), "NoSchedule"),
                false,
            ),
            (toleration("gpu", "Exists", None, ""), true),
            (toleration("gpu", "Exists", None, "NoExecute"), false),
            (toleration("", "Exists", None, ""), true),
            (toleration("cpu", "Exists", None, ""), false),
            (toleration("gpu", "Lt", Some("a100"), ""), false),
        ];
        for (t, expected) in cases {
            assert_eq!(tolerated(std::slice::from_ref(&t), &gpu), expected, "{t:?}");
        }
        let bare = taint("dedicated", None, "NoSchedule");
        assert!(tolerated(
            &[toleration("dedicated", "Equal", None, "")],
            &bare
        ));
    }

    #[test]
    fn a_taint_refuses_the_pods_that_do_not_tolerate_it() {
        let cluster = Cluster::new(crate::cluster::HistoryLimits {
            window: std::time::Duration::from_secs(75),
            max_events: 1000,
        });
        register(&cluster, "node-a");
        let mut node = cluster
            .node_table()
            .get("", "node-a")
            .expect("registered")
            .decode();
        node.spec.get_or_insert_with(Default::default).taints = Some(vec![
            taint("soft", Some("x"), "PreferNoSchedule"),
            taint("gpu", Some("a100"), "NoSchedule"),
        ]);
        let _ = cluster.node_table().write(
            (String::new(), "node-a".to_owned()),
            |_| -> Result<_, std::convert::Infallible> { Ok((Write::Replace(node), ())) },
            |_, _| {},
        );
        assert_eq!(
            refusal(&cluster, "node-a", Vec::new).as_deref(),
            Some(
                "0/1 nodes are available: 1 node(s) had untolerated taint {gpu: a100}. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
            )
        );
        let tolerant = || vec![toleration("gpu", "Equal", Some("a100"), "NoSchedule")];
        assert_eq!(
            refusal(&cluster, "node-a", tolerant).as_deref(),
            None,
            "PreferNoSchedule never refuses"
        );
    }
}
