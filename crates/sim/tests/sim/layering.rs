//! The sim's top-level modules depend one way: no import cycle between them, and the layers of
//! docs/ARCHITECTURE.md in order (`cluster` <- `api` <- `fault` <- `app` <- `server`: none names
//! one after it). Read from the sources: every `crate::` path outside comments, string literals
//! and `#[cfg(test)]` modules, with the crate root's `pub use` re-exports followed to the module
//! that defines the item.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first: a module of this list may not name one that comes after it.
const LAYERS: [&str; 5] = ["cluster", "api", "fault", "app", "server"];

/// Top-level module -> module it names -> where (file and path), for the failure messages.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

#[test]
fn top_level_modules_should_have_no_cycle() {
    let graph = graph_of(&src_dir());
    assert!(
        graph.contains_key("api") && graph["api"].contains_key("cluster"),
        "the checker read no edges: {graph:?}"
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "module cycle in crates/sim/src: {}",
            describe(&graph, &cycle)
        );
    }
}

#[test]
fn top_level_modules_should_follow_the_layers() {
    let graph = graph_of(&src_dir());
    let broken = layering_violations(&graph);
    assert!(
        broken.is_empty(),
        "lower layers name higher ones:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_checker_should_find_a_loop_through_a_third_module() {
    let graph = graph_from(&[
        ("a", "use crate::b::Thing;"),
        ("b", "fn f() { crate::c::g() }"),
        ("c", "use crate::{a::{self, X}, status::ApiError};"),
        ("status", "pub struct ApiError;"),
    ]);
    let cycle = find_cycle(&graph).expect("a -> b -> c -> a is a cycle");
    let mut members = cycle.clone();
    members.sort();
    assert_eq!(members, ["a", "b", "c"], "{cycle:?}");
}

#[test]
fn the_checker_should_ignore_comments_strings_and_test_modules() {
    let graph = graph_from(&[
        (
            "a",
            "//! See [`crate::b::X`].\n\
             /* crate::b::Y */\n\
             const S: &str = \"crate::b::Z\";\n\
             const R: &str = r#\"crate::b::W\"#;\n\
             #[cfg(test)]\nmod tests { use crate::b::V; }\n\
             use crate::c::Kept;",
        ),
        ("b", "use crate::a::Thing;"),
        ("c", ""),
    ]);
    assert_eq!(
        graph["a"].keys().collect::<Vec<_>>(),
        ["c"],
        "only the code's path counts: {graph:?}"
    );
    assert!(find_cycle(&graph).is_none());
}

#[test]
fn the_checker_should_report_a_lower_layer_naming_a_higher_one() {
    let graph = graph_from(&[("cluster", "use crate::server::Sim;"), ("server", "")]);
    assert_eq!(layering_violations(&graph).len(), 1, "{graph:?}");
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The graph of the crate under `src`: one node per top-level module (`x.rs` or `x/`).
fn graph_of(src: &Path) -> Graph {
    let root = std::fs::read_to_string(src.join("lib.rs")).expect("src/lib.rs is readable");
    let reexports = root_reexports(&strip(&root));
    let mut graph = Graph::new();
    for entry in std::fs::read_dir(src).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a UTF-8 file name")
            .to_owned();
        if name == "lib" {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&path, &mut files);
        let edges = graph.entry(name.clone()).or_default();
        for file in files {
            if file.file_name().is_some_and(|f| f == "tests.rs") {
                continue; // a `#[cfg(test)] mod tests;` file
            }
            let text = std::fs::read_to_string(&file).expect("a readable source file");
            let shown = file
                .strip_prefix(src)
                .unwrap_or(&file)
                .display()
                .to_string();
            for (target, path) in crate_paths(&strip(&text), &reexports) {
                if target != name {
                    edges
                        .entry(target)
                        .or_default()
                        .insert(format!("{shown}: {path}"));
                }
            }
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for edges in graph.values_mut() {
        edges.retain(|target, _| modules.contains(target));
    }
    graph
}

/// The graph of synthetic modules given as (name, source) pairs (for the checker's own tests).
fn graph_from(modules: &[(&str, &str)]) -> Graph {
    let names: BTreeSet<&str> = modules.iter().map(|(n, _)| *n).collect();
    let mut graph = Graph::new();
    for (name, text) in modules {
        let edges = graph.entry((*name).to_owned()).or_default();
        for (target, path) in crate_paths(&strip(text), &BTreeMap::new()) {
            if target != *name && names.contains(target.as_str()) {
                edges.entry(target).or_default().insert(path);
            }
        }
    }
    graph
}

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .expect("a readable directory")
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for entry in entries {
            rust_files(&entry, out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_owned());
    }
}

/// `text` without comments, without the contents of string and char literals, and without
/// `#[cfg(test)]` inline modules.
fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while let Some(c) = text[i..].chars().next() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            let mut depth = 0;
            while i < text.len() {
                if text[i..].starts_with("/*") {
                    depth += 1;
                    i += 2;
                } else if text[i..].starts_with("*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += text[i..].chars().next().map_or(1, char::len_utf8);
                }
            }
            out.push(' ');
        } else if let Some((open, close)) = raw_string_at(text, i) {
            // r"...", r#"..."#, br#"..."#: to the closing quote and as many hashes.
            let body = i + open;
            i = text[body..]
                .find(&close)
                .map_or(text.len(), |k| body + k + close.len());
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while let Some(d) = text[i..].chars().next() {
                i += d.len_utf8();
                match d {
                    '\\' => i += text[i..].chars().next().map_or(0, char::len_utf8),
                    '"' => break,
                    _ => {}
                }
            }
            out.push_str("\"\"");
        } else if let Some(len) = (c == '\'').then(|| char_literal_len(rest)).flatten() {
            out.push_str("' '");
            i += len;
        } else {
            out.push(c);
            i += c.len_utf8();
        }
    }
    drop_test_modules(&out)
}

