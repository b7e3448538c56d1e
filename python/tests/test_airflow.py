"""PodlineOperator under real Airflow (dag.test()) against a real `podline sim --exec` whose
pod creates fail with 409 Conflict 30% of the time."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import DagRun, Sim, dag_test_command, parse_run, wait_until


def test_seed_dag_runs_50_of_50_with_409s_and_leaves_no_pod(
    run_dag: Callable[..., DagRun], sim: Sim
) -> None:
    run = run_dag("seed")
    assert len(run.states) == 50
    failed = {t: s for t, s in run.states.items() if s != "success"}
    assert not failed, f"{failed}\n{run.output[-4000:]}"
    # Every container's output is in its task's log, in order.
    for i in range(50):
        log = run.log(f"seed_{i:02d}")
        hello = f"seed task seed_{i:02d} says hello"
        assert hello in log, f"seed_{i:02d}'s log lacks its output:\n{log[-3000:]}"
        assert log.index(hello) < log.index(f"line two of {i}")
        assert run.xcoms[f"seed_{i:02d}"]["pod_name"].startswith(f"seed-{i:02d}-")
        assert run.xcoms[f"seed_{i:02d}"]["pod_namespace"] == "default"
    # The 409s happened and were retried: podline logs each retry into the task log.
    retries = [
        line
        for line in run.output.splitlines()
        if "[podline]" in line and "retrying" in line and "409" in line
    ]
    assert len(retries) >= 3, "30% of 50 creates should have met a 409"
    assert sim.pods("experiment=seed") == []


def test_outcomes_failure_skip_return_value_template_keep_pod_and_quiet_logs(run_dag: Callable[..., DagRun], sim: Sim) -> None:
    run = run_dag("outcomes")
    assert run.states == {
        "fails": "failed",
        "skipped": "skipped",
        "returns": "success",
        "kept": "success",
        "quiet": "success",
        "all_logs": "success",
    }, run.output[-4000:]
    all_logs = run.log("all_logs")
    assert "[base] from the base container" in all_logs, all_logs[-3000:]
    assert "[helper] from the helper container" in all_logs, all_logs[-3000:]
    fails = run.log("fails")
    assert "about to fail" in fails
    # The AirflowException carries podline's failure report: exit code, phase.
    assert "AirflowException" in fails
    assert "failed: exit code 3" in fails
    assert "phase:  Failed" in fails
    skipped = run.log("skipped")
    assert "nothing to do today" in skipped
    assert "exited with 99, listed in skip_on_exit_code" in skipped
    assert "task failed" not in skipped, "a skipped task is not called failed (issue 27)"
    assert run.xcoms["returns"]["return_value"] == {"rows": 42, "table": "orders"}
    assert run.xcoms["returns"]["pod_name"].startswith("returns-")
    # get_logs=False: no container line in the log; the env value is in the pod manifest
    # file, not on podline's command line (which the task log shows).
    assert "--pod-template" in run.log("quiet")
    assert "hush-hush" not in run.log("quiet")
    # keep_pod left the pod: built from the template, labelled like Airflow's, with the grace.
    assert "template says yes" in run.log("kept")
    left = sim.pods("dag_id=podline_outcomes")
    assert [p.metadata.name for p in left] == [run.xcoms["kept"]["pod_name"]]
    assert left[0].metadata.name.startswith("kept-"), "no name: the task id, as KPO"
    pod = left[0]
    labels = pod.metadata.labels
    assert labels["from-template"] == "yes"
    assert labels["task_id"] == "kept"
    assert labels["try_number"] == "1"
    assert labels["kubernetes_pod_operator"] == "True"
    assert labels["run_id"].startswith("manual__")
    assert pod.spec.termination_grace_period_seconds == 7
    assert [c.name for c in pod.spec.containers] == ["base"]
    assert pod.status.phase == "Succeeded"
    sim.core().delete_namespaced_pod(pod.metadata.name, "default")


def test_execution_timeout_stops_podline_and_deletes_the_pod(
    run_dag: Callable[..., DagRun], sim: Sim
) -> None:
    run = run_dag("timeout")
    assert run.states == {"too_slow": "failed"}, run.output[-4000:]
    log = run.log("too_slow")
    assert "waiting" in log
    assert "Timeout" in log
    assert run.xcoms["too_slow"]["pod_name"].startswith("too-slow-")
    assert sim.pods("dag_id=podline_timeout") == [], "a timed-out task must not leave its pod"


class Worker:
    """A dag.test() process (a worker) whose output is collected while it runs."""

    def __init__(self, dag: str, logical_date: str | None = None, run_id: str | None = None) -> None:
        self.process = subprocess.Popen(
            dag_test_command(dag, logical_date, run_id),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def tail(self) -> str:
        return "".join(self.lines[-60:])

    def saw(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def finish(self, timeout: float = 60) -> DagRun:
        self.process.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return parse_run(self.process.returncode, "".join(self.lines))


def running_pod(sim: Sim, selector: str) -> Any:
    pods = sim.pods(selector)
    if len(pods) == 1 and pods[0].status.phase == "Running":
        return pods[0]
    return None


@pytest.fixture()
def gate() -> Any:
    path = Path(os.environ["PODLINE_TEST_DIR"]) / "go"
    path.unlink(missing_ok=True)
    yield path
    path.unlink(missing_ok=True)


def test_on_kill_stops_podline_and_the_pod_is_deleted(
    airflow_db: Path, sim: Sim, gate: Path
) -> None:
    worker = Worker("on_kill")
    try:
        pod = wait_until(
            "the on_kill task's pod running",
            lambda: running_pod(sim, "dag_id=podline_on_kill"),
            90,
            worker.tail,
        )
        wait_until("the first line in the task log", lambda: worker.saw("started"), 30, worker.tail)
        # What a worker does to a task it stops: SIGTERM to the task's process.
        os.kill(worker.process.pid, signal.SIGTERM)
        run = worker.finish()
    finally:
        if worker.process.poll() is None:
            os.killpg(worker.process.pid, signal.SIGKILL)
    assert run.states == {"long": "failed"}, run.output[-4000:]
    log = run.log("long")
    assert "on_kill: stopping podline" in log
    # Airflow 3: the operator's own message; Airflow 2 raises AirflowTaskTerminated from its
    # SIGTERM handler after on_kill, so execute() never gets to say it.
    assert "the task was killed" in log or "AirflowTaskTerminated" in log
    assert pod.metadata.name == run.xcoms["long"]["pod_name"]
    assert sim.pods("dag_id=podline_on_kill") == [], "on_kill must delete the pod"


def test_reattach_after_a_worker_restart(airflow_db: Path, sim: Sim, gate: Path) -> None:
    # The same task instance (dag, task, run id, map index) on a second worker.
    date, run_id = "2026-06-01T00:00:00+00:00", "manual__2026-06-01T00:00:00+00:00"
    first = Worker("reattach", date, run_id)
    try:
        pod = wait_until(
            "the first try's pod running",
            lambda: running_pod(sim, "dag_id=podline_reattach"),
            90,
            first.tail,
        )
        wait_until("the container's first line", lambda: first.saw("started"), 30, first.tail)
        podlines = _podline_children(first.process.pid)
        assert podlines, "the worker runs podline as its child"
    finally:
        # The worker is lost at once (SIGKILL to it and its children): nothing cleans up.
        os.killpg(first.process.pid, signal.SIGKILL)
        first.process.wait(timeout=10)
    # podline died with its worker, the pod did not.
    wait_until("podline of the lost worker gone", lambda: not any(map(_alive, podlines)))
    assert running_pod(sim, "dag_id=podline_reattach").metadata.uid == pod.metadata.uid

    second = Worker("reattach", date, run_id)
    try:
        wait_until(
            "the second try reattaching",
            lambda: second.saw("reattaching to the running pod"),
            60,
            second.tail,
        )
        gate.touch()
        run = second.finish()
    finally:
        if second.process.poll() is None:
            os.killpg(second.process.pid, signal.SIGKILL)
    assert run.states == {"survivor": "success"}, run.output[-4000:]
    assert run.xcoms["survivor"]["pod_name"] == pod.metadata.name
    log = run.log("survivor")
    assert f"reattaching to the running pod default/{pod.metadata.name}" in log
    assert "finished" in log
    assert sim.pods("dag_id=podline_reattach") == []


def _podline_children(pid: int) -> list[int]:
    """The pids of podline processes whose parent is `pid`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        comm, rest = stat.split(" (", 1)[1].rsplit(") ", 1)
        if comm == "podline" and rest.split()[1] == str(pid):
            found.append(int(proc.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(") ", 1)[1].split()[0] != "Z"


def test_xcom_return_value_comes_from_kpos_sidecar(run_dag: Callable[..., DagRun], sim: Sim) -> None:
    """do_xcom_push as KPO: /airflow/xcom/return.json, read through the XCom sidecar once the
    base container terminated, is the task's return value (multiple_outputs fans a dict out),
    and is pushed when the base container failed too; the sidecar (which never exits on the
    sim: the kill is scripted away) does not hold the task, and the pods are deleted."""
    run = run_dag("xcom")
    assert run.states == {
        "write_xcom": "success",
        "xcom_outputs": "success",
        "xcom_fails": "failed",
    }, run.output[-4000:]
    assert run.xcoms["write_xcom"]["return_value"] == [1, 2, 3, 4]
    outputs = run.xcoms["xcom_outputs"]
    assert outputs["return_value"] == {"rows": 7, "table": "t"}
    assert outputs["rows"] == 7 and outputs["table"] == "t"
    assert run.xcoms["xcom_fails"]["return_value"] == {"partial": 1}
    assert "exit code 2" in run.log("xcom_fails")
    assert sim.pods("dag_id=podline_xcom") == []
