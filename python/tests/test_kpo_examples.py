"""KubernetesPodOperator's own example DAG, with only the import switched.

`example_kubernetes.py` is fetched at test time from the source distribution of the provider
version installed (never copied into this repository); its test-harness imports
(`tests_common`, the provider's own test utilities) are stubbed here.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import textwrap
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from podline.airflow import PodlineOperator

DIST = "apache-airflow-providers-cncf-kubernetes"
EXAMPLE = "tests/system/cncf/kubernetes/example_kubernetes.py"
KPO_IMPORT = "from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator"
PODLINE_IMPORT = "from podline.airflow import PodlineOperator as KubernetesPodOperator"


@pytest.fixture(scope="module")
def example_source(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The example DAG of the installed provider version, from its sdist on the package index."""
    version = metadata.version(DIST)
    where = tmp_path_factory.mktemp("sdist")
    done = subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
            "--no-binary", ":all:", "--disable-pip-version-check",
            "--dest", str(where), f"{DIST}=={version}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    archives = list(where.glob("*.tar.gz"))
    if done.returncode != 0 or not archives:
        pytest.skip(
            f"cannot download the {DIST}=={version} source distribution (offline?): "
            f"{done.stderr.strip()[-300:]}"
        )
    with tarfile.open(archives[0]) as tar:
        member = next((m for m in tar.getmembers() if m.name.endswith("/" + EXAMPLE)), None)
        assert member is not None, f"{EXAMPLE} is not in {archives[0].name}"
        data = tar.extractfile(member)
        assert data is not None
        return data.read().decode()


def stub_tests_common(root: Path) -> None:
    """The provider's test harness, as the example uses it: a watcher task and a test run."""
    utils = root / "tests_common" / "test_utils"
    utils.mkdir(parents=True)
    (root / "tests_common" / "__init__.py").write_text("")
    (utils / "__init__.py").write_text("")
    (utils / "watcher.py").write_text(
        textwrap.dedent(
            """
            try:
                from airflow.providers.standard.operators.empty import EmptyOperator
            except ImportError:
                from airflow.operators.empty import EmptyOperator

            def watcher():
                return EmptyOperator(task_id="watcher", trigger_rule="one_failed")
            """
        )
    )
    (utils / "system_tests.py").write_text("def get_test_run(dag):\n    return None\n")


def test_example_kubernetes_parses_with_only_the_import_switched(
    example_source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kube_default: None
) -> None:
    assert example_source.count(KPO_IMPORT) == 1
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "example_kubernetes.py").write_text(example_source.replace(KPO_IMPORT, PODLINE_IMPORT))
    stubs = tmp_path / "stubs"
    stub_tests_common(stubs)
    monkeypatch.syspath_prepend(str(stubs))
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # Airflow 2
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef,attr-defined,unused-ignore]
    bag = DagBag(dag_folder=str(dags))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["example_kubernetes_operator"]
    pods = {t.task_id for t in dag.tasks if isinstance(t, PodlineOperator)}
    assert pods == {"task", "task-two", "write-xcom"}

    # The first task (not in_cluster, which needs a service account) builds KPO's pod.
    from kubernetes.client import ApiClient

    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    task = dag.get_task("task")
    ti = SimpleNamespace(dag_id=dag.dag_id, task_id="task", run_id="r", try_number=1, map_index=-1)
    context: dict[str, Any] = {"ti": ti, "run_id": "r", "dag": SimpleNamespace()}
    ours = task.build_pod(context)
    kpo = KubernetesPodOperator(task_id="task", **task.kpo_arguments)
    theirs = ApiClient().sanitize_for_serialization(kpo.build_pod_request_obj(context))
    for pod in (ours, theirs):  # random parts: the name suffix, the secret volumes' names
        pod["metadata"]["name"] = pod["metadata"]["name"].rsplit("-", 1)[0]
    strip = __import__("test_parity").secret_volume_names
    assert strip(ours) == strip(theirs)
    spec = ours["spec"]
    assert spec["priorityClassName"] == "medium"
    assert spec["tolerations"] == [{"key": "key", "operator": "Equal", "value": "value"}]
    assert [c["name"] for c in spec["initContainers"]] == ["init-container"]
    assert {"configMapRef": {"name": "test-configmap-1"}} in spec["containers"][0]["envFrom"]
