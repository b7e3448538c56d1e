"""Fixtures: a throwaway AIRFLOW_HOME (set before Airflow is imported), a migrated metadata
DB, and a real `podline sim --exec` subprocess with 30% of pod creates answered 409."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

# Airflow reads its configuration at import: this must run before any test imports it.
_HOME = Path(tempfile.mkdtemp(prefix="podline-airflow-home-"))
os.environ["AIRFLOW_HOME"] = str(_HOME)
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(HERE / "dags")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{_HOME}/airflow.db"
os.environ["PODLINE_TEST_DIR"] = str(_HOME / "gate")
(_HOME / "gate").mkdir()
# The workers' temporary files (a worker killed with SIGKILL leaves its own) go here too.
(_HOME / "tmp").mkdir()
os.environ["TMPDIR"] = str(_HOME / "tmp")

FAULTS = """
rules:
  - { verb: create, resource: pods, probability: 0.3, action: { status: { code: 409 } } }
"""


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def podline_bin() -> str:
    """The podline binary under test: $PODLINE_BIN, else the workspace's debug build."""
    path = os.environ.get("PODLINE_BIN") or str(REPO / "target" / "debug" / "podline")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no podline binary at {path}: build it (cargo build -p podline) or set PODLINE_BIN")
    os.environ["PODLINE_BIN"] = path
    return path


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """AIRFLOW_HOME with a migrated SQLite metadata DB."""
    subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=120,
    )
    return _HOME


@dataclass
class Sim:
    """A running `podline sim`: its kubeconfig and a Kubernetes client on it."""

    kubeconfig: Path
    process: subprocess.Popen[str]
    _api: Any = field(default=None)

    def core(self) -> Any:
        if self._api is None:
            from kubernetes import client, config

            api_client = config.new_client_from_config(config_file=str(self.kubeconfig))
            self._api = client.CoreV1Api(api_client)
        return self._api

    def pods(self, selector: str) -> list[Any]:
        return list(self.core().list_namespaced_pod("default", label_selector=selector).items)


def wait_until(
    what: str,
    check: Callable[[], Any],
    timeout: float = 30.0,
    detail: Callable[[], str] = lambda: "",
) -> Any:
    """Polls `check` until it returns something truthy; fails naming `what` (and `detail()`)
    after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}\n{detail()}")
        time.sleep(0.05)


@pytest.fixture(scope="session")
def sim(podline_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    """`podline sim --exec` (containers run their commands as local processes) with 30% of pod
    creates answered 409 Conflict; KUBECONFIG points at it for everything started after."""
    work = tmp_path_factory.mktemp("sim")
    faults = work / "faults.yaml"
    faults.write_text(FAULTS)
    kubeconfig = work / "kubeconfig"
    process = subprocess.Popen(
        [
            podline_bin,
            "sim",
            "--exec",
            "--faults",
            str(faults),
            "--kubeconfig-out",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=work,
    )
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if line.startswith("kubeconfig:"):
            break
    else:
        pytest.fail("podline sim exited before writing its kubeconfig:\n" + "".join(seen))
    # Keep draining its output so it never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in process.stdout or []], daemon=True).start()
    os.environ["KUBECONFIG"] = str(kubeconfig)
    try:
        yield Sim(kubeconfig=kubeconfig, process=process)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@dataclass
class DagRun:
    """The outcome of tests/run_dag.py: per-task states, tries, XComs and task log sections."""

    returncode: int
    output: str
    states: dict[str, str]
    tries: dict[str, int]
    xcoms: dict[str, dict[str, Any]]

    def log(self, task_id: str) -> str:
        """The log lines dag.test() printed while `task_id` ran (up to the next task)."""
        sections = re.split(r"(?=\[DAG TEST\] running task <TaskInstance: )", self.output)
        mine = [s for s in sections if re.match(rf"\[DAG TEST\] running task <TaskInstance: \S+\.{re.escape(task_id)} ", s)]
        return "\n".join(mine)


def parse_run(returncode: int, output: str) -> DagRun:
    results = [line for line in output.splitlines() if line.startswith("RESULT ")]
    if not results:
        pytest.fail(f"dag.test() printed no result (exit {returncode}):\n{output[-6000:]}")
    doc = json.loads(results[-1][len("RESULT ") :])
    return DagRun(returncode, output, doc["states"], doc["tries"], doc["xcoms"])


def dag_test_command(
    dag: str, logical_date: str | None = None, run_id: str | None = None
) -> list[str]:
    argv = [sys.executable, str(HERE / "run_dag.py"), dag]
    if logical_date:
        argv.append(logical_date)
        if run_id:
            argv.append(run_id)
    return argv


@pytest.fixture()
def run_dag(airflow_db: Path, sim: Sim) -> Callable[..., DagRun]:
    """Runs a test DAG with dag.test() in a subprocess and returns what it did."""

    def run(dag: str, logical_date: str | None = None, timeout: float = 150) -> DagRun:
        done = subprocess.run(
            dag_test_command(dag, logical_date),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
        )
        return parse_run(done.returncode, done.stdout)

    return run


@pytest.fixture()
def kube_default(sim: Sim) -> Iterator[None]:
    """For tests that build pods in this process: the kubernetes client reads $KUBECONFIG when
    it is imported (here: at collection, before the sim existed), where a worker has it set
    before. Point the client's default kubeconfig at the sim."""
    from kubernetes.config import kube_config

    before = kube_config.KUBE_CONFIG_DEFAULT_LOCATION
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = str(sim.kubeconfig)
    yield
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = before
