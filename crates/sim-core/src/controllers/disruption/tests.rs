use super::*;
use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
use k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::cluster::HistoryLimits;

fn now() -> Timestamp {
    "2026-01-10T00:10:00Z".parse().expect("a timestamp")
}

fn pod(name: &str, app: &str, ready: bool) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            labels: Some([("app".to_owned(), app.to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(PodStatus {
            phase: Some("Running".to_owned()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".to_owned(),
                status: if ready { "True" } else { "False" }.to_owned(),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        }),
    }
}

fn budget(min: Option<IntOrString>, max: Option<IntOrString>) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some("web".to_owned()),
            namespace: Some("default".to_owned()),
            generation: Some(1),
            ..ObjectMeta::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: min,
            max_unavailable: max,
            selector: Some(LabelSelector {
                match_labels: Some([("app".to_owned(), "web".to_owned())].into()),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: Some(PodDisruptionBudgetStatus::default()),
    }
}

fn condition(status: &PodDisruptionBudgetStatus) -> (&str, &str) {
    let c = &status.conditions.as_ref().expect("conditions")[0];
    (c.status.as_str(), c.reason.as_str())
}

#[test]
fn an_integer_min_available_counts_the_selected_ready_pods() {
    let pods = [
        pod("a", "web", true),
        pod("b", "web", true),
        pod("c", "web", false),
        pod("other", "db", true),
    ];
    let pdb = budget(Some(IntOrString::Int(1)), None);
    let status = computed_status(&pdb, &pods, now());
    assert_eq!(
        (
            status.expected_pods,
            status.desired_healthy,
            status.current_healthy,
            status.disruptions_allowed
        ),
        (3, 1, 2, 1)
    );
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(condition(&status), ("True", "SufficientPods"));

    let strict = budget(Some(IntOrString::Int(2)), None);
    let status = computed_status(&strict, &pods, now());
    assert_eq!(status.disruptions_allowed, 0);
    assert_eq!(condition(&status), ("False", "InsufficientPods"));
}

#[test]
fn an_eviction_in_flight_keeps_its_pod_out_of_the_healthy_count_for_two_minutes() {
    let pods = [pod("a", "web", true), pod("b", "web", true)];
    let mut pdb = budget(Some(IntOrString::Int(1)), None);
    let recent = Time(
        now()
            .checked_sub(jiff::SignedDuration::from_secs(30))
            .expect("ts"),
    );
    let stale = Time(
        now()
            .checked_sub(jiff::SignedDuration::from_secs(300))
            .expect("ts"),
    );
    pdb.status.as_mut().expect("status").disrupted_pods = Some(
        [
            ("a".to_owned(), recent),
            ("b".to_owned(), stale),
            ("gone".to_owned(), Time(now())),
        ]
        .into(),
    );
    let status = computed_status(&pdb, &pods, now());
    assert_eq!(status.current_healthy, 1, "a is being evicted");
    assert_eq!(status.disruptions_allowed, 0);
    let left: Vec<&String> = status
        .disrupted_pods
        .iter()
        .flatten()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(left, ["a"], "expired and vanished entries are dropped");
}

#[test]
fn percentages_and_max_unavailable_need_controllers_the_sim_does_not_serve() {
    let pods = [pod("a", "web", true), pod("b", "web", true)];
    // Bare pods: unmanaged, left out of the scale, so nothing is expected or allowed.
    let status = computed_status(&budget(None, Some(IntOrString::Int(1))), &pods, now());
    assert_eq!((status.expected_pods, status.disruptions_allowed), (0, 0));
    assert_eq!(status.current_healthy, 2);
    // A pod with a controller: the sync fails, the generation is not observed.
    let mut owned = pod("c", "web", true);
    owned.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".to_owned(),
        kind: "ReplicaSet".to_owned(),
        name: "web-1".to_owned(),
        uid: "u".to_owned(),
        controller: Some(true),
        ..OwnerReference::default()
    }]);
    let status = computed_status(
        &budget(Some(IntOrString::String("50%".to_owned())), None),
        &[owned],
        now(),
    );
    assert_eq!(condition(&status), ("False", "SyncFailed"));
    assert_eq!(status.observed_generation, None);
    let message = &status.conditions.as_ref().expect("conditions")[0].message;
    assert_eq!(message, "found no controllers for pod \"c\"");
}

#[test]
fn scaled_values_round_up_like_apimachinery() {
    assert_eq!(scaled(&IntOrString::String("50%".to_owned()), 3), 2);
    assert_eq!(scaled(&IntOrString::String("10%".to_owned()), 10), 1);
    assert_eq!(scaled(&IntOrString::String("0%".to_owned()), 10), 0);
    assert_eq!(scaled(&IntOrString::Int(4), 10), 4);
    assert_eq!(parse_percent("12%"), Some(12));
    assert_eq!(parse_percent("%"), None);
    assert_eq!(parse_percent("1.5%"), None);
}

