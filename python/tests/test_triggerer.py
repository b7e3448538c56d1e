"""PodlineOperator(deferrable=True) under a REAL Airflow deployment (issue 31): the scheduler and
`airflow triggerer` processes (on Airflow 3 also the API server, which the workers and the
triggerer talk to, and the DAG processor), on a metadata DB of their own, against the session's
`podline sim --exec`.

One scenario, in order, because its steps share the deployment and restart its triggerer:
- a task whose ``execution_timeout`` passes while deferred fails, and its pod is deleted;
- a task cleared while deferred (a user's kill) has its pod deleted (Airflow 3.3+: the trigger's
  ``on_kill``; before: its ``cleanup`` seeing the task out of the deferred state);
- a triggerer stopped with SIGTERM, then its successor killed with SIGKILL (its whole process
  group), delete nothing; the task's trigger, re-created on the next triggerer, reattaches to
  the same pod by launch id and the pod's outcome reaches the task: one pod, task success.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import HERE, Sim, wait_until

from airflow import __version__ as AIRFLOW_VERSION

AIRFLOW_2 = AIRFLOW_VERSION.startswith("2.")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@dataclass
class Deployment:
    """The running Airflow processes and what the test reads through."""

    home: Path
    gates: Path
    env: dict[str, str]
    logs: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    started: int = 0

    def start(self, name: str, *argv: str) -> subprocess.Popen[bytes]:
        """`airflow ARGV...` in a process group of its own (SIGKILL takes its children too)."""
        self.started += 1
        log = open(self.logs / f"{self.started:02d}-{name}.log", "wb")  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, "-m", "airflow", *argv],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.processes[name] = process
        return process

    def cli(self, *argv: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "airflow", *argv],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-3000:])

    def query(self, sql: str, *args: object) -> list[tuple[object, ...]]:
        with sqlite3.connect(self.home / "airflow.db", timeout=30) as db:
            return list(db.execute(sql, args).fetchall())

    def state(self, dag_id: str, task_id: str) -> object:
        rows = self.query("SELECT state FROM task_instance WHERE dag_id = ? AND task_id = ?", dag_id, task_id)
        return rows[0][0] if rows else "absent"

    def trigger_of(self, dag_id: str, task_id: str) -> tuple[object, object] | None:
        """The task's trigger id and the triggerer job that holds it."""
        rows = self.query(
            "SELECT t.id, t.triggerer_id FROM task_instance ti JOIN trigger t ON t.id = ti.trigger_id "
            "WHERE ti.dag_id = ? AND ti.task_id = ?",
            dag_id,
            task_id,
        )
        return rows[0] if rows else None

    def newest_triggerer_job(self) -> object:
        rows = self.query(
            "SELECT id FROM job WHERE job_type = 'TriggererJob' AND state = 'running' ORDER BY id DESC LIMIT 1"
        )
        return rows[0][0] if rows else None

    def task_log(self, dag_id: str, task_id: str) -> str:
        """Every attempt's task log of `dag_id.task_id`, joined."""
        logs = sorted((self.home / "logs").glob(f"dag_id={dag_id}/*/task_id={task_id}/*.log"))
        return "\n".join(path.read_text(errors="replace") for path in logs)

    def tail(self) -> str:
        out = []
        for path in sorted(self.logs.iterdir()):
            out.append(f"==== {path.name}\n" + path.read_text(errors="replace")[-3000:])
        return "\n".join(out)


@pytest.fixture()
def deployment(sim: Sim, tmp_path: Path) -> Iterator[Deployment]:
    home = tmp_path / "home"
    home.mkdir()
    gates = tmp_path / "gates"
    gates.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    port = free_port()
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(HERE / "dags_triggerer"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__EXECUTOR": "SequentialExecutor" if AIRFLOW_2 else "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": "podline-test-only-secret",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
        "AIRFLOW__SCHEDULER__TRIGGER_TIMEOUT_CHECK_INTERVAL": "1",
        "AIRFLOW__SCHEDULER__DAG_DIR_LIST_INTERVAL": "2",
        "AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL": "2",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "2",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "2",
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
        "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "6",
        "PODLINE_TEST_DIR": str(gates),
        "KUBECONFIG": str(sim.kubeconfig),
    }
    dep = Deployment(home=home, gates=gates, env=env, logs=logs)
    dep.cli("db", "migrate")
    try:
        if not AIRFLOW_2:
            dep.start("api-server", "api-server", "--port", str(port), "--workers", "1")
            dep.start("dag-processor", "dag-processor")
            # Workers call the execution API: no task may start before it answers.
            wait_until("the API server to listen", lambda: listening(port), timeout=120, detail=dep.tail)
        dep.start("scheduler", "scheduler")
        dep.start("triggerer", "triggerer")
        yield dep
    finally:
        for name, process in dep.processes.items():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in dep.processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        for gate in ("kill", "never", "restart"):
            (gates / gate).touch()


LAUNCHER_LABEL = "podline.io/launcher"


def owner_lease(sim: Sim, dag_id: str) -> str | None:
    """The Lease (a triggerer's) that owns the DAG's one live pod: its launcher label, if an
    ownerReference to that Lease goes with it."""
    pods = [p for p in sim.pods(f"dag_id={dag_id}") if p.metadata.deletion_timestamp is None]
    if len(pods) != 1:
        return None
    meta = pods[0].metadata
    label = (meta.labels or {}).get(LAUNCHER_LABEL)
    owners = [o.name for o in meta.owner_references or [] if o.kind == "Lease"]
    return label if label is not None and owners == [label] else None


