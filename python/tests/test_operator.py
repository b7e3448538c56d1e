"""PodlineOperator without a cluster: parameters refused at parse time, mapping from a task
instance's context to podline's command line."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from podline.airflow import AirflowException, PodlineOperator


def test_an_unsupported_kubernetes_pod_operator_parameter_is_refused_by_name() -> None:
    with pytest.raises(AirflowException, match=r"tolerations.*pod_template_file"):
        PodlineOperator(task_id="t", image="busybox", tolerations=[{"key": "gpu"}])
    with pytest.raises(AirflowException, match=r"parameters deferrable, volumes"):
        PodlineOperator(task_id="t", image="busybox", volumes=[], deferrable=True)


def test_bad_values_are_refused_with_the_parameter_name() -> None:
    with pytest.raises(AirflowException, match="on_finish_action='later'"):
        PodlineOperator(task_id="t", image="busybox", on_finish_action="later")
    with pytest.raises(AirflowException, match="startup_timeout_seconds"):
        PodlineOperator(task_id="t", image="busybox", startup_timeout_seconds=0)
    with pytest.raises(AirflowException, match="skip_on_exit_code"):
        PodlineOperator(task_id="t", image="busybox", skip_on_exit_code="99")
    with pytest.raises(AirflowException, match="in_cluster=True and config_file"):
        PodlineOperator(task_id="t", image="busybox", in_cluster=True, config_file="/k")


def test_a_dag_file_with_an_unsupported_parameter_fails_to_import(tmp_path: Path) -> None:
    (tmp_path / "bad_dag.py").write_text(
        textwrap.dedent(
            """
            from datetime import datetime
            try:
                from airflow.sdk import DAG
            except ImportError:
                from airflow import DAG
            from podline.airflow import PodlineOperator

            with DAG("bad", schedule=None, start_date=datetime(2026, 1, 1)):
                PodlineOperator(task_id="t", image="busybox", affinity={"nodeAffinity": {}})
            """
        )
    )
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # Airflow 2.10
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef]
    bag = DagBag(dag_folder=str(tmp_path))
    errors = "\n".join(bag.import_errors.values())
    assert "affinity" in errors, errors
    assert "bad" not in bag.dags


def context(try_number: int = 1, map_index: int = -1) -> dict[str, object]:
    ti = SimpleNamespace(
        dag_id="etl",
        task_id="Load_Orders",
        run_id="scheduled__2026-12-01T10:05:00+00:00",
        try_number=try_number,
        map_index=map_index,
    )
    return {"ti": ti, "run_id": ti.run_id}


def test_the_pod_is_labelled_like_airflows_and_named_after_the_task() -> None:
    op = PodlineOperator(
        task_id="Load_Orders",
        image="busybox",
        cmds=["sh", "-c", "true"],
        labels={"team": "data"},
        env_vars=[{"name": "MODE", "value": "full"}],
        container_resources={"limits": {"memory": "1Gi"}},
        on_finish_action="delete_succeeded_pod",
        reattach_on_restart=False,
        termination_grace_period=10,
    )
    key = op.task_instance_key(context(try_number=3, map_index=2))
    req = op.run_request(key)
    assert req.name == "load-orders"
    assert req.labels["dag_id"] == "etl"
    assert req.labels["task_id"] == "Load_Orders"
    assert req.labels["try_number"] == "3"
    assert req.labels["map_index"] == "2"
    assert req.labels["team"] == "data"
    assert req.labels["run_id"].startswith("scheduled__2026-12-01T10-05-00")
    argv = req.argv("podline", Path("p.json"), Path("r.json"))
    assert "--reattach" not in argv
    assert argv[argv.index("--on-finish") + 1] == "delete-succeeded"
    assert argv[argv.index("--limits") + 1] == "memory=1Gi"
    assert argv[argv.index("--delete-grace") + 1] == "10s"
    assert "MODE=full" not in argv and "--env" not in argv
    assert {"name": "MODE", "value": "full"} in req.with_env(op._template())["spec"][
        "containers"
    ][0]["env"]
    assert op._template()["spec"]["terminationGracePeriodSeconds"] == 10
    # Another try of the same task instance keeps the reattach key.
    assert op.task_instance_key(context(try_number=4, map_index=2)).podline_task_id() == (
        key.podline_task_id()
    )


def test_kubernetes_pod_operator_defaults() -> None:
    op = PodlineOperator(task_id="t", image="busybox")
    assert op.do_xcom_push is False
    assert op.reattach_on_restart is True
    assert op.on_finish_action == "delete_pod"
    assert op.startup_timeout_seconds == 120
    assert op.get_logs is True
    assert op.random_name_suffix is True
    assert {"image", "cmds", "arguments", "env_vars", "labels", "namespace"} <= set(
        op.template_fields
    )


def test_in_cluster_hides_every_kubeconfig(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECONFIG", "/somewhere/config")
    in_cluster = PodlineOperator(task_id="t", image="busybox", in_cluster=True)
    env = in_cluster._environment(str(tmp_path))
    assert "KUBECONFIG" not in env
    assert env["HOME"] == str(tmp_path)
    default = PodlineOperator(task_id="t", image="busybox")
    assert default._environment(str(tmp_path))["KUBECONFIG"] == "/somewhere/config"


def test_arguments_without_cmds_keep_the_images_entrypoint() -> None:
    op = PodlineOperator(task_id="t", image="busybox", arguments=["--day", "{{ ds }}"])
    assert op._template()["spec"]["containers"][0]["args"] == ["--day", "{{ ds }}"]
    argv = op.run_request(op.task_instance_key(context())).argv("podline", Path("p"), Path("r"))
    assert "--" not in argv


def test_the_pod_name_comes_from_the_parameter_then_the_template_then_the_task(
    tmp_path: Path,
) -> None:
    template = tmp_path / "pod.yaml"
    template.write_text("metadata:\n  name: From_File\nspec:\n  containers: [{name: main}]\n")
    key = PodlineOperator.task_instance_key(context())
    op = PodlineOperator(task_id="t", image="busybox", pod_template_file=str(template))
    assert op.run_request(key).name == "from-file"
    assert op._template()["spec"]["containers"] == [{"name": "main"}]
    named = PodlineOperator(task_id="t", image="b", name="Mine", pod_template_file=str(template))
    assert named.run_request(key).name == "mine"
    (tmp_path / "bad.yaml").write_text("- a list\n")
    bad = PodlineOperator(task_id="t", image="b", pod_template_file=str(tmp_path / "bad.yaml"))
    with pytest.raises(AirflowException, match="expected a Pod manifest"):
        bad.run_request(key)


def test_a_killed_tasks_temporary_directory_is_removed_by_the_next_task(tmp_path: Path) -> None:
    import subprocess

    from podline.airflow import sweep_stale_directories

    done = subprocess.Popen(["true"])
    done.wait()
    dead = tmp_path / f"podline-airflow-{done.pid}-abc"
    dead.mkdir()
    (dead / "pod.json").write_text("{}")
    live = tmp_path / f"podline-airflow-{os.getpid()}-def"
    live.mkdir()
    other = tmp_path / "podline-airflow-notapid"
    other.mkdir()
    assert sweep_stale_directories(str(tmp_path)) == [str(dead)]
    assert not dead.exists() and live.exists() and other.exists()


def test_a_pod_never_created_is_not_called_failed() -> None:
    op = PodlineOperator(task_id="t", image="busybox")
    op._killed = False
    op._exit_code = 3
    not_created = {"namespace": "default", "pod": "t-abc", "succeeded": False}
    with pytest.raises(AirflowException, match="pod default/t-abc was not created"):
        op._outcome(not_created)
    failed = dict(not_created, uid="u1")
    with pytest.raises(AirflowException, match="pod default/t-abc failed"):
        op._outcome(failed)
