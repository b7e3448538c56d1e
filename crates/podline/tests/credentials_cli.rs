//! No credential in any message of `podline run` (issue 27, Medium): the real binary, its stdout
//! and stderr searched for a marker secret. A YAML error in a kubeconfig, a pod template or a
//! tasks file says where and what (`line N column M: ...`), never the lines around it; an exec
//! credential plugin's output is never printed or quoted; env values and whole pods can be
//! given without a command line (`--env-file -`, `--pod-template -`, `-f -`); a malformed
//! `postgres:` target is refused, redacted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use podline_testkit::{client, kubeconfig_file, start_sim, test_config};

/// The secret every test hides: a token, key data, an env value, a plugin's answer.
const MARKER: &str = "Zq9CredMarker";

fn podline(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_podline"));
    cmd.args(args)
        .env_remove("KUBECONFIG")
        .env_remove("RUST_LOG")
        .env_remove("PODLINE_DB")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn text(out: &Output) -> String {
    format!(
        "--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[track_caller]
fn assert_hidden(what: &str, out: &Output) -> String {
    let shown = text(out);
    assert!(!out.status.success(), "{what} succeeded:\n{shown}");
    assert!(
        !shown.contains(MARKER),
        "the secret reached the output of {what}:\n{shown}"
    );
    shown
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A kubeconfig whose user is `user` (YAML lines, indented under `user:`).
fn kubeconfig(user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\nusers:\n- name: u\n  user:\n{user}"
    )
}

/// The finding's case: a stray tab near the user entry, whose token and client-key-data
/// kube's YAML error quoted; kubectl says only `yaml: line N: found a tab character`.
#[test]
fn a_kubeconfig_yaml_error_should_quote_no_token_or_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = kubeconfig(&format!(
        "    token: {MARKER}-token\n\tclient-key-data: {MARKER}KeyData\n    client-certificate-data: {MARKER}Cert\n"
    ));
    let path = write(dir.path(), "config", &config);
    for args in [
        vec![
            "run",
            "--kubeconfig",
            &path,
            "--image",
            "busybox",
            "--",
            "true",
        ],
        vec!["gc", "--kubeconfig", &path],
    ] {
        let out = podline(&args).output().unwrap();
        let shown = assert_hidden(&format!("{args:?}"), &out);
        assert!(shown.contains("line "), "{shown}");
        assert!(shown.contains("kubeconfig"), "{shown}");
    }
    // The same through KUBECONFIG.
    let out = podline(&["run", "--image", "busybox", "--", "true"])
        .env("KUBECONFIG", &path)
        .output()
        .unwrap();
    let shown = assert_hidden("run with KUBECONFIG", &out);
    assert!(shown.contains("line "), "{shown}");
}

/// A pod template and a tasks file hold env values: their YAML and type errors quote none.
#[test]
fn template_and_tasks_file_errors_should_quote_no_env_value() {
    let dir = tempfile::tempdir().unwrap();
    let template = write(
        dir.path(),
        "pod.yaml",
        &format!(
            "spec:\n  containers:\n  - name: c\n    env:\n    - name: A\n      value: {MARKER}\n\t- name: B\n      value: {MARKER}\n"
        ),
    );
    let tasks = write(
        dir.path(),
        "tasks.yaml",
        &format!(
            "- image: a\n  env: [[K, \"{MARKER}\"]]\n\t- image: b\n  env: [[K, \"{MARKER}\"]]\n"
        ),
    );
    let typed = write(
        dir.path(),
        "typed.yaml",
        &format!("- image: a\n  env: [[K, [\"{MARKER}\"]]]\n"),
    );
    for args in [
        vec!["run", "--pod-template", &template, "--", "true"],
        vec!["run", "-f", &tasks],
        vec!["run", "-f", &typed],
    ] {
        let out = podline(&args).output().unwrap();
        let shown = assert_hidden(&format!("{args:?}"), &out);
        assert_eq!(out.status.code(), Some(2), "{shown}");
        // A syntax error by its position; a type error by the task and field.
        assert!(
            shown.contains("line ") || shown.contains("task 1: env: invalid type"),
            "{shown}"
        );
    }
    // From standard input, the same.
    let mut child = podline(&["run", "--pod-template", "-", "--", "true"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(std::fs::read(&template).unwrap().as_slice())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let shown = assert_hidden("--pod-template -", &out);
    assert!(shown.contains("standard input"), "{shown}");
}

/// A failing plugin's stdout (which holds the credential) is never printed, nor is a bare
/// token a plugin prints in place of an ExecCredential; the command is named.
#[test]
fn exec_plugin_output_should_never_be_printed() {
    let dir = tempfile::tempdir().unwrap();
    for (script, want) in [
        (
            format!("echo '{{\"status\": {{\"token\": \"{MARKER}\"}}}}'; exit 3"),
            "exit status: 3",
        ),
        (format!("echo {MARKER}"), "no valid ExecCredential"),
        (
            format!("echo '{{\"status\": {{\"token\": [\"{MARKER}\"]}}}}'"),
            "no valid ExecCredential",
        ),
    ] {
        let plugin = dir.path().join("get-token");
        std::fs::write(&plugin, format!("#!/bin/sh\n{script}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o700)).unwrap();
        let config = kubeconfig(&format!(
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      args: [\"--secret={MARKER}\"]\n      interactiveMode: Never\n",
            plugin.display()
        ));
        let path = write(dir.path(), "config", &config);
        let out = podline(&["run", "--kubeconfig", &path, "--image", "i", "--", "true"])
            .output()
            .unwrap();
        let shown = assert_hidden(&script, &out);
        assert!(
            shown.contains("exec credential plugin") && shown.contains("get-token"),
            "{shown}"
        );
        assert!(shown.contains(want), "{script}: {shown}");
    }
}

/// `--db 'postgres:/user:pass@host/db'` (a `/` missing) is refused as a malformed URL, the
/// password hidden, instead of being opened as a SQLite file named after it.
#[test]
fn a_malformed_postgres_url_should_be_refused_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("postgres:/app:{MARKER}@db/podline");
    for args in [vec!["runs"], vec!["pods"], vec!["show", "x"]] {
        let out = podline(&args)
            .args(["--db", &db])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let shown = assert_hidden(&format!("{args:?}"), &out);
        assert!(shown.contains("malformed PostgreSQL URL"), "{shown}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// `--env-file -` and `--pod-template FILE` put env values into the pod without a command
/// line; the pod has them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_values_should_reach_the_pod_without_argv() {
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    let dir = tempfile::tempdir().unwrap();
    let template = write(
        dir.path(),
        "pod.json",
        &format!(
            r#"{{"spec": {{"containers": [{{"name": "base", "env": [{{"name": "FROM_TEMPLATE", "value": "{MARKER}-t"}}]}}]}}}}"#
        ),
    );
    let args = [
        "run",
        "--kubeconfig",
        kubeconfig.path().to_str().unwrap(),
        "--image",
        "busybox",
        "--on-finish",
        "keep",
        "--pod-template",
        &template,
        "--env-file",
        "-",
        "--",
        "true",
    ];
    let mut child = podline(&args).stdin(Stdio::piped()).spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("# a comment\nSECRET={MARKER}-f\n").as_bytes())
        .unwrap();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains(MARKER), "{}", text(&out));
    assert!(!args.iter().any(|a| a.contains(MARKER)));
    let pods: Api<Pod> = Api::namespaced(client(&sim).await, "default");
    let listed = pods.list(&ListParams::default()).await.unwrap();
    let env: Vec<(String, Option<String>)> = listed.items[0].spec.as_ref().unwrap().containers[0]
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.name, e.value))
        .collect();
    assert!(
        env.contains(&("SECRET".into(), Some(format!("{MARKER}-f")))),
        "{env:?}"
    );
    assert!(
        env.contains(&("FROM_TEMPLATE".into(), Some(format!("{MARKER}-t")))),
        "{env:?}"
    );
}

/// podline runs the exec plugin itself (kube's runner is unbounded and quotes the output): a
/// plugin that answers the sim's token as an ExecCredential runs a task, and a token that
/// expires is fetched again from the plugin (the plugin runs more than once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_plugins_token_should_run_a_task_and_be_refreshed() {
    let sim = start_sim(test_config()).await;
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("get-token");
    let count = dir.path().join("runs");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\necho run >> {}\necho '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{}\",\"expirationTimestamp\":\"2000-01-01T00:00:00Z\"}}}}'\n",
            count.display(),
            sim.token()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o700)).unwrap();
    let token_line = format!("    token: {}\n", sim.token());
    let config = sim.kubeconfig_yaml().replace(
        &token_line,
        &format!(
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      interactiveMode: Never\n",
            plugin.display()
        ),
    );
    assert!(!config.contains(sim.token()), "{config}");
    let path = write(dir.path(), "config", &config);
    let out = tokio::task::spawn_blocking(move || {
        podline(&[
            "run",
            "--kubeconfig",
            &path,
            "--image",
            "busybox",
            "--",
            "true",
        ])
        .output()
    })
    .await
    .unwrap()
    .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let runs = std::fs::read_to_string(&count).unwrap().lines().count();
    assert!(
        runs > 1,
        "the expired token was not refreshed: {runs} run(s)"
    );
}

/// A plugin that never answers (waiting for a login nobody can give) is stopped at the run's
/// create deadline, with an error naming the command and the bound, and nothing is created.
#[test]
fn a_hanging_exec_plugin_should_be_stopped_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("slow-login");
    std::fs::write(
        &plugin,
        format!("#!/bin/sh\necho {MARKER}\nexec sleep 600\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o700)).unwrap();
    let config = kubeconfig(&format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      interactiveMode: Never\n",
        plugin.display()
    ));
    let path = write(dir.path(), "config", &config);
    let started = std::time::Instant::now();
    let out = podline(&[
        "run",
        "--kubeconfig",
        &path,
        "--create-deadline",
        "2s",
        "--image",
        "i",
        "--",
        "true",
    ])
    .output()
    .unwrap();
    let shown = assert_hidden("a hanging plugin", &out);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert!(
        shown.contains("slow-login") && shown.contains("did not answer within 2s"),
        "{shown}"
    );
}