def pod_names(sim: Sim, dag_id: str) -> list[str]:
    return sorted(p.metadata.name for p in sim.pods(f"dag_id={dag_id}") if p.metadata.deletion_timestamp is None)


@pytest.mark.skipif(
    AIRFLOW_2,
    reason="not yet on Airflow 2.11: its SequentialExecutor (the only one on SQLite) runs one "
    "task at a time inside the scheduler's loop, so the second DAG's task never defers while "
    "the first is held; needs LocalExecutor on PostgreSQL (issue 31)",
)
def test_a_real_triggerer_honours_timeouts_kills_and_restarts(deployment: Deployment, sim: Sim) -> None:
    dep = deployment
    detail = dep.tail
    for dag_id, task_id in (("podline_rt_kill", "kill_me"), ("podline_rt_restart", "survives")):
        wait_until(
            f"{dag_id}.{task_id} to defer with its pod created",
            lambda d=dag_id, t=task_id: dep.state(d, t) == "deferred" and pod_names(sim, d),
            timeout=240,
            detail=detail,
        )
    restart_pods = pod_names(sim, "podline_rt_restart")
    assert len(restart_pods) == 1, restart_pods
    # The waiting triggerer's Lease owns the pod (reaped with it if that triggerer dies and no
    # other takes over).
    first_lease = wait_until(
        "the first triggerer's Lease to own the pod", lambda: owner_lease(sim, "podline_rt_restart"), detail=detail
    )

    # execution_timeout while deferred: the task fails, from the trigger's timed-out event, and
    # the trigger deleted the pod.
    wait_until(
        "the timed-out task to fail",
        lambda: dep.state("podline_rt_timeout", "times_out") == "failed",
        timeout=120,
        detail=detail,
    )
    assert "execution_timeout passed while the pod ran; the pod was deleted" in dep.task_log(
        "podline_rt_timeout", "times_out"
    )
    wait_until("the timed-out task's pod to be deleted", lambda: pod_names(sim, "podline_rt_timeout") == [], detail=detail)

    # A user's kill: clear the deferred task (Airflow then runs a new try, whose pod is another
    # one): the trigger is cancelled as a user's action and deletes the first try's pod.
    killed = pod_names(sim, "podline_rt_kill")
    dep.cli("tasks", "clear", "podline_rt_kill", "-t", "kill_me", "-y")
    wait_until(
        "the cleared task's pod to be deleted",
        lambda: not set(killed) & set(pod_names(sim, "podline_rt_kill")),
        timeout=90,
        detail=detail,
    )

    # The triggerer stopped gracefully: the pod stays; the next triggerer takes the trigger.
    first = dep.processes["triggerer"]
    os.killpg(first.pid, signal.SIGTERM)
    first.wait(timeout=60)
    assert pod_names(sim, "podline_rt_restart") == restart_pods
    assert dep.state("podline_rt_restart", "survives") == "deferred"
    second = dep.start("triggerer", "triggerer")
    wait_until(
        "the second triggerer to hold the task's trigger",
        lambda: (held := dep.trigger_of("podline_rt_restart", "survives")) is not None
        and held[1] is not None
        and held[1] == dep.newest_triggerer_job()
        and second.poll() is None,
        timeout=90,
        detail=detail,
    )
    held_by_second = dep.trigger_of("podline_rt_restart", "survives")
    second_lease = wait_until(
        "the second triggerer's Lease to own the pod",
        lambda: (lease := owner_lease(sim, "podline_rt_restart")) not in (None, first_lease) and lease,
        detail=detail,
    )
    # ... killed with SIGKILL, children included: the pod stays; a third one takes over once the
    # second's heartbeat is stale.
    os.killpg(second.pid, signal.SIGKILL)
    second.wait(timeout=30)
    assert pod_names(sim, "podline_rt_restart") == restart_pods
    third = dep.start("triggerer", "triggerer")
    wait_until(
        "the third triggerer to hold the task's trigger",
        lambda: (held := dep.trigger_of("podline_rt_restart", "survives")) is not None
        and held[1] is not None
        and held[1] != (held_by_second or (None, None))[1]
        and third.poll() is None,
        timeout=90,
        detail=detail,
    )
    assert pod_names(sim, "podline_rt_restart") == restart_pods
    wait_until(
        "the third triggerer's Lease to own the pod",
        lambda: owner_lease(sim, "podline_rt_restart") not in (None, first_lease, second_lease),
        detail=detail,
    )
    (dep.gates / "restart").touch()
    wait_until(
        "the restarted task to succeed",
        lambda: dep.state("podline_rt_restart", "survives") == "success",
        timeout=90,
        detail=detail,
    )
    # One pod ever (reattached, not re-created), deleted after the task (on_finish_action).
    wait_until("the restarted task's pod to be deleted", lambda: pod_names(sim, "podline_rt_restart") == [], detail=detail)
    pods_ever = dep.query(
        "SELECT value FROM xcom WHERE dag_id = 'podline_rt_restart' AND task_id = 'survives' AND key = 'pod_name'"
    )
    assert len(pods_ever) == 1, pods_ever
