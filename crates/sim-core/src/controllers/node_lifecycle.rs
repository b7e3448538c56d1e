//! The part of kube-controller-manager's node-lifecycle controller the sim needs: its
//! TaintNodesByCondition pass for `spec.unschedulable`. A cordoned Node gets the
//! `node.kubernetes.io/unschedulable:NoSchedule` taint and an uncordoned one loses it.
//!
//! Why it exists: clients read a node's schedulability from its taints as often as from
//! `spec.unschedulable` (`kubectl describe node` prints them; drain tooling and autoscalers
//! check them), and on a cluster the two always go together. The sim's scheduler treats a
//! cordoned node as having the taint whether or not this controller has written it yet, as
//! kube-scheduler's NodeUnschedulable plugin does.

use k8s_openapi::api::core::v1::{Node, Taint};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use crate::cluster::{ChangeKind, Cluster, WatchFrom, WeakCluster, Write, now_time};

/// The taint that stands for a cordoned node.
pub(crate) const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// The index of `metadata.name` in Node's field-selector fields (`Kind::FIELDS`).
const NAME_FIELD: usize = 0;

/// Starts the controller on `cluster`'s Nodes. It ends by itself when the cluster is dropped.
pub fn spawn(cluster: &Cluster) -> JoinHandle<()> {
    // A watch "from now" never fails.
    let watch = cluster.node_table().start_watch(WatchFrom::Now);
    let weak = cluster.downgrade();
    tokio::spawn(async move {
        let Ok(watch) = watch else {
            return;
        };
        let names = watch
            .initial
            .iter()
            .map(|stored| stored.facts.field(NAME_FIELD).to_owned())
            .collect();
        if !reconcile_all(&weak, names) {
            return;
        }
        let mut rx = watch.rx;
        loop {
            let names = match rx.recv().await {
                Ok(event) if event.kind == ChangeKind::Deleted => continue,
                Ok(event) => vec![event.facts.field(NAME_FIELD).to_owned()],
                Err(RecvError::Lagged(_)) => {
                    let Some(cluster) = weak.upgrade() else {
                        return;
                    };
                    let (nodes, _) = cluster.node_table().snapshot(None, None);
                    nodes
                        .iter()
                        .map(|stored| stored.facts.field(NAME_FIELD).to_owned())
                        .collect()
                }
                Err(RecvError::Closed) => return,
            };
            if !reconcile_all(&weak, names) {
                return;
            }
        }
    })
}

/// Reconciles the named Nodes; false when the cluster is gone.
fn reconcile_all(cluster: &WeakCluster, names: Vec<String>) -> bool {
    let Some(cluster) = cluster.upgrade() else {
        return false;
    };
    for name in names {
        reconcile(&cluster, &name);
    }
    true
}

/// Adds or removes the unschedulable taint so that it is there exactly while the Node is
/// cordoned. Writes nothing when it already agrees (so its own write ends the loop).
fn reconcile(cluster: &Cluster, name: &str) {
    // The closure never fails.
    let _ = cluster.node_table().write(
        (String::new(), name.to_owned()),
        |current| -> Result<_, std::convert::Infallible> {
            let Some(node) = current.map(|stored| stored.decode()) else {
                return Ok((Write::Unchanged, ()));
            };
            Ok(match tainted(node) {
                Some(changed) => (Write::Replace(changed), ()),
                None => (Write::Unchanged, ()),
            })
        },
        |_, _| {},
    );
}

/// The Node with its unschedulable taint in step with `spec.unschedulable`, or None when it is
/// already (a node being deleted is left alone).
fn tainted(mut node: Node) -> Option<Node> {
    if node.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let spec = node.spec.get_or_insert_with(Default::default);
    let cordoned = spec.unschedulable == Some(true);
    let taints = spec.taints.get_or_insert_with(Vec::new);
    let has = taints
        .iter()
        .any(|t| t.key == UNSCHEDULABLE_TAINT && t.effect == "NoSchedule");
    match (cordoned, has) {
        (true, false) => taints.push(Taint {
            key: UNSCHEDULABLE_TAINT.to_owned(),
            effect: "NoSchedule".to_owned(),
            time_added: Some(now_time()),
            value: None,
        }),
        (false, true) => {
            taints.retain(|t| !(t.key == UNSCHEDULABLE_TAINT && t.effect == "NoSchedule"));
        }
        _ => return None,
    }
    if taints.is_empty() {
        spec.taints = None;
    }
    Some(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(unschedulable: Option<bool>, taints: Option<Vec<Taint>>) -> Node {
        Node {
            spec: Some(k8s_openapi::api::core::v1::NodeSpec {
                unschedulable,
                taints,
                ..Default::default()
            }),
            ..Node::default()
        }
    }

    fn keys(node: &Node) -> Vec<String> {
        node.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect()
    }

    #[test]
    fn the_taint_follows_the_cordon_and_other_taints_stay() {
        let gpu = Taint {
            key: "gpu".to_owned(),
            effect: "NoSchedule".to_owned(),
            ..Taint::default()
        };
        let cordoned = tainted(node(Some(true), Some(vec![gpu.clone()]))).expect("a change");
        assert_eq!(
            keys(&cordoned),
            [
                "gpu:NoSchedule",
                "node.kubernetes.io/unschedulable:NoSchedule"
            ]
        );
        let added = &cordoned
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .expect("taints")[1];
        assert!(added.time_added.is_some(), "{added:?}");
        assert!(
            tainted(cordoned.clone()).is_none(),
            "in step: nothing to write"
        );
        let mut uncordoned = cordoned;
        uncordoned.spec.as_mut().expect("spec").unschedulable = Some(false);
        let uncordoned = tainted(uncordoned).expect("a change");
        assert_eq!(keys(&uncordoned), ["gpu:NoSchedule"]);
        assert!(tainted(node(None, None)).is_none());
        let only = tainted(node(Some(true), None)).expect("a change");
        let mut only = only;
        only.spec.as_mut().expect("spec").unschedulable = None;
        let cleared = tainted(only).expect("a change");
        assert_eq!(
            cleared.spec.and_then(|s| s.taints),
            None,
            "no empty list left"
        );
    }
}
