"""Test DAGs of KubernetesPodOperator's log parameters and callbacks (imported by
podline_test_dags, run with dag.test() against `podline sim --exec`)."""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG  # type: ignore[no-redef,attr-defined,unused-ignore]

from podline.airflow import PodlineOperator

START = datetime(2026, 1, 1)
#: Where RecordingCallbacks writes what it was called with (one JSON object a line).
CALLS = os.path.join(os.environ.get("PODLINE_TEST_DIR", "/tmp"), "callbacks.jsonl")


def _three_containers(base_says: str) -> dict[str, Any]:
    """A pod template: the base container, a helper and a quiet one (each runs a command)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {
            "containers": [
                {"name": "base"},
                {"name": "helper", "image": "busybox:1.36",
                 "command": ["sh", "-c", "echo from the helper container"]},
                {"name": "quiet", "image": "busybox:1.36",
                 "command": ["sh", "-c", "echo from the quiet container"]},
            ]
        },
    }


def _formatter(container: str, message: str) -> str:
    return f"<<{container}>> {message.upper()}"


class RecordingCallbacks:
    """A KubernetesPodOperatorCallback subclass (made when the DAG is parsed: the provider is
    imported here, as any DAG using callbacks does) that records each call."""

    @staticmethod
    def record(hook: str, **kwargs: Any) -> None:
        pod = kwargs.get("pod") or kwargs.get("pod_request")
        entry = {
            "hook": hook,
            "pod_type": type(pod).__name__ if pod is not None else None,
            "pod_name": getattr(getattr(pod, "metadata", None), "name", None),
            "phase": getattr(getattr(pod, "status", None), "phase", None),
            "mode": str(getattr(kwargs.get("mode"), "value", kwargs.get("mode"))),
            "client": type(kwargs.get("client")).__name__,
            "operator": type(kwargs.get("operator")).__name__,
            "has_context": "context" in kwargs,
            "line": kwargs.get("line"),
            "container": kwargs.get("container_name"),
        }
        with open(CALLS, "a") as f:
            f.write(json.dumps(entry) + "\n")


def _make_callbacks() -> type:
    from airflow.providers.cncf.kubernetes.callbacks import KubernetesPodOperatorCallback

    hooks = [
        "on_sync_client_creation",
        "on_pod_manifest_created",
        "on_pod_creation",
        "on_pod_starting",
        "on_pod_completion",
        "on_pod_teardown",
        "on_pod_cleanup",
        "progress_callback",
    ]

    def method(hook: str) -> Any:
        return staticmethod(lambda **kwargs: RecordingCallbacks.record(hook, **kwargs))

    return type(
        "Recording", (KubernetesPodOperatorCallback,), {h: method(h) for h in hooks}
    )


with DAG("podline_logs", schedule=None, start_date=START, catchup=False) as logs:
    # container_logs names one container: only its lines, with KPO's prefix.
    PodlineOperator(
        task_id="named",
        image="busybox:1.36",
        cmds=["sh", "-c", "echo from the base container"],
        pod_template_dict=_three_containers("base"),
        container_logs=["helper"],
    )
    # Every container (but the XCom sidecar), without the prefix.
    PodlineOperator(
        task_id="unprefixed",
        image="busybox:1.36",
        cmds=["sh", "-c", "echo from the base container"],
        pod_template_dict=_three_containers("base"),
        container_logs=True,
        container_name_log_prefix_enabled=False,
    )
    # A formatter: its result is the logged line.
    PodlineOperator(
        task_id="formatted",
        image="busybox:1.36",
        cmds=["sh", "-c", "echo from the base container"],
        pod_template_dict=_three_containers("base"),
        container_logs=["base", "quiet", "missing"],
        log_formatter=_formatter,
    )


with DAG("podline_callbacks", schedule=None, start_date=START, catchup=False) as callbacks:
    PodlineOperator(
        task_id="called_back",
        image="busybox:1.36",
        cmds=["sh", "-c", "echo one; echo two"],
        callbacks=_make_callbacks(),
    )
