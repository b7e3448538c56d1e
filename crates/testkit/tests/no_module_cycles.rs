//! No crate of the workspace has an import cycle between its modules, at the top level or
//! nested (a child naming an item its parent's file defines counts): each module depends one
//! way, so it can be read, tested and moved without the ones above it. On failure, every cycle
//! is named with where each step names the next module.

use std::path::{Path, PathBuf};

use podline_testkit::modules::{cycles, graph_of_target};

/// `(crate folder, scope, why)`: cycles known and not yet broken, each in code another change
/// owns. Every other cycle fails the test, and so does an entry that matches nothing any more,
/// so the list only shrinks.
const KNOWN: &[(&str, &str, &str)] = &[];

/// Each crate target of the workspace: (crate folder, root file).
fn targets() -> Vec<(PathBuf, &'static str)> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates/testkit is inside crates/")
        .to_owned();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&crates)
        .expect("crates/ is readable")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    let mut found = Vec::new();
    for dir in dirs {
        for root in ["lib.rs", "main.rs"] {
            if dir.join("src").join(root).is_file() {
                found.push((dir.clone(), root));
            }
        }
    }
    found
}

#[test]
fn no_crate_should_have_a_module_cycle() {
    let targets = targets();
    let mut read = Vec::new();
    let mut found = Vec::new();
    let mut known_seen = Vec::new();
    for (dir, root) in &targets {
        let name = dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let graph = graph_of_target(&dir.join("src"), root)
            .unwrap_or_else(|err| panic!("cannot read crates/{name}/src: {err}"));
        let edges: usize = graph
            .scopes()
            .flat_map(|s| s.edges().values())
            .map(|e| e.len())
            .sum();
        read.push((name.clone(), edges));
        for cycle in cycles(&graph) {
            let known = KNOWN
                .iter()
                .position(|(krate, scope, _)| *krate == name && *scope == cycle.scope);
            match known {
                Some(at) => known_seen.push(at),
                None => found.push(format!("crates/{name}/src/{root} {cycle}")),
            }
        }
    }
    // The check reads what it should: the crates there are, each with edges between modules.
    for expected in ["client", "launch", "podline", "record", "sim", "sim-core", "store"] {
        assert!(
            read.iter().any(|(n, edges)| n == expected && *edges > 10),
            "the checker read too little of crates/{expected}: {read:?}"
        );
    }
    let stale: Vec<String> = KNOWN
        .iter()
        .enumerate()
        .filter(|(at, _)| !known_seen.contains(at))
        .map(|(_, (krate, scope, _))| format!("crates/{krate} {scope}"))
        .collect();
    assert!(
        stale.is_empty(),
        "known cycles that are gone (remove them from KNOWN): {stale:?}"
    );
    assert!(
        found.is_empty(),
        "{} module cycle(s):\n{}",
        found.len(),
        found.join("\n")
    );
}
