//! PodDisruptionBudgets (`policy/v1`) as kube-apiserver admits them: `metadata.generation`
//! starts at 1 and moves on with every change of the spec (the eviction API and the disruption
//! controller compare it with `status.observedGeneration`), a create starts with an empty
//! status, and the spec is validated as `ValidatePodDisruptionBudgetSpec` does.
//!
//! Why it exists: `kubectl drain` and every client that evicts pods must handle the 429 a budget
//! answers; without budgets the sim could never send it. The status is the disruption
//! controller's (`crate::controllers::disruption`); the 429 is the eviction API's
//! (podline-sim's `api/eviction.rs`).

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::ApiKind;
use crate::cluster::{Cluster, Table};
use crate::part::Part;
use crate::validation::{Causes, qualified_name_errors, validate_meta};

/// The values of `spec.unhealthyPodEvictionPolicy`.
pub(crate) const EVICTION_POLICIES: [&str; 2] = ["AlwaysAllow", "IfHealthyBudget"];

impl ApiKind for PodDisruptionBudget {
    const GROUP: &'static str = "policy";
    const HAS_STATUS: bool = true;
    fn table(cluster: &Cluster) -> &Table<Self> {
        cluster.disruption_budget_table()
    }
    fn admit_create(&mut self) -> Causes {
        self.metadata.generation = Some(1);
        self.status = Some(PodDisruptionBudgetStatus::default());
        validate(self)
    }
    fn admit_update(&mut self, old: &Self, part: Part) -> Causes {
        match part {
            Part::Main => {
                self.status.clone_from(&old.status);
                if self.spec != old.spec {
                    self.metadata.generation = Some(old.metadata.generation.unwrap_or(0) + 1);
                }
            }
            Part::Status => self.spec.clone_from(&old.spec),
        }
        validate(self)
    }
}

/// `ValidatePodDisruptionBudget`: metadata, at most one of minAvailable and maxUnavailable, each
/// a non-negative integer or a percentage up to 100%, a valid selector, a known eviction policy.
fn validate(pdb: &PodDisruptionBudget) -> Causes {
    let mut causes = Causes::default();
    validate_meta(&mut causes, &pdb.metadata);
    let Some(spec) = &pdb.spec else {
        return causes;
    };
    if spec.min_available.is_some() && spec.max_unavailable.is_some() {
        causes.invalid(
            "spec",
            "policy.PodDisruptionBudgetSpec{...}",
            "minAvailable and maxUnavailable cannot be both set",
        );
    }
    for (field, value) in [
        ("spec.minAvailable", &spec.min_available),
        ("spec.maxUnavailable", &spec.max_unavailable),
    ] {
        if let Some(value) = value {
            validate_int_or_percent(&mut causes, field, value);
        }
    }
    if let Some(selector) = &spec.selector {
        validate_selector(&mut causes, "spec.selector", selector);
    }
    if let Some(policy) = spec.unhealthy_pod_eviction_policy.as_deref()
        && !EVICTION_POLICIES.contains(&policy)
    {
        causes.unsupported(
            "spec.unhealthyPodEvictionPolicy",
            policy,
            &EVICTION_POLICIES,
        );
    }
    causes
}

/// How Go prints an IntOrString in a validation message (`%#v`).
fn go_int_or_string(value: &IntOrString) -> String {
    match value {
        IntOrString::Int(n) => format!("intstr.IntOrString{{Type:0, IntVal:{n}, StrVal:\"\"}}"),
        IntOrString::String(s) => format!("intstr.IntOrString{{Type:1, IntVal:0, StrVal:{s:?}}}"),
    }
}

/// `ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent`.
fn validate_int_or_percent(causes: &mut Causes, field: &str, value: &IntOrString) {
    match value {
        IntOrString::Int(n) if *n < 0 => {
            causes.invalid(field, &n.to_string(), "must be greater than or equal to 0");
        }
        IntOrString::Int(_) => {}
        IntOrString::String(s) => match crate::validation::parse_percent(s) {
            None => causes.invalid(
                field,
                &go_int_or_string(value),
                "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
            ),
            Some(percent) if percent > 100 => {
                causes.invalid(
                    field,
                    &go_int_or_string(value),
                    "must not be greater than 100%",
                );
            }
            Some(_) => {}
        },
    }
}

