//! Pod specifics: create-time defaults (as the real server fills them), what an update may
//! change (deletion is in [`crate::delete`], namespace deletion in
//! [`crate::controllers::namespace`]).

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus, ResourceRequirements, Toleration};

use crate::cluster::{Cluster, Committed, Stored, Table, Write};
use crate::part::Part;
use crate::validation::Causes;

use super::api_kind::ApiKind;

mod qos;

/// Default grace period of a pod without `terminationGracePeriodSeconds`.
pub const DEFAULT_GRACE_SECONDS: i64 = 30;

/// Fills the defaults the real server sets on a new pod.
pub fn default_pod(pod: &mut Pod) {
    if let Some(spec) = pod.spec.as_mut() {
        spec.restart_policy
            .get_or_insert_with(|| "Always".to_owned());
        spec.dns_policy
            .get_or_insert_with(|| "ClusterFirst".to_owned());
        spec.scheduler_name
            .get_or_insert_with(|| "default-scheduler".to_owned());
        spec.termination_grace_period_seconds
            .get_or_insert(DEFAULT_GRACE_SECONDS);
        // The deprecated `serviceAccount` is what the internal -> v1 conversion makes of
        // `serviceAccountName` (pkg/apis/core/v1/conversion.go), which the ServiceAccount
        // admission set.
        if spec
            .service_account_name
            .as_deref()
            .unwrap_or_default()
            .is_empty()
        {
            spec.service_account_name = spec.service_account.clone().filter(|n| !n.is_empty());
        }
        spec.service_account.clone_from(&spec.service_account_name);
        spec.security_context.get_or_insert_with(Default::default);
        spec.enable_service_links.get_or_insert(true);
        spec.priority.get_or_insert(0);
        spec.preemption_policy
            .get_or_insert_with(|| "PreemptLowerPriority".to_owned());
        for c in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            let image = c.image.clone().unwrap_or_default();
            let last = image.rsplit('/').next().unwrap_or_default();
            let latest = !last.contains(':') || last.ends_with(":latest");
            c.image_pull_policy.get_or_insert_with(|| {
                if latest && !image.contains('@') {
                    "Always".to_owned()
                } else {
                    "IfNotPresent".to_owned()
                }
            });
            c.termination_message_path
                .get_or_insert_with(|| "/dev/termination-log".to_owned());
            c.termination_message_policy
                .get_or_insert_with(|| "File".to_owned());
            let resources = c.resources.get_or_insert_with(Default::default);
            default_resources(resources);
        }
        add_default_tolerations(spec);
    }
    // A new pod's status is the server's: Pending, whatever the client sent.
    pod.status = Some(PodStatus {
        phase: Some("Pending".to_owned()),
        qos_class: Some(qos::pod_qos(pod).to_owned()),
        ..PodStatus::default()
    });
}

/// A container's resources as `SetDefaults_Pod` leaves them: a limit without a request makes the
/// request equal to it, and every quantity is in canonical form.
fn default_resources(resources: &mut ResourceRequirements) {
    if let Some(limits) = resources.limits.as_ref().filter(|l| !l.is_empty()) {
        let requests = resources.requests.get_or_insert_with(Default::default);
        for (name, limit) in limits {
            requests
                .entry(name.clone())
                .or_insert_with(|| limit.clone());
        }
    }
    for quantities in [resources.requests.as_mut(), resources.limits.as_mut()]
        .into_iter()
        .flatten()
    {
        for q in quantities.values_mut() {
            q.0 = crate::quantity::canonicalize(&q.0);
        }
    }
}

/// Seconds the DefaultTolerationSeconds admission plugin gives its tolerations.
const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// The DefaultTolerationSeconds admission plugin: a pod that does not already tolerate the
/// not-ready (or unreachable) NoExecute taint gets a toleration of it for 300 s.
fn add_default_tolerations(spec: &mut PodSpec) {
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = tolerations.iter().any(|t| {
            t.key.as_deref().is_none_or(|k| k.is_empty() || k == key)
                && matches!(t.effect.as_deref(), None | Some("" | "NoExecute"))
        });
        if !tolerated {
            tolerations.push(Toleration {
                key: Some(key.to_owned()),
                operator: Some("Exists".to_owned()),
                effect: Some("NoExecute".to_owned()),
                toleration_seconds: Some(DEFAULT_TOLERATION_SECONDS),
                value: None,
            });
        }
    }
}

