//! The root-ca-cert-publisher: kube-controller-manager keeps a ConfigMap `kube-root-ca.crt` in
//! every active namespace holding the cluster's CA bundle under `ca.crt`, makes it again when
//! it is deleted and puts its data back when it is changed
//! (pkg/controller/certificates/rootcacertpublisher/publisher.go).
//!
//! Why it exists: every pod on a cluster mounts it (the `kube-api-access-*` projected volume
//! names it), and pods that mount it themselves must find it on the sim too. Like the
//! serviceaccount controller, [`spawn`] publishes into the namespaces that exist already before
//! it returns.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use crate::cluster::{ChangeKind, Cluster, WatchFrom, Write, now_time};

/// The ConfigMap's name.
pub const NAME: &str = "kube-root-ca.crt";

/// The key of the CA bundle.
pub const KEY: &str = "ca.crt";

/// The description annotation the publisher sets.
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// Makes or repairs `kube-root-ca.crt` in `namespace` (not in one that is gone or being
/// deleted). Returns whether it wrote.
pub fn publish(cluster: &Cluster, namespace: &str, ca: &str) -> bool {
    if !cluster.namespace_exists(namespace) || super::namespace::is_terminating(cluster, namespace)
    {
        return false;
    }
    let data = Some([(KEY.to_owned(), ca.to_owned())].into());
    cluster
        .config_map_table()
        .write(
            (namespace.to_owned(), NAME.to_owned()),
            |current| match current {
                Some(stored) => {
                    let mut cm: ConfigMap = stored.decode();
                    if cm.data == data && cm.binary_data.is_none() {
                        return Err(());
                    }
                    cm.data = data;
                    cm.binary_data = None;
                    Ok((Write::Replace(cm), ()))
                }
                None => Ok((
                    Write::Create(ConfigMap {
                        metadata: ObjectMeta {
                            name: Some(NAME.to_owned()),
                            namespace: Some(namespace.to_owned()),
                            uid: Some(uuid::Uuid::new_v4().to_string()),
                            creation_timestamp: Some(now_time()),
                            annotations: Some(
                                [(
                                    "kubernetes.io/description".to_owned(),
                                    DESCRIPTION.to_owned(),
                                )]
                                .into(),
                            ),
                            ..ObjectMeta::default()
                        },
                        data,
                        ..ConfigMap::default()
                    }),
                    (),
                )),
            },
            |_, _| {},
        )
        .is_ok()
}

fn resync(cluster: &Cluster, ca: &str) {
    let (namespaces, _) = cluster.namespace_table().snapshot(None, None);
    for stored in namespaces {
        publish(
            cluster,
            &stored.decode().metadata.name.unwrap_or_default(),
            ca,
        );
    }
}

/// Publishes `ca` into the namespaces that exist now, then follows namespaces and ConfigMaps.
/// It ends by itself when the cluster is dropped.
pub fn spawn(cluster: &Cluster, ca: String) -> JoinHandle<()> {
    cluster.set_root_ca(&ca);
    // Watches "from now" never fail.
    let namespaces = cluster.namespace_table().start_watch(WatchFrom::Now);
    let maps = cluster.config_map_table().start_watch(WatchFrom::Now);
    resync(cluster, &ca);
    let weak = cluster.downgrade();
    tokio::spawn(async move {
        let (Ok(namespaces), Ok(maps)) = (namespaces, maps) else {
            return;
        };
        let (mut ns_rx, mut cm_rx) = (namespaces.rx, maps.rx);
        loop {
            // Some(namespace), or None: nothing to do; a lag resyncs.
            let namespace = tokio::select! {
                got = ns_rx.recv() => match got {
                    // Index 0 of every kind's selectable fields is `metadata.name`.
                    Ok(event) if event.kind == ChangeKind::Added => Some(event.facts.field(0).to_owned()),
                    Ok(_) => None,
                    Err(RecvError::Lagged(_)) => Some(String::new()),
                    Err(RecvError::Closed) => return,
                },
                got = cm_rx.recv() => match got {
                    Ok(event) if event.facts.field(0) == NAME => Some(event.facts.namespace().to_owned()),
                    Ok(_) => None,
                    Err(RecvError::Lagged(_)) => Some(String::new()),
                    Err(RecvError::Closed) => return,
                },
            };
            let Some(cluster) = weak.upgrade() else {
                return;
            };
            match namespace.as_deref() {
                Some("") => resync(&cluster, &ca),
                Some(namespace) => {
                    publish(&cluster, namespace, &ca);
                }
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
    use std::time::Duration;

    fn published(cluster: &Cluster, namespace: &str) -> Option<String> {
        cluster
            .config_map_table()
            .get(namespace, NAME)?
            .decode()
            .data?
            .remove(KEY)
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
    async fn every_namespace_gets_the_ca_and_keeps_it() {
        let cluster = Cluster::new(HistoryLimits {
            window: Duration::from_secs(60),
            max_events: 1000,
        });
        let _publisher = spawn(&cluster, "PEM".to_owned());
        assert_eq!(published(&cluster, "default").as_deref(), Some("PEM"));
        assert!(cluster.create_namespace("team-a"));
        until(|| published(&cluster, "team-a").is_some()).await;
        cluster
            .config_map_table()
            .write(
                ("team-a".to_owned(), NAME.to_owned()),
                |current| -> Result<_, ()> {
                    let mut cm = current.ok_or(())?.decode();
                    cm.data = Some([(KEY.to_owned(), "changed".to_owned())].into());
                    Ok((Write::Replace(cm), ()))
                },
                |_, _| {},
            )
            .expect("changed");
        until(|| published(&cluster, "team-a").as_deref() == Some("PEM")).await;
        cluster
            .config_map_table()
            .write(
                ("team-a".to_owned(), NAME.to_owned()),
                |current| Ok::<_, ()>((Write::Delete(current.ok_or(())?.decode()), ())),
                |_, _| {},
            )
            .expect("deleted");
        until(|| published(&cluster, "team-a").is_some()).await;
    }
}
