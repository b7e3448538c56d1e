"""PodlineOperator without a cluster: KubernetesPodOperator's surface, taken from the installed
provider; parameters refused at parse time; what the DAG parse imports."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from podline import _kpo_surface, _mapping
from podline.airflow import AirflowException, PodlineOperator

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator


def test_the_surface_read_from_source_is_the_imported_ones() -> None:
    """The fast path (ast, at parse time) agrees with the provider installed."""
    path = _kpo_surface._kpo_source_path()
    from_source = _kpo_surface.from_source(path)
    assert from_source is not None, f"{path}: no longer readable with ast; the import is used"
    imported = _kpo_surface.from_import()
    assert from_source.parameters == imported.parameters
    assert from_source.template_fields == imported.template_fields
    assert from_source.template_fields_renderers == imported.template_fields_renderers


def test_every_kpo_parameter_is_in_the_signature_and_templates_are_kpos() -> None:
    kpo = inspect.signature(KubernetesPodOperator.__init__).parameters
    kpo_names = [n for n, p in kpo.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    ours = inspect.signature(PodlineOperator.__init__).parameters
    assert set(kpo_names) <= set(ours), set(kpo_names) - set(ours)
    assert tuple(PodlineOperator.template_fields) == tuple(KubernetesPodOperator.template_fields)


def test_behaviour_names_only_kpo_parameters() -> None:
    """A parameter the provider renamed or dropped shows up here, not as a dead table row."""
    kpo = set(inspect.signature(KubernetesPodOperator.__init__).parameters)
    assert set(_mapping.BEHAVIOUR) - kpo == set()


def test_refused_values_name_the_parameter() -> None:
    with pytest.raises(AirflowException, match=r"parameter on_kill_action \(on_kill_action='keep_pod'"):
        PodlineOperator(task_id="t", image="busybox", on_kill_action="keep_pod")
    # KPO's log and callback parameters are podline's too now.
    PodlineOperator(task_id="t", image="busybox", log_formatter=print, callbacks=[object])
    PodlineOperator(task_id="t", image="busybox", deferrable=True)  # PodlineTrigger
    # Pod-shaping parameters that used to be refused are KPO's now.
    PodlineOperator(task_id="t", image="busybox", deferrable=False, tolerations=[{"key": "gpu"}])


def test_bad_values_are_refused_with_the_parameter_name() -> None:
    with pytest.raises(AirflowException, match="on_finish_action='later'"):
        PodlineOperator(task_id="t", image="busybox", on_finish_action="later")
    with pytest.raises(AirflowException, match="startup_timeout_seconds"):
        PodlineOperator(task_id="t", image="busybox", startup_timeout_seconds=0)
    with pytest.raises(AirflowException, match="skip_on_exit_code"):
        PodlineOperator(task_id="t", image="busybox", skip_on_exit_code="99")


def test_an_unknown_parameter_is_refused_as_by_any_operator() -> None:
    with pytest.raises((TypeError, AirflowException), match="imaeg"):
        PodlineOperator(task_id="t", imaeg="busybox")


DAG_HEADER = """
from datetime import datetime
try:
    from airflow.sdk import DAG
except ImportError:
    from airflow import DAG
from podline.airflow import PodlineOperator
"""


def dagbag(folder: Path) -> Any:
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # Airflow 2
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef,attr-defined,unused-ignore]
    return DagBag(dag_folder=str(folder))


def test_a_dag_file_with_deferrable_imports(tmp_path: Path) -> None:
    (tmp_path / "bad_dag.py").write_text(
        DAG_HEADER
        + textwrap.dedent(
            """
            with DAG("bad", schedule=None, start_date=datetime(2026, 1, 1)):
                PodlineOperator(task_id="t", image="busybox", deferrable=True)
            """
        )
    )
    bag = dagbag(tmp_path)
    assert not bag.import_errors, bag.import_errors
    assert "bad" in bag.dags


def test_default_args_partial_and_expand_reach_kpo_parameters(tmp_path: Path) -> None:
    (tmp_path / "dag.py").write_text(
        DAG_HEADER
        + textwrap.dedent(
            """
            args = {"namespace": "from-default-args", "get_logs": False}
            with DAG("d", schedule=None, start_date=datetime(2026, 1, 1), default_args=args):
                PodlineOperator(task_id="plain", image="busybox")
                PodlineOperator.partial(task_id="mapped", image="busybox").expand(
                    arguments=[["a"], ["b"]]
                )
            """
        )
    )
    bag = dagbag(tmp_path)
    assert not bag.import_errors, bag.import_errors
    plain = bag.dags["d"].get_task("plain")
    assert plain.namespace == "from-default-args"
    assert plain.kpo_arguments["get_logs"] is False


def test_parsing_a_dag_does_not_import_the_provider(tmp_path: Path) -> None:
    """The DAG-parse cost stays low: the provider is imported when a task runs."""
    code = textwrap.dedent(
        """
        import sys
        try:
            from airflow.sdk import BaseOperator
        except ImportError:
            from airflow.models import BaseOperator
        before = set(sys.modules)  # what Airflow itself loads (2.11 loads kubernetes.client)
        from podline.airflow import PodlineOperator
        PodlineOperator(task_id="t", image="busybox", volumes=[], env_vars={"A": "1"})
        heavy = ("airflow.providers.cncf.kubernetes.operators.pod", "kubernetes.client")
        loaded = [m for m in sys.modules if m in heavy and m not in before]
        print("LOADED", loaded)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "LOADED []" in done.stdout, done.stdout + done.stderr


