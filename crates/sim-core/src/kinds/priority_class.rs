//! PriorityClasses (`scheduling.k8s.io/v1`, cluster-scoped) and the Priority admission of pods,
//! as kube-apiserver 1.32 has them.
//!
//! Why it exists: real pod specs name a `priorityClassName` (often `system-cluster-critical` or
//! `system-node-critical`); on a cluster an unknown name is refused and a known one resolves to
//! `spec.priority`, so a client that gets either wrong must fail on the sim as it would there.
//!
//! - The two system classes exist from the start (kube-apiserver's scheduling storage makes them
//!   in a post-start hook, pkg/registry/scheduling/rest/storage_scheduling.go):
//!   `system-node-critical` (2000001000) and `system-cluster-critical` (2000000000).
//! - `ValidatePriorityClass` (pkg/apis/scheduling/validation/validation.go): names starting
//!   with `system-` are reserved for those, a user class's value is at most 1000000000; on
//!   update `value` and `preemptionPolicy` cannot change. `preemptionPolicy` defaults to
//!   `PreemptLowerPriority`.
//! - The Priority admission (plugin/pkg/admission/priority/admission.go), on pod create: a
//!   named class that does not exist is 403 `no PriorityClass with name <n> was found`; else the
//!   class's value (or the lowest-valued global default's, or 0 without one) becomes
//!   `spec.priority`, its preemption policy `spec.preemptionPolicy`, and a pod that brought a
//!   different priority of its own is 403 as well.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::ApiKind;
use crate::cluster::{Cluster, Kind, Table, Write, now_time};
use crate::part::Part;
use crate::status::ApiError;
use crate::validation::{Causes, validate_meta};

/// The system classes kube-apiserver makes: (name, value, description).
pub const SYSTEM_CLASSES: [(&str, i32, &str); 2] = [
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

/// `HighestUserDefinablePriority`.
const HIGHEST_USER_PRIORITY: i32 = 1_000_000_000;

/// The default preemption policy.
const PREEMPT_LOWER: &str = "PreemptLowerPriority";

impl Kind for PriorityClass {
    const KIND: &'static str = "PriorityClass";
    const LIST_KIND: &'static str = "PriorityClassList";
    const API_VERSION: &'static str = "scheduling.k8s.io/v1";
    const RESOURCE: &'static str = "priorityclasses";
    const NAMESPACED: bool = false;
    const FIELDS: &'static [&'static str] = &["metadata.name"];
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
    fn field(&self, field: &str) -> Option<String> {
        (field == "metadata.name").then(|| self.metadata.name.clone().unwrap_or_default())
    }
}

impl ApiKind for PriorityClass {
    const GROUP: &'static str = "scheduling.k8s.io";
    fn table(cluster: &Cluster) -> &Table<Self> {
        cluster.priority_class_table()
    }
    fn admit_create(&mut self) -> Causes {
        self.preemption_policy
            .get_or_insert_with(|| PREEMPT_LOWER.to_owned());
        validate(self)
    }
    fn admit_update(&mut self, old: &Self, _part: Part) -> Causes {
        self.preemption_policy
            .get_or_insert_with(|| PREEMPT_LOWER.to_owned());
        let mut causes = validate(self);
        if self.value != old.value {
            causes.forbidden("value", "may not be changed in an update.");
        }
        if self.preemption_policy != old.preemption_policy {
            causes.invalid(
                "preemptionPolicy",
                &format!(
                    "{:?}",
                    self.preemption_policy.as_deref().unwrap_or_default()
                ),
                "field is immutable",
            );
        }
        causes
    }
}

/// `ValidatePriorityClass`.
fn validate(class: &PriorityClass) -> Causes {
    let mut causes = Causes::default();
    validate_meta(&mut causes, &class.metadata);
    let name = class.metadata.name.as_deref().unwrap_or_default();
    let system = SYSTEM_CLASSES.iter().find(|(n, ..)| *n == name);
    match system {
        Some((_, value, _)) if class.value != *value => causes.forbidden(
            "metadata.name",
            &format!("priority class {name} can only have value {value}"),
        ),
        Some(_) => {}
        None if name.starts_with("system-") => causes.forbidden(
            "metadata.name",
            "priority class names with 'system-' prefix are reserved.",
        ),
        None if class.value > HIGHEST_USER_PRIORITY => causes.forbidden(
            "value",
            &format!("maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"),
        ),
        None => {}
    }
    if let Some(policy) = class.preemption_policy.as_deref()
        && !matches!(policy, "Never" | PREEMPT_LOWER)
    {
        causes.unsupported("preemptionPolicy", policy, &[PREEMPT_LOWER, "Never"]);
    }
    causes
}

