//! The Events the sim's scheduler and kubelet record about pods: who they are about
//! ([`EventSubject`]), how they are built and named as the real event recorder does it, what makes
//! two of them the same for aggregation, and the dictionary they are stored compressed with.

use std::sync::LazyLock;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};

use super::packed::Dictionary;

/// The sim's node unless the kubelet is told otherwise ([`crate::KubeletConfig::node_name`]'s
/// default), which the Event dictionary is built with.
pub(crate) const DEFAULT_NODE_NAME: &str = "sim-node-1";

/// The pod an Event is about, as the Event refers to it.
#[derive(Debug, Clone, Copy)]
pub struct EventSubject<'a> {
    /// The pod's namespace.
    pub namespace: &'a str,
    /// The pod's name.
    pub name: &'a str,
    /// The pod's uid.
    pub uid: &'a str,
    /// The pod's resourceVersion when the Event is recorded.
    pub resource_version: Option<&'a str>,
    /// The node the pod is bound to (the Event's source host), if it is.
    pub node_name: Option<&'a str>,
}

/// What an Event about a pod says: its type, reason, message, the component reporting it and
/// the part of the pod it is about (`involvedObject.fieldPath`, `spec.containers{name}` for a
/// container's events; None for the pod as a whole).
#[derive(Debug, Clone, Copy)]
pub struct PodEventSpec<'a> {
    /// `Normal` or `Warning`.
    pub event_type: &'a str,
    /// The machine-readable reason (`Pulled`, `BackOff`...).
    pub reason: &'a str,
    /// The human-readable message.
    pub message: &'a str,
    /// The reporting component (`kubelet`, `default-scheduler`).
    pub component: &'a str,
    /// The part of the pod the event is about.
    pub field_path: Option<&'a str>,
}

/// What makes two pod events "the same" for aggregation: the pod and the part of it, type,
/// reason, message and reporting component (the real recorder's key, minus what is constant in
/// the sim).
pub(super) struct AggregationKey<'a> {
    pub(super) uid: &'a str,
    pub(super) spec: &'a PodEventSpec<'a>,
}

impl AggregationKey<'_> {
    pub(super) fn hash(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::hash::DefaultHasher::new();
        (
            self.uid,
            self.spec.field_path,
            self.spec.event_type,
            self.spec.reason,
            self.spec.message,
            self.spec.component,
        )
            .hash(&mut hasher);
        hasher.finish()
    }

    /// Whether `event` is the aggregate of this key.
    pub(super) fn matches(&self, event: &Event) -> bool {
        event.involved_object.uid.as_deref() == Some(self.uid)
            && event.involved_object.field_path.as_deref() == self.spec.field_path
            && event.type_.as_deref() == Some(self.spec.event_type)
            && event.reason.as_deref() == Some(self.spec.reason)
            && event.message.as_deref() == Some(self.spec.message)
            && event.reporting_component.as_deref() == Some(self.spec.component)
    }
}

/// The name of an Event about the object `name`, from its suffix.
pub(super) fn event_name(name: &str, suffix: u64) -> String {
    format!("{name}.{suffix:016x}")
}

/// A new core/v1 Event named `name` about `pod`, as the real event recorder writes it.
pub(super) fn pod_event(
    pod: &EventSubject<'_>,
    name: &str,
    spec: &PodEventSpec<'_>,
    now: Timestamp,
) -> Event {
    let PodEventSpec {
        event_type,
        reason,
        message,
        component,
        field_path,
    } = *spec;
    Event {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(pod.namespace.to_owned()),
            uid: Some(uuid::Uuid::new_v4().to_string()),
            creation_timestamp: Some(Time(now)),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Pod".to_owned()),
            name: Some(pod.name.to_owned()),
            namespace: Some(pod.namespace.to_owned()),
            uid: Some(pod.uid.to_owned()),
            resource_version: pod.resource_version.map(str::to_owned),
            field_path: field_path.map(str::to_owned),
        },
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        type_: Some(event_type.to_owned()),
        source: Some(EventSource {
            component: Some(component.to_owned()),
            host: pod.node_name.map(str::to_owned),
        }),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: None::<MicroTime>,
        reporting_component: Some(component.to_owned()),
        reporting_instance: Some(pod.node_name.unwrap_or(component).to_owned()),
        ..Event::default()
    }
}

/// The dictionary Events are stored compressed with: one Event of each kind the simulated
/// scheduler and kubelet record for a pod's life, built exactly as
/// [`super::Cluster::record_pod_event`] builds them (placeholder names and uids), so what a real
/// Event shares with them is its structure and wording.
pub(crate) fn event_dictionary() -> &'static Dictionary {
    static DICTIONARY: LazyLock<Dictionary> = LazyLock::new(|| {
        let node = DEFAULT_NODE_NAME;
        let pod = EventSubject {
            namespace: "default",
            name: "task-0000-abcdefgh",
            uid: "00000000-0000-4000-8000-000000000000",
            resource_version: Some("100000"),
            node_name: Some(node),
        };
        let image = "busybox:1.36";
        let samples = [
            (
                "Normal",
                "Scheduled",
                format!("Successfully assigned default/{} to {node}", pod.name),
                "default-scheduler",
            ),
            (
                "Normal",
                "Pulling",
                format!("Pulling image \"{image}\""),
                "kubelet",
            ),
            (
                "Normal",
                "Pulled",
                format!(
                    "Successfully pulled image \"{image}\" in 1.2s (1.2s including waiting). Image size: 2166802 bytes."
                ),
                "kubelet",
            ),
            (
                "Normal",
                "Created",
                "Created container: task".to_owned(),
                "kubelet",
            ),
            (
                "Normal",
                "Started",
                "Started container task".to_owned(),
                "kubelet",
            ),
            (
                "Normal",
                "Killing",
                "Stopping container task".to_owned(),
                "kubelet",
            ),
            (
                "Warning",
                "Failed",
                format!(
                    "Failed to pull image \"{image}\": rpc error: code = NotFound desc = failed to pull and unpack image"
                ),
                "kubelet",
            ),
            (
                "Warning",
                "BackOff",
                "Back-off restarting failed container task in pod".to_owned(),
                "kubelet",
            ),
        ];
        let mut content = Vec::new();
        for (event_type, reason, message, component) in samples {
            let name = event_name(pod.name, 0x1870_0000_0000_0000);
            let spec = PodEventSpec {
                event_type,
                reason,
                message: &message,
                component,
                field_path: (component == "kubelet").then_some("spec.containers{task}"),
            };
            let event = pod_event(&pod, &name, &spec, Timestamp::UNIX_EPOCH);
            // Invariant: an Event is plain data and writing into a Vec cannot fail.
            serde_json::to_writer(&mut content, &event).expect("Events serialize");
        }
        Dictionary::new(&content)
    });
    &DICTIONARY
}
