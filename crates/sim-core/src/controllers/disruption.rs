//! kube-controller-manager's disruption controller, and the budget check of the eviction API
//! that relies on it.
//!
//! Why it exists: a PodDisruptionBudget means something only through its status (how many of
//! its pods are healthy, how many may be disrupted now), and the eviction API answers 429 from
//! that status. Clients that evict (`kubectl drain`, descheduler-like tools) must be tested
//! against both the refusal and the budget freeing up again.
//!
//! As the real controller does, for each budget it
//! - selects the pods of its namespace matching `spec.selector` (none without a selector, all
//!   with an empty one);
//! - counts the healthy ones: Ready, not being deleted, and not named in `disruptedPods` (an
//!   eviction in flight) for less than two minutes;
//! - computes the expected and desired counts: an integer `minAvailable` is the desired count
//!   of the pods selected; a percentage, or `maxUnavailable`, scales the pods' controllers,
//!   which the sim does not serve: pods without a controller are left out (so the budget
//!   expects 0 pods and allows no disruption), a pod with a controller fails the sync
//!   (`SyncFailed`, nothing allowed);
//! - writes `status` (`observedGeneration`, the counts, `disruptionsAllowed`, the
//!   `DisruptionAllowed` condition) when it changed.
//!
//! It follows the budget and pod tables and looks at pods only in namespaces that have a budget,
//! so a cluster without budgets costs it nothing. The eviction API's side is [`take`]: the
//! decision for one pod, and the budget's decrement, in one write.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition, LabelSelector, StatusCause, StatusDetails, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::task::JoinHandle;

use crate::cluster::{ChangeKind, Cluster, WatchFrom, WeakCluster, Write};
use crate::status::ApiError;
use crate::validation::parse_percent;

/// How long an eviction's entry in `disruptedPods` keeps the pod out of the healthy count
/// (the controller's `DeletionTimeout`).
const DELETION_TIMEOUT: Duration = Duration::from_secs(120);

/// How often budgets with evictions in flight are looked at again (their entries expire).
const RESYNC: Duration = Duration::from_secs(5);

/// The eviction API's message when a budget refuses.
pub(crate) const REFUSED: &str =
    "Cannot evict pod as it would violate the pod's disruption budget.";

/// The condition type the controller keeps.
const CONDITION: &str = "DisruptionAllowed";

/// Starts the controller. It ends by itself when the cluster is dropped.
pub fn spawn(cluster: &Cluster) -> JoinHandle<()> {
    // Watches "from now" never fail.
    let budgets = cluster
        .disruption_budget_table()
        .start_watch(WatchFrom::Now);
    let pods = cluster.pod_table().start_watch(WatchFrom::Now);
    let weak = cluster.downgrade();
    tokio::spawn(async move {
        let (Ok(budgets), Ok(pods)) = (budgets, pods) else {
            return;
        };
        let mut controller = Controller {
            cluster: weak,
            budgeted: HashMap::new(),
            dirty: HashSet::new(),
        };
        for stored in &budgets.initial {
            controller.saw_budget(ChangeKind::Added, stored.facts.namespace(), &stored.json());
        }
        let (mut budget_rx, mut pod_rx) = (budgets.rx, pods.rx);
        let mut tick = tokio::time::interval(RESYNC);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                got = budget_rx.recv() => match got {
                    Ok(event) => controller.saw_budget(event.kind, event.facts.namespace(), &event.json),
                    Err(RecvError::Lagged(_)) => controller.resync_all(),
                    Err(RecvError::Closed) => return,
                },
                got = pod_rx.recv() => match got {
                    Ok(event) => controller.saw_pod(event.facts.namespace()),
                    Err(RecvError::Lagged(_)) => controller.resync_all(),
                    Err(RecvError::Closed) => return,
                },
                _ = tick.tick() => controller.expire(),
            }
            // Take what else is queued, then sync each touched namespace once.
            loop {
                match budget_rx.try_recv() {
                    Ok(event) => {
                        controller.saw_budget(event.kind, event.facts.namespace(), &event.json)
                    }
                    Err(TryRecvError::Lagged(_)) => controller.resync_all(),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Closed) => return,
                }
            }
            loop {
                match pod_rx.try_recv() {
                    Ok(event) => controller.saw_pod(event.facts.namespace()),
                    Err(TryRecvError::Lagged(_)) => controller.resync_all(),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Closed) => return,
                }
            }
            if !controller.sync() {
                return;
            }
        }
    })
}

struct Controller {
    cluster: WeakCluster,
    /// Namespace -> its budgets' names.
    budgeted: HashMap<String, HashSet<String>>,
    /// Namespaces to sync.
    dirty: HashSet<String>,
}

