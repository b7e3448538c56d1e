//! The volume binder: what kube-controller-manager's persistentvolume-binder controller and a
//! dynamic provisioner (kind's local-path) do together for a claim of a class with
//! `volumeBindingMode: Immediate`: provision a volume and bind the claim to it at once
//! (pkg/controller/volume/persistentvolume/pv_controller.go `syncUnboundClaim`,
//! `provisionClaim`, `bindClaimToVolume`).
//!
//! Why it exists: a pod mounting a claim is scheduled only once its claim is bound, so claims
//! must bind on the sim as they do on kind. What is emulated: the bound claim gets
//! `spec.volumeName` `pvc-<claim uid>` (the provisioner's naming), the annotations
//! `pv.kubernetes.io/bind-completed`, `pv.kubernetes.io/bound-by-controller` and
//! `volume.kubernetes.io/storage-provisioner` (with its beta twin), and a status with phase
//! `Bound`, the claim's access modes and its requested storage as capacity. No
//! PersistentVolume object is made (the sim does not serve that kind); the kubelet backs the
//! volume with a directory. A claim whose class does not exist, or waits for its first consumer,
//! stays Pending.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimStatus};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use crate::cluster::{ChangeKind, Cluster, WatchFrom, Write};
use crate::kinds::storage_class::IMMEDIATE;

/// The name of the volume a claim is bound to (the provisioner's `pvc-<uid>`).
pub fn volume_name(claim_uid: &str) -> String {
    format!("pvc-{claim_uid}")
}

/// Binds the claim `namespace/name` if it is unbound and its class binds at once. Returns
/// whether it bound it.
pub fn bind(cluster: &Cluster, namespace: &str, name: &str) -> bool {
    cluster
        .volume_claim_table()
        .write(
            (namespace.to_owned(), name.to_owned()),
            |current| {
                let Some(stored) = current else {
                    return Err(());
                };
                let mut claim: PersistentVolumeClaim = stored.decode();
                let Some(provisioner) = immediate_provisioner(cluster, &claim) else {
                    return Err(());
                };
                if claim.metadata.deletion_timestamp.is_some()
                    || claim.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Pending")
                {
                    return Err(());
                }
                let uid = claim.metadata.uid.clone().unwrap_or_default();
                let spec = claim.spec.get_or_insert_with(Default::default);
                if spec.volume_name.as_deref().is_some_and(|v| !v.is_empty()) {
                    // Pre-bound to a PersistentVolume the sim does not have: stays Pending.
                    return Err(());
                }
                spec.volume_name = Some(volume_name(&uid));
                let capacity = spec
                    .resources
                    .as_ref()
                    .and_then(|r| r.requests.as_ref())
                    .and_then(|r| r.get("storage"))
                    .map(|q| [("storage".to_owned(), q.clone())].into());
                let access_modes = spec.access_modes.clone();
                let annotations = claim
                    .metadata
                    .annotations
                    .get_or_insert_with(Default::default);
                for (key, value) in [
                    ("pv.kubernetes.io/bind-completed", "yes"),
                    ("pv.kubernetes.io/bound-by-controller", "yes"),
                    (
                        "volume.beta.kubernetes.io/storage-provisioner",
                        provisioner.as_str(),
                    ),
                    (
                        "volume.kubernetes.io/storage-provisioner",
                        provisioner.as_str(),
                    ),
                ] {
                    annotations.insert(key.to_owned(), value.to_owned());
                }
                claim.status = Some(PersistentVolumeClaimStatus {
                    phase: Some("Bound".to_owned()),
                    access_modes,
                    capacity,
                    ..PersistentVolumeClaimStatus::default()
                });
                Ok((Write::Replace(claim), ()))
            },
            |_, _| {},
        )
        .is_ok()
}

/// The provisioner of the claim's class when that class exists and binds at once.
fn immediate_provisioner(cluster: &Cluster, claim: &PersistentVolumeClaim) -> Option<String> {
    let class = claim.spec.as_ref()?.storage_class_name.as_deref()?;
    if class.is_empty() {
        return None;
    }
    let class = cluster.storage_class_table().get("", class)?.decode();
    (class.volume_binding_mode.as_deref().unwrap_or(IMMEDIATE) == IMMEDIATE)
        .then_some(class.provisioner)
}

/// Binds every claim that can be bound now.
fn resync(cluster: &Cluster) {
    let (claims, _) = cluster.volume_claim_table().snapshot(None, None);
    for stored in claims {
        let claim = stored.decode();
        bind(
            cluster,
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            claim.metadata.name.as_deref().unwrap_or_default(),
        );
    }
}

