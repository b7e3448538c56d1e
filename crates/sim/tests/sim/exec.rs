//! `pods/exec` through real kubectl (1.30+ speaks `v5.channel.k8s.io` over WebSocket): a command
//! run as a process in an `--exec` pod's context, stdin, a non-zero exit code, `kubectl cp` out
//! of the pod, the scripted answer without `--exec`, and kube's errors.

use std::process::{Output, Stdio};
use std::time::Duration;

use super::kubectl_kit::{kubectl, kubectl_cmd, ok};
use podline_sim::{KubeletConfig, Sim, SimConfig};
use tokio::io::AsyncWriteExt;

async fn kubectl_stdin(kubeconfig: &std::path::Path, args: &[&str], input: &[u8]) -> Output {
    let mut child = kubectl_cmd(kubeconfig, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin.write_all(input).await.expect("write stdin");
    drop(stdin);
    tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("kubectl {args:?} timed out"))
        .expect("kubectl runs")
}

/// Creates `pod` (JSON) with kubectl and waits until it is Ready.
async fn run_pod(kubeconfig: &std::path::Path, pod: serde_json::Value) {
    let name = pod["metadata"]["name"].as_str().expect("name").to_owned();
    ok(&kubectl_stdin(
        kubeconfig,
        &["create", "-f", "-"],
        pod.to_string().as_bytes(),
    )
    .await);
    ok(&kubectl(
        kubeconfig,
        &[
            "wait",
            "--for=condition=Ready",
            &format!("pod/{name}"),
            "--timeout=20s",
        ],
    )
    .await);
}

async fn exec_sim() -> Sim {
    podline_testkit::start_sim(SimConfig::default().kubelet(KubeletConfig::default().exec(true)))
        .await
}

/// A long-running `--exec` pod whose container has an env value and a working directory.
fn sleeper(name: &str, workdir: &std::path::Path) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "busybox", "command": ["sleep", "60"],
            "workingDir": workdir.to_str().expect("utf-8 path"),
            "env": [{"name": "GREETING", "value": "hello from the pod"}],
        }]},
    })
}

#[tokio::test]
async fn kubectl_exec_runs_the_command_in_the_containers_env_and_working_dir() {
    let sim = exec_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    run_pod(kc.path(), sleeper("exec-env", dir.path())).await;
    let out = ok(&kubectl(kc.path(), &["exec", "exec-env", "--", "echo", "hi"]).await);
    assert_eq!(out, "hi\n");
    let out = ok(&kubectl(
        kc.path(),
        &[
            "exec",
            "exec-env",
            "--",
            "sh",
            "-c",
            "echo $GREETING; pwd; echo oops >&2",
        ],
    )
    .await);
    let canonical = dir.path().canonicalize().expect("canonical");
    assert_eq!(
        out,
        format!("hello from the pod\n{}\n", canonical.display())
    );
    sim.shutdown().await;
}

/// A command written for a container sees only its own processes: KubernetesPodOperator stops
/// its XCom sidecar with `kill -2 $(pgrep -u $(id -u) -f 'sh')`, which as a host process would
/// interrupt every shell of the sim's user. In its own PID namespace the exec'd shell is pid 1
/// and `pgrep` finds nothing of the host's.
#[tokio::test]
async fn kubectl_exec_runs_in_a_pid_namespace_of_its_own() {
    if podline_sim_core::kubelet::sandbox::pid_namespace_prefix().is_none() {
        eprintln!("skipped: no PID namespace can be made here (docs/sim.md, exec mode)");
        return;
    }
    let sim = exec_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    run_pod(kc.path(), sleeper("exec-pidns", dir.path())).await;
    let out = ok(&kubectl(
        kc.path(),
        &[
            "exec",
            "exec-pidns",
            "--",
            "sh",
            "-c",
            "echo $$; pgrep -x sleep | wc -l",
        ],
    )
    .await);
    // The shell is the namespace's init, and the pod's own `sleep 60` (a host process of the
    // sim) is out of its sight.
    assert_eq!(out, "1\n0\n");
    sim.shutdown().await;
}

#[tokio::test]
async fn kubectl_exec_dash_i_feeds_stdin_and_ends_it() {
    let sim = exec_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    run_pod(kc.path(), sleeper("exec-stdin", dir.path())).await;
    // `wc -c` prints only once stdin ended: v5's close signal reached the process.
    let out = ok(&kubectl_stdin(
        kc.path(),
        &[
            "exec",
            "-i",
            "exec-stdin",
            "--",
            "sh",
            "-c",
            "cat; wc -c </dev/null",
        ],
        b"line one\nline two\n",
    )
    .await);
    assert_eq!(out, "line one\nline two\n0\n");
    sim.shutdown().await;
}