/// A raw string literal starting at `i` (`r"`, `r#"`, `br"`...): the length of its opening and
/// its closing text.
fn raw_string_at(text: &str, i: usize) -> Option<(usize, String)> {
    let starts_word = !text[..i]
        .chars()
        .next_back()
        .is_some_and(|p| p.is_alphanumeric() || p == '_');
    let rest = &text[i..];
    let after_prefix = rest.strip_prefix("br").or_else(|| rest.strip_prefix('r'))?;
    let hashes = after_prefix.chars().take_while(|c| *c == '#').count();
    (starts_word && after_prefix[hashes..].starts_with('"')).then(|| {
        let open = rest.len() - after_prefix.len() + hashes + 1;
        (open, format!("\"{}", "#".repeat(hashes)))
    })
}

/// The length of a char literal at the start of `text` (`'a'`, `'\n'`, `'\''`, `'\u{1F600}'`);
/// None for a lifetime (`'a`, `'static`).
fn char_literal_len(text: &str) -> Option<usize> {
    let mut chars = text.char_indices().skip(1);
    let (_, first) = chars.next()?;
    if first == '\\' {
        let end = text.get(3..)?.find('\'')? + 3;
        return (end <= 12).then_some(end + 1);
    }
    let (at, second) = chars.next()?;
    (second == '\'').then_some(at + 1)
}

/// `text` without the `#[cfg(test)] mod name { ... }` blocks.
fn drop_test_modules(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let mut head = after.trim_start();
        // Further attributes (`#[allow(...)]`) between it and the `mod`.
        while let Some(attr) = head.strip_prefix("#[") {
            head = attr.find(']').map_or("", |k| attr[k + 1..].trim_start());
        }
        let block = head
            .strip_prefix("mod ")
            .and_then(|m| m.find(['{', ';']).map(|k| (m, k)))
            .filter(|(m, k)| m.as_bytes()[*k] == b'{');
        match block {
            Some((m, k)) => {
                let body = &m[k..];
                let mut depth = 0usize;
                let mut end = body.len();
                for (j, c) in body.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = j + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &body[end..];
            }
            None => rest = after,
        }
    }
    out.push_str(rest);
    out
}

/// The crate root's `pub use module::{A, B}` re-exports: item name -> module.
fn root_reexports(root: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for stmt in root.split(';') {
        let Some(tree) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let module = ident_at(tree.trim_start()).to_owned();
        let leaves = tree
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .filter_map(|t| t.rsplit("::").next())
            .filter(|t| !t.is_empty() && *t != module && *t != "self");
        for leaf in leaves {
            map.insert(leaf.to_owned(), module.clone());
        }
    }
    map
}

fn ident_at(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// Every `crate::x...` (and `$crate::`) path in `code` as (top-level module, path shown); a
/// group `crate::{a::X, b}` names each of its members' modules.
fn crate_paths(code: &str, reexports: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("crate::").map(|k| k + from) {
        from = at + "crate::".len();
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[from..];
        let members: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => top_level_members(group),
            None => vec![rest],
        };
        for member in members {
            let first = ident_at(member.trim_start());
            if first.is_empty() {
                continue;
            }
            let module = reexports.get(first).map_or(first, String::as_str);
            let shown_end = member
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(member.len());
            found.push((
                module.to_owned(),
                format!("crate::{}", member[..shown_end].trim()),
            ));
        }
    }
    found
}

/// The comma-separated members of a `{...}` group at its top level (`group` starts after `{`).
fn top_level_members(group: &str) -> Vec<&str> {
    let mut members = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (j, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                members.push(group[start..j].trim());
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                members.push(group[start..j].trim());
                start = j + 1;
            }
            _ => {}
        }
    }
    members
}

/// One cycle of `graph` (its modules in order), if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            return Some(path[at..].to_vec());
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flat_map(BTreeMap::keys) {
            if let Some(cycle) = visit(next, graph, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

/// Each edge from a layer to a later one in [`LAYERS`], with where it is.
fn layering_violations(graph: &Graph) -> Vec<String> {
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut broken = Vec::new();
    for (from, edges) in graph {
        for (to, wheres) in edges {
            if let (Some(a), Some(b)) = (rank(from), rank(to))
                && a < b
            {
                let at: Vec<&str> = wheres.iter().map(String::as_str).collect();
                broken.push(format!("{from} -> {to} ({})", at.join("; ")));
            }
        }
    }
    broken
}

/// `a -> b -> a`, each step with the first place that names the next module.
fn describe(graph: &Graph, cycle: &[String]) -> String {
    let mut steps = Vec::new();
    for (i, from) in cycle.iter().enumerate() {
        let to = &cycle[(i + 1) % cycle.len()];
        let at = graph[from][to].iter().next().map_or("", String::as_str);
        steps.push(format!("{from} -> {to} ({at})"));
    }
    steps.join(", ")
}
