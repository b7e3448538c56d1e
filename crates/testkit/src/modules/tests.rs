//! The checker's own tests: each would fail if the reader missed an edge it must see or saw one
//! it must not.

use super::*;

fn top(files: &[(&str, &str)]) -> Scope {
    graph_of_sources("lib.rs", files).top_level()
}

fn targets(scope: &Scope, from: &str) -> Vec<String> {
    scope.edges()[from].keys().cloned().collect()
}

#[test]
fn a_loop_through_a_third_module_should_be_found() {
    let graph = graph_of_sources(
        "lib.rs",
        &[
            ("lib.rs", "mod a; mod b; mod c; mod status;"),
            ("a.rs", "use crate::b::Thing;"),
            ("b.rs", "fn f() { crate::c::g() }"),
            ("c.rs", "use crate::{a::{self, X}, status::ApiError};"),
            ("status.rs", "pub struct ApiError;"),
        ],
    );
    let found = cycles(&graph);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].modules, ["a", "b", "c"]);
    assert_eq!(
        found[0].to_string(),
        "in crate: a -> b (a.rs: crate::b::Thing), b -> c (b.rs: crate::c::g), \
         c -> a (c.rs: crate::a)"
    );
}

#[test]
fn comments_strings_and_test_items_should_name_nothing() {
    let scope = top(&[
        ("lib.rs", "mod a; mod b; mod c;"),
        (
            "a.rs",
            "//! See [`crate::b::X`].\n\
             /* crate::b::Y /* nested */ crate::b::Y2 */\n\
             const S: &str = \"crate::b::Z\";\n\
             const R: &str = r#\"crate::b::W\"#;\n\
             const C: char = '\"'; const L: &'static str = \"\";\n\
             #[cfg(test)]\nmod tests { use crate::b::V; }\n\
             #[cfg(test)]\n#[allow(dead_code)]\nfn helper() { crate::b::h() }\n\
             #[cfg(test)]\nmod more;\n\
             use crate::c::Kept;",
        ),
        ("a/more.rs", "use crate::b::Q;"),
        ("b.rs", "use crate::a::Thing;"),
        ("c.rs", ""),
    ]);
    assert_eq!(targets(&scope, "a"), ["c"], "{scope:?}");
    assert!(scope_cycles(&scope).is_empty());
}

#[test]
fn a_file_that_is_all_test_code_should_name_nothing() {
    let scope = top(&[
        ("lib.rs", "mod a; mod b;"),
        ("a.rs", "#![cfg(test)]\nuse crate::b::X;"),
        ("b.rs", "use crate::a::Y;"),
    ]);
    assert!(targets(&scope, "a").is_empty(), "{scope:?}");
}

#[test]
fn a_root_reexport_should_lead_to_the_defining_module() {
    let scope = top(&[
        (
            "lib.rs",
            "mod a; mod b; pub use a::Thing; pub use b::{Other as Renamed};",
        ),
        ("a.rs", "pub struct Thing; fn f(_: crate::Renamed) {}"),
        ("b.rs", "use crate::Thing;"),
    ]);
    assert_eq!(targets(&scope, "a"), ["b"]);
    assert_eq!(targets(&scope, "b"), ["a"]);
    assert_eq!(scope_cycles(&scope).len(), 1);
}

#[test]
fn an_item_defined_in_the_root_file_should_make_a_cycle_with_it() {
    let graph = graph_of_sources(
        "lib.rs",
        &[
            ("lib.rs", "mod a; pub const LIMIT: u8 = 1;"),
            ("a.rs", "fn f() -> u8 { crate::LIMIT }"),
        ],
    );
    let found = cycles(&graph);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].modules, ["a", "lib.rs"]);
}