#[tokio::test]
async fn kubectl_exec_returns_the_commands_non_zero_exit_code() {
    let sim = exec_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    run_pod(kc.path(), sleeper("exec-exit", dir.path())).await;
    let out = kubectl(
        kc.path(),
        &["exec", "exec-exit", "--", "sh", "-c", "echo before; exit 3"],
    )
    .await;
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "before\n");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("command terminated with exit code 3"),
        "{out:?}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn kubectl_cp_copies_a_file_out_of_an_exec_pod() {
    let sim = exec_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("result.txt");
    std::fs::write(&src, "the result\n").expect("write the pod's file");
    run_pod(kc.path(), sleeper("exec-cp", dir.path())).await;
    let out_dir = tempfile::tempdir().expect("tempdir");
    let dest = out_dir.path().join("copied.txt");
    ok(&kubectl(
        kc.path(),
        &[
            "cp",
            &format!("exec-cp:{}", src.display()),
            dest.to_str().expect("utf-8 path"),
        ],
    )
    .await);
    assert_eq!(
        std::fs::read_to_string(&dest).expect("copied"),
        "the result\n"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn kubectl_exec_without_exec_mode_answers_the_annotation_script() {
    let sim = podline_testkit::start_sim(SimConfig::default()).await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "scripted", "annotations": {
            "sim.podline.io/duration": "60s",
            "sim.podline.io/exec-main": "{\"stdout\": \"42\\n\", \"exitCode\": 7}",
        }},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
    });
    run_pod(kc.path(), pod).await;
    let out = kubectl(
        kc.path(),
        &["exec", "scripted", "--", "cat", "/airflow/xcom/return.json"],
    )
    .await;
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "42\n");
    sim.shutdown().await;
}

/// kube's errors as kubectl prints them: an unknown pod (404 before any upgrade), a container
/// the pod does not have (400), and a container that is not running (the kubelet's `container
/// not found`, reported by kube-apiserver's v5 translator as an internal error after the
/// upgrade).
#[tokio::test]
async fn kubectl_exec_errors_are_kubes() {
    let sim = exec_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let out = kubectl(kc.path(), &["exec", "nope", "--", "true"]).await;
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(r#"pods "nope" not found"#),
        "{out:?}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    run_pod(kc.path(), sleeper("exec-errs", dir.path())).await;
    let out = kubectl(
        kc.path(),
        &["exec", "exec-errs", "-c", "other", "--", "true"],
    )
    .await;
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("container other is not valid for pod exec-errs"),
        "{out:?}"
    );
    assert!(!out.status.success());

    // A container that has exited while the pod runs: kube-apiserver's v5 translator has
    // upgraded already, so the kubelet's refusal comes back as an InternalError Status.
    let mut pod = sleeper("exec-done", dir.path());
    pod["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .push(serde_json::json!({"name": "done", "image": "busybox", "command": ["true"]}));
    run_pod_created(kc.path(), pod).await;
    ok(&kubectl(
        kc.path(),
        &[
            "wait",
            "--for=jsonpath={.status.containerStatuses[1].state.terminated.reason}=Completed",
            "pod/exec-done",
            "--timeout=20s",
        ],
    )
    .await);
    let out = kubectl(
        kc.path(),
        &["exec", "exec-done", "-c", "done", "--", "true"],
    )
    .await;
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            r#"Internal error occurred: unable to upgrade connection: container not found ("done")"#
        ),
        "{out:?}"
    );
    assert!(!out.status.success());
    sim.shutdown().await;
}

/// Creates `pod` (JSON) with kubectl.
async fn run_pod_created(kubeconfig: &std::path::Path, pod: serde_json::Value) {
    ok(&kubectl_stdin(
        kubeconfig,
        &["create", "-f", "-"],
        pod.to_string().as_bytes(),
    )
    .await);
}

