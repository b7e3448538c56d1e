//! Label and field selectors with the real server's syntax and semantics.
//!
//! Labels: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a` (exists), `!a` (does not
//! exist), joined by commas (AND). `!=` and `notin` also match objects without the label.
//! Fields: `f=v`, `f==v`, `f!=v`, joined by commas, over the fields each kind supports.

use crate::cluster::{Facts, Kind};
use crate::status::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector (empty matches everything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<LabelReq>);

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, ApiError> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| bad(whole, "expected a set of values in parentheses"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect())
}

fn bad(selector: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!(
        "unable to parse requirement: found '{selector}', {why}"
    ))
}

fn check_key(key: &str, whole: &str) -> Result<String, ApiError> {
    let key = key.trim();
    let ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(key.to_owned())
    } else {
        Err(bad(whole, "invalid label key"))
    }
}

impl LabelSelector {
    /// Parses a selector string.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let req = if let Some(key) = part.strip_prefix('!') {
                LabelReq::NotExists(check_key(key, part)?)
            } else if let Some((k, v)) = part.split_once("!=") {
                LabelReq::NotEq(check_key(k, part)?, v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelReq::Eq(check_key(k, part)?, v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelReq::Eq(check_key(k, part)?, v.trim().to_owned())
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                LabelReq::NotIn(check_key(k, part)?, parse_set(rest, part)?)
            } else if let Some((k, rest)) = part.split_once(" in ") {
                LabelReq::In(check_key(k, part)?, parse_set(rest, part)?)
            } else {
                LabelReq::Exists(check_key(part, part)?)
            };
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    /// Whether the selector is empty (matches everything).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the labels `get` answers satisfy every requirement (`get` gives a label's value).
    pub fn matches<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        let in_set = |x: &str, vs: &[String]| vs.iter().any(|v| v == x);
        self.0.iter().all(|req| match req {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| in_set(x, vs)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| !in_set(x, vs)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

/// One field requirement: the field's index in its kind's [`Kind::FIELDS`], whether it must be
/// equal (else not equal), and the value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldReq {
    index: usize,
    equal: bool,
    value: String,
}

/// A parsed field selector (empty matches everything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<FieldReq>);

impl FieldSelector {
    /// Parses a selector, checking each field is supported by kind `K`.
    pub fn parse<K: Kind>(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            let Some(index) = K::FIELDS.iter().position(|f| *f == field) else {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            };
            reqs.push(FieldReq {
                index,
                equal,
                value: value.trim().to_owned(),
            });
        }
        Ok(Self(reqs))
    }

    /// Whether the selector is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether an object with these facts (of the kind the selector was parsed for) satisfies
    /// every requirement.
    pub fn matches(&self, facts: &Facts) -> bool {
        self.0
            .iter()
            .all(|req| (facts.field(req.index) == req.value) == req.equal)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn label_selectors_follow_the_real_semantics() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let m = |s: &str| {
            LabelSelector::parse(s)
                .expect(s)
                .matches(|k| l.get(k).map(String::as_str))
        };
        assert!(m("app=web"));
        assert!(m("app==web,tier=front"));
        assert!(!m("app=db"));
        assert!(m("app!=db"));
        assert!(m("missing!=x"), "!= matches objects without the label");
        assert!(m("app in (web, db)"));
        assert!(!m("app notin (web)"));
        assert!(m("missing notin (web)"));
        assert!(m("app"));
        assert!(!m("!app"));
        assert!(m("!missing"));
        assert!(m(""));
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("a b=c").is_err());
    }

    #[test]
    fn field_selectors_read_the_facts() {
        use k8s_openapi::api::core::v1::{Pod, PodStatus};
        let mut pod = Pod::default();
        pod.metadata.name = Some("web-1".into());
        pod.status = Some(PodStatus {
            phase: Some("Running".into()),
            ..PodStatus::default()
        });
        let facts = Facts::of(&pod);
        let m = |s: &str| FieldSelector::parse::<Pod>(s).expect(s).matches(&facts);
        assert!(m("status.phase=Running"));
        assert!(m("status.phase!=Pending,metadata.name=web-1"));
        assert!(!m("status.phase==Pending"));
        assert!(m("spec.nodeName="), "an unset field is empty");
        assert!(FieldSelector::parse::<Pod>("spec.nope=x").is_err());
    }
}
