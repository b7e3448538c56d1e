//! Declarative fault rules: which requests a rule matches, when it fires, what it does.
//!
//! In YAML (the `podline sim` fault file) or JSON (`POST /_sim/faults`):
//! ```yaml
//! rules:
//!   - verb: create
//!     resource: pods
//!     probability: 0.3
//!     action: { status: { code: 409 } }      # quota-style Conflict
//!   - verb: watch
//!     resource: pods
//!     times: 1
//!     action: { reset: { after_events: 2 } }  # break the next watch after 2 events
//!   - verb: watch
//!     times: 1
//!     action: { freeze: { after_ms: 500 } }   # freeze the next watch's connection (TCP level)
//!   - verb: create
//!     resource: pods
//!     probability: 0.05
//!     action: commit_then_reset_stream        # store the pod, lose the answer (one stream)
//! ```
//!
//! `reset` and `commit_then_drop` act on the request's whole connection: over HTTP/2 that is
//! every request multiplexed on it. Their `_stream` forms (`reset_stream`,
//! `commit_then_reset_stream`) act on the one request, so a rule's rate means the same for
//! HTTP/1.1 and HTTP/2 clients.

use serde::{Deserialize, Serialize};

use crate::api::RequestInfo;
use crate::error::SimError;
use crate::verb::Verb;

/// A set of fault rules, evaluated in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultPlan {
    /// The rules.
    #[serde(default)]
    pub rules: Vec<FaultRule>,
}

impl FaultPlan {
    /// Parses a plan from YAML or JSON (JSON is YAML); accepts `{rules: [...]}`, a bare list of
    /// rules, or a single rule. Every rule is validated.
    pub fn parse(text: &str) -> Result<Self, SimError> {
        let plan = if let Ok(plan) = serde_saphyr::from_str::<FaultPlan>(text) {
            plan
        } else if let Ok(rules) = serde_saphyr::from_str::<Vec<FaultRule>>(text) {
            FaultPlan { rules }
        } else {
            match serde_saphyr::from_str::<FaultRule>(text) {
                Ok(rule) => FaultPlan { rules: vec![rule] },
                Err(_) => {
                    // Report the error of the documented form.
                    let err = serde_saphyr::from_str::<FaultPlan>(text)
                        .err()
                        .map(|e| e.to_string())
                        .unwrap_or_default();
                    return Err(SimError::FaultPlan(format!(
                        "{err} (expected `rules:` with a list of rules, each with an `action` such as `{{status: {{code: 409}}}}`)"
                    )));
                }
            }
        };
        for rule in &plan.rules {
            rule.validate()?;
        }
        Ok(plan)
    }
}

/// The verbs a rule can match.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultVerb {
    /// Every request.
    #[default]
    Any,
    /// POST.
    Create,
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// Watch.
    Watch,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
    /// GET of `pods/{name}/log`.
    Log,
}