/// A client that goes away mid-command takes the command with it (as a kubelet's exec session
/// ends with its stream): the process is killed, not left running.
#[tokio::test]
async fn an_exec_process_is_killed_when_the_client_disconnects() {
    let sim = exec_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    run_pod(kc.path(), sleeper("exec-gone", dir.path())).await;
    // A command line no other process has; found from the host's view (the exec'd command
    // may be in a PID namespace of its own, where its `$$` means nothing to the host).
    let marker = "sleep 31.4159";
    let mut client = kubectl_cmd(
        kc.path(),
        &[
            "exec",
            "exec-gone",
            "--",
            "sh",
            "-c",
            &format!("exec {marker}"),
        ],
    )
    .spawn()
    .expect("kubectl runs");
    let running = || {
        std::process::Command::new("pgrep")
            .args(["-f", marker])
            .output()
            .is_ok_and(|out| out.status.success())
    };
    assert!(
        podline_testkit::wait_until(Duration::from_secs(20), || async { running() }).await,
        "the command never started"
    );
    client.kill().await.expect("kill kubectl");
    assert!(
        podline_testkit::wait_until(Duration::from_secs(10), || async { !running() }).await,
        "the exec process ({marker}) outlived its client"
    );
    sim.shutdown().await;
}

/// `kubectl attach` streams the running container's output from the moment it attached until
/// the container exits (the scripted kubelet spreads `log-lines` over the run).
#[tokio::test]
async fn kubectl_attach_streams_the_containers_output_until_it_exits() {
    let sim = podline_testkit::start_sim(SimConfig::default()).await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "attached", "annotations": {
            "sim.podline.io/duration": "3s",
            "sim.podline.io/log-lines": "6",
        }},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
    });
    run_pod(kc.path(), pod).await;
    let out = ok(&kubectl(kc.path(), &["attach", "attached"]).await);
    let lines: Vec<&str> = out.lines().collect();
    // From the attach on: a run of consecutive lines ending with the last one.
    let first: usize = lines
        .first()
        .and_then(|l| l.strip_prefix("line "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("kubectl attach printed: {out:?}"));
    let expected: Vec<String> = (first..=6).map(|n| format!("line {n}")).collect();
    assert_eq!(lines, expected, "kubectl attach printed: {out:?}");
    sim.shutdown().await;
}

/// A `status` fault matching `get` on pods hits an exec before its upgrade, as it would a log
/// read: kubectl reports the injected 503, and the next exec (the rule spent) runs.
#[tokio::test]
async fn a_status_fault_hits_an_exec_before_the_upgrade() {
    use podline_sim::{FaultAction, FaultRule, FaultVerb};
    let sim = exec_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    run_pod(kc.path(), sleeper("exec-fault", dir.path())).await;
    sim.faults().push(
        FaultRule::new(FaultAction::status(503))
            .verb(FaultVerb::Get)
            .resource("pods")
            .times(1),
    );
    // kubectl's WebSocket GET meets the rule; its SPDY fallback (a POST) is not served.
    let out = kubectl(kc.path(), &["exec", "exec-fault", "--", "echo", "hi"]).await;
    assert!(!out.status.success(), "{out:?}");
    assert!(sim.faults().list().is_empty(), "the exec met the rule");
    let out = ok(&kubectl(kc.path(), &["exec", "exec-fault", "--", "echo", "hi"]).await);
    assert_eq!(out, "hi\n");
    sim.shutdown().await;
}

/// An HTTP/1.1-only sim serves the exec WebSocket too (its connections are served by hyper's
/// HTTP/1 builder, with upgrades).
#[tokio::test]
async fn kubectl_exec_works_against_an_http1_only_sim() {
    let sim = podline_testkit::start_sim(
        SimConfig::default()
            .kubelet(KubeletConfig::default().exec(true))
            .http1_only(true),
    )
    .await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    run_pod(kc.path(), sleeper("exec-h1", dir.path())).await;
    let out = ok(&kubectl(kc.path(), &["exec", "exec-h1", "--", "echo", "hi"]).await);
    assert_eq!(out, "hi\n");
    sim.shutdown().await;
}

/// A command that prints five lines 0.3 s apart (so each is a frame of its own), then leaves
/// a `DONE` file in `dir`.
fn five_lines(dir: &std::path::Path) -> String {
    format!(
        "for i in 1 2 3 4 5; do echo line $i; sleep 0.3; done; touch {}/DONE",
        dir.display()
    )
}

/// Pushes a one-shot `action` on `pods/exec` and runs `kubectl exec` of [`five_lines`].
async fn exec_with_fault(
    name: &str,
    action: podline_sim::FaultAction,
) -> (Sim, tempfile::TempDir, tempfile::NamedTempFile) {
    use podline_sim::FaultRule;
    let sim = exec_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    run_pod(kc.path(), sleeper(name, dir.path())).await;
    sim.faults()
        .push(FaultRule::new(action).resource("pods/exec").times(1));
    (sim, dir, kc)
}