def context(try_number: int = 1, map_index: int = -1) -> dict[str, object]:
    ti = SimpleNamespace(
        dag_id="etl",
        task_id="Load_Orders",
        run_id="scheduled__2026-12-01T10:05:00+00:00",
        try_number=try_number,
        map_index=map_index,
    )
    return {"ti": ti, "run_id": ti.run_id, "dag": SimpleNamespace(dag_id="etl")}


def test_the_run_request_follows_kpos_reading_of_the_parameters() -> None:
    op = PodlineOperator(
        task_id="Load_Orders",
        image="busybox",
        on_finish_action="delete_succeeded_pod",
        reattach_on_restart=False,
        termination_grace_period=10,
        startup_timeout_seconds=30,
        container_logs=True,
    )
    kpo = op.kubernetes_pod_operator()
    req = op.run_request(kpo, {"metadata": {"name": "load-orders-x"}}, context(3, 2))
    assert req.on_finish == "delete-succeeded"
    assert req.reattach is False
    assert req.delete_grace == 10
    assert req.startup_timeout == 30 and req.schedule_timeout == 30  # KPO: schedule = startup
    # container_logs=True: every container but KPO's XCom sidecar, on podline's JSON stream.
    assert req.log_flags == ("--log-format", "json")  # a pod without containers
    pod = {"metadata": {"name": "x"}, "spec": {"containers": [
        {"name": "base"}, {"name": "side"}, {"name": "airflow-xcom-sidecar"}]}}
    req = op.run_request(kpo, pod, context(3, 2))
    assert req.log_flags == (
        "--log-format", "json", "--logs-container", "base", "--logs-container", "side"
    )
    # Another try of the same task instance keeps the reattach key.
    again = op.run_request(kpo, {"metadata": {"name": "x"}}, context(4, 2))
    assert again.task_id == req.task_id


def test_cluster_access_from_parameters_and_in_cluster(tmp_path: Path) -> None:
    op = PodlineOperator(
        task_id="t", image="busybox", config_file="/k/config", cluster_context="prod",
        kubernetes_conn_id=None,
    )
    access = op.cluster_access(op.kubernetes_pod_operator())
    assert (access.kubeconfig_path, access.context, access.in_cluster) == ("/k/config", "prod", False)
    inside = PodlineOperator(task_id="t", image="busybox", in_cluster=True, kubernetes_conn_id=None)
    assert inside.cluster_access(inside.kubernetes_pod_operator()).in_cluster is True


def test_the_distribution_registers_as_an_airflow_provider() -> None:
    from importlib import metadata

    try:
        metadata.distribution("podline")
    except metadata.PackageNotFoundError:
        pytest.skip("podline is not installed as a distribution (PYTHONPATH run); CI installs it")
    points = [e for e in metadata.entry_points(group="apache_airflow_provider") if e.value.startswith("podline.")]
    assert len(points) == 1, points
    info = points[0].load()()
    assert info["package-name"] == "podline" and info["name"] and info["description"]
    try:
        from airflow.providers_manager import ProvidersManager
    except ImportError:  # pragma: no cover
        pytest.skip("no ProvidersManager")
    assert "podline" in ProvidersManager().providers


def test_do_xcom_push_defaults_to_kpos_false_on_every_airflow() -> None:
    assert PodlineOperator(task_id="t", image="busybox").do_xcom_push is False
    assert PodlineOperator(task_id="t", image="busybox", do_xcom_push=True).do_xcom_push is True