/// Makes the system classes that are missing (at the sim's start).
pub fn ensure_system_classes(cluster: &Cluster) {
    for (name, value, description) in SYSTEM_CLASSES {
        let class = PriorityClass {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                uid: Some(uuid::Uuid::new_v4().to_string()),
                creation_timestamp: Some(now_time()),
                ..ObjectMeta::default()
            },
            value,
            description: Some(description.to_owned()),
            preemption_policy: Some(PREEMPT_LOWER.to_owned()),
            global_default: Some(false),
        };
        // An existing class stays as it is.
        let _ = cluster.priority_class_table().write(
            (String::new(), name.to_owned()),
            |current| match current {
                Some(_) => Err(()),
                None => Ok((Write::Create(class), ())),
            },
            |_, _| {},
        );
    }
}

/// The Priority admission of a pod being created (see the module docs).
pub(crate) fn admit_pod_priority(cluster: &Cluster, pod: &mut Pod) -> Result<(), ApiError> {
    let meta = pod.metadata.clone();
    let forbidden = |why: String| super::service_account::pod_forbidden(&meta, &why);
    let Some(spec) = pod.spec.as_mut() else {
        return Ok(());
    };
    let named = spec.priority_class_name.clone().filter(|n| !n.is_empty());
    let class = match &named {
        Some(class_name) => match cluster.priority_class_table().get("", class_name) {
            Some(stored) => Some(stored.decode()),
            None => {
                return Err(forbidden(format!(
                    "no PriorityClass with name {class_name} was found"
                )));
            }
        },
        // The global default with the lowest value, if any.
        None => {
            let (all, _) = cluster.priority_class_table().snapshot(None, None);
            all.iter()
                .map(|s| s.decode())
                .filter(|c| c.global_default == Some(true))
                .min_by_key(|c| c.value)
        }
    };
    let priority = class.as_ref().map_or(0, |c| c.value);
    if let Some(own) = spec.priority
        && own != priority
    {
        return Err(forbidden(format!(
            "the integer value of priority ({own}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
        )));
    }
    spec.priority = Some(priority);
    if let Some(class) = class {
        if named.is_none() {
            spec.priority_class_name = class.metadata.name.clone();
        }
        if let Some(policy) = class.preemption_policy {
            if let Some(own) = spec.preemption_policy.as_deref()
                && own != policy
            {
                return Err(forbidden(format!(
                    "the string value of PreemptionPolicy ({own}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
                )));
            }
            spec.preemption_policy = Some(policy);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::HistoryLimits;
    use k8s_openapi::api::core::v1::PodSpec;

    fn cluster() -> Cluster {
        let cluster = Cluster::new(HistoryLimits {
            window: std::time::Duration::from_secs(60),
            max_events: 100,
        });
        ensure_system_classes(&cluster);
        cluster
    }

    fn pod(class: Option<&str>, priority: Option<i32>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                priority_class_name: class.map(str::to_owned),
                priority,
                ..PodSpec::default()
            }),
            status: None,
        }
    }

    #[test]
    fn a_known_class_resolves_the_priority_and_an_unknown_one_is_forbidden() {
        let cluster = cluster();
        let mut critical = pod(Some("system-cluster-critical"), None);
        admit_pod_priority(&cluster, &mut critical).expect("admitted");
        let spec = critical.spec.expect("spec");
        assert_eq!(spec.priority, Some(2_000_000_000));
        assert_eq!(spec.preemption_policy.as_deref(), Some(PREEMPT_LOWER));

        let err = admit_pod_priority(&cluster, &mut pod(Some("nope"), None)).expect_err("403");
        assert_eq!(err.code, 403);
        assert_eq!(
            err.message,
            "pods \"p\" is forbidden: no PriorityClass with name nope was found"
        );
        let err = admit_pod_priority(&cluster, &mut pod(Some("system-node-critical"), Some(5)))
            .expect_err("403");
        assert_eq!(
            err.message,
            "pods \"p\" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 2000001000 from the given PriorityClass name"
        );
        let mut plain = pod(None, None);
        admit_pod_priority(&cluster, &mut plain).expect("admitted");
        assert_eq!(plain.spec.expect("spec").priority, Some(0));
    }

    #[test]
    fn classes_are_validated_as_kube_apiserver_does() {
        let class = |name: &str, value: i32| PriorityClass {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            value,
            ..PriorityClass::default()
        };
        assert!(class("high", 1000).admit_create().is_empty());
        let lines =
            |c: Causes| -> Vec<String> { c.0.iter().map(crate::status::cause_line).collect() };
        assert_eq!(
            lines(class("huge", HIGHEST_USER_PRIORITY + 1).admit_create()),
            ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]
        );
        assert_eq!(
            lines(class("system-mine", 1).admit_create()),
            ["metadata.name: Forbidden: priority class names with 'system-' prefix are reserved."]
        );
        let mut old = class("high", 1000);
        old.admit_create();
        let mut changed = class("high", 2000);
        assert_eq!(
            lines(changed.admit_update(&old, Part::Main)),
            ["value: Forbidden: may not be changed in an update."]
        );
    }
}
