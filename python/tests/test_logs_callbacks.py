"""KubernetesPodOperator's log parameters (container_logs, container_name_log_prefix_enabled,
log_formatter) and callbacks, in real Airflow (dag.test()) against `podline sim --exec`:
podline follows the containers and reports the pod's lifecycle on its JSON stream; the operator
formats the lines and calls the callbacks as KPO does."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from conftest import DagRun, Sim


def test_container_logs_prefix_and_formatter_shape_the_task_log(
    run_dag: Callable[..., DagRun], sim: Sim
) -> None:
    run = run_dag("logs")
    assert run.states == {"named": "success", "unprefixed": "success", "formatted": "success"}, (
        run.output[-4000:]
    )
    named = run.log("named")
    assert "[helper] from the helper container" in named, named[-3000:]
    assert "from the base container" not in named, "not chosen"
    assert "from the quiet container" not in named, "not chosen"
    unprefixed = run.log("unprefixed")
    for who in ("base", "helper", "quiet"):
        assert f"from the {who} container" in unprefixed, unprefixed[-3000:]
        assert f"[{who}] from the" not in unprefixed, "the prefix is off"
    formatted = run.log("formatted")
    assert "<<base>> FROM THE BASE CONTAINER" in formatted, formatted[-3000:]
    assert "<<quiet>> FROM THE QUIET CONTAINER" in formatted, formatted[-3000:]
    assert "<<helper>>" not in formatted and "FROM THE HELPER" not in formatted, "not chosen"
    # KPO's error for a requested container the pod lacks.
    assert "container missing whose logs were requested not found in the pod" in formatted
    # The JSON stream's lifecycle events (the whole pod) never reach the task log.
    assert '"event"' not in run.output


def test_callbacks_are_called_at_kpos_points_with_v1pods(
    run_dag: Callable[..., DagRun], sim: Sim
) -> None:
    calls_file = Path(os.environ["PODLINE_TEST_DIR"]) / "callbacks.jsonl"
    calls_file.unlink(missing_ok=True)
    run = run_dag("callbacks")
    assert run.states == {"called_back": "success"}, run.output[-4000:]
    calls = [json.loads(line) for line in calls_file.read_text().splitlines()]
    hooks = [c["hook"] for c in calls]
    # KPO's order (execute_sync): the client, the manifest, the pod's life, a progress call per
    # line, completion and teardown together, the cleanup last.
    lifecycle = [h for h in hooks if h != "progress_callback"]
    assert lifecycle == [
        "on_sync_client_creation",
        "on_pod_manifest_created",
        "on_pod_creation",
        "on_pod_starting",
        "on_pod_completion",
        "on_pod_teardown",
        "on_pod_cleanup",
    ], hooks
    progress = [c for c in calls if c["hook"] == "progress_callback"]
    assert [(c["container"], c["line"]) for c in progress] == [("base", "one"), ("base", "two")]
    pod_name = run.xcoms["called_back"]["pod_name"]
    by_hook = {c["hook"]: c for c in calls}
    for hook in ("on_pod_manifest_created", "on_pod_creation", "on_pod_starting",
                 "on_pod_completion", "on_pod_cleanup"):
        assert by_hook[hook]["pod_type"] == "V1Pod", by_hook[hook]
        assert by_hook[hook]["pod_name"] == pod_name, by_hook[hook]
        assert by_hook[hook]["mode"] == "sync"
        assert by_hook[hook]["client"] == "CoreV1Api"
        assert by_hook[hook]["operator"] == "KubernetesPodOperator"
        assert by_hook[hook]["has_context"]
    assert by_hook["on_pod_starting"]["phase"] == "Running"
    assert by_hook["on_pod_completion"]["phase"] in ("Running", "Succeeded")
    assert by_hook["on_sync_client_creation"]["client"] == "CoreV1Api"


def test_kpos_log_parameters_map_to_podlines_flags() -> None:
    from types import SimpleNamespace

    from podline import _logs

    pod = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "base"}, {"name": "side"}, {"name": "airflow-xcom-sidecar"}],
            "initContainers": [{"name": "setup"}, {"name": "migrate"}],
        },
    }

    def kpo(**kw: object) -> SimpleNamespace:
        defaults: dict[str, object] = {
            "get_logs": True, "container_logs": "base", "base_container_name": "base",
            "init_container_logs": None,
        }
        return SimpleNamespace(**{**defaults, **kw})

    # KPO's default: the base container alone.
    assert _logs.select(kpo(), pod).flags() == ["--log-format", "json", "--logs-container", "base"]
    everything = _logs.select(kpo(container_logs=True, init_container_logs=True), pod)
    assert everything.containers == ["base", "side"], "never the XCom sidecar"
    assert everything.init_containers == ["setup", "migrate"]
    chosen = _logs.select(kpo(container_logs=["side", "nope"], init_container_logs="migrate"), pod)
    assert chosen.flags() == [
        "--log-format", "json", "--logs-container", "side", "--init-logs-container", "migrate",
    ]
    assert chosen.missing == ["nope"]
    # get_logs=False: no container's lines, init containers' still (as KPO).
    quiet = _logs.select(kpo(get_logs=False, init_container_logs=["setup"]), pod)
    assert (quiet.containers, quiet.init_containers) == ([], ["setup"])


def test_lines_are_formatted_as_kpos_pod_manager_does() -> None:
    from types import SimpleNamespace

    from podline import _logs

    logged: list[str] = []
    log = SimpleNamespace(log=lambda level, fmt, msg: logged.append(msg), info=logged.append)

    def stream(**kw: object) -> _logs.LogStream:
        kpo = SimpleNamespace(callbacks=[], **kw)
        return _logs.LogStream(log=log, kpo=kpo, context={}, operator=None, show=["base"])

    line = json.dumps({"container": "base", "line": "hello"})
    stream().feed(line)
    stream(container_name_log_prefix_enabled=False).feed(line)
    stream(log_formatter=lambda c, m: f"{c}|{m}").feed(line)
    stream().feed(json.dumps({"container": "other", "line": "not shown"}))
    stream().feed(json.dumps({"event": "created", "pod": {"spec": {"containers": []}}}))
    assert logged == ["[base] hello", "hello", "base|hello"]
