//! The UI in-process: `podline_ui::router` driven with `tower::ServiceExt::oneshot`, no socket
//! and no binary, over a real SQLite store in a temp dir filled through `podline-store`.
//! `api` checks the JSON routes and their errors, `pages` the HTML pages (and that HTML in
//! names, labels and annotations renders as text), `guard` the `Host` allow-list and the
//! security headers, `live` the change feed and the event stream. The binary's own wiring
//! (flags, the serving line) is tested in `crates/podline/tests/ui`, the pages in a real
//! browser in `crates/podline/tests/ui/browser.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api;
mod guard;
mod live;
mod pages;
mod support;
