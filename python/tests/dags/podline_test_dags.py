"""DAGs of the podline operator's tests (run with dag.test() against `podline sim --exec`).

`PODLINE_TEST_DIR` (set by the tests) is where the lifecycle tasks' containers, which the sim
runs as local processes, wait for a `go` file, so a test decides when they finish.
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
GATE = os.path.join(os.environ.get("PODLINE_TEST_DIR", "/tmp"), "go")
WAIT_FOR_GATE = f"echo started; while [ ! -e {GATE} ]; do sleep 0.05; done; echo finished"

# The seed experiment's DAG: 50 pod tasks every 5 minutes (there, KubernetesPodOperator).
with DAG("podline_seed", schedule="*/5 * * * *", start_date=START, catchup=False) as seed:
    for i in range(50):
        PodlineOperator(
            task_id=f"seed_{i:02d}",
            image="busybox:1.36",
            cmds=["sh", "-c"],
            arguments=["echo seed task {{ ti.task_id }} says hello; echo line two of $TASK_NO"],
            env_vars={"TASK_NO": str(i)},
            labels={"experiment": "seed"},
            startup_timeout_seconds=60,
        )

# One DAG run covering the outcomes: failure, skip, XCom return value.
with DAG("podline_outcomes", schedule=None, start_date=START, catchup=False) as outcomes:
    PodlineOperator(
        task_id="fails",
        image="busybox:1.36",
        cmds=["sh", "-c", "echo about to fail; exit 3"],
    )
    PodlineOperator(
        task_id="skipped",
        image="busybox:1.36",
        cmds=["sh", "-c", "echo nothing to do today; exit 99"],
        skip_on_exit_code=99,
    )
    # A container with no command is scripted by the sim: its annotations say what it does,
    # here what it writes to /dev/termination-log (podline's extra channel for the return
    # value: the XCom sidecar, scripted, finds no return.json).
    PodlineOperator(
        task_id="returns",
        image="busybox:1.36",
        annotations={
            "sim.podline.io/logs.base": "computing",
            "sim.podline.io/termination-message.base": '{"rows": 42, "table": "orders"}',
            "sim.podline.io/exec-airflow-xcom-sidecar": '{"stdout": "__airflow_xcom_result_empty__\\n"}',
        },
        do_xcom_push=True,
    )

    # A template, keep_pod and a grace period: the test reads the pod that is left.
    PodlineOperator(
        task_id="kept",
        pod_template_file=os.path.join(os.path.dirname(__file__), "..", "pod_template.yaml"),
        cmds=["sh", "-c", "echo template says $FROM_TEMPLATE"],
        on_finish_action="keep_pod",
        termination_grace_period=7,
    )
    PodlineOperator(
        task_id="quiet",
        image="busybox:1.36",
        cmds=["sh", "-c", "echo $WORD"],
        env_vars={"WORD": "hush-hush"},  # in the pod file, never on the command line
        get_logs=False,
    )

    # container_logs=True: every container's lines, each prefixed with its name.
    PodlineOperator(
        task_id="all_logs",
        image="busybox:1.36",
        cmds=["sh", "-c", "echo from the base container"],
        pod_template_dict={
            "apiVersion": "v1",
            "kind": "Pod",
            "spec": {
                "containers": [
                    {"name": "base"},
                    {"name": "helper", "image": "busybox:1.36",
                     "command": ["sh", "-c", "echo from the helper container"]},
                ]
            },
        },
        container_logs=True,
    )

with DAG("podline_on_kill", schedule=None, start_date=START, catchup=False) as on_kill:
    PodlineOperator(task_id="long", image="busybox:1.36", cmds=["sh", "-c", WAIT_FOR_GATE])

# Airflow's execution_timeout interrupts execute(): podline is stopped and deletes the pod.
with DAG("podline_timeout", schedule=None, start_date=START, catchup=False) as timeout:
    PodlineOperator(
        task_id="too_slow",
        image="busybox:1.36",
        cmds=["sh", "-c", "echo waiting; exec sleep 300"],
        execution_timeout=timedelta(seconds=3),
    )

with DAG("podline_reattach", schedule=None, start_date=START, catchup=False) as reattach:
    PodlineOperator(
        task_id="survivor",
        image="busybox:1.36",
        cmds=["sh", "-c", WAIT_FOR_GATE],
        retries=1,
    )


# Issue 30: a worker lost to SIGKILL. With a retry to come (Airflow's default retry delay, 5
# minutes) the pod is kept for it; on the last try it is reaped promptly.
with DAG("podline_retried", schedule=None, start_date=START, catchup=False) as retried:
    PodlineOperator(
        task_id="retried",
        image="busybox:1.36",
        cmds=["sh", "-c", f"echo started; while [ ! -e {GATE}-retried ]; do sleep 0.05; done; echo finished"],
        retries=1,
        retry_delay=timedelta(minutes=5),
    )

with DAG("podline_last_try", schedule=None, start_date=START, catchup=False) as last_try:
    PodlineOperator(
        task_id="last_try",
        image="busybox:1.36",
        cmds=["sh", "-c", f"echo started; while [ ! -e {GATE}-last ]; do sleep 0.05; done"],
        retries=0,
    )


def wait_for(name: str) -> str:
    """A container command that says it started and waits for the gate file `name`."""
    gate = os.path.join(os.environ.get("PODLINE_TEST_DIR", "/tmp"), name)
    return f"echo started {name}; while [ ! -e {gate} ]; do sleep 0.05; done; echo finished {name}"


# Cluster access through Airflow Connections only (the test removes KUBECONFIG): a kubeconfig
# path, an inline kubeconfig, and an inline one without its CA plus disable_verify_ssl.
with DAG("podline_connections", schedule=None, start_date=START, catchup=False) as connections:
    for conn in ("k8s_path", "k8s_inline", "k8s_insecure"):
        PodlineOperator(
            task_id=f"via_{conn}",
            kubernetes_conn_id=conn,
            image="busybox:1.36",
            # The env value reaches the container (exit 7 if not), through the pod file only.
            cmds=["sh", "-c", '[ "${SECRET_ENV:-unset}" != unset ] || exit 7; ' + wait_for(f"gate-{conn}")],
            env_vars={"SECRET_ENV": os.environ.get("PODLINE_TEST_ENV_MARKER", "unset")},
        )


# deferrable=True: the task creates its pod, defers to PodlineTrigger (dag.test() runs the
# trigger in-process), and resumes with the base container's outcome.
with DAG("podline_deferrable", schedule=None, start_date=START, catchup=False) as deferrable:
    PodlineOperator(
        task_id="deferred_fails",
        image="busybox:1.36",
        cmds=["sh", "-c", "echo about to fail; sleep 0.5; exit 3"],
        deferrable=True,
    )
    PodlineOperator(
        task_id="deferred_returns",
        image="busybox:1.36",
        annotations={
            "sim.podline.io/duration": "500ms",
            # KPO's XCom sidecar serves /airflow/xcom/return.json (read through pods/exec, as in
            # sync mode); the sim scripts the exec's answer.
            "sim.podline.io/exec-airflow-xcom-sidecar": '{"stdout": "{\\"rows\\": 7}\\n"}',
        },
        do_xcom_push=True,
        deferrable=True,
    )
    PodlineOperator(
        task_id="deferred_skipped",
        image="busybox:1.36",
        cmds=["sh", "-c", "exit 99"],
        skip_on_exit_code=99,
        deferrable=True,
    )


# KPO's XCom contract: the base container writes /airflow/xcom/return.json and the value is read
# through the XCom sidecar (pods/exec). Here the sim scripts the sidecar's exec answer (its
# `sim.podline.io/exec-airflow-xcom-sidecar` annotation: the file as `cat` would print it), and
# the base container (no command) is scripted too; the sidecar's loop runs until the pod goes.
def _sidecar_serves(value: str) -> dict[str, str]:
    import json

    return {"sim.podline.io/exec-airflow-xcom-sidecar": json.dumps({"stdout": value + "\n"})}


with DAG("podline_xcom", schedule=None, start_date=START, catchup=False) as xcom:
    PodlineOperator(
        task_id="write_xcom",
        image="alpine",
        annotations=_sidecar_serves("[1,2,3,4]"),
        do_xcom_push=True,
    )
    PodlineOperator(
        task_id="xcom_outputs",
        image="alpine",
        annotations=_sidecar_serves('{"rows": 7, "table": "t"}'),
        do_xcom_push=True,
        multiple_outputs=True,
    )
    PodlineOperator(
        task_id="xcom_fails",
        image="alpine",
        annotations={**_sidecar_serves('{"partial": 1}'), "sim.podline.io/exit-code.base": "2"},
        do_xcom_push=True,
    )
