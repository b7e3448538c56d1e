//! Test: flag and variable names stay in the binary. No library crate's source (`crates/*/src`
//! other than this crate's) may name one of podline's long flags (every `--flag` of every
//! subcommand, read from the clap definition itself) or a `PODLINE_*` variable; the binary maps
//! library errors to messages that name them (`cli/settings.rs`, `cli/cluster.rs`). Flags of
//! other programs (kube-apiserver's `--min-request-timeout`, kubectl's `--timestamps`) are fine.
//!
//! [`ALLOWED`] lists, per file, the names that may still appear there and why; an entry that no
//! longer matches anything fails the test too, so the list only shrinks.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

use super::Cli;

/// `(file under crates/, name, why)`: names a library file may still contain.
const ALLOWED: &[(&str, &str, &str)] = &[
    // Not podline's flags or variables.
    (
        "mlmd/src/test_server.rs",
        "--db",
        "the MLMD test server script's own flag",
    ),
    (
        "record/src/lifecycle.rs",
        "PODLINE_RUN_LABEL",
        "a Rust constant for the podline.io/run label, not a variable",
    ),
    (
        "conformance/src/lib.rs",
        "--kubeconfig",
        "kubectl's own flag: the suite runs kubectl",
    ),
    (
        "conformance/src/lib.rs",
        "--namespace",
        "kubectl's own flag: the suite runs kubectl",
    ),
    (
        "conformance/src/lib.rs",
        "PODLINE_CONFORMANCE_KUBECONFIG",
        "the conformance suite's own test-harness variable",
    ),
    (
        "testkit/src/db.rs",
        "PODLINE_TEST_POSTGRES",
        "the test kit's own test-harness variable",
    ),
    (
        "testkit/src/db.rs",
        "--db",
        "the test kit builds command lines for the binary",
    ),
    (
        "testkit/src/bin.rs",
        "--kubeconfig",
        "the test kit builds command lines for the binary",
    ),
    (
        "testkit/src/bin.rs",
        "PODLINE_CREATE_BACKOFF_BASE",
        "the test kit builds command lines for the binary",
    ),
    (
        "testkit/src/bin.rs",
        "PODLINE_CREATE_BACKOFF_CAP",
        "the test kit builds command lines for the binary",
    ),
];

/// Every long flag (and alias) of every subcommand, as `--name`.
fn podline_flags() -> BTreeSet<String> {
    fn walk(command: &clap::Command, flags: &mut BTreeSet<String>) {
        for arg in command.get_arguments() {
            let longs = arg.get_long().into_iter();
            let aliases = arg.get_all_aliases().into_iter().flatten();
            flags.extend(longs.chain(aliases).map(|long| format!("--{long}")));
        }
        for sub in command.get_subcommands() {
            walk(sub, flags);
        }
    }
    let mut flags = BTreeSet::new();
    walk(&Cli::command(), &mut flags);
    flags
}

/// The `--name` and `PODLINE_NAME` words of a line: a word starts after a character that
/// cannot be part of it (so `kube--x` and `---` are not flags).
fn names_in(line: &str) -> Vec<String> {
    let bytes = line.as_bytes();
    let word_char = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    let mut names = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !line.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let starts_word = i == 0 || !word_char(bytes[i - 1]);
        let rest = &line[i..];
        let flag =
            rest.starts_with("--") && rest[2..].starts_with(|c: char| c.is_ascii_lowercase());
        let variable = rest.starts_with("PODLINE_");
        if starts_word && (flag || variable) {
            let len = rest
                .bytes()
                .take_while(|&b| {
                    if flag {
                        b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'
                    } else {
                        b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'
                    }
                })
                .count();
            names.push(rest[..len].trim_end_matches('-').to_owned());
            i += len;
        } else {
            i += 1;
        }
    }
    names
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

#[test]
fn no_library_crate_names_a_podline_flag_or_variable() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates/")
        .to_path_buf();
    let flags = podline_flags();
    assert!(
        flags.contains("--kubeconfig") && flags.contains("--watch-client-timeout"),
        "the flags are read from clap: {flags:?}"
    );
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("crates/").flatten() {
        if entry.file_name() != "podline" {
            rust_files(&entry.path().join("src"), &mut files);
        }
    }
    files.sort();
    assert!(files.len() > 50, "library sources found: {}", files.len());
    let mut found = Vec::new();
    let mut used = BTreeSet::new();
    for file in &files {
        let relative = file
            .strip_prefix(&crates)
            .expect("under crates/")
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(file).expect("readable source");
        for (number, line) in text.lines().enumerate() {
            for name in names_in(line) {
                if name.starts_with("--") && !flags.contains(&name) {
                    continue; // another program's flag
                }
                match ALLOWED
                    .iter()
                    .position(|(path, allowed, _)| *path == relative && *allowed == name)
                {
                    Some(entry) => {
                        used.insert(entry);
                    }
                    None => found.push(format!("crates/{relative}:{}: {name}", number + 1)),
                }
            }
        }
    }
    let stale: Vec<_> = ALLOWED
        .iter()
        .enumerate()
        .filter(|(i, _)| !used.contains(i))
        .map(|(_, (path, name, _))| format!("crates/{path}: {name}"))
        .collect();
    assert!(
        found.is_empty(),
        "library crates name podline's flags or variables (the binary should, see cli/settings.rs):\n{}",
        found.join("\n")
    );
    assert!(
        stale.is_empty(),
        "allow-list entries that match nothing any more (remove them):\n{}",
        stale.join("\n")
    );
}

#[test]
fn names_should_be_whole_words() {
    assert_eq!(
        names_in("pass `--kubeconfig FILE`, set PODLINE_DB=x; --watch-client-timeout=\"1\""),
        ["--kubeconfig", "PODLINE_DB", "--watch-client-timeout"]
    );
    assert_eq!(names_in("--leader-elect-* flags"), ["--leader-elect"]);
    assert!(names_in("a---b ---x kube--name X_PODLINE_Y --Upper -n").is_empty());
    assert_eq!(names_in("é → --db ✓"), ["--db"]);
}
