"""PodlineOperator(deferrable=True) and PodlineTrigger (issue 31) against a real
`podline sim --exec` whose pod creates are answered 409 Conflict 30% of the time."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from conftest import DagRun, Sim, wait_until

from podline import _native
from podline.triggers import PodlineTrigger


def test_deferrable_tasks_fail_succeed_and_skip_on_the_base_containers_exit_code(
    run_dag: Callable[..., DagRun], sim: Sim
) -> None:
    """dag.test() runs each task's trigger in-process: the task creates its pod, defers, and
    resumes with the outcome; the pods are deleted (on_finish_action's default)."""
    run = run_dag("deferrable")
    assert run.states == {
        "deferred_fails": "failed",
        "deferred_returns": "success",
        "deferred_skipped": "skipped",
    }, run.output[-4000:]
    fails = run.log("deferred_fails")
    assert "deferring to the triggerer" in fails, fails[-3000:]
    assert "failed: exit code 3" in fails, fails[-3000:]
    assert run.xcoms["deferred_returns"]["return_value"] == {"rows": 7}
    assert run.xcoms["deferred_returns"]["pod_name"].startswith("deferred-returns-")
    assert "exited with 99, listed in skip_on_exit_code" in run.log("deferred_skipped")
    wait_until(
        "the deferred tasks' pods to be deleted",
        lambda: sim.pods("dag_id=podline_deferrable") == [],
        detail=lambda: str([p.metadata.name for p in sim.pods("dag_id=podline_deferrable")]),
    )


#: Runs a trigger from its serialized form in a process of its own (a triggerer), prints
#: WAITING once its wait is under way and EVENT <json> when it fires.
TRIGGERER = textwrap.dedent(
    """
    import asyncio, importlib, json, sys
    path, kwargs = json.loads(sys.argv[1])
    module, name = path.rsplit(".", 1)
    trigger = getattr(importlib.import_module(module), name)(**kwargs)

    async def main():
        run = trigger.run().__aiter__()
        event = asyncio.ensure_future(run.__anext__())
        await asyncio.sleep(0.5)
        print("WAITING", flush=True)
        print("EVENT " + json.dumps((await event).payload), flush=True)

    asyncio.run(main())
    """
)


def triggerer(serialized: tuple[str, dict[str, object]]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", TRIGGERER, json.dumps(serialized)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def marker(process: subprocess.Popen[str]) -> str:
    """The triggerer's next WAITING / EVENT line (Airflow's warnings may come before it)."""
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        if line.startswith(("WAITING", "EVENT ")):
            return line.strip()
        seen.append(line)
    raise AssertionError("the triggerer ended without a marker:\n" + "".join(seen))


def test_a_trigger_recreated_after_its_triggerer_was_killed_reattaches_by_launch_id(
    sim: Sim, tmp_path: Path
) -> None:
    """A triggerer killed with SIGKILL while waiting; the task's trigger re-created from its
    serialized form in a new process finds the same pod by name and launch id and fires with
    its outcome; a new try of the task (reattach by task id) creates no second pod."""
    gate = tmp_path / "go"
    task_id = "deferrable-reattach-test"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "reattach-me", "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "base",
                    "image": "busybox:1.36",
                    "command": ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done; exit 5"],
                }
            ],
        },
    }
    kubeconfig = str(sim.kubeconfig)
    started = json.loads(
        _native.start_pod(kubeconfig, None, "default", json.dumps(pod), task_id=task_id, reattach=True)
    )
    assert not started["reattached"]
    trigger = PodlineTrigger(
        namespace=started["namespace"],
        pod_name=started["name"],
        launch_id=started["launchId"],
        base_container=started["mainContainer"],
        kubeconfig=kubeconfig,
    )
    first = triggerer(trigger.serialize())
    assert marker(first) == "WAITING"
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)

    # A new try of the task, on another worker: reattaches, no second pod.
    again = json.loads(
        _native.start_pod(kubeconfig, None, "default", json.dumps(pod), task_id=task_id, reattach=True)
    )
    assert again["reattached"], again
    assert (again["name"], again["launchId"]) == (started["name"], started["launchId"])

    second = triggerer(trigger.serialize())
    assert marker(second) == "WAITING"
    gate.touch()
    line = marker(second)
    second.wait(timeout=30)
    assert line.startswith("EVENT "), line
    event = json.loads(line[len("EVENT ") :])
    assert event["exitCode"] == 5 and not event["succeeded"], event
    assert event["launchId"] == started["launchId"]
    pods = sim.pods(f"podline.io/task-id={task_id}")
    assert [p.metadata.name for p in pods] == ["reattach-me"]
    assert _native.delete_pod(kubeconfig, None, "default", "reattach-me", "another-launch") is False
    assert _native.delete_pod(kubeconfig, None, "default", "reattach-me", started["launchId"]) is True


def test_default_deferrable_makes_a_task_deferrable_as_for_kpo() -> None:
    """Airflow's ``[operators] default_deferrable`` reaches PodlineOperator through KPO's own
    default (read when the provider is imported: a process of its own)."""
    import os

    code = textwrap.dedent(
        """
        from podline import _deferrable
        from podline.airflow import PodlineOperator
        for kwargs in ({}, {"deferrable": False}):
            op = PodlineOperator(task_id="t", image="busybox", **kwargs)
            print(_deferrable.is_deferrable(op.kubernetes_pod_operator()))
        """
    )
    env = {**os.environ, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True", "False"], done.stdout