#[test]
fn selectors_select_as_label_selectors_do() {
    let labels: BTreeMap<String, String> = [
        ("app".to_owned(), "web".to_owned()),
        ("tier".to_owned(), "a".to_owned()),
    ]
    .into();
    assert!(!selects(None, &labels), "no selector selects nothing");
    assert!(
        selects(Some(&LabelSelector::default()), &labels),
        "empty selects all"
    );
    let expr = |key: &str, operator: &str, values: &[&str]| LabelSelector {
        match_expressions: Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                key: key.to_owned(),
                operator: operator.to_owned(),
                values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
            },
        ]),
        ..LabelSelector::default()
    };
    assert!(selects(Some(&expr("tier", "In", &["a", "b"])), &labels));
    assert!(!selects(Some(&expr("tier", "NotIn", &["a"])), &labels));
    assert!(selects(Some(&expr("zone", "DoesNotExist", &[])), &labels));
    assert!(!selects(Some(&expr("zone", "Exists", &[])), &labels));
}

fn cluster_with(pdb: PodDisruptionBudget) -> Cluster {
    let cluster = Cluster::new(HistoryLimits {
        window: Duration::from_secs(75),
        max_events: 1000,
    });
    let _ = cluster.disruption_budget_table().write(
        ("default".to_owned(), "web".to_owned()),
        |_| -> Result<_, std::convert::Infallible> { Ok((Write::Create(pdb), ())) },
        |_, _| {},
    );
    cluster
}

fn stored_status(cluster: &Cluster) -> PodDisruptionBudgetStatus {
    cluster
        .disruption_budget_table()
        .get("default", "web")
        .and_then(|s| s.decode().status)
        .expect("a status")
}

#[test]
fn an_eviction_takes_one_disruption_and_then_is_refused_with_the_budgets_counts() {
    let mut pdb = budget(Some(IntOrString::Int(1)), None);
    let pods = [pod("a", "web", true), pod("b", "web", true)];
    pdb.status = Some(computed_status(&pdb, &pods, now()));
    let cluster = cluster_with(pdb);
    assert_eq!(take(&cluster, &pods[0], true), Ok(Allowed::Delete));
    assert_eq!(
        stored_status(&cluster).disruptions_allowed,
        1,
        "a dry run takes nothing"
    );
    assert_eq!(take(&cluster, &pods[0], false), Ok(Allowed::Delete));
    let status = stored_status(&cluster);
    assert_eq!(status.disruptions_allowed, 0);
    assert!(status.disrupted_pods.is_some_and(|d| d.contains_key("a")));
    let refused = take(&cluster, &pods[1], false).expect_err("no disruption left");
    assert_eq!(
        (refused.code, refused.reason.as_str()),
        (429, "TooManyRequests")
    );
    assert_eq!(refused.message, REFUSED);
    let cause = &refused
        .details
        .as_ref()
        .and_then(|d| d.causes.clone())
        .expect("causes")[0];
    assert_eq!(cause.reason.as_deref(), Some("DisruptionBudget"));
    assert_eq!(
        cause.message.as_deref(),
        Some("The disruption budget web needs 1 healthy pods and has 2 currently")
    );
    assert_eq!(refused.retry_after, None);
}

#[test]
fn an_unobserved_generation_is_refused_for_now_and_unready_pods_may_go_by_policy() {
    let mut pdb = budget(Some(IntOrString::Int(1)), None);
    pdb.metadata.generation = Some(2);
    let cluster = cluster_with(pdb.clone());
    let refused = take(&cluster, &pod("a", "web", true), false).expect_err("not observed");
    assert_eq!(refused.retry_after, Some(10));
    assert!(
        refused
            .details
            .as_ref()
            .and_then(|d| d.causes.clone())
            .expect("causes")[0]
            .message
            .as_deref()
            .is_some_and(|m| m.ends_with("is still being processed by the server."))
    );

    pdb.spec
        .as_mut()
        .expect("spec")
        .unhealthy_pod_eviction_policy = Some("AlwaysAllow".to_owned());
    let cluster = cluster_with(pdb);
    assert_eq!(
        take(&cluster, &pod("a", "web", false), false),
        Ok(Allowed::DeleteIfUnchanged)
    );
    assert_eq!(
        take(&cluster, &pod("x", "db", true), false),
        Ok(Allowed::Delete),
        "not covered"
    );
}

#[test]
fn two_budgets_covering_a_pod_are_a_500() {
    let cluster = cluster_with(budget(Some(IntOrString::Int(1)), None));
    let mut second = budget(Some(IntOrString::Int(1)), None);
    second.metadata.name = Some("web-2".to_owned());
    let _ = cluster.disruption_budget_table().write(
        ("default".to_owned(), "web-2".to_owned()),
        |_| -> Result<_, std::convert::Infallible> { Ok((Write::Create(second), ())) },
        |_, _| {},
    );
    let err = take(&cluster, &pod("a", "web", true), false).expect_err("two budgets");
    assert_eq!((err.code, err.reason.as_str()), (500, ""));
    assert!(err.message.contains("more than one PodDisruptionBudget"));
}
