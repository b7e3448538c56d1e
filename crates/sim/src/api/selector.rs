//! Label and field selectors with the real server's syntax and semantics.
//!
//! Labels: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a` (exists), `!a` (does not
//! exist), joined by commas (AND). `!=` and `notin` also match objects without the label.
//! Fields: `f=v`, `f==v`, `f!=v`, joined by commas, over the fields each kind supports.

use std::collections::BTreeMap;

use crate::cluster::Kind;
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

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k));
        self.0.iter().all(|req| match req {
            LabelReq::Eq(k, v) => get(k) == Some(v),
            LabelReq::NotEq(k, v) => get(k) != Some(v),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.contains(x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| !vs.contains(x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector (empty matches everything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses a selector, checking each field is supported by kind `K`.
    pub fn parse<K: Kind>(s: &str, probe: &K) -> Result<Self, ApiError> {
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
            if probe.field(field).is_none() {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            reqs.push((field.to_owned(), equal, value.trim().to_owned()));
        }
        Ok(Self(reqs))
    }

    /// Whether the selector is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `obj` satisfies every requirement.
    pub fn matches<K: Kind>(&self, obj: &K) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = obj.field(field).unwrap_or_default();
            (actual == *value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
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
        let m = |s: &str| LabelSelector::parse(s).expect(s).matches(Some(&l));
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
}