impl Controller {
    fn saw_budget(&mut self, change: ChangeKind, namespace: &str, json: &[u8]) {
        let Some(name) = name_of(json) else {
            return;
        };
        let names = self.budgeted.entry(namespace.to_owned()).or_default();
        if change == ChangeKind::Deleted {
            names.remove(&name);
            if names.is_empty() {
                self.budgeted.remove(namespace);
            }
            return;
        }
        names.insert(name);
        self.dirty.insert(namespace.to_owned());
    }

    fn saw_pod(&mut self, namespace: &str) {
        if self.budgeted.contains_key(namespace) {
            self.dirty.insert(namespace.to_owned());
        }
    }

    /// Rebuilds the budget index from the store and syncs everything (after missed changes).
    fn resync_all(&mut self) {
        let Some(cluster) = self.cluster.upgrade() else {
            return;
        };
        self.budgeted.clear();
        let (budgets, _) = cluster.disruption_budget_table().snapshot(None, None);
        for stored in &budgets {
            self.saw_budget(ChangeKind::Added, stored.facts.namespace(), &stored.json());
        }
    }

    /// Marks the namespaces of budgets with evictions in flight (their entries expire).
    fn expire(&mut self) {
        let Some(cluster) = self.cluster.upgrade() else {
            return;
        };
        for namespace in self.budgeted.keys() {
            let (budgets, _) = cluster
                .disruption_budget_table()
                .snapshot(Some(namespace), None);
            let in_flight = budgets.iter().any(|stored| {
                stored
                    .decode()
                    .status
                    .and_then(|s| s.disrupted_pods)
                    .is_some_and(|d| !d.is_empty())
            });
            if in_flight {
                self.dirty.insert(namespace.clone());
            }
        }
    }

    /// Syncs every dirty namespace; false when the cluster is gone.
    fn sync(&mut self) -> bool {
        if self.dirty.is_empty() {
            return true;
        }
        let Some(cluster) = self.cluster.upgrade() else {
            return false;
        };
        let now = Timestamp::now();
        for namespace in std::mem::take(&mut self.dirty) {
            let names: Vec<String> = self
                .budgeted
                .get(&namespace)
                .map(|names| names.iter().cloned().collect())
                .unwrap_or_default();
            if names.is_empty() {
                continue;
            }
            let (pods, _) = cluster.pod_table().snapshot(Some(&namespace), None);
            let pods: Vec<Pod> = pods.iter().map(|stored| stored.decode()).collect();
            for name in names {
                sync_budget(&cluster, &namespace, &name, &pods, now);
            }
        }
        true
    }
}

/// `metadata.name` of an object's JSON.
fn name_of(json: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Doc {
        metadata: Meta,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        name: String,
    }
    serde_json::from_slice::<Doc>(json)
        .ok()
        .map(|doc| doc.metadata.name)
}

/// Writes the status of budget `name` computed from `pods` (its namespace's), if it changed.
fn sync_budget(cluster: &Cluster, namespace: &str, name: &str, pods: &[Pod], now: Timestamp) {
    // The closure never fails.
    let _ = cluster.disruption_budget_table().write(
        (namespace.to_owned(), name.to_owned()),
        |current| -> Result<_, std::convert::Infallible> {
            let Some(mut pdb) = current.map(|stored| stored.decode()) else {
                return Ok((Write::Unchanged, ()));
            };
            if pdb.metadata.deletion_timestamp.is_some() {
                return Ok((Write::Unchanged, ()));
            }
            let old = pdb.status.clone().unwrap_or_default();
            let status = computed_status(&pdb, pods, now);
            if status == old {
                return Ok((Write::Unchanged, ()));
            }
            pdb.status = Some(status);
            Ok((Write::Replace(pdb), ()))
        },
        |_, _| {},
    );
}

/// The status the controller writes for `pdb` given its namespace's `pods`.
fn computed_status(
    pdb: &PodDisruptionBudget,
    pods: &[Pod],
    now: Timestamp,
) -> PodDisruptionBudgetStatus {
    let mut status = pdb.status.clone().unwrap_or_default();
    let spec = pdb.spec.clone().unwrap_or_default();
    let selected: Vec<&Pod> = pods
        .iter()
        .filter(|pod| selects(spec.selector.as_ref(), pod_labels(pod)))
        .collect();
    let counts = match expected_and_desired(&spec, &selected) {
        Ok(counts) => counts,
        Err(message) => {
            // `failSafe`: nothing allowed, the generation not observed.
            status.disruptions_allowed = 0;
            let generation = status.observed_generation;
            set_condition(
                &mut status,
                "False",
                "SyncFailed",
                &message,
                generation,
                now,
            );
            return status;
        }
    };
    let (expected, desired) = counts;
    let disrupted = still_disrupted(status.disrupted_pods.as_ref(), &selected, now);
    let healthy = i32::try_from(
        selected
            .iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .filter(|pod| {
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                !disrupted.as_ref().is_some_and(|d| d.contains_key(name))
            })
            .filter(|pod| is_ready(pod))
            .count(),
    )
    .unwrap_or(i32::MAX);
    let allowed = healthy.saturating_sub(desired);
    let allowed = if expected <= 0 || allowed <= 0 {
        0
    } else {
        allowed
    };
    status.current_healthy = healthy;
    status.desired_healthy = desired;
    status.expected_pods = expected;
    status.disruptions_allowed = allowed;
    status.disrupted_pods = disrupted;
    status.observed_generation = pdb.metadata.generation;
    let generation = status.observed_generation;
    if allowed > 0 {
        set_condition(&mut status, "True", "SufficientPods", "", generation, now);
    } else {
        set_condition(
            &mut status,
            "False",
            "InsufficientPods",
            "",
            generation,
            now,
        );
    }
    status
}

