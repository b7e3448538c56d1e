//! Label and field selectors with the real server's syntax and semantics.
//!
//! Labels: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a` (exists), `!a` (does not
//! exist), `a>1`, `a<1` (integer values), joined by commas (AND). `!=` and `notin` also match
//! objects without the label. Keys and values are validated like labels, and every error is
//! apimachinery's wording.
//! Fields: `f=v`, `f==v`, `f!=v`, joined by commas, over the fields each kind supports.

use std::collections::BTreeSet;

use podline_sim_core::cluster::{Facts, Kind};
use podline_sim_core::validation::{label_value_errors, qualified_name_errors};

use super::query::{go_parse_int, go_quote};
use crate::status::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    Gt(String, i64),
    Lt(String, i64),
}

/// A parsed label selector (empty matches everything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<LabelReq>);

/// Tokens of the label selector grammar (apimachinery's `labels` lexer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    Gt,
    Identifier,
    In,
    Lt,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &str) -> Option<Tok> {
    Some(match s {
        ")" => Tok::ClosedPar,
        "," => Tok::Comma,
        "!" => Tok::DoesNotExist,
        "==" => Tok::DoubleEquals,
        "=" => Tok::Equals,
        ">" => Tok::Gt,
        "in" => Tok::In,
        "<" => Tok::Lt,
        "!=" => Tok::NotEquals,
        "notin" => Tok::NotIn,
        "(" => Tok::OpenPar,
        _ => return None,
    })
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Splits a selector into tokens: runs of operator characters become the longest operator
/// they start with; other runs (up to an operator or a blank) are identifiers or `in`/`notin`.
fn lex(s: &str) -> Vec<(Tok, &str)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        while pos < b.len() && is_space(b[pos]) {
            pos += 1;
        }
        if pos >= b.len() {
            out.push((Tok::End, ""));
            return out;
        }
        let start = pos;
        if is_special(b[pos]) {
            // Every single operator character is a token, so `last` is set after one step.
            let mut last = (Tok::End, start);
            while pos < b.len() && is_special(b[pos]) {
                match keyword(&s[start..=pos]) {
                    Some(tok) => last = (tok, pos + 1),
                    None => break,
                }
                pos += 1;
            }
            pos = last.1;
            out.push((last.0, &s[start..pos]));
        } else {
            while pos < b.len() && !is_special(b[pos]) && !is_space(b[pos]) {
                pos += 1;
            }
            let lit = &s[start..pos];
            out.push((keyword(lit).unwrap_or(Tok::Identifier), lit));
        }
    }
}

/// Where the parser reads operators (`in`/`notin` are keywords) or values (they are names).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    KeyAndOperator,
    Values,
}

/// The operator of a requirement being parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Exists,
    DoesNotExist,
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    Gt,
    Lt,
}

/// A recursive-descent parser with the grammar and the error messages of apimachinery's
/// `labels.Parse`, so a bad `labelSelector` gets the 400 text a real server sends.
struct Parser<'a> {
    items: Vec<(Tok, &'a str)>,
    position: usize,
}

impl<'a> Parser<'a> {
    fn lookahead(&self, ctx: Ctx) -> (Tok, &'a str) {
        let (tok, lit) = self.items[self.position.min(self.items.len() - 1)];
        match tok {
            Tok::In | Tok::NotIn if ctx == Ctx::Values => (Tok::Identifier, lit),
            _ => (tok, lit),
        }
    }