/// Starts the binder, which follows claims and classes (a class made later binds the claims
/// waiting for it). It ends by itself when the cluster is dropped.
pub fn spawn(cluster: &Cluster) -> JoinHandle<()> {
    // Watches "from now" never fail.
    let claims = cluster.volume_claim_table().start_watch(WatchFrom::Now);
    let classes = cluster.storage_class_table().start_watch(WatchFrom::Now);
    resync(cluster);
    let weak = cluster.downgrade();
    tokio::spawn(async move {
        let (Ok(claims), Ok(classes)) = (claims, classes) else {
            return;
        };
        let (mut claim_rx, mut class_rx) = (claims.rx, classes.rx);
        loop {
            // Some(claim key), or None for "look at every claim".
            let todo: Option<Option<(String, String)>> = tokio::select! {
                got = claim_rx.recv() => match got {
                    Ok(event) if event.kind != ChangeKind::Deleted => Some(Some((
                        event.facts.namespace().to_owned(),
                        // Index 0 of every kind's selectable fields is `metadata.name`.
                        event.facts.field(0).to_owned(),
                    ))),
                    Ok(_) => None,
                    Err(RecvError::Lagged(_)) => Some(None),
                    Err(RecvError::Closed) => return,
                },
                got = class_rx.recv() => match got {
                    Ok(event) if event.kind != ChangeKind::Deleted => Some(None),
                    Ok(_) => None,
                    Err(RecvError::Lagged(_)) => Some(None),
                    Err(RecvError::Closed) => return,
                },
            };
            let Some(cluster) = weak.upgrade() else {
                return;
            };
            match todo {
                Some(Some((namespace, name))) => {
                    bind(&cluster, &namespace, &name);
                }
                Some(None) => resync(&cluster),
                None => {}
            }
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::cluster::HistoryLimits;
    use crate::kinds::ApiKind;
    use crate::kinds::storage_class::ensure_default_class;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, VolumeResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::time::Duration;

    fn create(cluster: &Cluster, name: &str, class: Option<&str>) {
        let mut claim = PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("default".to_owned()),
                uid: Some(format!("uid-{name}")),
                ..ObjectMeta::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
                storage_class_name: class.map(str::to_owned),
                resources: Some(VolumeResourceRequirements {
                    requests: Some([("storage".to_owned(), Quantity("1Gi".to_owned()))].into()),
                    ..VolumeResourceRequirements::default()
                }),
                ..PersistentVolumeClaimSpec::default()
            }),
            status: None,
        };
        claim.admit_against(cluster).expect("admitted");
        assert!(claim.admit_create().is_empty());
        cluster
            .volume_claim_table()
            .write(
                ("default".to_owned(), name.to_owned()),
                |_| Ok::<_, ()>((Write::Create(claim), ())),
                |_, _| {},
            )
            .expect("created");
    }

    fn phase(cluster: &Cluster, name: &str) -> Option<String> {
        cluster
            .volume_claim_table()
            .get("default", name)?
            .decode()
            .status?
            .phase
    }

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
    async fn a_claim_of_the_default_class_is_bound_at_once() {
        let cluster = Cluster::new(HistoryLimits {
            window: Duration::from_secs(60),
            max_events: 1000,
        });
        ensure_default_class(&cluster);
        let _binder = spawn(&cluster);
        create(&cluster, "data", None);
        until(|| phase(&cluster, "data").as_deref() == Some("Bound")).await;
        let claim = cluster
            .volume_claim_table()
            .get("default", "data")
            .unwrap()
            .decode();
        let spec = claim.spec.unwrap();
        assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));
        assert_eq!(spec.volume_name.as_deref(), Some("pvc-uid-data"));
        let status = claim.status.unwrap();
        assert_eq!(status.capacity.unwrap()["storage"].0, "1Gi");
        assert_eq!(
            claim.metadata.annotations.unwrap()["volume.kubernetes.io/storage-provisioner"],
            "rancher.io/local-path"
        );
        // A class that does not exist: Pending until it is made.
        create(&cluster, "later", Some("fast"));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(phase(&cluster, "later").as_deref(), Some("Pending"));
        let mut fast = cluster
            .storage_class_table()
            .get("", "standard")
            .unwrap()
            .decode();
        fast.metadata.name = Some("fast".to_owned());
        fast.metadata.annotations = None;
        cluster
            .storage_class_table()
            .write(
                (String::new(), "fast".to_owned()),
                |_| Ok::<_, ()>((Write::Create(fast), ())),
                |_, _| {},
            )
            .expect("created");
        until(|| phase(&cluster, "later").as_deref() == Some("Bound")).await;
    }
}
