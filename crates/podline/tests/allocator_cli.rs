//! The binary's allocator settings (crates/podline/src/allocator.rs) are in force from the first
//! allocation: mimalloc prints its options when it initialises if `MIMALLOC_VERBOSE=1`, and that
//! happens after podline's load-time tuning has run, so the printout shows what the process uses.

use std::process::Command;

/// Runs `podline --help` with mimalloc's verbose start-up output and the extra environment.
fn mimalloc_options(env: &[(&str, &str)]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_podline"))
        .arg("--help")
        .env("MIMALLOC_VERBOSE", "1")
        .envs(env.iter().copied())
        .output()
        .expect("podline runs");
    assert!(output.status.success(), "podline --help failed");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn freed_memory_should_be_purged_at_once_from_lazily_committed_arenas() {
    let options = mimalloc_options(&[]);
    assert!(
        options.contains("option 'arena_eager_commit': 0"),
        "arena_eager_commit is not podline's 0:\n{options}"
    );
    assert!(
        options.contains("option 'purge_delay': 0"),
        "purge_delay is not podline's 0:\n{options}"
    );
}

#[test]
fn the_users_mimalloc_environment_should_win_over_podlines_settings() {
    let options = mimalloc_options(&[
        ("MIMALLOC_PURGE_DELAY", "250"),
        ("MIMALLOC_ARENA_EAGER_COMMIT", "1"),
    ]);
    assert!(
        options.contains("option 'purge_delay': 250"),
        "the user's purge delay was overridden:\n{options}"
    );
    assert!(
        options.contains("option 'arena_eager_commit': 1"),
        "the user's arena_eager_commit was overridden:\n{options}"
    );
}