def test_connection_fields_in_cluster_and_their_checks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from podline.airflow import _environment

    monkeypatch.setenv(
        "AIRFLOW_CONN_K8S_IC", '{"conn_type": "kubernetes", "extra": {"in_cluster": true}}'
    )
    # The extras' old spelling (extra__kubernetes__...) is read too, as KubernetesHook reads it.
    monkeypatch.setenv(
        "AIRFLOW_CONN_K8S_OLD",
        '{"conn_type": "kubernetes", "extra": {"extra__kubernetes__cluster_context": "old"}}',
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_K8S_BAD",
        '{"conn_type": "kubernetes", "extra": {"in_cluster": true, "disable_verify_ssl": true}}',
    )
    inside = PodlineOperator(task_id="t", image="busybox", kubernetes_conn_id="k8s_ic")
    access = inside.cluster_access(inside.kubernetes_pod_operator())
    assert access.in_cluster is True and access.kubeconfig_path is None
    monkeypatch.setenv("KUBECONFIG", "/somewhere/config")
    env = _environment(access, home=str(tmp_path))
    assert "KUBECONFIG" not in env and env["HOME"] == str(tmp_path)
    old = PodlineOperator(task_id="t", image="busybox", kubernetes_conn_id="k8s_old")
    assert old.cluster_access(old.kubernetes_pod_operator()).context == "old"
    # A parameter wins over the connection, as in KubernetesHook.
    param = PodlineOperator(
        task_id="t", image="busybox", kubernetes_conn_id="k8s_old", cluster_context="param"
    )
    assert param.cluster_access(param.kubernetes_pod_operator()).context == "param"
    bad = PodlineOperator(task_id="t", image="busybox", kubernetes_conn_id="k8s_bad")
    with pytest.raises(AirflowException, match="disable_verify_ssl with in_cluster"):
        bad.cluster_access(bad.kubernetes_pod_operator())
    outside = _mapping.ClusterAccess(kubeconfig_path="/k")
    assert _environment(outside, home=str(tmp_path))["KUBECONFIG"] == "/somewhere/config"


def test_an_unreadable_provider_source_falls_back_to_the_import(tmp_path: Path) -> None:
    odd = tmp_path / "pod.py"
    odd.write_text(
        "class KubernetesPodOperator(Base):\n"
        "    template_fields = Base.template_fields + ('image',)\n"
        "    def __init__(self, *, image=None, **kwargs):\n"
        "        pass\n"
    )
    assert _kpo_surface.from_source(str(odd)) is None  # not a literal: not guessed
    assert _kpo_surface.from_source(str(tmp_path / "missing.py")) is None
    assert _kpo_surface.from_import().how == "import"


def test_without_the_provider_the_import_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_kpo_surface.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(_kpo_surface.ProviderMissing, match=r"pip install 'podline\[airflow\]'"):
        _kpo_surface._kpo_source_path()


def test_a_killed_tasks_temporary_directory_is_removed_by_the_next_task(tmp_path: Path) -> None:
    import os

    from podline.airflow import sweep_stale_directories

    done = subprocess.Popen(["true"])
    done.wait()
    dead = tmp_path / f"podline-airflow-{done.pid}-abc"
    dead.mkdir()
    (dead / "kubeconfig").write_text("token")
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
    op._skip_codes = set()
    not_created = {"namespace": "default", "pod": "t-abc", "succeeded": False}
    with pytest.raises(AirflowException, match="pod default/t-abc was not created"):
        op._outcome(not_created)
    failed = dict(not_created, uid="u1")
    with pytest.raises(AirflowException, match="pod default/t-abc failed"):
        op._outcome(failed)


class _PushTI:
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def _finished(xcom: str | None = None, **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = {
        "namespace": "default",
        "pod": "t-abc",
        "uid": "u1",
        "succeeded": True,
        "mainContainer": "base",
        "containers": [{"name": "base", "exitCode": 0}],
    }
    if xcom is not None:
        result["xcom"] = xcom
    result.update(extra)
    return result


def _xcom_operator(**kwargs: Any) -> PodlineOperator:
    op = PodlineOperator(task_id="t", image="busybox", do_xcom_push=True, **kwargs)
    op._killed = False
    op._exit_code = 0
    op._skip_codes = frozenset()
    return op


def test_the_return_value_is_the_sidecars_value_then_the_termination_message() -> None:
    op = _xcom_operator()
    assert op._outcome(_finished("[1,2,3,4]\n")) == [1, 2, 3, 4]
    # podline's extra: no return.json, the termination message.
    extra = _finished(containers=[{"name": "base", "exitCode": 0, "message": '{"a": 1}'}])
    assert op._outcome(extra) == {"a": 1}
    assert op._outcome(_finished()) is None
    with pytest.raises(AirflowException, match="cannot read /airflow/xcom/return.json: boom"):
        op._outcome(_finished(xcomError="boom"))
    with pytest.raises(AirflowException, match="return.json is not JSON"):
        op._outcome(_finished("nope"))


def test_a_failed_base_container_still_pushes_its_value_as_kpo_does() -> None:
    op = _xcom_operator(multiple_outputs=True)
    op._exit_code = 2
    failed = _finished(
        '{"rows": 7}', succeeded=False, containers=[{"name": "base", "exitCode": 2}]
    )
    ti = _PushTI()
    with pytest.raises(AirflowException, match="failed: exit code 2"):
        op._outcome(failed, {"ti": ti})
    assert ti.pushed == {"rows": 7, "return_value": {"rows": 7}}
    # Without do_xcom_push nothing is pushed.
    plain = PodlineOperator(task_id="t", image="busybox")
    plain._killed, plain._exit_code, plain._skip_codes = False, 2, frozenset()
    ti = _PushTI()
    with pytest.raises(AirflowException):
        plain._outcome(failed, {"ti": ti})
    assert ti.pushed == {}
