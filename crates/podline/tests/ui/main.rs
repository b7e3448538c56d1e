//! `podline ui` end to end: the real binary serving a store filled by a real `podline demo`
//! run. `api` checks the JSON API over plain HTTP and the CLI's wiring; `browser` drives
//! headless Chromium through chromedriver and checks what a person sees (skipped when Chromium
//! is absent, unless `PODLINE_REQUIRE_BROWSER=1`, which CI sets). Each route's behaviour is
//! tested in-process, without the binary, in `crates/ui/tests/router`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api;
mod browser;
mod support;
