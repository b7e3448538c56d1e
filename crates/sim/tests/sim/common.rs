//! Shared helpers of the sim tests.

use k8s_openapi::api::core::v1::Pod;
use podline_sim::{Sim, SimConfig};

/// A plain-HTTP sim without kubelet (pods stay as the test writes them).
pub async fn sim_without_kubelet() -> Sim {
    podline_testkit::start_sim(SimConfig::default().tls(false).kubelet_enabled(false)).await
}

/// A minimal valid pod.
pub fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "demo"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], "restartPolicy": "Never"}
    }))
    .expect("valid pod json")
}
