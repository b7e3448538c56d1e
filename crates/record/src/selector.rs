//! A label selector (`-l`) parsed once, so the recorder can fail fast on a bad one and evaluate it
//! against stored labels when reconciling (only pods in the recorder's scope may be marked
//! vanished).
//!
//! Grammar, as kubectl accepts it: comma-separated requirements `key=value`, `key==value`,
//! `key!=value`, `key`, `!key`, `key in (a,b)`, `key notin (a,b)`.

use std::collections::BTreeMap;

use kube::core::{Expression, Selector, SelectorExt};

use crate::error::SelectorError;

/// A parsed label selector; the original text is kept for the API requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelSelector {
    text: String,
    selector: Selector,
}

impl LabelSelector {
    /// Parses `text`; the error names the requirement that is wrong and the accepted forms.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut selector = Selector::default();
        for requirement in split_requirements(text) {
            let requirement = requirement.trim();
            if requirement.is_empty() {
                continue;
            }
            selector.extend(parse_requirement(requirement).ok_or_else(|| SelectorError {
                selector: text.to_owned(),
                requirement: requirement.to_owned(),
            })?);
        }
        Ok(Self {
            text: text.trim().to_owned(),
            selector,
        })
    }

    /// The selector as the API server expects it in `labelSelector`.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether a pod with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector.matches(labels)
    }
}

/// Splits on commas that are not inside `( )`.
fn split_requirements(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn parse_requirement(req: &str) -> Option<Expression> {
    if let Some(key) = req.strip_prefix('!') {
        let key = key.trim();
        return valid_key(key).then(|| Expression::DoesNotExist(key.to_owned()));
    }
    for (op, not) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((key, value)) = req.split_once(op) {
            let (key, value) = (key.trim(), value.trim());
            if !valid_key(key) || !valid_value(value) {
                return None;
            }
            return Some(if not {
                Expression::NotEqual(key.to_owned(), value.to_owned())
            } else {
                Expression::Equal(key.to_owned(), value.to_owned())
            });
        }
    }
    if let Some(open) = req.find('(') {
        let head: Vec<&str> = req[..open].split_whitespace().collect();
        let inner = req[open + 1..].strip_suffix(')')?;
        let values: std::collections::BTreeSet<String> =
            inner.split(',').map(|v| v.trim().to_owned()).collect();
        if values.iter().any(|v| v.is_empty() || !valid_value(v)) {
            return None;
        }
        return match head.as_slice() {
            [key, "in"] if valid_key(key) => Some(Expression::In((*key).to_owned(), values)),
            [key, "notin"] if valid_key(key) => Some(Expression::NotIn((*key).to_owned(), values)),
            _ => None,
        };
    }
    valid_key(req).then(|| Expression::Exists(req.to_owned()))
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
    fn every_kubectl_form_parses_and_matches() {
        let s =
            LabelSelector::parse("app=web, tier!=db,env in (prod, stage),!legacy,team,x notin (a)")
                .unwrap();
        assert!(s.matches(&labels(&[("app", "web"), ("env", "prod"), ("team", "t")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("env", "dev"), ("team", "t")])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("env", "prod"),
            ("team", "t"),
            ("legacy", "1")
        ])));
        assert!(
            !s.matches(&labels(&[("app", "web"), ("env", "prod")])),
            "team must exist"
        );
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("env", "prod"),
            ("team", "t"),
            ("x", "a")
        ])));
        assert!(
            LabelSelector::parse("podline.io/run==r1")
                .unwrap()
                .matches(&labels(&[("podline.io/run", "r1")]))
        );
        assert!(LabelSelector::parse("").unwrap().matches(&labels(&[])));
    }

    #[test]
    fn bad_selectors_name_the_bad_requirement() {
        for bad in ["app=we b", "a in (", "=x", "a in ()", "a within (b)"] {
            let err = LabelSelector::parse(bad).unwrap_err();
            assert!(err.to_string().contains("expected"), "{bad}: {err}");
        }
    }
}
