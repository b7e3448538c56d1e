//! A crate's module tree, read from its files as rustc finds them (`mod x;` is `x.rs` or
//! `x/mod.rs` beside the parent's file, or in the folder named after it), and the module that
//! defines what a path names.

use std::collections::{BTreeMap, BTreeSet};

use super::source::strip;
use super::syntax::{ModuleSyntax, parse};
use super::tokens::tokenize;

/// A module path below the crate root (`[]` is the root).
pub(crate) type ModPath = Vec<String>;

/// How deep [`Tree::locate`] follows re-exports and aliases before giving up (a loop of `use`s
/// is a compile error; this only bounds the reader).
const MAX_HOPS: usize = 32;

/// One module of the tree.
#[derive(Debug)]
pub(crate) struct Module {
    /// Where its code is, relative to `src/` (`lifecycle.rs (mod phase)` for an inline one).
    pub(crate) label: String,
    /// Its children's names.
    pub(crate) children: BTreeSet<String>,
    /// Each name its `use` declarations bind: the path (relative to it), `None` if external.
    aliases: BTreeMap<String, Option<Vec<String>>>,
    /// Every path it spells.
    pub(crate) paths: Vec<Vec<String>>,
}

/// What a path names, by the module that defines it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Target {
    /// The module that defines the item, or the module named.
    pub(crate) module: ModPath,
    /// Whether the path names an item of `module` rather than only the module itself.
    pub(crate) item: bool,
}

/// A crate's modules by path.
#[derive(Debug)]
pub(crate) struct Tree {
    pub(crate) modules: BTreeMap<ModPath, Module>,
}

impl Tree {
    /// The tree whose root is the file `root` (`lib.rs`, `main.rs`) among `files` (path
    /// relative to `src/`, with `/` -> source). A declared module without a file is left out.
    pub(crate) fn read(files: &BTreeMap<String, String>, root: &str) -> Tree {
        let mut tree = Tree {
            modules: BTreeMap::new(),
        };
        if let Some(text) = files.get(root) {
            let dir = root.rsplit_once('/').map_or("", |(d, _)| d);
            let syntax = parse(&tokenize(&strip(text)));
            tree.add(files, Vec::new(), root.to_owned(), dir.to_owned(), syntax);
        }
        tree
    }

    /// Adds the module at `path`, read as `syntax`, whose children's files are in `dir`.
    fn add(
        &mut self,
        files: &BTreeMap<String, String>,
        path: ModPath,
        label: String,
        dir: String,
        syntax: ModuleSyntax,
    ) {
        let join = |name: &str| {
            if dir.is_empty() {
                name.to_owned()
            } else {
                format!("{dir}/{name}")
            }
        };
        let mut children = BTreeSet::new();
        for name in &syntax.declared {
            let flat = format!("{}.rs", join(name));
            let nested = format!("{}/mod.rs", join(name));
            let Some((file, text)) = [flat, nested]
                .into_iter()
                .find_map(|f| files.get(&f).map(|t| (f, t)))
            else {
                continue;
            };
            let child = parse(&tokenize(&strip(text)));
            let mut child_path = path.clone();
            child_path.push(name.clone());
            self.add(files, child_path, file, join(name), child);
            children.insert(name.clone());
        }
        for (name, body) in syntax.inline {
            let mut child_path = path.clone();
            child_path.push(name.clone());
            let child_label = format!("{label} (mod {name})");
            self.add(files, child_path, child_label, join(&name), body);
            children.insert(name);
        }
        self.modules.insert(
            path,
            Module {
                label,
                children,
                aliases: syntax.aliases.into_iter().collect(),
                paths: syntax.paths,
            },
        );
    }

    fn has_child(&self, module: &[String], name: &str) -> bool {
        self.modules
            .get(module)
            .is_some_and(|m| m.children.contains(name))
    }

    fn alias(&self, module: &[String], name: &str) -> Option<&Option<Vec<String>>> {
        self.modules.get(module).and_then(|m| m.aliases.get(name))
    }

    /// `path` as written in `module`, from the crate root; `None` if it starts outside the
    /// crate (another crate, std, a local type or variable).
    fn absolute(&self, module: &[String], path: &[String], hops: usize) -> Option<ModPath> {
        let (first, rest) = path.split_first()?;
        match first.as_str() {
            "crate" => Some(rest.to_vec()),
            "super" => {
                let mut base = module.to_vec();
                let mut rest = path;
                while let Some(("super", after)) = rest.split_first().map(|(s, a)| (s.as_str(), a))
                {
                    base.pop()?;
                    rest = after;
                }
                base.extend_from_slice(rest);
                Some(base)
            }
            "self" => Some([module, rest].concat()),
            name if self.has_child(module, name) => Some([module, path].concat()),
            name => {
                let target = self.alias(module, name)?.as_ref()?;
                if hops >= MAX_HOPS {
                    return None;
                }
                self.absolute(module, &[target.as_slice(), rest].concat(), hops + 1)
            }
        }
    }

    /// The module defining what `path`, written in `module`, names: re-exports and aliases
    /// followed; `None` for a path outside the crate.
    pub(crate) fn locate(&self, module: &[String], path: &[String]) -> Option<Target> {
        let absolute = self.absolute(module, path, 0)?;
        self.locate_absolute(&absolute, 0)
    }

    fn locate_absolute(&self, path: &[String], hops: usize) -> Option<Target> {
        let mut at: ModPath = Vec::new();
        for (i, segment) in path.iter().enumerate() {
            if self.has_child(&at, segment) {
                at.push(segment.clone());
                continue;
            }
            if let Some(alias) = self.alias(&at, segment) {
                let alias = alias.as_ref()?;
                if hops >= MAX_HOPS {
                    return None;
                }
                let through =
                    self.absolute(&at, &[alias.as_slice(), &path[i + 1..]].concat(), 0)?;
                return self.locate_absolute(&through, hops + 1);
            }
            return Some(Target {
                module: at,
                item: true,
            });
        }
        Some(Target {
            module: at,
            item: false,
        })
    }
}
