//! The official Kubernetes Python client (`kubernetes` from PyPI) against the sim, over TLS, on a
//! sim that offers HTTP/2 (the client's urllib3 asks ALPN for HTTP/1.1 only) and on one that
//! serves HTTP/1.1 only. Skipped, loudly, when the package is not installed, unless
//! `PODLINE_REQUIRE_PYTHON_KUBERNETES=1` (set by CI) makes that a failure.

use std::path::PathBuf;
use std::time::Duration;

use podline_sim::SimConfig;
use tokio::process::Command;

fn python_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(name)
}

/// Runs `tests/python/<name>` against the sim of `kubeconfig` (at most 45 s) and asserts that it
/// printed "ok" and exited 0; on failure the message shows both of its outputs.
async fn run_script(name: &str, kubeconfig: &std::path::Path) {
    let mut cmd = Command::new("python3");
    cmd.arg(python_file(name))
        .arg(kubeconfig)
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(45), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{name} did not finish within 45 s"))
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim() == "ok",
        "the Python client failed ({name}):\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether the package is importable; panics instead when CI requires it.
async fn python_client_installed() -> bool {
    let found = Command::new("python3")
        .args(["-c", "import kubernetes"])
        .output()
        .await
        .is_ok_and(|o| o.status.success());
    if !found {
        let msg = "the Python `kubernetes` package is not installed: \
                   `pip install -r crates/sim/tests/python/requirements.txt`";
        if std::env::var("PODLINE_REQUIRE_PYTHON_KUBERNETES").as_deref() == Ok("1") {
            panic!("{msg} (PODLINE_REQUIRE_PYTHON_KUBERNETES=1)");
        }
        eprintln!("SKIPPED: {msg}");
    }
    found
}

async fn python_against(http1_only: bool) {
    if !python_client_installed().await {
        return;
    }
    let sim = podline_testkit::start_sim(
        SimConfig::default()
            .kubelet_enabled(false)
            .http1_only(http1_only),
    )
    .await;
    let kubeconfig = podline_testkit::kubeconfig_file(&sim);
    run_script("kube_client.py", kubeconfig.path()).await;
    assert!(sim.counts().get("watch", "pods") >= 1, "it watched");
    sim.shutdown().await;
}

#[tokio::test]
async fn the_python_client_should_work_against_a_sim_that_offers_http2() {
    python_against(false).await;
}

#[tokio::test]
async fn the_python_client_should_work_against_an_http1_only_sim() {
    python_against(true).await;
}

/// The client sends `follow=True` on `read_namespaced_pod_log(..., follow=True)`: the sim must
/// read that as kube-apiserver does (true), not answer 400, and stream the log to its end.
#[tokio::test]
async fn the_python_client_should_follow_a_pod_log() {
    if !python_client_installed().await {
        return;
    }
    let sim = podline_testkit::start_sim(SimConfig::default()).await;
    let kubeconfig = podline_testkit::kubeconfig_file(&sim);
    run_script("kube_logs.py", kubeconfig.path()).await;
    sim.shutdown().await;
}

/// The Python client decodes kube-shaped BOOKMARK events on a watch with bookmarks, reads a
/// server-side Table as kubectl asks for it, and deletes a collection by label selector.
#[tokio::test]
async fn the_python_client_should_watch_bookmarks_read_tables_and_delete_collections() {
    if !python_client_installed().await {
        return;
    }
    let sim = podline_testkit::start_sim(
        SimConfig::default()
            .kubelet_enabled(false)
            .bookmark_interval(Duration::from_millis(200)),
    )
    .await;
    let kubeconfig = podline_testkit::kubeconfig_file(&sim);
    run_script("kube_compat.py", kubeconfig.path()).await;
    sim.shutdown().await;
}

/// Server-side apply through the Python client (`patch_namespaced_pod` with the apply content
/// type): created by apply (201), changed by the same manager (200), a conflict with another
/// manager without force (409 with kube's message), forced (200).
#[tokio::test]
async fn the_python_client_should_server_side_apply_a_pod() {
    if !python_client_installed().await {
        return;
    }
    let sim = podline_testkit::start_sim(SimConfig::default().kubelet_enabled(false)).await;
    let kubeconfig = podline_testkit::kubeconfig_file(&sim);
    run_script("kube_ssa.py", kubeconfig.path()).await;
    assert!(sim.counts().get("patch", "pods") >= 4, "it applied");
    sim.shutdown().await;
}

/// The client decodes `/version` (1.32's version.Info) and the kubelet's Node with its models'
/// required-field checks, and cordons the node with a strategic merge patch.
#[tokio::test]
async fn the_python_client_should_read_the_version_and_the_node() {
    if !python_client_installed().await {
        return;
    }
    let sim = podline_testkit::start_sim(SimConfig::default()).await;
    let kubeconfig = podline_testkit::kubeconfig_file(&sim);
    run_script("kube_nodes.py", kubeconfig.path()).await;
    sim.shutdown().await;
}

/// Secrets, ConfigMaps and ServiceAccounts through the Python client: `string_data` becomes
/// base64 `data` and is never returned, an immutable ConfigMap's change is kube's 422, the
/// namespace's `default` ServiceAccount is listed, and a watch of secrets sees a change.
#[tokio::test]
async fn the_python_client_should_use_secrets_config_maps_and_service_accounts() {
    if !python_client_installed().await {
        return;
    }
    let sim = podline_testkit::start_sim(SimConfig::default().kubelet_enabled(false)).await;
    let kubeconfig = podline_testkit::kubeconfig_file(&sim);
    run_script("kube_kinds.py", kubeconfig.path()).await;
    assert!(sim.counts().get("watch", "secrets") >= 1, "it watched");
    sim.shutdown().await;
}

/// `stream(connect_get_namespaced_pod_exec, ...)` into a pod of a `--exec` sim: the command's
/// output with the container's env, stdin, and the exit code from the error channel's Status.
#[tokio::test]
async fn the_python_client_should_exec_into_a_pod_through_stream() {
    if !python_client_installed().await {
        return;
    }
    let sim = podline_testkit::start_sim(
        SimConfig::default().kubelet(podline_sim::KubeletConfig::default().exec(true)),
    )
    .await;
    let kubeconfig = podline_testkit::kubeconfig_file(&sim);
    run_script("kube_exec.py", kubeconfig.path()).await;
    sim.shutdown().await;
}
