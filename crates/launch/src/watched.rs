//! [`WatchedPod`]: the part of a pod the launcher's watches decode.
//!
//! Why not the whole [`Pod`]: a launch reads a pod's metadata and status from its watch, and from
//! the spec only the node name and the container names; the rest of the spec (commands, env,
//! resources, volumes, tolerations, probes...) is what the launcher itself sent. With 200 tasks in
//! flight one shared watch carries about ten thousand pod events a second, and decoding (then
//! cloning and dropping) every spec's containers was a large share of the launcher's CPU, which
//! on a busy machine shows as latency. serde skips the fields a [`WatchedSpec`] does not name
//! without allocating for them.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

/// A pod as a watch event or list item carries it, minus the spec fields the launcher never
/// reads from a watch. Requests for it go to the `pods` resource like [`Pod`]'s.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct WatchedPod {
    /// The pod's metadata, whole.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The node name and container names only.
    #[serde(default)]
    pub spec: Option<WatchedSpec>,
    /// The pod's status, whole.
    #[serde(default)]
    pub status: Option<PodStatus>,
}

/// The fields of a pod's spec the launcher reads from its watch.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchedSpec {
    /// Set once the pod is scheduled.
    #[serde(default)]
    pub node_name: Option<String>,
    /// The containers, by name (for [`LogMode::AllContainers`](crate::LogMode::AllContainers)
    /// logs and the main container).
    #[serde(default)]
    pub containers: Vec<NamedContainer>,
}

/// A container of the spec, by name only.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NamedContainer {
    /// The container's name.
    pub name: String,
}

impl From<WatchedPod> for Pod {
    /// A [`Pod`] whose spec holds only the node name and the container names (everything else
    /// at its default), so that code written for pods reads a watched one unchanged.
    fn from(watched: WatchedPod) -> Pod {
        Pod {
            metadata: watched.metadata,
            spec: watched.spec.map(|spec| PodSpec {
                node_name: spec.node_name,
                containers: spec
                    .containers
                    .into_iter()
                    .map(|c| Container {
                        name: c.name,
                        ..Container::default()
                    })
                    .collect(),
                ..PodSpec::default()
            }),
            status: watched.status,
        }
    }
}

impl k8s_openapi::Resource for WatchedPod {
    const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <Pod as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for WatchedPod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watched_pod_keeps_metadata_status_node_and_container_names() {
        let json = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7",
                         "labels": {"podline.dev/launch-id": "abc"}},
            "spec": {
                "nodeName": "node-1",
                "restartPolicy": "Never",
                "containers": [
                    {"name": "main", "image": "busybox", "command": ["sh"],
                     "env": [{"name": "SECRET", "value": "s3cr3t"}]},
                    {"name": "side", "image": "busybox"}
                ],
                "tolerations": [{"key": "k", "operator": "Exists"}]
            },
            "status": {"phase": "Running",
                       "containerStatuses": [{"name": "main", "ready": true, "restartCount": 0,
                                              "image": "busybox", "imageID": ""}]}
        });
        let watched: WatchedPod = serde_json::from_value(json.clone()).expect("decodes");
        let pod = Pod::from(watched);
        let full: Pod = serde_json::from_value(json).expect("decodes");
        assert_eq!(pod.metadata, full.metadata);
        assert_eq!(pod.status, full.status);
        let spec = pod.spec.expect("a spec");
        assert_eq!(spec.node_name.as_deref(), Some("node-1"));
        let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["main", "side"]);
        // What the launcher does not read is not kept.
        assert!(spec.containers[0].env.is_none() && spec.tolerations.is_none());
    }

    #[test]
    fn a_pod_without_spec_or_status_decodes() {
        let watched: WatchedPod =
            serde_json::from_str(r#"{"metadata":{"name":"p"}}"#).expect("decodes");
        let pod = Pod::from(watched);
        assert!(pod.spec.is_none() && pod.status.is_none());
    }
}
