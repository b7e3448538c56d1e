//! The node's heartbeats, as a real kubelet sends them (the NodeLease feature, GA since 1.17):
//! a Lease named after the node in `kube-node-lease`, renewed every [`RENEW_INTERVAL`], and the
//! Node's conditions re-posted (their `lastHeartbeatTime`) every [`STATUS_REPORT_EVERY`] renewals.
//!
//! Why it exists: tools read node liveness from these two places (`kubectl describe node` prints
//! the Lease's holder and renew time; node-lifecycle logic and dashboards compare the renew time
//! with the lease duration), and a node without a Lease is a node a real cluster would call
//! unhealthy.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use std::time::Duration;

use crate::cluster::{Cluster, Write, now_time};

/// Where kubelets keep their Leases.
pub(crate) const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The kubelet's `nodeLeaseDurationSeconds` default.
const LEASE_DURATION_SECONDS: i32 = 40;

/// How often the kubelet renews its Lease: a quarter of its duration, as the kubelet's lease
/// controller does (`renewInterval` = duration * 0.25).
pub(crate) const RENEW_INTERVAL: Duration = Duration::from_secs(10);

/// Renewals between two reports of the Node's status when nothing changed: the kubelet's
/// `nodeStatusReportFrequency` default (5 min) over [`RENEW_INTERVAL`].
pub(crate) const STATUS_REPORT_EVERY: u64 = 30;

/// Creates or renews the node's Lease: holder and name are the node's, the owner is the Node
/// (so deleting the Node collects its Lease, as kube-controller-manager's collector does), and
/// `renewTime` is now. Skipped while `kube-node-lease` does not exist or is being deleted (a
/// real kubelet's write would be refused and retried at the next renewal).
pub(crate) fn renew_lease(cluster: &Cluster, node_name: &str) {
    let namespace_live = cluster
        .namespace_table()
        .get("", NODE_LEASE_NAMESPACE)
        .is_some_and(|ns| ns.decode().metadata.deletion_timestamp.is_none());
    if !namespace_live {
        return;
    }
    let owner = cluster
        .node_table()
        .get("", node_name)
        .and_then(|node| node.decode().metadata.uid)
        .map(|uid| OwnerReference {
            api_version: "v1".to_owned(),
            kind: "Node".to_owned(),
            name: node_name.to_owned(),
            uid,
            ..OwnerReference::default()
        });
    let now = MicroTime(now_time().0);
    // The closure never fails.
    let _ = cluster.lease_table().write(
        (NODE_LEASE_NAMESPACE.to_owned(), node_name.to_owned()),
        |current| -> Result<_, std::convert::Infallible> {
            let write = match current.map(|stored| stored.decode()) {
                // Being deleted (a finalizer holds it): a real kubelet's update would be
                // refused; it waits for the Lease to go and creates a new one.
                Some(lease) if lease.metadata.deletion_timestamp.is_some() => Write::Unchanged,
                Some(mut lease) => {
                    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                    spec.holder_identity = Some(node_name.to_owned());
                    spec.lease_duration_seconds = Some(LEASE_DURATION_SECONDS);
                    spec.renew_time = Some(now);
                    let owners = lease.metadata.owner_references.get_or_insert_with(Vec::new);
                    if owners.is_empty() {
                        owners.extend(owner);
                    }
                    Write::Replace(lease)
                }
                None => Write::Create(Lease {
                    metadata: ObjectMeta {
                        name: Some(node_name.to_owned()),
                        namespace: Some(NODE_LEASE_NAMESPACE.to_owned()),
                        uid: Some(uuid::Uuid::new_v4().to_string()),
                        creation_timestamp: Some(now_time()),
                        owner_references: owner.map(|owner| vec![owner]),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(node_name.to_owned()),
                        lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
                        renew_time: Some(now),
                        ..LeaseSpec::default()
                    }),
                }),
            };
            Ok((write, ()))
        },
        |_, _| {},
    );
}

