//! The parts of kube-controller-manager the API's behaviour rests on, in the sim's process as
//! the kubelet is. Each is a task that follows the cluster's tables and ends by itself when the
//! cluster is dropped; [`spawn_all`] starts the ones that run for the cluster's whole life
//! (the namespace controller runs per Terminating namespace, started by its DELETE).

pub mod claim_protection;
pub mod disruption;
pub mod gc;
pub mod namespace;
pub mod node_lifecycle;
pub mod root_ca;
pub mod service_account;
pub mod volume_binder;

use crate::cluster::Cluster;

/// What the controllers do for a namespace just created, done before its create is answered:
/// its `default` ServiceAccount and its `kube-root-ca.crt` (once the root CA is known). On a
/// cluster these come a moment later, and a pod created in between waits for them (the
/// ServiceAccount admission looks `default` up for up to two seconds; the kubelet retries the
/// mount); doing it at once keeps a pod created right after its namespace from racing them.
pub fn namespace_added(cluster: &Cluster, namespace: &str) {
    service_account::ensure_default(cluster, namespace);
    if let Some(ca) = cluster.root_ca() {
        root_ca::publish(cluster, namespace, &ca);
    }
}

/// Starts the garbage collector, the node lifecycle controller, the disruption controller, the
/// serviceaccount controller, the volume binder and the pvc-protection controller of `cluster`; each ends by itself with the
/// cluster.
pub fn spawn_all(cluster: &Cluster) {
    drop(gc::spawn(cluster));
    drop(node_lifecycle::spawn(cluster));
    drop(disruption::spawn(cluster));
    drop(service_account::spawn(cluster));
    drop(volume_binder::spawn(cluster));
    drop(claim_protection::spawn(cluster));
}
