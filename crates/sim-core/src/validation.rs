//! Validation with the real server's rules and wording (apimachinery's validation messages), so
//! a client sees the same 422 causes it would see on a cluster.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, StatusCause};

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// Largest `spec.activeDeadlineSeconds` the real server accepts (`math.MaxInt32`): the field is an
/// int64 on the wire, but validation keeps it to 68 years.
pub const MAX_ACTIVE_DEADLINE_SECONDS: i64 = i32::MAX as i64;
/// kube-apiserver's `InclusiveRangeError(1, math.MaxInt32)` for `spec.activeDeadlineSeconds`.
pub const ACTIVE_DEADLINE_RANGE_MSG: &str = "must be between 1 and 2147483647, inclusive";

/// Collected causes of an invalid object.
#[derive(Debug, Default)]
pub struct Causes(pub Vec<StatusCause>);

fn quote(v: &str) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| format!("\"{v}\""))
}

impl Causes {
    fn push(&mut self, reason: &str, field: &str, message: String) {
        self.0.push(StatusCause {
            reason: Some(reason.to_owned()),
            field: Some(field.to_owned()),
            message: Some(message),
        });
    }
    /// `field: Required value`.
    pub fn required(&mut self, field: &str, detail: &str) {
        let message = if detail.is_empty() {
            "Required value".to_owned()
        } else {
            format!("Required value: {detail}")
        };
        self.push("FieldValueRequired", field, message);
    }
    /// `field: Invalid value: "v": detail`.
    pub fn invalid(&mut self, field: &str, value: &str, detail: &str) {
        self.push(
            "FieldValueInvalid",
            field,
            format!("Invalid value: {value}: {detail}"),
        );
    }
    /// `field: Duplicate value: "v"`.
    pub fn duplicate(&mut self, field: &str, value: &str) {
        self.push(
            "FieldValueDuplicate",
            field,
            format!("Duplicate value: {}", quote(value)),
        );
    }
    /// `field: Unsupported value: "v": supported values: ...`.
    pub fn unsupported(&mut self, field: &str, value: &str, supported: &[&str]) {
        let list: Vec<String> = supported.iter().map(|s| quote(s)).collect();
        self.push(
            "FieldValueNotSupported",
            field,
            format!(
                "Unsupported value: {}: supported values: {}",
                quote(value),
                list.join(", ")
            ),
        );
    }
    /// `field: Forbidden: detail`.
    pub fn forbidden(&mut self, field: &str, detail: &str) {
        self.push("FieldValueForbidden", field, format!("Forbidden: {detail}"));
    }
    /// `field: Too long: may not be more than N bytes` (apimachinery's `field.TooLong`, which
    /// prints no value).
    pub fn too_long(&mut self, field: &str, max_bytes: usize) {
        self.push(
            "FieldValueTooLong",
            field,
            format!("Too long: may not be more than {max_bytes} bytes"),
        );
    }
    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Whether `s` is an RFC 1123 label (max 63).
pub fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// Whether `s` is an RFC 1123 subdomain (max 253).
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && !s.is_empty() && s.split('.').all(is_dns1123_label)
}

/// apimachinery's `IsQualifiedName` (label and annotation keys): every problem, worded like it.
pub fn qualified_name_errors(key: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else if prefix.len() > 253 {
                errors.push("prefix part must be no more than 253 characters".to_owned());
            } else if !is_dns1123_subdomain(prefix) {
                errors.push(format!("prefix part {DNS1123_SUBDOMAIN_MSG}"));
            }
            *name
        }
        _ => {
            errors.push(format!(
                "a qualified {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                QUALIFIED_NAME_MSG.trim_start_matches("name part ").replacen("must", "name must", 1)
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errors.push("name part must be no more than 63 characters".to_owned());
    }
    if !is_qualified_part_chars(name) {
        errors.push(QUALIFIED_NAME_MSG.to_owned());
    }
    errors
}

/// apimachinery's `IsValidLabelValue`: every problem, worded like it.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 characters".to_owned());
    }
    if !value.is_empty() && !is_qualified_part_chars(value) {
        errors.push(LABEL_VALUE_MSG.to_owned());
    }
    errors
}

