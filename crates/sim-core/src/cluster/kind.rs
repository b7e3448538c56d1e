//! [`Kind`]: what the object store needs to know about each resource it serves, and
//! [`GenericObject`], the schemaless object used for custom resources (workflowtaskresults).

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Namespace, Node, Pod, PodCondition};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::packed::Dictionary;

/// A resource kind the sim stores: its names on the wire and how to reach its metadata.
pub trait Kind:
    Clone + Default + Serialize + DeserializeOwned + Send + Sync + std::fmt::Debug + 'static
{
    /// `kind` of one object, e.g. `Pod`.
    const KIND: &'static str;
    /// `kind` of a list, e.g. `PodList`.
    const LIST_KIND: &'static str;
    /// `apiVersion`, e.g. `v1` or `coordination.k8s.io/v1`.
    const API_VERSION: &'static str;
    /// The plural resource name in URLs, e.g. `pods`.
    const RESOURCE: &'static str;
    /// Whether objects live in a namespace.
    const NAMESPACED: bool;
    /// The fields field selectors may name (each answered by [`Kind::field`]).
    const FIELDS: &'static [&'static str] = &["metadata.name", "metadata.namespace"];

    /// The dictionary objects of this kind are stored compressed with, for kinds kept by the
    /// hundred thousand and rarely read (see `packed.rs`); None (the default) stores plain JSON.
    fn dictionary() -> Option<&'static Dictionary> {
        None
    }

    /// Whether objects of this kind are stored compressed once idle (see `table.rs`): kinds
    /// kept by the hundred thousand, written a few times early in their life and then mostly
    /// left alone (pods). Their writes stay uncompressed.
    const PACK_IDLE: bool = false;

    /// Writes the object's JSON as kube-apiserver answers it; serde's serialization unless a
    /// kind's wire form has fields serde leaves out (pods: see `impl Kind for Pod`).
    fn write_json(&self, buf: &mut Vec<u8>) {
        // Invariant: the stored kinds are plain data (string map keys, no fallible Serialize
        // impls), and writing into a Vec cannot fail, so serialization cannot fail.
        serde_json::to_writer(buf, self).expect("k8s objects always serialize");
    }

    /// The object's metadata.
    fn meta(&self) -> &ObjectMeta;
    /// The object's metadata, mutable.
    fn meta_mut(&mut self) -> &mut ObjectMeta;
    /// Value of a field for field selectors (`metadata.name`, `status.phase`...); None when the
    /// kind does not support that field.
    fn field(&self, field: &str) -> Option<String> {
        match field {
            "metadata.name" => Some(self.meta().name.clone().unwrap_or_default()),
            "metadata.namespace" => Some(self.meta().namespace.clone().unwrap_or_default()),
            _ => None,
        }
    }
}

impl Kind for Pod {
    const KIND: &'static str = "Pod";
    const LIST_KIND: &'static str = "PodList";
    const API_VERSION: &'static str = "v1";
    const RESOURCE: &'static str = "pods";
    const NAMESPACED: bool = true;
    const PACK_IDLE: bool = true;
    const FIELDS: &'static [&'static str] = &[
        "metadata.name",
        "metadata.namespace",
        "status.phase",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "status.podIP",
    ];
    /// A pod condition's `lastProbeTime` and `lastTransitionTime` are `metav1.Time` structs,
    /// which Go's `omitempty` never omits: kube-apiserver writes `null` for unset ones (k8s.io/api
    /// `core/v1/types.go` `PodCondition`; metav1 `Time.MarshalJSON`), where serde leaves them out.
    fn write_json(&self, buf: &mut Vec<u8>) {
        // Invariant: as the default `write_json`, a pod always serializes.
        let start = buf.len();
        serde_json::to_writer(&mut *buf, self).expect("k8s objects always serialize");
        if let Some(conditions) = self
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .filter(|c| !c.is_empty())
        {
            go_conditions(buf, start, conditions);
        }
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
    fn field(&self, field: &str) -> Option<String> {
        match field {
            "status.phase" => Some(
                self.status
                    .as_ref()
                    .and_then(|s| s.phase.clone())
                    .unwrap_or_default(),
            ),
            "spec.nodeName" => Some(
                self.spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default(),
            ),
            "spec.restartPolicy" => Some(
                self.spec
                    .as_ref()
                    .and_then(|s| s.restart_policy.clone())
                    .unwrap_or_default(),
            ),
            "spec.serviceAccountName" => Some(
                self.spec
                    .as_ref()
                    .and_then(|s| s.service_account_name.clone())
                    .unwrap_or_default(),
            ),
            "status.podIP" => Some(
                self.status
                    .as_ref()
                    .and_then(|s| s.pod_ip.clone())
                    .unwrap_or_default(),
            ),
            _ => match field {
                "metadata.name" => Some(self.metadata.name.clone().unwrap_or_default()),
                "metadata.namespace" => Some(self.metadata.namespace.clone().unwrap_or_default()),
                _ => None,
            },
        }
    }
}