#[test]
fn a_child_naming_its_parents_item_should_be_a_nested_cycle() {
    let graph = graph_of_sources(
        "lib.rs",
        &[
            ("lib.rs", "mod finalize;"),
            ("finalize/mod.rs", "mod sweep; pub struct Finalize;"),
            ("finalize/sweep.rs", "use super::Finalize;"),
        ],
    );
    let found = cycles(&graph);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].scope, "crate::finalize");
    assert_eq!(found[0].modules, ["finalize/mod.rs", "sweep"]);
    assert_eq!(
        found[0].to_string(),
        "in crate::finalize: finalize/mod.rs -> sweep (finalize/mod.rs: mod sweep), \
         sweep -> finalize/mod.rs (finalize/sweep.rs: super::Finalize)"
    );
}

#[test]
fn a_parent_that_only_declares_and_reexports_should_make_no_cycle() {
    let graph = graph_of_sources(
        "lib.rs",
        &[
            ("lib.rs", "mod finalize; pub use finalize::Finalize;"),
            (
                "finalize/mod.rs",
                "mod sweep; mod state; pub use state::Finalize;",
            ),
            ("finalize/state.rs", "pub struct Finalize;"),
            (
                "finalize/sweep.rs",
                "use super::Finalize; use crate::finalize; fn f(_: crate::Finalize) {}",
            ),
        ],
    );
    assert!(cycles(&graph).is_empty(), "{graph:?}");
    let scope = graph
        .scope("crate::finalize")
        .expect("finalize has children");
    assert_eq!(targets(scope, "sweep"), ["state"]);
}

#[test]
fn paths_through_aliases_super_and_children_should_be_followed() {
    let graph = graph_of_sources(
        "lib.rs",
        &[
            ("lib.rs", "mod cli; mod gc;"),
            ("gc.rs", "pub fn parse() {}"),
            ("cli.rs", "mod run; mod exit; fn f() { run::go() }"),
            ("cli/exit.rs", "pub const USAGE: u8 = 2;"),
            (
                "cli/run.rs",
                "use crate::cli; use super::super::gc;\n\
                 fn go() { gc::parse(); let _ = cli::exit::USAGE; self::inner::x(); }\n\
                 mod inner { pub fn x() { super::super::exit::USAGE; } }",
            ),
        ],
    );
    let top = graph.top_level();
    assert_eq!(targets(&top, "cli"), ["gc"], "{top:?}");
    let cli = graph.scope("crate::cli").expect("cli has children");
    assert_eq!(targets(cli, "run"), ["exit"], "{cli:?}");
    let run = graph
        .scope("crate::cli::run")
        .expect("run has an inline child");
    assert_eq!(targets(run, "cli/run.rs"), ["inner"]);
    assert!(targets(run, "inner").is_empty(), "{run:?}");
    assert!(cycles(&graph).is_empty());
}

#[test]
fn a_visibility_path_and_external_paths_should_name_nothing() {
    let scope = top(&[
        ("lib.rs", "mod a; mod b;"),
        (
            "b.rs",
            "pub(in crate::b) fn f() {} use ::a::X; use std::fmt; fn g() { std::mem::drop(()) }",
        ),
        ("a.rs", "use crate::b::Y;"),
    ]);
    assert!(targets(&scope, "b").is_empty(), "{scope:?}");
}

#[test]
fn a_macro_path_should_count_in_the_defining_module() {
    let scope = top(&[
        ("lib.rs", "mod a; mod b;"),
        ("a.rs", "macro_rules! m { () => { $crate::b::f() } }"),
        ("b.rs", "pub fn f() {}"),
    ]);
    assert_eq!(targets(&scope, "a"), ["b"]);
}

#[test]
fn a_crate_on_disk_should_be_read() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let src = dir.path();
    std::fs::create_dir(src.join("a")).expect("a/");
    std::fs::write(src.join("main.rs"), "mod a; mod b; fn main() {}").expect("main.rs");
    std::fs::write(src.join("a/mod.rs"), "use crate::b::X;").expect("a/mod.rs");
    std::fs::write(src.join("b.rs"), "pub struct X; use crate::a::Y;").expect("b.rs");
    let graph = graph_of_crate(src).expect("the crate is readable");
    assert_eq!(cycles(&graph)[0].modules, ["a", "b"]);
    assert!(graph_of_target(src, "lib.rs").is_err());
}
