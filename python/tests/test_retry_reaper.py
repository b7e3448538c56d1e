"""Issue 30, "retries and the reaper agree": a worker lost to SIGKILL (the task's process and
podline with it) mid-run, with a reaper (`podline gc`) as the cluster's. With a retry to come,
the pod is kept past the reaper's normal bound and the next try reattaches to the same pod; on
the last try the pod is gone within that bound.

The next try is a second dag.test() of the same DAG run (run id, task, map index), as in
test_airflow.py's reattach test: what a worker does for a task instance whose try it lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from conftest import Sim, wait_until
from test_airflow import Worker, _alive, _podline_children, running_pod

#: `podline run`'s default Lease duration (the operator does not change it) and the grace the
#: test's reaper adds: the normal bound after which a dead launcher's pod is reaped.
LEASE_SECONDS, GRACE_SECONDS = 10, 2


def start_gc(podline_bin: str, wait: str) -> subprocess.Popen[str]:
    """Starts one `podline gc` (the reaper), JSON output."""
    return subprocess.Popen(
        [podline_bin, "gc", "--grace", f"{GRACE_SECONDS}s", "--wait", wait, "-o", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish_gc(reaper: subprocess.Popen[str], own: str) -> dict[str, Any]:
    """What gc did, once it has decided the Lease `own` (this test's).

    Other tests' Leases share the namespace: a deferred task's triggerer Lease lasts 120 s,
    longer than gc's --wait, so gc may leave those undecided (exit 3); this test's own is
    decided."""
    stdout, stderr = reaper.communicate(timeout=60)
    assert reaper.returncode in (0, 3), stderr
    swept: dict[str, Any] = json.loads(stdout)
    assert f"default/{own}" not in (swept.get("undecided") or []), swept
    return swept


def gc(podline_bin: str, wait: str, own: str) -> dict[str, Any]:
    """One `podline gc` to its end (see :func:`finish_gc`)."""
    return finish_gc(start_gc(podline_bin, wait), own)


def lose(worker: Worker) -> float:
    """SIGKILLs the worker and its children (podline too): nothing cleans up. Returns when."""
    podlines = _podline_children(worker.process.pid)
    assert podlines, "the worker runs podline as its child"
    os.killpg(worker.process.pid, signal.SIGKILL)
    worker.process.wait(timeout=10)
    killed = time.monotonic()
    wait_until("podline of the lost worker gone", lambda: not any(map(_alive, podlines)))
    return killed


def lease_annotations(sim: Sim, name: str) -> dict[str, str]:
    from kubernetes import client

    api = client.CoordinationV1Api(sim.core().api_client)
    return dict(api.read_namespaced_lease(name, "default").metadata.annotations or {})


def test_a_lost_try_with_a_retry_to_come_keeps_its_pod_for_the_retry(
    airflow_db: Path, sim: Sim, podline_bin: str
) -> None:
    gate = Path(os.environ["PODLINE_TEST_DIR"]) / "go-retried"
    gate.unlink(missing_ok=True)
    date, run_id = "2026-07-01T00:00:00+00:00", "manual__2026-07-01T00:00:00+00:00"
    selector = "dag_id=podline_retried"
    first = Worker("retried", date, run_id)
    try:
        pod = wait_until("the first try's pod running", lambda: running_pod(sim, selector), 90, first.tail)
        wait_until("the container's first line", lambda: first.saw("started"), 30, first.tail)
        # retries=1, retry_delay 5 min, Airflow's heartbeat timeout 300 s: 300 + 300 + 60 s.
        assert first.saw("the pod is kept 660s past podline's liveness Lease"), first.tail()
        launcher = pod.metadata.labels["podline.io/launcher"]
        assert lease_annotations(sim, launcher)["podline.io/keep-for-retry"] == "660"
    finally:
        killed = lose(first)

    # The reaper sees the dead launcher's Lease unchanged for its duration + grace: dead, but
    # held for the retry (its keep ends past gc's --wait), so the pod is left running.
    swept = gc(podline_bin, wait="40s", own=launcher)
    assert f"default/{launcher}" in swept.get("held", []), swept
    assert f"default/{launcher}" not in swept["reaped"], swept
    assert time.monotonic() - killed >= LEASE_SECONDS + GRACE_SECONDS
    held = running_pod(sim, selector)
    assert held is not None and held.metadata.uid == pod.metadata.uid
    assert held.metadata.deletion_timestamp is None

    second = Worker("retried", date, run_id)
    try:
        wait_until(
            "the next try reattaching",
            lambda: second.saw("reattaching to the running pod"),
            60,
            second.tail,
        )
        # The same pod, moved to the new try's Lease: the old Lease's reaping no longer owns it.
        moved = running_pod(sim, selector)
        assert moved is not None and moved.metadata.uid == pod.metadata.uid
        assert moved.metadata.labels["podline.io/launcher"] != launcher
        owners = [o.name for o in moved.metadata.owner_references or []]
        assert launcher not in owners and moved.metadata.labels["podline.io/launcher"] in owners
        gate.touch()
        run = second.finish()
    finally:
        if second.process.poll() is None:
            os.killpg(second.process.pid, signal.SIGKILL)
        gate.unlink(missing_ok=True)
    assert run.states == {"retried": "success"}, run.output[-4000:]
    assert run.xcoms["retried"]["pod_name"] == pod.metadata.name
    assert f"reattaching to the running pod default/{pod.metadata.name}" in run.log("retried")
    assert "finished" in run.log("retried")
    assert sim.pods(selector) == []


def test_a_lost_last_try_loses_its_pod_within_the_reapers_bound(
    airflow_db: Path, sim: Sim, podline_bin: str
) -> None:
    selector = "dag_id=podline_last_try"
    first = Worker("last_try")
    try:
        pod = wait_until("the pod running", lambda: running_pod(sim, selector), 90, first.tail)
        wait_until("the container's first line", lambda: first.saw("started"), 30, first.tail)
        assert not first.saw("the pod is kept"), first.tail()
        launcher = pod.metadata.labels["podline.io/launcher"]
        assert "podline.io/keep-for-retry" not in lease_annotations(sim, launcher)
    finally:
        killed = lose(first)
    reaper = start_gc(podline_bin, wait="40s")
    wait_until("the lost try's pod gone", lambda: sim.pods(selector) == [], 40)
    took = time.monotonic() - killed
    swept = finish_gc(reaper, own=launcher)
    assert f"default/{launcher}" in swept["reaped"], swept
    # Lease 10 s + grace 2 s, then gc's passes (every 666 ms) and the pod's deletion.
    assert took <= LEASE_SECONDS + GRACE_SECONDS + 8, f"took {took:.1f}s"
