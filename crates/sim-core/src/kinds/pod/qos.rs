//! `status.qosClass` of a pod, computed the way kube-apiserver's `GetPodQOS` does (1.32, without
//! pod-level resources): over regular and init containers, counting only cpu and memory.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use crate::quantity::Quantity;

/// The pod's QoS class: `Guaranteed`, `Burstable` or `BestEffort`.
pub fn pod_qos(pod: &Pod) -> &'static str {
    let Some(spec) = pod.spec.as_ref() else {
        return "BestEffort";
    };
    let mut requests: BTreeMap<&str, i128> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i128> = BTreeMap::new();
    let mut guaranteed = true;
    let positive = |q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity| {
        Quantity::parse(&q.0).map(|q| q.nanos).filter(|n| *n > 0)
    };
    for container in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        let Some(resources) = container.resources.as_ref() else {
            guaranteed = false;
            continue;
        };
        for (name, quantity) in resources.requests.iter().flatten() {
            let name = name.as_str();
            if let ("cpu" | "memory", Some(n)) = (name, positive(quantity)) {
                *requests.entry(name).or_default() += n;
            }
        }
        let mut found = 0;
        for (name, quantity) in resources.limits.iter().flatten() {
            let name = name.as_str();
            if let ("cpu" | "memory", Some(n)) = (name, positive(quantity)) {
                found += 1;
                *limits.entry(name).or_default() += n;
            }
        }
        if found < 2 {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed
        && requests.iter().all(|(name, n)| limits.get(name) == Some(n))
        && requests.len() == limits.len()
    {
        return "Guaranteed";
    }
    "Burstable"
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_with(containers: serde_json::Value, init: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": containers, "initContainers": init}
        }))
        .expect("pod")
    }

    #[test]
    fn the_class_follows_requests_and_limits_of_every_container() {
        let both = json!({"cpu": "100m", "memory": "64Mi"});
        let guaranteed = json!([{"name": "a", "resources": {"requests": both, "limits": both}}]);
        assert_eq!(
            pod_qos(&pod_with(guaranteed.clone(), json!([]))),
            "Guaranteed"
        );
        // An init container without limits makes the pod Burstable.
        let init = json!([{"name": "i", "resources": {"requests": {"cpu": "1"}}}]);
        assert_eq!(pod_qos(&pod_with(guaranteed, init)), "Burstable");
        // Only a cpu limit is not enough for Guaranteed.
        let cpu_only =
            json!([{"name": "a", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}]);
        assert_eq!(pod_qos(&pod_with(cpu_only, json!([]))), "Burstable");
        // Zero quantities and other resources do not count.
        let zero =
            json!([{"name": "a", "resources": {"requests": {"cpu": "0", "nvidia.com/gpu": "1"}}}]);
        assert_eq!(pod_qos(&pod_with(zero, json!([]))), "BestEffort");
        // Equal in value, written differently.
        let spelled = json!([{"name": "a", "resources": {"requests": {"cpu": "0.1", "memory": "1Gi"}, "limits": {"cpu": "100m", "memory": "1024Mi"}}}]);
        assert_eq!(pod_qos(&pod_with(spelled, json!([]))), "Guaranteed");
    }
}