/// Rewrites the `status.conditions` of the pod serialized at `buf[start..]` the way Go writes
/// them: unset `lastProbeTime` and `lastTransitionTime` as `null` (see `impl Kind for Pod`).
///
/// Only that array is rewritten, in place: a pod's `status` is its last field and `conditions`
/// the first field of a status (k8s-openapi writes fields in alphabetical order), so the array
/// starts right after the last `"status":{"conditions":` of the text (an unescaped `"` never
/// occurs inside a JSON string) and is exactly as long as `conditions` serialized alone. Each
/// condition is then written with the two times first (they sort first) and the rest of its
/// fields as serde writes them.
fn go_conditions(buf: &mut Vec<u8>, start: usize, conditions: &[PodCondition]) {
    const PREFIX: &[u8] = br#""status":{"conditions":"#;
    // Invariant (as above): conditions serialize.
    let as_serde = serde_json::to_vec(conditions).expect("k8s objects always serialize");
    let Some(at) = memchr::memmem::rfind(&buf[start..], PREFIX).map(|i| start + i + PREFIX.len())
    else {
        return;
    };
    if buf.get(at..at + as_serde.len()) != Some(&as_serde[..]) {
        return;
    }
    let mut go = Vec::with_capacity(as_serde.len() + 64 * conditions.len());
    go.push(b'[');
    for (i, condition) in conditions.iter().enumerate() {
        if i > 0 {
            go.push(b',');
        }
        go.extend_from_slice(br#"{"lastProbeTime":"#);
        serde_json::to_writer(&mut go, &condition.last_probe_time).expect("times serialize");
        go.extend_from_slice(br#","lastTransitionTime":"#);
        serde_json::to_writer(&mut go, &condition.last_transition_time).expect("times serialize");
        let rest = PodCondition {
            last_probe_time: None,
            last_transition_time: None,
            ..condition.clone()
        };
        let rest = serde_json::to_vec(&rest).expect("k8s objects always serialize");
        // `rest` is `{...}`: append its fields (if any) after the times.
        if rest.len() > 2 {
            go.push(b',');
        }
        go.extend_from_slice(&rest[1..]);
    }
    go.push(b']');
    buf.splice(at..at + as_serde.len(), go);
}

impl Kind for Namespace {
    const KIND: &'static str = "Namespace";
    const LIST_KIND: &'static str = "NamespaceList";
    const API_VERSION: &'static str = "v1";
    const RESOURCE: &'static str = "namespaces";
    const NAMESPACED: bool = false;
    const FIELDS: &'static [&'static str] = &["metadata.name", "status.phase"];
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
    fn field(&self, field: &str) -> Option<String> {
        match field {
            "metadata.name" => Some(self.metadata.name.clone().unwrap_or_default()),
            "status.phase" => Some(
                self.status
                    .as_ref()
                    .and_then(|s| s.phase.clone())
                    .unwrap_or_default(),
            ),
            _ => None,
        }
    }
}

impl Kind for Node {
    const KIND: &'static str = "Node";
    const LIST_KIND: &'static str = "NodeList";
    const API_VERSION: &'static str = "v1";
    const RESOURCE: &'static str = "nodes";
    const NAMESPACED: bool = false;
    const FIELDS: &'static [&'static str] = &["metadata.name", "spec.unschedulable"];
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
    fn field(&self, field: &str) -> Option<String> {
        match field {
            "metadata.name" => Some(self.metadata.name.clone().unwrap_or_default()),
            "spec.unschedulable" => Some(
                self.spec
                    .as_ref()
                    .and_then(|s| s.unschedulable)
                    .unwrap_or(false)
                    .to_string(),
            ),
            _ => None,
        }
    }
}

impl Kind for Event {
    const KIND: &'static str = "Event";
    const LIST_KIND: &'static str = "EventList";
    const API_VERSION: &'static str = "v1";
    const RESOURCE: &'static str = "events";
    const NAMESPACED: bool = true;
    fn dictionary() -> Option<&'static Dictionary> {
        Some(super::events::event_dictionary())
    }
    const FIELDS: &'static [&'static str] = &[
        "metadata.name",
        "metadata.namespace",
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ];
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
    fn field(&self, field: &str) -> Option<String> {
        let io = &self.involved_object;
        let v = match field {
            "metadata.name" => self.metadata.name.clone(),
            "metadata.namespace" => self.metadata.namespace.clone(),
            "involvedObject.kind" => io.kind.clone(),
            "involvedObject.namespace" => io.namespace.clone(),
            "involvedObject.name" => io.name.clone(),
            "involvedObject.uid" => io.uid.clone(),
            "involvedObject.apiVersion" => io.api_version.clone(),
            "involvedObject.resourceVersion" => io.resource_version.clone(),
            "involvedObject.fieldPath" => io.field_path.clone(),
            "reason" => self.reason.clone(),
            "reportingComponent" => self.reporting_component.clone(),
            "source" => self.source.as_ref().and_then(|s| s.component.clone()),
            "type" => self.type_.clone(),
            _ => return None,
        };
        Some(v.unwrap_or_default())
    }
}

