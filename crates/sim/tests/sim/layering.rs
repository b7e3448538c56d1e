//! The sim's top-level modules depend one way: no import cycle between them, and the layers of
//! docs/ARCHITECTURE.md in order (`api` <- `fault` <- `app` <- `server`: none names one after
//! it). Read from the sources by the workspace's module-graph reader
//! (`podline_testkit::modules`: every path outside comments, string literals and `#[cfg(test)]`
//! items, re-exports followed to the module that defines the item), which also checks every
//! crate, nested modules included, for cycles (crates/testkit/tests/no_module_cycles.rs).
//!
//! The layer under them all, the cluster (store, kinds, kubelet, logs, controllers), is the
//! crate podline-sim-core, which has no dependency on this one: Cargo, not this test, keeps it
//! from naming the API, the faults or the server. What is left here is the order of this
//! crate's own modules, which no crate boundary checks.

use std::path::Path;

use podline_testkit::modules::{Scope, graph_of_crate, graph_of_sources, scope_cycles};

/// The layers, lowest first: a module of this list may not name one that comes after it.
const LAYERS: [&str; 4] = ["api", "fault", "app", "server"];

fn top_level() -> Scope {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    graph_of_crate(&src)
        .expect("crates/sim/src is readable")
        .top_level()
}

#[test]
fn top_level_modules_should_have_no_cycle() {
    let graph = top_level();
    assert!(
        !graph.names("fault", "api").is_empty(),
        "the checker read no edges: {graph:?}"
    );
    let cycles = scope_cycles(&graph);
    assert!(
        cycles.is_empty(),
        "module cycle in crates/sim/src: {}",
        cycles
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    );
}

#[test]
fn top_level_modules_should_follow_the_layers() {
    let broken = layering_violations(&top_level());
    assert!(
        broken.is_empty(),
        "lower layers name higher ones:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_checker_should_report_a_lower_layer_naming_a_higher_one() {
    let graph = graph_of_sources(
        "lib.rs",
        &[
            ("lib.rs", "mod api; mod server;"),
            ("api.rs", "use crate::server::Sim;"),
            ("server.rs", "pub struct Sim;"),
        ],
    )
    .top_level();
    let broken = layering_violations(&graph);
    assert_eq!(broken, ["api -> server (api.rs: crate::server::Sim)"]);
}

/// Each edge from a layer to a later one in [`LAYERS`], with where it is.
fn layering_violations(graph: &Scope) -> Vec<String> {
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut broken = Vec::new();
    for (from, edges) in graph.edges() {
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
