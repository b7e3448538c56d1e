//! The module graphs of a crate: one per module that has children (the crate root included),
//! whose nodes are those children and the parent's own file, with an edge wherever one names
//! something another defines.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;

use super::tree::{ModPath, Tree};

/// From node -> to node -> where (`file: path as written`), for the failure messages.
pub type Edges = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// One module's children and its own file, and what each names of the others.
///
/// A child that names an item defined in the parent's own file (not one it only re-exports)
/// depends on that file, which declares the child: a cycle. A re-export is followed to the
/// module that defines the item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    module: String,
    own: String,
    edges: Edges,
}

impl Scope {
    /// The module whose children these are: `crate` or `crate::cli::demo`.
    pub fn module(&self) -> &str {
        &self.module
    }

    /// The node standing for the module's own file (`lib.rs`, `cli/demo.rs`).
    pub fn own_file(&self) -> &str {
        &self.own
    }

    /// Every edge: from -> to -> where.
    pub fn edges(&self) -> &Edges {
        &self.edges
    }

    /// Where `from` names something of `to` (empty if nowhere).
    pub fn names(&self, from: &str, to: &str) -> BTreeSet<String> {
        self.edges
            .get(from)
            .and_then(|e| e.get(to))
            .cloned()
            .unwrap_or_default()
    }

    /// The nodes: the own file and each child.
    pub fn nodes(&self) -> impl Iterator<Item = &str> {
        self.edges.keys().map(String::as_str)
    }
}

/// Every module graph of one crate target (a library or a binary), by module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrateGraph {
    scopes: BTreeMap<String, Scope>,
}

impl CrateGraph {
    /// The graph of the crate root's children (with the root file as one node); empty if the
    /// root declares no module.
    pub fn top_level(&self) -> Scope {
        self.scope("crate").cloned().unwrap_or_else(|| Scope {
            module: "crate".to_owned(),
            own: String::new(),
            edges: Edges::new(),
        })
    }

    /// The graph of `module`'s children (`crate::finalize`), if it has any.
    pub fn scope(&self, module: &str) -> Option<&Scope> {
        self.scopes.get(module)
    }

    /// Every graph, the crate root's first.
    pub fn scopes(&self) -> impl Iterator<Item = &Scope> {
        self.scopes.values()
    }
}

/// The module graphs of the crate whose sources are in `src`: its library (`lib.rs`), or if it
/// has none its binary (`main.rs`).
pub fn graph_of_crate(src: &Path) -> io::Result<CrateGraph> {
    let root = if src.join("lib.rs").is_file() {
        "lib.rs"
    } else {
        "main.rs"
    };
    graph_of_target(src, root)
}

/// The module graphs of the target whose root file is `src/<root>` (`lib.rs`, `main.rs`).
pub fn graph_of_target(src: &Path, root: &str) -> io::Result<CrateGraph> {
    let mut files = BTreeMap::new();
    read_sources(src, src, &mut files)?;
    if !files.contains_key(root) {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no {root} in {}", src.display()),
        ));
    }
    Ok(graph_of(&Tree::read(&files, root)))
}

/// The module graphs of a crate given as (path relative to `src/`, source) pairs, rooted at
/// `root`: for testing the checker on made-up crates.
pub fn graph_of_sources(root: &str, files: &[(&str, &str)]) -> CrateGraph {
    let files: BTreeMap<String, String> = files
        .iter()
        .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
        .collect();
    graph_of(&Tree::read(&files, root))
}

fn read_sources(src: &Path, dir: &Path, out: &mut BTreeMap<String, String>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            read_sources(src, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path.strip_prefix(src).unwrap_or(&path);
            let key: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.insert(key.join("/"), std::fs::read_to_string(&path)?);
        }
    }
    Ok(())
}

fn graph_of(tree: &Tree) -> CrateGraph {
    let mut scopes: BTreeMap<ModPath, Scope> = BTreeMap::new();
    for (path, module) in &tree.modules {
        if module.children.is_empty() {
            continue;
        }
        let mut edges = Edges::new();
        let own = edges.entry(module.label.clone()).or_default();
        for child in &module.children {
            own.entry(child.clone())
                .or_default()
                .insert(format!("{}: mod {child}", module.label));
        }
        for child in &module.children {
            edges.entry(child.clone()).or_default();
        }
        let scope = Scope {
            module: display(path),
            own: module.label.clone(),
            edges,
        };
        scopes.insert(path.clone(), scope);
    }
    for (from, module) in &tree.modules {
        for path in &module.paths {
            let Some(target) = tree.locate(from, path) else {
                continue;
            };
            let shown = format!("{}: {}", module.label, path.join("::"));
            // Every scope both modules are in: the common ancestors of `from` and the target.
            for depth in 0..=from.len().min(target.module.len()) {
                if from[..depth] != target.module[..depth] {
                    break;
                }
                let Some(scope) = scopes.get_mut(&from[..depth]) else {
                    continue;
                };
                let naming_the_parent = target.module.len() == depth && !target.item;
                let (a, b) = (node(scope, from, depth), node(scope, &target.module, depth));
                if a != b && !naming_the_parent {
                    scope
                        .edges
                        .entry(a)
                        .or_default()
                        .entry(b)
                        .or_default()
                        .insert(shown.clone());
                }
            }
        }
    }
    CrateGraph {
        scopes: scopes
            .into_values()
            .map(|s| (s.module.clone(), s))
            .collect(),
    }
}

/// The node of `scope` (the module at `depth`) that `module` (at or below it) belongs to.
fn node(scope: &Scope, module: &[String], depth: usize) -> String {
    module
        .get(depth)
        .cloned()
        .unwrap_or_else(|| scope.own.clone())
}

fn display(path: &[String]) -> String {
    std::iter::once("crate")
        .chain(path.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("::")
}
