"""Airflow Connections (`kubernetes_conn_id`) as podline's cluster access, and where secrets go:
the connection's token and an env value must reach no command line (`/proc/*/cmdline`, readable
by every local user), no task log line, no stdout or stderr."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import uuid
from pathlib import Path

import yaml

from conftest import Sim, dag_test_command, parse_run, wait_until


def cmdlines() -> dict[int, bytes]:
    found = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                found[int(proc.name)] = (proc / "cmdline").read_bytes()
            except OSError:
                continue
    return found


def test_connections_reach_the_cluster_and_no_secret_reaches_argv_or_logs(
    airflow_db: Path, sim: Sim
) -> None:
    kubeconfig = sim.kubeconfig.read_text()
    doc = yaml.safe_load(kubeconfig)
    token = doc["users"][0]["user"]["token"]
    assert len(token) >= 16
    without_ca = json.loads(json.dumps(doc))
    without_ca["clusters"][0]["cluster"].pop("certificate-authority-data")
    env_marker = f"env-marker-{uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["PODLINE_TEST_ENV_MARKER"] = env_marker
    env["AIRFLOW_CONN_K8S_PATH"] = json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": str(sim.kubeconfig)}}
    )
    env["AIRFLOW_CONN_K8S_INLINE"] = json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config": kubeconfig}}
    )
    env["AIRFLOW_CONN_K8S_INSECURE"] = json.dumps(
        {
            "conn_type": "kubernetes",
            "extra": {"kube_config": json.dumps(without_ca), "disable_verify_ssl": True},
        }
    )
    gate_dir = Path(os.environ["PODLINE_TEST_DIR"])
    # (A worker killed with SIGKILL by another test leaves its private directory behind.)
    before = set(Path(os.environ["TMPDIR"]).glob("podline-airflow-*"))
    worker = subprocess.Popen(
        dag_test_command("connections"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    lines: list[bytes] = []

    def read() -> None:
        assert worker.stdout is not None
        for line in worker.stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    tail = lambda: b"".join(lines[-40:]).decode(errors="replace")  # noqa: E731
    try:
        pending = {"k8s_path", "k8s_inline", "k8s_insecure"}
        while pending:  # dag.test() runs the tasks in an order of its own

            def started() -> str | None:
                text = b"".join(list(lines))
                return next((c for c in pending if f"started gate-{c}".encode() in text), None)

            conn = wait_until(f"one of {sorted(pending)} running its container", started, 90, tail)
            seen = cmdlines()
            runs = [c for c in seen.values() if b"--pod-template" in c and b"run" in c]
            assert runs, "podline run is running while its command lines are read"
            for pid, line in seen.items():
                assert token.encode() not in line, f"the token is on pid {pid}'s command line"
                assert env_marker.encode() not in line, f"the env value is on pid {pid}'s command line"
            # Its private files: the pod (env values) is gone once podline has read it; the
            # kubeconfig is the owner's only, in a directory that is the owner's only.
            mine = set(Path(os.environ["TMPDIR"]).glob("podline-airflow-*")) - before
            assert len(mine) == 1, mine
            workdir = mine.pop()
            assert workdir.stat().st_mode & 0o777 == 0o700
            assert not (workdir / "pod.json").exists(), "the pod file outlived podline's read"
            if conn != "k8s_path":
                assert (workdir / "kubeconfig").stat().st_mode & 0o777 == 0o600
            (gate_dir / f"gate-{conn}").touch()
            pending.discard(conn)
        worker.wait(timeout=120)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, 9)
        reader.join(timeout=10)
    output = b"".join(lines)
    run = parse_run(worker.returncode, output.decode(errors="replace"))
    assert run.states == {
        "via_k8s_path": "success",
        "via_k8s_inline": "success",
        "via_k8s_insecure": "success",
    }, output.decode(errors="replace")[-5000:]
    assert token.encode() not in output, "the token reached the worker's output (task logs)"
    assert env_marker.encode() not in output, "the env value reached the task log"
    logs = Path(os.environ["AIRFLOW_HOME"]) / "logs"
    for path in logs.rglob("*") if logs.exists() else []:
        if path.is_file():
            data = path.read_bytes()
            assert token.encode() not in data and env_marker.encode() not in data, path
    # The private files are gone: nothing of podline-airflow is left in the temp directory.
    left = set(Path(os.environ["TMPDIR"]).glob("podline-airflow-*")) - before
    assert left == set(), left