/// The qualified-name regex alone (`([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`), any length.
fn is_qualified_part_chars(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

fn validate_qualified_key(causes: &mut Causes, field: &str, key: &str) {
    for message in qualified_name_errors(key) {
        causes.invalid(field, &quote(key), &message);
    }
}

fn validate_labels(causes: &mut Causes, labels: &BTreeMap<String, String>) {
    for (k, v) in labels {
        validate_qualified_key(causes, "metadata.labels", k);
        for message in label_value_errors(v) {
            causes.invalid("metadata.labels", &quote(v), &message);
        }
    }
}

/// The number of a `[0-9]+%` string (None for anything else): an `IntOrString` percentage, as
/// the budget's validation and the disruption controller's scaling both read it.
pub(crate) fn parse_percent(s: &str) -> Option<u64> {
    let digits = s.strip_suffix('%')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // More digits than a u64 holds: certainly more than 100%.
    Some(digits.parse().unwrap_or(u64::MAX))
}

/// Validates the metadata every object has: name (as an RFC 1123 subdomain), labels, annotations.
pub fn validate_meta(causes: &mut Causes, meta: &ObjectMeta) {
    // A generateName is checked as a prefix (a trailing `-` is fine), before the name made of it.
    if let Some(prefix) = meta.generate_name.as_deref().filter(|g| !g.is_empty()) {
        let masked = match prefix.strip_suffix('-') {
            Some(rest) if !rest.is_empty() => format!("{rest}a"),
            _ => prefix.to_owned(),
        };
        if !is_dns1123_subdomain(&masked) {
            causes.invalid(
                "metadata.generateName",
                &quote(prefix),
                DNS1123_SUBDOMAIN_MSG,
            );
        }
    }
    match meta.name.as_deref() {
        None | Some("") => causes.required("metadata.name", "name or generateName is required"),
        Some(name) if !is_dns1123_subdomain(name) => {
            causes.invalid("metadata.name", &quote(name), DNS1123_SUBDOMAIN_MSG)
        }
        Some(_) => {}
    }
    if let Some(labels) = &meta.labels {
        validate_labels(causes, labels);
    }
    if let Some(annotations) = &meta.annotations {
        let mut total = 0;
        for (k, v) in annotations {
            validate_qualified_key(causes, "metadata.annotations", k);
            total += k.len() + v.len();
        }
        if total > 256 * 1024 {
            causes.push(
                "FieldValueTooLong",
                "metadata.annotations",
                format!("Too long: may not be more than {} bytes", 256 * 1024),
            );
        }
    }
}

/// `IsDNS1123Subdomain`'s messages for `name` (apimachinery `pkg/util/validation`).
fn dns1123_subdomain_errors(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    if name.len() > 253 {
        out.push("must be no more than 253 characters".to_owned());
    }
    if !is_dns1123_subdomain_shape(name) {
        out.push(DNS1123_SUBDOMAIN_MSG.to_owned());
    }
    out
}

/// Whether `name` matches the DNS-1123 subdomain pattern, whatever its length.
fn is_dns1123_subdomain_shape(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// A container's resources as `ValidateResourceRequirements` checks them
/// (pkg/apis/core/validation/validation.go): no negative quantity (`<path>.limits[<name>]`,
/// `<path>.requests[<name>]`: `must be greater than or equal to 0`), and no request above its
/// limit (reported on `<path>.requests` itself: `must be less than or equal to <name> limit of
/// <limit>`).
fn validate_resources(
    causes: &mut Causes,
    path: &str,
    resources: &k8s_openapi::api::core::v1::ResourceRequirements,
) {
    use crate::quantity::Quantity;
    let negative = "must be greater than or equal to 0";
    let limits = resources.limits.as_ref();
    for (name, q) in limits.into_iter().flatten() {
        if Quantity::parse(&q.0).is_some_and(|v| v.nanos < 0) {
            causes.invalid(&format!("{path}.limits[{name}]"), &quote(&q.0), negative);
        }
    }
    for (name, q) in resources.requests.iter().flatten() {
        let Some(request) = Quantity::parse(&q.0) else {
            continue;
        };
        if request.nanos < 0 {
            causes.invalid(&format!("{path}.requests[{name}]"), &quote(&q.0), negative);
        }
        let limit = limits.and_then(|l| l.get(name));
        if let Some(limit) = limit
            && Quantity::parse(&limit.0).is_some_and(|l| request.nanos > l.nanos)
        {
            causes.invalid(
                &format!("{path}.requests"),
                &quote(&q.0),
                &format!("must be less than or equal to {name} limit of {}", limit.0),
            );
        }
    }
}

/// Validates a pod for create: metadata, containers (at least one, names, images), restart policy.
pub fn validate_pod(pod: &Pod) -> Causes {
    let mut causes = Causes::default();
    validate_meta(&mut causes, &pod.metadata);
    let Some(spec) = &pod.spec else {
        causes.required("spec.containers", "");
        return causes;
    };
    if spec.containers.is_empty() {
        causes.required("spec.containers", "");
    }
    let mut names = BTreeSet::new();
    let all = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| (format!("spec.initContainers[{i}]"), c))
        .chain(
            spec.containers
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("spec.containers[{i}]"), c)),
        );
    for (path, c) in all {
        let name_field = format!("{path}.name");
        if c.name.is_empty() {
            causes.required(&name_field, "");
        } else if !is_dns1123_label(&c.name) {
            causes.invalid(&name_field, &quote(&c.name), DNS1123_LABEL_MSG);
        } else if !names.insert(c.name.clone()) {
            causes.duplicate(&name_field, &c.name);
        }
        if c.image.as_deref().is_none_or(|i| i.trim().is_empty()) {
            causes.required(&format!("{path}.image"), "");
        }
        if let Some(resources) = &c.resources {
            validate_resources(&mut causes, &format!("{path}.resources"), resources);
        }
    }
    // `ValidateServiceAccountName`: a DNS-1123 subdomain (pkg/apis/core/validation/validation.go
    // `ValidatePodSpec`).
    if let Some(name) = spec
        .service_account_name
        .as_deref()
        .filter(|n| !n.is_empty())
    {
        for message in dns1123_subdomain_errors(name) {
            causes.invalid("spec.serviceAccountName", &quote(name), &message);
        }
    }
    if let Some(policy) = spec.restart_policy.as_deref()
        && !matches!(policy, "Always" | "OnFailure" | "Never")
    {
        causes.unsupported(
            "spec.restartPolicy",
            policy,
            &["Always", "OnFailure", "Never"],
        );
    }
    if let Some(d) = spec.active_deadline_seconds
        && !(1..=MAX_ACTIVE_DEADLINE_SECONDS).contains(&d)
    {
        causes.invalid(
            "spec.activeDeadlineSeconds",
            &d.to_string(),
            ACTIVE_DEADLINE_RANGE_MSG,
        );
    }
    if let Some(g) = spec.termination_grace_period_seconds
        && g < 0
    {
        causes.invalid(
            "spec.terminationGracePeriodSeconds",
            &g.to_string(),
            "must be greater than or equal to 0",
        );
    }
    causes
}

