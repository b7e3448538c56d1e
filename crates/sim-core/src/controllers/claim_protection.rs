//! The pvc-protection controller: a claim carries the `kubernetes.io/pvc-protection` finalizer
//! from its create (the StorageObjectInUseProtection admission, `kinds/volume_claim.rs`), and
//! once it is deleted kube-controller-manager removes the finalizer only when no pod that is not
//! terminated uses the claim (pkg/controller/volume/pvcprotection/pvc_protection_controller.go).
//! Until then the claim stays, `Terminating` in `kubectl get pvc`.
//!
//! Why it exists: deleting a claim under a running pod must not pull its volume away on the sim
//! any more than on a cluster. The controller follows claims (a deleted one is checked at once)
//! and pods (a pod that ends or goes releases the claims of its namespace waiting for it).

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use crate::cluster::{Cluster, WatchFrom, Write};

use crate::kinds::volume_claim::PROTECTION_FINALIZER as FINALIZER;

/// Whether a pod that is not terminated in `namespace` mounts the claim `name`.
fn in_use(cluster: &Cluster, namespace: &str, name: &str) -> bool {
    cluster.pods().iter().any(|pod: &std::sync::Arc<Pod>| {
        pod.metadata.namespace.as_deref() == Some(namespace)
            && !matches!(
                pod.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
            && pod
                .spec
                .iter()
                .flat_map(|s| s.volumes.iter().flatten())
                .any(|v| {
                    v.persistent_volume_claim
                        .as_ref()
                        .is_some_and(|c| c.claim_name == name)
                })
    })
}

/// Removes the finalizer of the deleted claim `namespace/name` if no pod uses it. Returns
/// whether the claim still waits (deleted, finalizer kept).
pub fn release_if_unused(cluster: &Cluster, namespace: &str, name: &str) -> bool {
    let Some(stored) = cluster.volume_claim_table().get(namespace, name) else {
        return false;
    };
    let claim: PersistentVolumeClaim = stored.decode();
    let finalizers = claim.metadata.finalizers.clone().unwrap_or_default();
    if claim.metadata.deletion_timestamp.is_none() || !finalizers.iter().any(|f| f == FINALIZER) {
        return false;
    }
    if in_use(cluster, namespace, name) {
        return true;
    }
    let written = cluster.volume_claim_table().write(
        (namespace.to_owned(), name.to_owned()),
        |current| {
            let Some(stored) = current else {
                return Err(());
            };
            let mut claim: PersistentVolumeClaim = stored.decode();
            let mut rest = claim.metadata.finalizers.take().unwrap_or_default();
            rest.retain(|f| f != FINALIZER);
            // The last finalizer gone: the object goes (the generic registry's rule).
            if rest.is_empty() {
                return Ok((Write::Delete(claim), ()));
            }
            claim.metadata.finalizers = Some(rest);
            Ok((Write::Replace(claim), ()))
        },
        |_, _| {},
    );
    written.is_err()
}

/// Starts the controller; it ends by itself when the cluster is dropped.
pub fn spawn(cluster: &Cluster) -> JoinHandle<()> {
    // Watches "from now" never fail.
    let claims = cluster.volume_claim_table().start_watch(WatchFrom::Now);
    let mut pods = cluster.subscribe_pods();
    let weak = cluster.downgrade();
    tokio::spawn(async move {
        let Ok(claims) = claims else {
            return;
        };
        let mut waiting: HashSet<(String, String)> = HashSet::new();
        let mut claim_rx = claims.rx;
        loop {
            // Some(namespace): recheck its waiting claims; a claim event checks that claim.
            let recheck: Option<String> = tokio::select! {
                got = claim_rx.recv() => match got {
                    Ok(event) => {
                        let key = (
                            event.facts.namespace().to_owned(),
                            // Index 0 of every kind's selectable fields is `metadata.name`.
                            event.facts.field(0).to_owned(),
                        );
                        let Some(cluster) = weak.upgrade() else { return };
                        if release_if_unused(&cluster, &key.0, &key.1) {
                            waiting.insert(key);
                        } else {
                            waiting.remove(&key);
                        }
                        None
                    }
                    Err(RecvError::Lagged(_)) => Some(String::new()),
                    Err(RecvError::Closed) => return,
                },
                got = pods.recv() => match got {
                    Ok(change) if waiting.iter().any(|(ns, _)| *ns == change.pod.namespace) => {
                        Some(change.pod.namespace.clone())
                    }
                    Ok(_) => None,
                    Err(RecvError::Lagged(_)) => Some(String::new()),
                    Err(RecvError::Closed) => return,
                },
            };
            let Some(namespace) = recheck else {
                continue;
            };
            let Some(cluster) = weak.upgrade() else {
                return;
            };
            if namespace.is_empty() {
                // Missed events: every deleted claim is looked at again.
                let (all, _) = cluster.volume_claim_table().snapshot(None, None);
                waiting = all
                    .iter()
                    .map(|s| s.decode())
                    .filter(|c| c.metadata.deletion_timestamp.is_some())
                    .map(|c| {
                        (
                            c.metadata.namespace.unwrap_or_default(),
                            c.metadata.name.unwrap_or_default(),
                        )
                    })
                    .collect();
            }
            waiting.retain(|(ns, name)| {
                (!namespace.is_empty() && *ns != namespace) || release_if_unused(&cluster, ns, name)
            });
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::cluster::HistoryLimits;
    use crate::kinds::ApiKind;
    use std::time::Duration;

    async fn until(what: impl Fn() -> bool) {
        tokio::time::timeout(Duration::from_secs(10), async {
            while !what() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("in time");
    }

    #[tokio::test]
    async fn a_deleted_claim_stays_while_a_running_pod_uses_it() {
        let cluster = Cluster::new(HistoryLimits {
            window: Duration::from_secs(60),
            max_events: 1000,
        });
        let _controller = spawn(&cluster);
        let mut claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "data", "namespace": "default", "uid": "c1"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }))
        .unwrap();
        assert!(claim.admit_create().is_empty());
        assert_eq!(
            claim.metadata.finalizers.as_deref(),
            Some(&[FINALIZER.to_owned()][..])
        );
        cluster
            .volume_claim_table()
            .write(
                ("default".to_owned(), "data".to_owned()),
                |_| Ok::<_, ()>((Write::Create(claim), ())),
                |_, _| {},
            )
            .unwrap();
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "user", "namespace": "default", "uid": "p1"},
            "spec": {"containers": [{"name": "main", "image": "busybox"}],
                     "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]},
        }))
        .unwrap();
        cluster
            .write_pod("default", "user", |_| Ok::<_, ()>((Write::Create(pod), ())))
            .unwrap();
        // Deleted (the generic registry sets deletionTimestamp and keeps it for its finalizer).
        cluster
            .volume_claim_table()
            .write(
                ("default".to_owned(), "data".to_owned()),
                |current| -> Result<_, ()> {
                    let mut claim = current.ok_or(())?.decode();
                    claim.metadata.deletion_timestamp = Some(crate::cluster::now_time());
                    Ok((Write::Replace(claim), ()))
                },
                |_, _| {},
            )
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            cluster
                .volume_claim_table()
                .get("default", "data")
                .is_some()
        );
        assert!(cluster.remove_pod("default", "user", "p1"));
        until(|| {
            cluster
                .volume_claim_table()
                .get("default", "data")
                .is_none()
        })
        .await;
    }
}