/// Re-posts the Node's conditions with a fresh `lastHeartbeatTime` (their statuses and
/// `lastTransitionTime` unchanged), as the kubelet's periodic status report does. Nothing is
/// written while the Node does not exist.
pub(crate) fn report_status(cluster: &Cluster, node_name: &str) {
    let now = now_time();
    // The closure never fails.
    let _ = cluster.node_table().write(
        (String::new(), node_name.to_owned()),
        |current| -> Result<_, std::convert::Infallible> {
            let Some(mut node) = current.map(|stored| stored.decode()) else {
                return Ok((Write::Unchanged, ()));
            };
            if node.metadata.deletion_timestamp.is_some() {
                return Ok((Write::Unchanged, ()));
            }
            let conditions = node
                .status
                .as_mut()
                .and_then(|status| status.conditions.as_mut());
            for condition in conditions.into_iter().flatten() {
                condition.last_heartbeat_time = Some(now.clone());
            }
            Ok((Write::Replace(node), ()))
        },
        |_, _| {},
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::HistoryLimits;

    fn cluster() -> Cluster {
        Cluster::new(HistoryLimits {
            window: Duration::from_secs(75),
            max_events: 1000,
        })
    }

    fn lease(cluster: &Cluster) -> Lease {
        cluster
            .lease_table()
            .get(NODE_LEASE_NAMESPACE, "node-a")
            .expect("the node's lease")
            .decode()
    }

    #[test]
    fn the_lease_is_created_owned_by_the_node_and_renewed() {
        let cluster = cluster();
        super::super::node::register(&cluster, "node-a");
        renew_lease(&cluster, "node-a");
        let first = lease(&cluster);
        let spec = first.spec.clone().expect("spec");
        assert_eq!(spec.holder_identity.as_deref(), Some("node-a"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        let owner = &first.metadata.owner_references.clone().expect("an owner")[0];
        let node_uid = cluster
            .node_table()
            .get("", "node-a")
            .and_then(|n| n.decode().metadata.uid);
        assert_eq!(
            (owner.kind.as_str(), Some(owner.uid.clone())),
            ("Node", node_uid)
        );
        std::thread::sleep(Duration::from_millis(2));
        renew_lease(&cluster, "node-a");
        let second = lease(&cluster);
        assert_eq!(
            second.metadata.uid, first.metadata.uid,
            "renewed, not replaced"
        );
        assert!(
            second.spec.and_then(|s| s.renew_time).map(|t| t.0) > spec.renew_time.map(|t| t.0),
            "renewTime moves on"
        );
    }

    #[test]
    fn no_lease_is_written_without_its_namespace_and_no_owner_without_a_node() {
        let cluster = cluster();
        renew_lease(&cluster, "node-a");
        assert_eq!(lease(&cluster).metadata.owner_references, None);
        let _ = cluster.namespace_table().write(
            (String::new(), NODE_LEASE_NAMESPACE.to_owned()),
            |current| -> Result<_, std::convert::Infallible> {
                Ok((Write::Delete(current.expect("the namespace").decode()), ()))
            },
            |_, _| {},
        );
        let _ = cluster.lease_table().write(
            (NODE_LEASE_NAMESPACE.to_owned(), "node-a".to_owned()),
            |current| -> Result<_, std::convert::Infallible> {
                Ok((Write::Delete(current.expect("the lease").decode()), ()))
            },
            |_, _| {},
        );
        renew_lease(&cluster, "node-a");
        assert!(
            cluster
                .lease_table()
                .get(NODE_LEASE_NAMESPACE, "node-a")
                .is_none()
        );
    }

    #[test]
    fn a_status_report_moves_only_the_heartbeat_times() {
        let cluster = cluster();
        super::super::node::register(&cluster, "node-a");
        let conditions = |cluster: &Cluster| {
            cluster
                .node_table()
                .get("", "node-a")
                .and_then(|n| n.decode().status)
                .and_then(|s| s.conditions)
                .expect("conditions")
        };
        // Heartbeats from long ago (Node times have whole seconds: no waiting for the clock).
        let mut node = cluster
            .node_table()
            .get("", "node-a")
            .expect("registered")
            .decode();
        let long_ago = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2020-01-01T00:00:00Z".parse().expect("a timestamp"),
        );
        for condition in node
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .expect("conditions")
        {
            condition.last_heartbeat_time = Some(long_ago.clone());
        }
        let _ = cluster.node_table().write(
            (String::new(), "node-a".to_owned()),
            |_| -> Result<_, std::convert::Infallible> { Ok((Write::Replace(node), ())) },
            |_, _| {},
        );
        let before = conditions(&cluster);
        report_status(&cluster, "node-a");
        let after = conditions(&cluster);
        assert_eq!(before.len(), after.len());
        for (b, a) in before.iter().zip(&after) {
            assert_eq!((&b.type_, &b.status), (&a.type_, &a.status));
            assert_eq!(b.last_transition_time, a.last_transition_time);
            assert!(
                a.last_heartbeat_time.as_ref().map(|t| t.0)
                    > b.last_heartbeat_time.as_ref().map(|t| t.0)
            );
        }
        report_status(&cluster, "node-b"); // no such node: nothing happens
        assert!(cluster.node_table().get("", "node-b").is_none());
    }
}