impl Kind for Lease {
    const KIND: &'static str = "Lease";
    const LIST_KIND: &'static str = "LeaseList";
    const API_VERSION: &'static str = "coordination.k8s.io/v1";
    const RESOURCE: &'static str = "leases";
    const NAMESPACED: bool = true;
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl Kind for PodDisruptionBudget {
    const KIND: &'static str = "PodDisruptionBudget";
    const LIST_KIND: &'static str = "PodDisruptionBudgetList";
    const API_VERSION: &'static str = "policy/v1";
    const RESOURCE: &'static str = "poddisruptionbudgets";
    const NAMESPACED: bool = true;
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A schemaless namespaced object (apiVersion, kind, metadata, and any other fields), the way the
/// real server stores custom resources without a schema.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct GenericObject {
    /// `apiVersion` as sent by the client.
    #[serde(rename = "apiVersion", default)]
    pub api_version: String,
    /// `kind` as sent by the client.
    #[serde(default)]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Every other top-level field (`spec`, `status`, ...), kept as is.
    #[serde(flatten)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

/// Argo Workflows' `WorkflowTaskResult` (argoproj.io/v1alpha1), stored schemaless.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(transparent)]
pub struct WorkflowTaskResult(pub GenericObject);

impl Kind for WorkflowTaskResult {
    const KIND: &'static str = "WorkflowTaskResult";
    const LIST_KIND: &'static str = "WorkflowTaskResultList";
    const API_VERSION: &'static str = "argoproj.io/v1alpha1";
    const RESOURCE: &'static str = "workflowtaskresults";
    const NAMESPACED: bool = true;
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields_are_answered<K: Kind>() {
        let probe = K::default();
        for field in K::FIELDS {
            assert!(probe.field(field).is_some(), "{} {field}", K::KIND);
        }
        assert!(probe.field("spec.nope").is_none(), "{}", K::KIND);
    }

    /// The condition times go in as `null` where unset, in place, and the rest of the pod is
    /// serde's bytes: what rewriting the whole pod as a `Value` tree gave.
    #[test]
    fn a_pods_unset_condition_times_are_written_as_null() {
        use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

        let set = Time(jiff::Timestamp::from_second(1_764_561_600).expect("a valid time"));
        let mut pod = Pod::default();
        pod.metadata.name = Some("web".into());
        // A string that looks like the pattern must not be taken for it.
        pod.metadata.annotations =
            Some([("x".into(), r#""status":{"conditions":[]"#.into())].into());
        pod.spec = Some(PodSpec::default());
        pod.status = Some(PodStatus {
            conditions: Some(vec![
                PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(set.clone()),
                    ..PodCondition::default()
                },
                PodCondition {
                    type_: "PodScheduled".into(),
                    status: "True".into(),
                    last_probe_time: Some(set),
                    reason: Some("r".into()),
                    ..PodCondition::default()
                },
            ]),
            phase: Some("Running".into()),
            ..PodStatus::default()
        });
        let mut expected = serde_json::to_value(&pod).expect("serializes");
        for condition in expected
            .pointer_mut("/status/conditions")
            .and_then(serde_json::Value::as_array_mut)
            .expect("conditions")
            .iter_mut()
            .filter_map(serde_json::Value::as_object_mut)
        {
            for time in ["lastProbeTime", "lastTransitionTime"] {
                condition.entry(time).or_insert(serde_json::Value::Null);
            }
        }
        let mut buf = b"prefix".to_vec();
        pod.write_json(&mut buf);
        assert_eq!(&buf[..6], b"prefix");
        assert_eq!(
            std::str::from_utf8(&buf[6..]).expect("UTF-8"),
            serde_json::to_string(&expected).expect("serializes")
        );
        let mut plain = Vec::new();
        pod.status.as_mut().expect("status").conditions = None;
        pod.write_json(&mut plain);
        assert_eq!(plain, serde_json::to_vec(&pod).expect("serializes"));
    }

    #[test]
    fn every_listed_field_is_answered() {
        fields_are_answered::<Pod>();
        fields_are_answered::<Namespace>();
        fields_are_answered::<Event>();
        fields_are_answered::<Lease>();
        fields_are_answered::<WorkflowTaskResult>();
    }
}