/// `ValidateLabelSelector`: label keys and values, and each expression's operator and values.
fn validate_selector(causes: &mut Causes, field: &str, selector: &LabelSelector) {
    for (key, value) in selector.match_labels.iter().flatten() {
        for error in qualified_name_errors(key) {
            causes.invalid(&format!("{field}.matchLabels"), &format!("{key:?}"), &error);
        }
        for error in crate::validation::label_value_errors(value) {
            causes.invalid(
                &format!("{field}.matchLabels"),
                &format!("{value:?}"),
                &error,
            );
        }
    }
    for (i, expression) in selector.match_expressions.iter().flatten().enumerate() {
        let at = format!("{field}.matchExpressions[{i}]");
        let values = expression.values.as_deref().unwrap_or_default();
        match expression.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => causes.required(
                &format!("{at}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            ),
            "Exists" | "DoesNotExist" if !values.is_empty() => causes.forbidden(
                &format!("{at}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            ),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => causes.invalid(
                &format!("{at}.operator"),
                &format!("{other:?}"),
                "not a valid selector operator",
            ),
        }
        for error in qualified_name_errors(&expression.key) {
            causes.invalid(
                &format!("{at}.key"),
                &format!("{:?}", expression.key),
                &error,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelectorRequirement, ObjectMeta};

    fn pdb(spec: PodDisruptionBudgetSpec) -> PodDisruptionBudget {
        PodDisruptionBudget {
            metadata: ObjectMeta {
                name: Some("budget".to_owned()),
                namespace: Some("default".to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
            status: None,
        }
    }

    fn messages(causes: &Causes) -> Vec<String> {
        causes.0.iter().map(crate::status::cause_line).collect()
    }

    #[test]
    fn a_budget_is_validated_as_kube_apiserver_does() {
        let ok = pdb(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::String("50%".to_owned())),
            ..Default::default()
        });
        assert!(validate(&ok).is_empty());
        let both = pdb(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(1)),
            max_unavailable: Some(IntOrString::Int(1)),
            ..Default::default()
        });
        assert!(
            messages(&validate(&both))[0]
                .ends_with("minAvailable and maxUnavailable cannot be both set")
        );
        let negative = pdb(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(-1)),
            ..Default::default()
        });
        assert_eq!(
            messages(&validate(&negative)),
            ["spec.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"]
        );
        let too_much = pdb(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::String("101%".to_owned())),
            ..Default::default()
        });
        assert_eq!(
            messages(&validate(&too_much)),
            [
                "spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"101%\"}: must not be greater than 100%"
            ]
        );
        let not_percent = pdb(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::String("half".to_owned())),
            ..Default::default()
        });
        assert!(messages(&validate(&not_percent))[0].contains("a valid percent string"));
        let bad_selector = pdb(PodDisruptionBudgetSpec {
            selector: Some(LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: "app".to_owned(),
                    operator: "In".to_owned(),
                    values: None,
                }]),
                ..Default::default()
            }),
            unhealthy_pod_eviction_policy: Some("Sometimes".to_owned()),
            ..Default::default()
        });
        assert_eq!(
            messages(&validate(&bad_selector)),
            [
                "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                "spec.unhealthyPodEvictionPolicy: Unsupported value: \"Sometimes\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\"",
            ]
        );
    }

    #[test]
    fn the_generation_moves_with_the_spec_only_and_each_part_keeps_the_other() {
        let mut created = pdb(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(1)),
            ..Default::default()
        });
        assert!(created.admit_create().is_empty());
        assert_eq!(created.metadata.generation, Some(1));
        assert_eq!(created.status, Some(PodDisruptionBudgetStatus::default()));

        let mut relabelled = created.clone();
        relabelled.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
        relabelled.status = None;
        assert!(relabelled.admit_update(&created, Part::Main).is_empty());
        assert_eq!(relabelled.metadata.generation, Some(1));
        assert_eq!(
            relabelled.status, created.status,
            "a main write keeps the status"
        );

        let mut changed = created.clone();
        changed.spec.as_mut().expect("spec").min_available = Some(IntOrString::Int(2));
        assert!(changed.admit_update(&created, Part::Main).is_empty());
        assert_eq!(changed.metadata.generation, Some(2));

        let mut status = created.clone();
        status.spec = None;
        status.status.as_mut().expect("status").disruptions_allowed = 3;
        assert!(status.admit_update(&created, Part::Status).is_empty());
        assert_eq!(status.spec, created.spec, "a status write keeps the spec");
        assert_eq!(status.metadata.generation, Some(1));
    }
}