/// What kubectl printed of [`five_lines`] before a fault after two frames: the first two lines,
/// and never the last.
fn cut_after_two(stdout: &str) {
    assert!(stdout.starts_with("line 1\nline 2\n"), "{stdout:?}");
    assert!(!stdout.contains("line 5"), "{stdout:?}");
}

/// `end_early` on an exec: after two output frames the sim closes the WebSocket normally,
/// without the error channel's Status, while the command still runs: kubectl prints what came.
/// The next exec (the rule spent) gets everything.
#[tokio::test]
async fn an_end_early_fault_cuts_an_exec_stream_after_n_frames() {
    let (sim, dir, kc) = exec_with_fault(
        "exec-end-early",
        podline_sim::FaultAction::EndEarly { after_events: 2 },
    )
    .await;
    let script = five_lines(dir.path());
    let out = kubectl(
        kc.path(),
        &["exec", "exec-end-early", "--", "sh", "-c", &script],
    )
    .await;
    cut_after_two(&String::from_utf8_lossy(&out.stdout));
    assert!(sim.faults().list().is_empty(), "the exec met the rule");
    let out = ok(&kubectl(
        kc.path(),
        &["exec", "exec-end-early", "--", "sh", "-c", &script],
    )
    .await);
    assert_eq!(out, "line 1\nline 2\nline 3\nline 4\nline 5\n");
    sim.shutdown().await;
}

/// `reset` on an exec: after two output frames the sim cuts the TCP connection; kubectl fails
/// with what it had printed.
#[tokio::test]
async fn a_reset_fault_cuts_an_exec_connection_after_n_frames() {
    let (sim, dir, kc) = exec_with_fault(
        "exec-reset",
        podline_sim::FaultAction::Reset {
            after_bytes: None,
            after_events: Some(2),
        },
    )
    .await;
    let script = five_lines(dir.path());
    let out = kubectl(
        kc.path(),
        &["exec", "exec-reset", "--", "sh", "-c", &script],
    )
    .await;
    assert!(!out.status.success(), "{out:?}");
    cut_after_two(&String::from_utf8_lossy(&out.stdout));
    sim.shutdown().await;
}

/// `stall` on an exec: after two output frames nothing more arrives, though the command ran to
/// its end, and the connection stays open: kubectl waits (until the test kills it).
#[tokio::test]
async fn a_stall_fault_stalls_an_exec_stream_after_n_frames() {
    use tokio::io::AsyncReadExt;
    let (sim, dir, kc) = exec_with_fault(
        "exec-stall",
        podline_sim::FaultAction::Stall { after_events: 2 },
    )
    .await;
    let script = five_lines(dir.path());
    let mut child = kubectl_cmd(
        kc.path(),
        &["exec", "exec-stall", "--", "sh", "-c", &script],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("kubectl runs");
    let done = dir.path().join("DONE");
    assert!(
        podline_testkit::wait_until(Duration::from_secs(20), || async { done.exists() }).await,
        "the command never finished"
    );
    // Unstalled, kubectl would get the rest and the Status at once and exit.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "kubectl ended: the stream was not stalled"
    );
    child.kill().await.expect("kill kubectl");
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("piped")
        .read_to_string(&mut stdout)
        .await
        .expect("read stdout");
    cut_after_two(&stdout);
    sim.shutdown().await;
}

/// `kubectl exec -it` from a terminal (util-linux `script` gives kubectl one): kubectl asks for
/// a TTY (`tty=true`), puts the terminal in raw mode and sends its size on the resize channel
/// (4). The sim accepts both (it has no pseudo-terminal: the command's output comes back on
/// stdout) and the command runs to its end.
#[tokio::test]
async fn kubectl_exec_with_a_tty_runs_the_command() {
    let sim = exec_sim().await;
    let kc = podline_testkit::kubeconfig_file(&sim);
    let dir = tempfile::tempdir().expect("tempdir");
    run_pod(kc.path(), sleeper("exec-tty", dir.path())).await;
    let line = format!(
        "kubectl --kubeconfig {} exec -it exec-tty -- sh -c 'echo from-the-tty-$((6*7))'",
        kc.path().display()
    );
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("kubectl exec -it timed out")
    .expect("script runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("from-the-tty-42"), "{stdout:?}");
    assert!(
        !stdout.contains("Unable to use a TTY"),
        "kubectl had no terminal: {stdout:?}"
    );
    sim.shutdown().await;
}