/// What a rule does when it fires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FaultAction {
    /// Answer with this status instead of serving the request. 409 defaults to the
    /// ResourceQuota conflict the real server sends under create bursts; 429 carries Retry-After.
    Status {
        /// HTTP status code (e.g. 409, 429, 500, 502, 503, 504).
        code: u16,
        /// `reason` of the Status (default: what the real server uses for that code).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// `message` of the Status (default: the real server's wording).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        /// Retry-After seconds (default 1 for 429).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after: Option<u32>,
    },
    /// Delay the request by this many milliseconds, then serve it (other rules still apply).
    Latency {
        /// Milliseconds.
        ms: u64,
    },
    /// Streams: send `after_events` events, then nothing more while keeping the connection open.
    /// Unary requests: never answer.
    Stall {
        /// Events sent before the stall (streams only).
        #[serde(default)]
        after_events: u64,
    },
    /// Send part of the response, then abort the TCP connection in the middle of a chunk.
    Reset {
        /// Reset once this many body bytes were sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after_bytes: Option<u64>,
        /// Reset once this many events (watch) or lines (logs) were sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after_events: Option<u64>,
    },
    /// End the stream cleanly after this many events (like a server-side timeout, but early).
    EndEarly {
        /// Events sent before the end.
        after_events: u64,
    },
    /// Perform the request (a create is stored), then drop the connection without a response.
    CommitThenDrop,
    /// `reset` for this request alone. Over HTTP/2 its stream is reset (RST_STREAM with
    /// INTERNAL_ERROR, as Go's server resets the stream of a handler that aborts) after the same
    /// part of the response, and every other stream on the connection goes on. Over HTTP/1.1,
    /// which carries one request at a time, the connection is reset, as `reset` does.
    ResetStream {
        /// Reset once this many body bytes were sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after_bytes: Option<u64>,
        /// Reset once this many events (watch) or lines (logs) were sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after_events: Option<u64>,
    },
    /// `commit_then_drop` for this request alone: the write is stored, then, over HTTP/2, its
    /// stream is reset before any response header (a lost response; other streams on the
    /// connection go on). Over HTTP/1.1 the connection is dropped, as `commit_then_drop` does.
    CommitThenResetStream,
    /// Freeze the whole TCP connection the request rides on, like a frozen proxy: from then on
    /// the sim neither reads nor writes a byte on it, and never closes it. Over HTTP/2 every
    /// request multiplexed on that connection freezes too, and the client's PINGs go unanswered.
    /// Without `after_ms` the connection freezes at once and the request is never answered (the
    /// client waits for response headers); with it the request is served (a watch opens) and the
    /// connection freezes `after_ms` later (a quiet watch that goes silent).
    Freeze {
        /// Serve the request, then freeze the connection this many milliseconds later.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after_ms: Option<u64>,
    },
    /// Serves objects whose `metadata.name` matches the glob `name` garbled so that no client
    /// model decodes them (`field` says how), like an object from a newer or buggy API server:
    /// in each watch event, each LIST item and a GET of one object. Everything else is served
    /// unchanged, and writes are not affected (the stored object stays valid).
    Malform {
        /// Glob (`*`, `?`) of the object names to garble.
        name: String,
        /// What to garble (default `status`).
        #[serde(default, skip_serializing_if = "MalformField::is_default")]
        field: MalformField,
    },
}

/// What a [`FaultAction::Malform`] garbles in a served object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MalformField {
    /// `status.containerStatuses` as a string: the metadata still decodes, a typed Pod does not.
    #[default]
    Status,
    /// `metadata.deletionTimestamp: "not-a-time"`: not even the metadata decodes (`Time` is RFC
    /// 3339), so a client reading the object generically fails too.
    DeletionTimestamp,
}

impl MalformField {
    fn is_default(&self) -> bool {
        *self == MalformField::Status
    }
}

impl FaultAction {
    /// A status action with the default reason and message for `code`.
    pub fn status(code: u16) -> Self {
        FaultAction::Status {
            code,
            reason: None,
            message: None,
            retry_after: None,
        }
    }
}

/// One rule: a match, a trigger, an action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// Verb to match (default any).
    #[serde(default)]
    pub verb: FaultVerb,
    /// Resource to match, e.g. `pods`, `pods/log`, `pods/status`, `leases` (default any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Namespace to match (default any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Object name glob (`*` and `?`) to match (default any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Fire with this probability (0..=1) on each match (default: always).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    /// Fire on the next N matches only, then retire (default: forever).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
    /// What to do.
    pub action: FaultAction,
}

impl FaultRule {
    /// A rule matching every request with `action`; narrow it with the setters.
    pub fn new(action: FaultAction) -> Self {
        Self {
            verb: FaultVerb::Any,
            resource: None,
            namespace: None,
            name: None,
            probability: None,
            times: None,
            action,
        }
    }
    /// Matches only this verb.
    #[must_use]
    pub fn verb(mut self, verb: FaultVerb) -> Self {
        self.verb = verb;
        self
    }
    /// Matches only this resource (`pods`, `pods/log`...).
    #[must_use]
    pub fn resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }
    /// Matches only this namespace.
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }
    /// Matches only names matching this glob.
    #[must_use]
    pub fn name(mut self, glob: impl Into<String>) -> Self {
        self.name = Some(glob.into());
        self
    }
    /// Fires with this probability.
    #[must_use]
    pub fn probability(mut self, p: f64) -> Self {
        self.probability = Some(p);
        self
    }
    /// Fires on the next `n` matches only.
    #[must_use]
    pub fn times(mut self, n: u32) -> Self {
        self.times = Some(n);
        self
    }

    /// Checks values a parser cannot: probability range, status codes.
    pub fn validate(&self) -> Result<(), SimError> {
        if let Some(p) = self.probability
            && !(0.0..=1.0).contains(&p)
        {
            return Err(SimError::FaultPlan(format!(
                "probability {p} is out of range (expected a number from 0 to 1)"
            )));
        }
        if let FaultAction::Status { code, .. } = self.action
            && !(400..=599).contains(&code)
        {
            return Err(SimError::FaultPlan(format!(
                "status code {code} is not an error (expected 400..=599)"
            )));
        }
        Ok(())
    }

    /// Whether the rule's match part accepts this request.
    pub fn matches(&self, info: &RequestInfo) -> bool {
        if !info.is_resource {
            return false;
        }
        let verb_ok = match self.verb {
            FaultVerb::Any => true,
            FaultVerb::Log => info.subresource == "log",
            FaultVerb::Create => info.verb == Verb::Create,
            FaultVerb::Get => info.verb == Verb::Get && info.subresource != "log",
            FaultVerb::List => info.verb == Verb::List,
            FaultVerb::Watch => info.verb == Verb::Watch,
            FaultVerb::Update => info.verb == Verb::Update,
            FaultVerb::Patch => info.verb == Verb::Patch,
            FaultVerb::Delete => matches!(info.verb, Verb::Delete | Verb::DeleteCollection),
        };
        verb_ok
            && self
                .resource
                .as_ref()
                .is_none_or(|r| *r == info.resource_path())
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| *ns == info.namespace)
            && self.name.as_ref().is_none_or(|g| glob_match(g, &info.name))
    }
}

