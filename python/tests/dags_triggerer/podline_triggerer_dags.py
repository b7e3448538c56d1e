"""DAGs run by a real Airflow deployment (scheduler, triggerer; on Airflow 3 also the API server
and the DAG processor) in test_triggerer.py: deferrable podline tasks whose pods, run by
`podline sim --exec` as local processes, wait for a gate file the test creates.

Each DAG runs once, as soon as it is parsed (`@once`, not paused at creation).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG  # type: ignore[no-redef,attr-defined,unused-ignore]

from podline.airflow import PodlineOperator

START = datetime(2026, 1, 1)


def wait_for(name: str, code: int = 0) -> str:
    """A container command that waits for the gate file `name`, then exits with `code`."""
    gate = os.path.join(os.environ.get("PODLINE_TEST_DIR", "/tmp"), name)
    return f"echo started {name}; while [ ! -e {gate} ]; do sleep 0.05; done; echo finished {name}; exit {code}"


def once(dag_id: str) -> DAG:
    return DAG(dag_id, schedule="@once", start_date=START, catchup=False, is_paused_upon_creation=False)


# Cleared while deferred: its pod is deleted (on_kill_action's default, delete_pod).
with once("podline_rt_kill"):
    PodlineOperator(
        task_id="kill_me", image="busybox:1.36", cmds=["sh", "-c", wait_for("kill")], deferrable=True
    )

# Its execution_timeout passes while deferred: the task fails and its pod is deleted.
with once("podline_rt_timeout"):
    PodlineOperator(
        task_id="times_out",
        image="busybox:1.36",
        cmds=["sh", "-c", wait_for("never")],
        execution_timeout=timedelta(seconds=12),
        deferrable=True,
    )

# Its triggerer is stopped (SIGTERM), then the next one killed (SIGKILL): the pod is kept, the
# trigger re-created on the next triggerer reattaches, and the outcome reaches the task.
with once("podline_rt_restart"):
    PodlineOperator(
        task_id="survives",
        image="busybox:1.36",
        cmds=["sh", "-c", wait_for("restart", 0)],
        deferrable=True,
    )