/// (expected pods, desired healthy) as `getExpectedPodCount` computes them, or the sync error.
fn expected_and_desired(
    spec: &k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec,
    selected: &[&Pod],
) -> Result<(i32, i32), String> {
    let count = i32::try_from(selected.len()).unwrap_or(i32::MAX);
    if let Some(max_unavailable) = &spec.max_unavailable {
        let expected = controllers_scale(selected)?;
        let unavailable = scaled(max_unavailable, expected);
        return Ok((expected, expected.saturating_sub(unavailable).max(0)));
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok((count, *n)),
        Some(percent @ IntOrString::String(_)) => {
            let expected = controllers_scale(selected)?;
            Ok((expected, scaled(percent, expected)))
        }
        None => Ok((0, 0)),
    }
}

/// The summed scale of the pods' controllers (`getExpectedScale`). Pods without a controller
/// are left out; the sim serves no kind with a scale, so a pod with one fails the sync as a
/// controller that cannot be found does on a cluster.
fn controllers_scale(selected: &[&Pod]) -> Result<i32, String> {
    for pod in selected {
        let controlled = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.controller == Some(true));
        if controlled {
            return Err(format!(
                "found no controllers for pod {:?}",
                pod.metadata.name.as_deref().unwrap_or_default()
            ));
        }
    }
    Ok(0)
}

/// `GetScaledValueFromIntOrPercent(value, total, roundUp=true)`.
fn scaled(value: &IntOrString, total: i32) -> i32 {
    match value {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => {
            let percent = parse_percent(s).map_or(0, |p| i64::try_from(p).unwrap_or(i64::MAX));
            let total = i64::from(total.max(0));
            i32::try_from((percent.saturating_mul(total) + 99) / 100).unwrap_or(i32::MAX)
        }
    }
}

/// The `disruptedPods` entries still in force: of selected pods not being deleted, for less
/// than [`DELETION_TIMEOUT`]. None when none is left.
fn still_disrupted(
    entries: Option<&BTreeMap<String, Time>>,
    selected: &[&Pod],
    now: Timestamp,
) -> Option<BTreeMap<String, Time>> {
    let entries = entries?;
    let live: HashSet<&str> = selected
        .iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter_map(|pod| pod.metadata.name.as_deref())
        .collect();
    let timeout = jiff::SignedDuration::try_from(DELETION_TIMEOUT).unwrap_or_default();
    let kept: BTreeMap<String, Time> = entries
        .iter()
        .filter(|(name, at)| {
            live.contains(name.as_str()) && at.0.saturating_add(timeout).is_ok_and(|end| end > now)
        })
        .map(|(name, at)| (name.clone(), at.clone()))
        .collect();
    (!kept.is_empty()).then_some(kept)
}

/// `apimeta.SetStatusCondition` for the `DisruptionAllowed` condition: the transition time moves
/// only when the status does.
fn set_condition(
    status: &mut PodDisruptionBudgetStatus,
    value: &str,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
    now: Timestamp,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let transition = conditions
        .iter()
        .find(|c| c.type_ == CONDITION && c.status == value)
        .map(|c| c.last_transition_time.clone());
    conditions.retain(|c| c.type_ != CONDITION);
    conditions.push(Condition {
        type_: CONDITION.to_owned(),
        status: value.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation,
        last_transition_time: transition.unwrap_or(Time(now)),
    });
}

/// Whether a pod's Ready condition is True (`IsPodReady`, what the controller calls healthy).
pub(crate) fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn pod_labels(pod: &Pod) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    pod.metadata.labels.as_ref().unwrap_or(&EMPTY)
}