/// Validates a Lease like kube-apiserver's `ValidateLease`: metadata, a positive duration, a
/// non-negative transition count, and a preferred holder only with a strategy.
pub fn validate_lease(lease: &Lease) -> Causes {
    let mut causes = Causes::default();
    validate_meta(&mut causes, &lease.metadata);
    let Some(spec) = &lease.spec else {
        return causes;
    };
    if let Some(d) = spec.lease_duration_seconds
        && d <= 0
    {
        causes.invalid(
            "spec.leaseDurationSeconds",
            &d.to_string(),
            "must be greater than 0",
        );
    }
    if let Some(t) = spec.lease_transitions
        && t < 0
    {
        causes.invalid(
            "spec.leaseTransitions",
            &t.to_string(),
            "must be greater than or equal to 0",
        );
    }
    // A `/`-qualified strategy is a custom one (not checked here); others must be known.
    if let Some(strategy) = spec.strategy.as_deref()
        && strategy != "OldestEmulationVersion"
        && !strategy.contains('/')
    {
        causes.unsupported("spec.strategy", strategy, &["OldestEmulationVersion"]);
    }
    if spec
        .preferred_holder
        .as_deref()
        .is_some_and(|h| !h.is_empty())
        && spec.strategy.as_deref().is_none_or(str::is_empty)
    {
        causes.forbidden(
            "spec.preferredHolder",
            "may only be specified if `strategy` is defined",
        );
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_should_get_every_problem_like_apimachinery() {
        assert!(qualified_name_errors("app").is_empty());
        assert!(qualified_name_errors("example.com/app").is_empty());
        assert_eq!(
            qualified_name_errors("example.com/"),
            vec![
                "name part must be non-empty".to_owned(),
                QUALIFIED_NAME_MSG.to_owned()
            ]
        );
        let many = qualified_name_errors("a/b/c");
        assert_eq!(many.len(), 1);
        assert!(
            many[0].starts_with("a qualified name must consist of alphanumeric characters")
                && many[0].ends_with(
                    "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
                ),
            "{many:?}"
        );
        assert_eq!(label_value_errors(&"x".repeat(64)).len(), 1);
        assert_eq!(label_value_errors(&format!("-{}", "x".repeat(64))).len(), 2);
    }

    /// pkg/apis/core/validation/validation.go: `ValidateResourceRequirements` (negative
    /// quantities on the keyed path, a request above its limit on `requests` itself) and
    /// `ValidatePodSpec`'s `ValidateServiceAccountName`.
    #[test]
    fn pods_with_negative_or_inverted_resources_or_a_bad_service_account_are_invalid() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "bad"},
            "spec": {
                "serviceAccountName": "../../etc",
                "containers": [{
                    "name": "main", "image": "busybox",
                    "resources": {
                        "requests": {"memory": "-1Gi", "cpu": "2"},
                        "limits": {"cpu": "1"}
                    }
                }]
            }
        }))
        .expect("a pod");
        let messages: Vec<String> = validate_pod(&pod)
            .0
            .iter()
            .map(|c| {
                format!(
                    "{}: {}",
                    c.field.as_deref().unwrap_or(""),
                    c.message.as_deref().unwrap_or("")
                )
            })
            .collect();
        assert_eq!(
            messages,
            [
                r#"spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1"#.to_owned(),
                r#"spec.containers[0].resources.requests[memory]: Invalid value: "-1Gi": must be greater than or equal to 0"#.to_owned(),
                format!(r#"spec.serviceAccountName: Invalid value: "../../etc": {DNS1123_SUBDOMAIN_MSG}"#),
            ]
        );
        let mut fine = pod.clone();
        let spec = fine.spec.as_mut().expect("spec");
        spec.service_account_name = Some("builder.example".to_owned());
        spec.containers[0].resources = None;
        assert!(validate_pod(&fine).is_empty());
    }

    #[test]
    fn names_follow_rfc1123() {
        assert!(is_dns1123_subdomain("a.b-c.d"));
        assert!(!is_dns1123_subdomain("A"));
        assert!(!is_dns1123_subdomain("-a"));
        assert!(!is_dns1123_subdomain("a_b"));
        assert!(is_dns1123_label("main"));
        assert!(!is_dns1123_label("a.b"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
    }
}
