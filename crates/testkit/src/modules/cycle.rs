//! The import cycles of a crate's module graphs: one named cycle per knot of modules that
//! reach each other.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

use super::graph::{CrateGraph, Edges, Scope};

/// One import cycle: modules of one scope each naming the next, the last naming the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// The module whose children loop (`crate`, `crate::finalize`).
    pub scope: String,
    /// The modules in order (the parent's own file by its file name).
    pub modules: Vec<String>,
    /// For each step `modules[i] -> modules[i + 1]`, the first place it names the next.
    pub at: Vec<String>,
}

impl fmt::Display for Cycle {
    /// `in crate::finalize: finalize/mod.rs -> sweep (...) -> finalize/mod.rs (...)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "in {}: ", self.scope)?;
        for (i, module) in self.modules.iter().enumerate() {
            let next = &self.modules[(i + 1) % self.modules.len()];
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{module} -> {next} ({})", self.at[i])?;
        }
        Ok(())
    }
}

/// Every import cycle of `graph`: for each set of modules of one scope that reach each other,
/// one shortest cycle through its first module.
pub fn cycles(graph: &CrateGraph) -> Vec<Cycle> {
    graph.scopes().flat_map(scope_cycles).collect()
}

/// The import cycles of one scope, as [`cycles`].
pub fn scope_cycles(scope: &Scope) -> Vec<Cycle> {
    knots(scope.edges())
        .into_iter()
        .filter_map(|knot| shortest_cycle(scope, &knot))
        .collect()
}

/// The strongly connected components of more than one node (Tarjan's algorithm).
fn knots(edges: &Edges) -> Vec<BTreeSet<String>> {
    struct State<'a> {
        edges: &'a Edges,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, node: &'a str) {
        let n = s.index.len();
        s.index.insert(node, n);
        s.low.insert(node, n);
        s.stack.push(node);
        s.on_stack.insert(node);
        let edges = s.edges;
        for next in edges.get(node).into_iter().flat_map(BTreeMap::keys) {
            let next = next.as_str();
            if !s.index.contains_key(next) {
                visit(s, next);
                let low = s.low[node].min(s.low[next]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(next) {
                let low = s.low[node].min(s.index[next]);
                s.low.insert(node, low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut knot = BTreeSet::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(top);
                knot.insert(top.to_owned());
                if top == node {
                    break;
                }
            }
            if knot.len() > 1 {
                s.found.push(knot);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.found
}

/// A shortest cycle through the knot's first module, staying in the knot.
fn shortest_cycle(scope: &Scope, knot: &BTreeSet<String>) -> Option<Cycle> {
    let start = knot.first()?;
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start.as_str()]);
    let mut last = None;
    while let Some(node) = queue.pop_front() {
        for next in scope.edges().get(node).into_iter().flat_map(BTreeMap::keys) {
            if !knot.contains(next) {
                continue;
            }
            if next == start {
                last = Some(node);
                break;
            }
            if !came_from.contains_key(next.as_str()) {
                came_from.insert(next, node);
                queue.push_back(next);
            }
        }
        if last.is_some() {
            break;
        }
    }
    let mut modules = vec![last?.to_owned()];
    while let Some(prev) = came_from.get(modules[0].as_str()) {
        modules.insert(0, (*prev).to_owned());
    }
    if modules[0] != *start {
        modules.insert(0, start.clone());
    }
    let at = (0..modules.len())
        .map(|i| {
            let next = &modules[(i + 1) % modules.len()];
            scope
                .names(&modules[i], next)
                .into_iter()
                .next()
                .unwrap_or_default()
        })
        .collect();
    Some(Cycle {
        scope: scope.module().to_owned(),
        modules,
        at,
    })
}