/// Glob match with `*` (any run) and `?` (any one character).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_shell_patterns() {
        assert!(glob_match("job-*", "job-1"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "ac"));
        assert!(glob_match("*-x-*", "a-x-b"));
        assert!(!glob_match("job-*", "jo"));
    }

    #[test]
    fn plans_parse_from_yaml_in_three_shapes_and_are_validated() {
        let plan = FaultPlan::parse(
            "rules:\n  - verb: create\n    resource: pods\n    probability: 0.5\n    action: {status: {code: 409}}\n",
        )
        .expect("plan");
        assert_eq!(plan.rules[0].verb, FaultVerb::Create);
        assert_eq!(plan.rules[0].action, FaultAction::status(409));
        let plan = FaultPlan::parse("- action: commit_then_drop\n  times: 2\n").expect("list");
        assert_eq!(plan.rules[0].action, FaultAction::CommitThenDrop);
        let plan = FaultPlan::parse(
            "- action: commit_then_reset_stream\n- action: {reset_stream: {after_events: 3}}\n- action: {reset_stream: {}}\n",
        )
        .expect("per-stream faults");
        assert_eq!(plan.rules[0].action, FaultAction::CommitThenResetStream);
        assert_eq!(
            plan.rules[1].action,
            FaultAction::ResetStream {
                after_bytes: None,
                after_events: Some(3)
            }
        );
        assert_eq!(
            plan.rules[2].action,
            FaultAction::ResetStream {
                after_bytes: None,
                after_events: None
            }
        );
        let plan =
            FaultPlan::parse("- action: {freeze: {after_ms: 500}}\n- action: {freeze: {}}\n")
                .expect("freeze");
        assert_eq!(
            plan.rules[0].action,
            FaultAction::Freeze {
                after_ms: Some(500)
            }
        );
        assert_eq!(plan.rules[1].action, FaultAction::Freeze { after_ms: None });
        let plan = FaultPlan::parse(r#"{"verb":"watch","action":{"reset":{"after_events":2}}}"#)
            .expect("one");
        assert_eq!(plan.rules[0].verb, FaultVerb::Watch);
        let plan = FaultPlan::parse("- verb: watch\n  action: {malform: {name: bad-*}}\n")
            .expect("malform");
        assert_eq!(
            plan.rules[0].action,
            FaultAction::Malform {
                name: "bad-*".into(),
                field: MalformField::Status,
            }
        );
        let plan = FaultPlan::parse(
            "- resource: pods\n  action: {malform: {name: bad, field: deletion_timestamp}}\n",
        )
        .expect("malform a field");
        assert_eq!(
            plan.rules[0].action,
            FaultAction::Malform {
                name: "bad".into(),
                field: MalformField::DeletionTimestamp,
            }
        );
        assert!(FaultPlan::parse("- action: {malform: {name: x, field: spec}}\n").is_err());
        let err = FaultPlan::parse("rules:\n  - probability: 2\n    action: {latency: {ms: 1}}\n")
            .expect_err("bad probability");
        assert!(err.to_string().contains("probability 2"), "{err}");
        assert!(FaultPlan::parse("rules: [{action: {explode: {}}}]").is_err());
    }
}