/// An update of `old` into `new`: the main resource keeps the old status and may only change
/// the mutable parts of the spec; the status subresource keeps the old spec.
pub fn admit_pod_update(new: &mut Pod, old: &Pod, part: Part) -> Causes {
    let mut causes = Causes::default();
    match part {
        Part::Main => {
            new.status.clone_from(&old.status);
            // Mutable spec fields: container images, activeDeadlineSeconds, tolerations additions.
            let mut allowed = old.spec.clone();
            if let (Some(allowed), Some(spec)) = (allowed.as_mut(), new.spec.as_ref()) {
                for (a, c) in allowed.containers.iter_mut().zip(&spec.containers) {
                    a.image.clone_from(&c.image);
                }
                allowed.active_deadline_seconds = spec.active_deadline_seconds;
                allowed.tolerations.clone_from(&spec.tolerations);
            }
            if new.spec.is_none() {
                new.spec.clone_from(&old.spec);
            } else if serde_json::to_value(&allowed).ok() != serde_json::to_value(&new.spec).ok() {
                causes.forbidden(
                    "spec",
                    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
                );
            }
        }
        Part::Status => {
            new.spec.clone_from(&old.spec);
        }
    }
    if let Some(status) = new.status.as_mut() {
        as_stored(status);
    }
    if part == Part::Main {
        validate_deadline_update(&mut causes, new, old);
    }
    let mut meta = Causes::default();
    crate::validation::validate_meta(&mut meta, &new.metadata);
    causes.0.extend(meta.0);
    causes
}

/// A status as kube-apiserver stores and answers it: `podIPs` (`hostIPs`) follow `podIP`
/// (`hostIP`) when they are not given or disagree with it (`Convert_v1_PodStatus_To_core_PodStatus`
/// in `pkg/apis/core/v1/conversion.go`), and a container status always has `state` and
/// `lastState`, `{}` when empty (Go structs, which `omitempty` never omits: k8s.io/api
/// `core/v1/types.go` `ContainerStatus`).
pub fn as_stored(status: &mut PodStatus) {
    use k8s_openapi::api::core::v1::{HostIP, PodIP};
    if let Some(ip) = status.pod_ip.clone().filter(|ip| !ip.is_empty()) {
        let first = status.pod_ips.as_ref().and_then(|ips| ips.first());
        if first.is_none_or(|p| p.ip != ip) {
            status.pod_ips = Some(vec![PodIP { ip }]);
        }
    }
    if let Some(ip) = status.host_ip.clone().filter(|ip| !ip.is_empty()) {
        let first = status.host_ips.as_ref().and_then(|ips| ips.first());
        if first.is_none_or(|h| h.ip != ip) {
            status.host_ips = Some(vec![HostIP { ip }]);
        }
    }
    for c in status
        .container_statuses
        .iter_mut()
        .chain(status.init_container_statuses.iter_mut())
        .chain(status.ephemeral_container_statuses.iter_mut())
        .flatten()
    {
        c.state.get_or_insert_with(Default::default);
        c.last_state.get_or_insert_with(Default::default);
    }
}

/// `spec.activeDeadlineSeconds` on update, as kube-apiserver's `ValidatePodUpdate`: in range,
/// never raised, never removed once set.
fn validate_deadline_update(causes: &mut Causes, new: &Pod, old: &Pod) {
    use crate::validation::{ACTIVE_DEADLINE_RANGE_MSG, MAX_ACTIVE_DEADLINE_SECONDS};
    let field = "spec.activeDeadlineSeconds";
    let new_value = new.spec.as_ref().and_then(|s| s.active_deadline_seconds);
    let old_value = old.spec.as_ref().and_then(|s| s.active_deadline_seconds);
    match (new_value, old_value) {
        (Some(n), _) if !(1..=MAX_ACTIVE_DEADLINE_SECONDS).contains(&n) => {
            causes.invalid(field, &n.to_string(), ACTIVE_DEADLINE_RANGE_MSG);
        }
        (Some(n), Some(o)) if n > o => {
            causes.invalid(
                field,
                &n.to_string(),
                "must be less than or equal to previous value",
            );
        }
        (None, Some(_)) => {
            causes.invalid(
                field,
                "null",
                "must not update from a positive integer to nil value",
            );
        }
        _ => {}
    }
}

/// Pods through the generic handlers: their table, their write path (the pod table's own), the
/// ServiceAccount and Priority admission, and the pod strategy's defaults and update rules above.
impl ApiKind for Pod {
    const GROUP: &'static str = "";
    const HAS_STATUS: bool = true;
    fn table(cluster: &Cluster) -> &Table<Self> {
        cluster.pod_table()
    }
    fn commit<T, E>(
        cluster: &Cluster,
        namespace: &str,
        name: &str,
        decide: impl FnOnce(Option<&Stored<Self>>) -> Result<(Write<Self>, T), E>,
    ) -> Result<Committed<Self, T>, E> {
        cluster.write_pod(namespace, name, decide)
    }
    fn admit_against(&mut self, cluster: &Cluster) -> Result<(), crate::status::ApiError> {
        // kube-apiserver's plugin order: ServiceAccount before Priority.
        super::service_account::admit_pod_service_account(cluster, self)?;
        super::priority_class::admit_pod_priority(cluster, self)
    }
    fn admit_create(&mut self) -> Causes {
        default_pod(self);
        crate::validation::validate_pod(self)
    }
    fn admit_update(&mut self, old: &Self, part: Part) -> Causes {
        admit_pod_update(self, old, part)
    }
}