    fn consume(&mut self, ctx: Ctx) -> (Tok, &'a str) {
        let item = self.lookahead(ctx);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<LabelReq>, String> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Ctx::Values);
            match tok {
                Tok::Identifier | Tok::DoesNotExist => {
                    let req = self
                        .requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(req);
                    let (tok, lit) = self.consume(Ctx::Values);
                    match tok {
                        Tok::End => return Ok(reqs),
                        Tok::Comma => {
                            let (next, lit) = self.lookahead(Ctx::Values);
                            if next != Tok::Identifier && next != Tok::DoesNotExist {
                                return Err(format!(
                                    "found '{lit}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!("found '{lit}', expected: ',' or 'end of string'"));
                        }
                    }
                }
                Tok::End => return Ok(reqs),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<LabelReq, String> {
        let (key, op) = self.key_and_inferred_operator()?;
        let op = match op {
            Some(op @ (Op::Exists | Op::DoesNotExist)) => return new_requirement(key, op, &[]),
            _ => self.operator()?,
        };
        let values = match op {
            Op::In | Op::NotIn => self.values()?,
            _ => self.exact_value()?,
        };
        let values: Vec<&str> = values.into_iter().collect();
        new_requirement(key, op, &values)
    }

    fn key_and_inferred_operator(&mut self) -> Result<(&'a str, Option<Op>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Ctx::Values);
        if tok == Tok::DoesNotExist {
            op = Some(Op::DoesNotExist);
            (tok, lit) = self.consume(Ctx::Values);
        }
        if tok != Tok::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let errors = qualified_name_errors(lit);
        if !errors.is_empty() {
            // The parser's field path is nil, which Go prints as `<nil>`.
            return Err(format!(
                "<nil>: Invalid value: {}: {}",
                go_quote(lit),
                errors.join("; ")
            ));
        }
        if matches!(self.lookahead(Ctx::Values).0, Tok::End | Tok::Comma) && op.is_none() {
            op = Some(Op::Exists);
        }
        Ok((lit, op))
    }

    fn operator(&mut self) -> Result<Op, String> {
        let (tok, lit) = self.consume(Ctx::KeyAndOperator);
        Ok(match tok {
            Tok::In => Op::In,
            Tok::Equals => Op::Equals,
            Tok::DoubleEquals => Op::DoubleEquals,
            Tok::Gt => Op::Gt,
            Tok::Lt => Op::Lt,
            Tok::NotIn => Op::NotIn,
            Tok::NotEquals => Op::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    fn values(&mut self) -> Result<BTreeSet<&'a str>, String> {
        let (tok, lit) = self.consume(Ctx::Values);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Ctx::Values);
        match tok {
            Tok::Identifier | Tok::Comma => {
                let set = self.identifiers()?;
                if self.consume(Ctx::Values).0 != Tok::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set)
            }
            Tok::ClosedPar => {
                self.consume(Ctx::Values);
                Ok(BTreeSet::from([""]))
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn identifiers(&mut self) -> Result<BTreeSet<&'a str>, String> {
        let mut set = BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(Ctx::Values);
            match tok {
                Tok::Identifier => {
                    set.insert(lit);
                    let (next, lit) = self.lookahead(Ctx::Values);
                    match next {
                        Tok::Comma => {}
                        Tok::ClosedPar => return Ok(set),
                        _ => return Err(format!("found '{lit}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    // `(,`, `,,` and `,)` each stand for an empty value.
                    if set.is_empty() {
                        set.insert("");
                    }
                    match self.lookahead(Ctx::Values).0 {
                        Tok::ClosedPar => {
                            set.insert("");
                            return Ok(set);
                        }
                        Tok::Comma => {
                            set.insert("");
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn exact_value(&mut self) -> Result<BTreeSet<&'a str>, String> {
        if matches!(self.lookahead(Ctx::Values).0, Tok::End | Tok::Comma) {
            return Ok(BTreeSet::from([""]));
        }
        let (tok, lit) = self.consume(Ctx::Values);
        if tok == Tok::Identifier {
            Ok(BTreeSet::from([lit]))
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

/// apimachinery's `NewRequirement` checks on the values (the key was checked by the parser),
/// as one aggregated error: one message, or `[a, b]` for several.
fn new_requirement(key: &str, op: Op, values: &[&str]) -> Result<LabelReq, String> {
    let mut errors = Vec::new();
    let mut numbers = Vec::new();
    if matches!(op, Op::Gt | Op::Lt) {
        for (i, v) in values.iter().enumerate() {
            match go_parse_int(v) {
                Ok(n) => numbers.push(n),
                Err(_) => errors.push(format!(
                    "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                    go_quote(v)
                )),
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        let problems = label_value_errors(v);
        if !problems.is_empty() {
            errors.push(format!(
                "values[{i}][{key}]: Invalid value: {}: {}",
                go_quote(v),
                problems.join("; ")
            ));
        }
    }
    match errors.len() {
        0 => {}
        1 => return Err(errors.remove(0)),
        _ => return Err(format!("[{}]", errors.join(", "))),
    }
    let key = key.to_owned();
    let first = || values.first().map(|v| (*v).to_owned()).unwrap_or_default();
    let all = || values.iter().map(|v| (*v).to_owned()).collect();
    Ok(match op {
        Op::Exists => LabelReq::Exists(key),
        Op::DoesNotExist => LabelReq::NotExists(key),
        Op::Equals | Op::DoubleEquals => LabelReq::Eq(key, first()),
        Op::NotEquals => LabelReq::NotEq(key, first()),
        Op::In => LabelReq::In(key, all()),
        Op::NotIn => LabelReq::NotIn(key, all()),
        Op::Gt => LabelReq::Gt(key, numbers.first().copied().unwrap_or_default()),
        Op::Lt => LabelReq::Lt(key, numbers.first().copied().unwrap_or_default()),
    })
}

impl LabelSelector {
    /// Parses a selector string with kube-apiserver's grammar; a bad one is the 400 BadRequest
    /// a real server answers, with its message (e.g. `unable to parse requirement: found '',
    /// expected: in, notin, =, ==, !=, gt, lt`, or `found 'x', expected: ',' or 'end of string'`).
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut parser = Parser {
            items: lex(s),
            position: 0,
        };
        parser.parse().map(Self).map_err(ApiError::bad_request)
    }

    /// Whether the selector is empty (matches everything).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the labels `get` answers satisfy every requirement (`get` gives a label's value).
    pub fn matches<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        let in_set = |x: &str, vs: &[String]| vs.iter().any(|v| v == x);
        let number = |k: &str| get(k).and_then(|v| go_parse_int(v).ok());
        self.0.iter().all(|req| match req {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| in_set(x, vs)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| !in_set(x, vs)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
            LabelReq::Gt(k, n) => number(k).is_some_and(|x| x > *n),
            LabelReq::Lt(k, n) => number(k).is_some_and(|x| x < *n),
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
        assert!(m("app in (web,),tier notin ()"));
        assert!(!m("missing in (,)"));
        let n = labels(&[("rank", "7")]);
        let num = |s: &str| {
            LabelSelector::parse(s)
                .expect(s)
                .matches(|k| n.get(k).map(String::as_str))
        };
        assert!(num("rank>5") && num("rank<8") && !num("rank>7") && !num("missing<100"));
    }

    #[test]
    fn bad_label_selectors_should_get_the_real_messages() {
        let err = |s: &str| {
            let e = LabelSelector::parse(s).expect_err(s);
            assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"), "{s}");
            e.message
        };
        assert_eq!(
            err("app=web value"),
            "found 'value', expected: ',' or 'end of string'"
        );
        assert_eq!(
            err("a b=c"),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(
            err("app in web"),
            "unable to parse requirement: found 'web' expected: '('"
        );
        assert_eq!(
            err("app in (a b)"),
            "unable to parse requirement: found 'b', expected: ',' or ')'"
        );
        assert_eq!(err("app=web,"), "found '', expected: identifier after ','");
        assert_eq!(
            err("=web"),
            "found '=', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            err("!"),
            "unable to parse requirement: found '', expected: identifier"
        );
        assert_eq!(
            err("-app=x"),
            "unable to parse requirement: <nil>: Invalid value: \"-app\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        );
        assert_eq!(
            err("app=-x"),
            "unable to parse requirement: values[0][app]: Invalid value: \"-x\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
        assert_eq!(
            err("rank>x"),
            "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
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
