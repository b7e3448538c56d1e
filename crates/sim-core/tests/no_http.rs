//! podline-sim-core has no HTTP in its dependency graph (no hyper, axum, h2, http, rustls,
//! tower): the HTTP API, its faults and its transport live in podline-sim above it. Cargo keeps
//! this crate from naming podline-sim; this test keeps a dependency (direct or through another
//! crate) from bringing HTTP in, which Cargo would allow. It reads what `cargo tree` resolves.

use std::collections::BTreeSet;
use std::process::Command;

/// Crates that speak HTTP or carry it, none of which may appear under podline-sim-core.
const HTTP: &[&str] = &[
    "axum",
    "h2",
    "http",
    "http-body",
    "hyper",
    "hyper-util",
    "rustls",
    "tokio-rustls",
    "tower",
];

#[test]
fn sim_core_should_depend_on_no_http_crate() {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            "podline-sim-core",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    // The tree is what it should be: this crate and its runtime are in it.
    assert!(
        names.contains("podline-sim-core") && names.contains("tokio"),
        "cargo tree listed too little: {names:?}"
    );
    let found: Vec<&str> = HTTP
        .iter()
        .copied()
        .filter(|c| names.contains(*c))
        .collect();
    assert!(
        found.is_empty(),
        "podline-sim-core depends on HTTP crates {found:?}: keep HTTP in podline-sim"
    );
}
