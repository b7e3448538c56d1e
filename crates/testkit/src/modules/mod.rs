//! The import graph between a crate's modules, read from its sources, and its cycles: for the
//! workspace test that no crate's modules import each other in a loop, and for layering tests
//! (the sim's) that check which way its modules depend.
//!
//! A module *names* another when its code or a `use` spells a path to an item the other defines
//! (`crate::`, `super::`, `self::`, a child's name, or a name a `use` bound), with re-exports
//! followed to the defining module. Comments, string literals and `#[cfg(test)]` items do not
//! count. There is one graph per module that has children (the crate root included): its
//! children and its own file, which declares each child; so a child naming an item defined in
//! its parent's file is a cycle, as is `a -> b -> a` between siblings.
//!
//! A textual reader, not rustc: macros are not expanded, names a glob import brings in and
//! `#[path]` attributes are not followed, and a local type spelled like a child module would be
//! mistaken for it.
//!
//! ```
//! use podline_testkit::modules::{cycles, graph_of_sources};
//!
//! let graph = graph_of_sources("lib.rs", &[
//!     ("lib.rs", "mod a; mod b;"),
//!     ("a.rs", "use crate::b::Ticket; pub struct Queue;"),
//!     ("b.rs", "pub struct Ticket(crate::a::Queue);"),
//! ]);
//! let found = cycles(&graph);
//! assert_eq!(found[0].modules, ["a", "b"]);
//! assert!(found[0].to_string().starts_with("in crate: a -> b (a.rs: crate::b::Ticket)"));
//! ```

mod cycle;
mod graph;
mod source;
mod syntax;
mod tokens;
mod tree;

#[cfg(test)]
mod tests;

pub use cycle::{Cycle, cycles, scope_cycles};
pub use graph::{CrateGraph, Edges, Scope, graph_of_crate, graph_of_sources, graph_of_target};
