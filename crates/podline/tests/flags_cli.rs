//! Which shared flags each subcommand takes (the table in `cli/mod.rs`): a flag that means
//! nothing to a subcommand is not in its `--help` and is refused there with clap's usage error
//! (exit 2); only `-v` is global. No cluster is needed: everything here fails or prints before
//! connecting.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_podline");

/// The cluster flags (ClusterFlags), as `--help` spells them.
const CLUSTER: &[&str] = &[
    "--kubeconfig <FILE>",
    "--context <NAME>",
    "--http2-ping-interval <DURATION>",
    "--http2-ping-timeout <DURATION>",
    "--connect-timeout <DURATION>",
];
const NAMESPACE: &str = "-n, --namespace <NAMESPACE>";
const OUTPUT: &str = "-o, --output <OUTPUT>";
const VERBOSE: &str = "-v, --verbose";

fn podline(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("PODLINE_HTTP2_PING_INTERVAL")
        .env_remove("PODLINE_HTTP2_PING_TIMEOUT")
        .env_remove("PODLINE_CONNECT_TIMEOUT")
        .output()
        .unwrap()
}

fn help(subcommand: &str) -> String {
    let out = podline(&[subcommand, "--help"]);
    assert!(out.status.success(), "{subcommand} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

fn assert_has(subcommand: &str, help: &str, flags: &[&str]) {
    for flag in flags {
        assert!(
            help.contains(flag),
            "{subcommand} --help lacks {flag}:\n{help}"
        );
    }
}

/// None of `flags` in `help`, by their long name (`--context`), whole (`--kubeconfig-out` is
/// sim's own flag, not `--kubeconfig`), nor their short one (`-n,`).
fn assert_lacks(subcommand: &str, help: &str, flags: &[&str]) {
    for flag in flags {
        let long = flag.split(' ').find(|w| w.starts_with("--")).unwrap();
        let mentioned = help.match_indices(long).any(|(at, _)| {
            let next = help[at + long.len()..].chars().next();
            !matches!(next, Some(c) if c.is_ascii_alphanumeric() || c == '-')
        });
        assert!(!mentioned, "{subcommand} --help mentions {long}:\n{help}");
        let short = flag
            .split_once(long)
            .map_or("", |(before, _)| before.trim_end());
        if !short.is_empty() {
            assert!(
                !help.contains(short),
                "{subcommand} --help has {short}:\n{help}"
            );
        }
    }
}

/// clap's usage error for an argument the subcommand does not have.
fn assert_unknown(args: &[&str], flag: &str) {
    let out = podline(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.contains(&format!("unexpected argument '{flag}'")),
        "{args:?}: {stderr}"
    );
}

#[test]
fn sim_should_take_no_cluster_flag_and_no_namespace() {
    let sim = help("sim");
    assert_lacks("sim", &sim, CLUSTER);
    assert_lacks("sim", &sim, &[NAMESPACE, OUTPUT]);
    assert!(!sim.contains("--http2-ping"), "{sim}");
    // Its own flag stays, and so does the global -v.
    assert_has("sim", &sim, &["--kubeconfig-out <FILE>", VERBOSE]);
    assert_unknown(&["sim", "-n", "x"], "-n");
    assert_unknown(&["sim", "--kubeconfig", "k"], "--kubeconfig");
    assert_unknown(
        &["sim", "--http2-ping-interval", "5s"],
        "--http2-ping-interval",
    );
}

#[test]
fn ui_and_demo_should_take_no_cluster_flag() {
    for subcommand in ["ui", "demo"] {
        let text = help(subcommand);
        assert_lacks(subcommand, &text, CLUSTER);
        assert_lacks(subcommand, &text, &[NAMESPACE, OUTPUT]);
        assert_has(subcommand, &text, &[VERBOSE]);
    }
    assert_unknown(&["ui", "--context", "prod"], "--context");
    assert_unknown(&["demo", "-n", "x"], "-n");
}

#[test]
fn store_readers_should_keep_their_namespace_filter_and_output_but_no_cluster_flag() {
    for subcommand in ["runs", "pods", "show"] {
        let text = help(subcommand);
        assert_lacks(subcommand, &text, CLUSTER);
        assert_has(subcommand, &text, &[NAMESPACE, OUTPUT, VERBOSE]);
    }
    assert_unknown(&["runs", "--kubeconfig", "k"], "--kubeconfig");
    assert_unknown(&["pods", "--connect-timeout", "2s"], "--connect-timeout");
}

#[test]
fn cluster_subcommands_should_keep_every_cluster_flag() {
    for (subcommand, output) in [("run", true), ("record", false), ("gc", true)] {
        let text = help(subcommand);
        assert_has(subcommand, &text, CLUSTER);
        assert_has(subcommand, &text, &[NAMESPACE, VERBOSE]);
        if output {
            assert_has(subcommand, &text, &[OUTPUT]);
        } else {
            assert_lacks(subcommand, &text, &[OUTPUT]);
        }
    }
    // The daemon prints no result: -o is not its flag.
    assert_unknown(&["record", "-o", "json"], "-o");
}

/// Flags go after the subcommand's name; only -v may come before it.
#[test]
fn shared_flags_should_follow_the_subcommand_and_only_v_is_global() {
    assert_unknown(&["-n", "x", "run", "--image", "busybox"], "-n");
    assert_unknown(&["--kubeconfig", "k", "gc"], "--kubeconfig");
    let out = podline(&["-v", "run", "--help"]);
    assert!(out.status.success());
    let out = podline(&["run", "-vv", "--help"]);
    assert!(out.status.success());
}

/// gc takes the PING and connect flags now that they are in its --help: a bad value is bad
/// usage, found before it connects (the variable too).
#[test]
fn gc_should_check_its_ping_and_connect_flags_before_connecting() {
    for (args, named) in [
        (
            &["gc", "--http2-ping-interval", "soon"][..],
            "--http2-ping-interval",
        ),
        (&["gc", "--connect-timeout", "0"][..], "--connect-timeout"),
    ] {
        let out = podline(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(named), "{args:?}: {stderr}");
    }
    let out = Command::new(BIN)
        .arg("gc")
        .env_remove("KUBECONFIG")
        .env("PODLINE_HTTP2_PING_TIMEOUT", "abc")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("PODLINE_HTTP2_PING_TIMEOUT"), "{stderr}");
}