/// Whether `selector` selects an object with `labels`: no selector selects nothing, an empty
/// one everything (policy/v1), else every `matchLabels` pair and `matchExpressions` term holds.
fn selects(selector: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    let Some(selector) = selector else {
        return false;
    };
    let pairs = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    let terms = selector.match_expressions.iter().flatten().all(|term| {
        let value = labels.get(&term.key);
        let listed = |v: &String| term.values.iter().flatten().any(|want| want == v);
        match term.operator.as_str() {
            "In" => value.is_some_and(listed),
            "NotIn" => !value.is_some_and(listed),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    pairs && terms
}

/// What the eviction API may do with a pod the budgets allow to go. Public for that API
/// (podline-sim's `api/eviction.rs`), which acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowed {
    /// No budget covers it, or a disruption was taken from its budget: delete it.
    Delete,
    /// It is unhealthy and its budget lets unhealthy pods go without taking a disruption:
    /// delete it only if it is still the version that was read (it might become ready).
    DeleteIfUnchanged,
}

/// The eviction API's budget check for `pod` (`EvictionREST.Create` after `canIgnorePDB`): the
/// budgets of its namespace that select it; none allows it; more than one is a 500; with one,
/// an unhealthy pod may go if the budget's policy says so, else one disruption is taken from
/// the budget (its `disruptionsAllowed` and `disruptedPods`, in one write; nothing with
/// `dry_run`) or the eviction is refused with 429. Public for the eviction API, which calls it
/// before it deletes.
pub fn take(cluster: &Cluster, pod: &Pod, dry_run: bool) -> Result<Allowed, ApiError> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let (budgets, _) = cluster
        .disruption_budget_table()
        .snapshot(Some(namespace), None);
    let mut covering = budgets.iter().map(|stored| stored.decode()).filter(|pdb| {
        selects(
            pdb.spec.as_ref().and_then(|s| s.selector.as_ref()),
            pod_labels(pod),
        )
    });
    let Some(first) = covering.next() else {
        return Ok(Allowed::Delete);
    };
    if covering.next().is_some() {
        return Err(ApiError::new(
            500,
            "",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        ));
    }
    let ready = is_ready(pod);
    let policy = first
        .spec
        .as_ref()
        .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref());
    if !ready && policy == Some("AlwaysAllow") {
        return Ok(Allowed::DeleteIfUnchanged);
    }
    let budget_name = first.metadata.name.clone().unwrap_or_default();
    let now = Timestamp::now();
    let (_, allowed) = cluster.disruption_budget_table().write(
        (namespace.to_owned(), budget_name.clone()),
        |current| -> Result<_, ApiError> {
            let Some(mut pdb) = current.map(|stored| stored.decode()) else {
                // Deleted meanwhile: nothing covers the pod any more.
                return Ok((Write::Unchanged, Allowed::Delete));
            };
            let status = pdb.status.get_or_insert_with(Default::default);
            if !ready && status.current_healthy >= status.desired_healthy && status.desired_healthy > 0 {
                return Ok((Write::Unchanged, Allowed::DeleteIfUnchanged));
            }
            if status.observed_generation.unwrap_or(0) < pdb.metadata.generation.unwrap_or(0) {
                return Err(refusal(
                    format!("The disruption budget {budget_name} is still being processed by the server."),
                    Some(10),
                ));
            }
            if status.disruptions_allowed < 0 {
                return Err(ApiError::new(
                    403,
                    "Forbidden",
                    format!("poddisruptionbudgets.policy \"{budget_name}\" is forbidden: pdb disruptions allowed is negative"),
                ));
            }
            if status.disruptions_allowed == 0 {
                return Err(refusal(
                    format!(
                        "The disruption budget {budget_name} needs {} healthy pods and has {} currently",
                        status.desired_healthy, status.current_healthy
                    ),
                    None,
                ));
            }
            if dry_run {
                return Ok((Write::Unchanged, Allowed::Delete));
            }
            status.disruptions_allowed -= 1;
            if status.disruptions_allowed == 0 {
                let generation = status.observed_generation;
                set_condition(status, "False", "InsufficientPods", "", generation, now);
            }
            status
                .disrupted_pods
                .get_or_insert_with(BTreeMap::new)
                .insert(pod_name.clone(), Time(now));
            Ok((Write::Replace(pdb), Allowed::Delete))
        },
        |_, _| {},
    )?;
    Ok(allowed)
}

/// The eviction API's 429 for a budget, with its cause (and a Retry-After when given).
fn refusal(cause: String, retry_after: Option<u32>) -> ApiError {
    let mut err = ApiError::new(429, "TooManyRequests", REFUSED);
    err.retry_after = retry_after;
    err.details = Some(Box::new(StatusDetails {
        causes: Some(vec![StatusCause {
            reason: Some("DisruptionBudget".to_owned()),
            message: Some(cause),
            field: None,
        }]),
        retry_after_seconds: retry_after.and_then(|s| i32::try_from(s).ok()),
        ..StatusDetails::default()
    }));
    err
}

#[cfg(test)]
mod tests;
