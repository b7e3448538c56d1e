"""KubernetesPodOperator's own example DAG, with only the import switched.

`example_kubernetes.py` is fetched at test time from the source distribution of the provider
version installed (never copied into this repository); its test-harness imports
(`tests_common`, the provider's own test utilities) are stubbed here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import threading
import textwrap
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conftest import Sim, dag_test_command, parse_run
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


# -- example_kubernetes.py run end to end on `podline sim --exec` -------------------------------

DAG_ID = "example_kubernetes_operator"
POD_TASKS = ("task", "task-two", "write-xcom")
SERVICE_ACCOUNT = "/run/secrets/kubernetes.io/serviceaccount"


def create_what_the_example_names(sim: Sim) -> None:
    """The Secrets, ConfigMaps, claim and PriorityClass the example's pods reference (a cluster
    the example runs on has them), made idempotently (the sim lives for the session)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = sim.core()
    scheduling = client.SchedulingV1Api(core.api_client)
    objects = [
        (core.create_namespaced_secret, k8s_object("V1Secret", "airflow-secrets",
            string_data={"sql_alchemy_conn": "postgresql://example"})),
        (core.create_namespaced_secret, k8s_object("V1Secret", "airflow-secrets-2",
            string_data={"FIRST_KEY": "one", "SECOND_KEY": "two"})),
        (core.create_namespaced_config_map, k8s_object("V1ConfigMap", "test-configmap-1",
            data={"FROM_CONFIGMAP_1": "a"})),
        (core.create_namespaced_config_map, k8s_object("V1ConfigMap", "test-configmap-2",
            data={"FROM_CONFIGMAP_2": "b"})),
        (core.create_namespaced_persistent_volume_claim, client.V1PersistentVolumeClaim(
            metadata=client.V1ObjectMeta(name="test-volume"),
            spec=client.V1PersistentVolumeClaimSpec(
                access_modes=["ReadWriteOnce"],
                resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}),
            ),
        )),
    ]
    for create, body in objects:
        try:
            create("default", body)
        except ApiException as err:
            if err.status != 409:
                raise
    try:
        scheduling.create_priority_class(
            client.V1PriorityClass(metadata=client.V1ObjectMeta(name="medium"), value=1000)
        )
    except ApiException as err:
        if err.status != 409:
            raise


def k8s_object(kind: str, name: str, **fields: Any) -> Any:
    from kubernetes import client

    return getattr(client, kind)(metadata=client.V1ObjectMeta(name=name), **fields)


def service_account_files(sim: Sim, where: Path) -> dict[str, str]:
    """What a pod's service account gives podline and KPO's hook in the cluster (token, CA,
    namespace) from the sim's kubeconfig, and the environment naming the API server."""
    import base64
    from urllib.parse import urlparse

    import yaml

    doc = yaml.safe_load(sim.kubeconfig.read_text())
    cluster = doc["clusters"][0]["cluster"]
    user = doc["users"][0]["user"]
    where.mkdir(mode=0o700)
    (where / "token").write_text(user["token"])
    (where / "ca.crt").write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    (where / "namespace").write_text("default")
    server = urlparse(cluster["server"])
    return {"KUBERNETES_SERVICE_HOST": str(server.hostname), "KUBERNETES_SERVICE_PORT": str(server.port)}


def in_cluster_command(argv: list[str], service_account: Path) -> list[str]:
    """`argv` as if in a pod: in a mount namespace of its own, a tmpfs on /run holding the
    service account's files where in-cluster clients read them (the host's /run untouched)."""
    script = (
        f"mount -t tmpfs podline-test /run && mkdir -p {SERVICE_ACCOUNT} && "
        f'cp "$0"/token "$0"/ca.crt "$0"/namespace {SERVICE_ACCOUNT}/ && exec "$@"'
    )
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(service_account), *argv]


class PodRecorder:
    """Every pod of a DAG as first seen by a watch (the example deletes its pods at the end)."""

    def __init__(self, sim: Sim, dag_id: str) -> None:
        from kubernetes import watch

        self.pods: dict[str, dict[str, Any]] = {}
        self._watch = watch.Watch()
        self._core = sim.core()
        self._selector = f"dag_id={dag_id}"
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        api = self._core.api_client
        while not self._stopped.is_set():
            try:
                for event in self._watch.stream(
                    self._core.list_namespaced_pod, "default", label_selector=self._selector,
                    timeout_seconds=60,
                ):
                    pod = api.sanitize_for_serialization(event["object"])
                    task = pod["metadata"]["labels"].get("task_id", "")
                    self.pods.setdefault(task, pod)
            except Exception:  # a watch the server ended: watch again (from a new list)
                if not self._stopped.wait(0.2):
                    continue

    def stop(self) -> None:
        self._stopped.set()
        self._watch.stop()


#: Fields of the example that are not in the Pod schema where it puts them: a
#: V1WeightedPodAffinityTerm (`weight`, `podAffinityTerm`) in podAffinity's required list, which
#: takes PodAffinityTerms. The API server drops unknown fields (kube-apiserver's default
#: fieldValidation=Warn; staging/src/k8s.io/apiserver/pkg/endpoints/handlers/create.go); the
#: object left has no topologyKey, which kube-apiserver 1.32 refuses
#: (pkg/apis/core/validation/validation.go, validatePodAffinityTerm) and the sim accepts.
NOT_IN_THE_SCHEMA = {
    ".affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].weight",
    ".affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm",
}
#: DefaultTolerationSeconds admission adds these to every pod that lacks them
#: (plugin/pkg/admission/defaulttolerationseconds/admission.go).
ADMISSION_TOLERATIONS = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}


def as_stored(spec: dict[str, Any]) -> dict[str, Any]:
    """The created pod's spec without what admission added (the default tolerations)."""
    out = dict(spec)
    out["tolerations"] = [
        t for t in spec.get("tolerations") or [] if t.get("key") not in ADMISSION_TOLERATIONS
    ]
    return out


def carries(actual: Any, expected: Any, where: str = "") -> list[str]:
    """Where `actual` (the pod read back) lacks or changes what `expected` (KPO's) sets: every
    field KPO set is there with its value (but for NOT_IN_THE_SCHEMA); what the API server
    adds is not compared."""
    if where in NOT_IN_THE_SCHEMA:
        return []
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: {actual!r} is not a mapping"]
        return [d for k, v in expected.items() for d in carries(actual.get(k), v, f"{where}.{k}")]
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: {actual!r} != {expected!r}"]
        return [d for i, (a, e) in enumerate(zip(actual, expected)) for d in carries(a, e, f"{where}[{i}]")]
    return [] if actual == expected else [f"{where}: {actual!r} != {expected!r}"]


def test_example_kubernetes_runs_end_to_end_with_only_the_import_switched(
    example_source: str, tmp_path: Path, sim: Sim, airflow_db: Path, kube_default: None
) -> None:
    """KPO's example_kubernetes.py, only the import switched, run with dag.test() on `podline
    sim --exec` (its containers' commands run as local processes: bash -cx, mkdir and echo
    into /airflow/xcom), with what it names created first and in-cluster access for its
    in_cluster tasks: every task succeeds, each pod carries what KPO's builder gives it, and
    write-xcom's [1,2,3,4] reaches pod_task_xcom_result."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("the in_cluster tasks' service account needs a mount namespace (root, unshare)")
    create_what_the_example_names(sim)
    dags = tmp_path / "dags"
    dags.mkdir()
    dag_file = dags / "example_kubernetes.py"
    dag_file.write_text(example_source.replace(KPO_IMPORT, PODLINE_IMPORT))
    stubs = tmp_path / "stubs"
    stub_tests_common(stubs)
    env = dict(os.environ)
    env.update(service_account_files(sim, tmp_path / "serviceaccount"))
    env["PYTHONPATH"] = os.pathsep.join([str(stubs), env.get("PYTHONPATH", "")])
    # Airflow 3's dag.test() runs the DAG as serialized from the DAG folder.
    env["AIRFLOW__CORE__DAGS_FOLDER"] = str(dags)
    argv = in_cluster_command(
        dag_test_command(f"{dag_file}::{DAG_ID}"), tmp_path / "serviceaccount"
    )
    recorder = PodRecorder(sim, DAG_ID)
    try:
        done = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=280
        )
    except subprocess.TimeoutExpired as err:
        out = err.output.decode() if isinstance(err.output, bytes) else str(err.output)
        lines = [line for line in out.splitlines() if "[debug" not in line]
        pytest.fail("dag.test() of the example timed out:\n" + "\n".join(lines[-80:]))
    finally:
        recorder.stop()
    run = parse_run(done.returncode, done.stdout)
    assert run.states == {
        "task": "success",
        "task-two": "success",
        "write-xcom": "success",
        "pod_task_xcom_result": "success",
        "watcher": "skipped",  # one_failed: nothing failed
    }, run.output[-6000:]

    # write-xcom's return.json is its return value, and the BashOperator templated it in.
    assert run.xcoms["write-xcom"]["return_value"] == [1, 2, 3, 4]
    # The BashOperator's last output line, "1": Airflow 3 keeps it a string; the run harness
    # reads Airflow 2.11's XCom back as the JSON number 1.
    assert str(run.xcoms["pod_task_xcom_result"]["return_value"]) == "1"
    assert "+ echo 10" in run.log("task") or "10" in run.log("task"), run.log("task")[-3000:]

    # Each pod, as created, carries what KPO's builder gives it for the same arguments.
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    strip = __import__("test_parity").secret_volume_names
    assert set(POD_TASKS) <= set(recorder.pods), sorted(recorder.pods)
    for task_id in POD_TASKS:
        pod = recorder.pods[task_id]
        arguments = run_arguments(dags, stubs, task_id)
        kpo = KubernetesPodOperator(task_id=task_id, **arguments)
        ti = SimpleNamespace(dag_id=DAG_ID, task_id=task_id, run_id="r", try_number=1, map_index=-1)
        context: dict[str, Any] = {"ti": ti, "run_id": "r", "dag": SimpleNamespace()}
        from kubernetes.client import ApiClient

        built = ApiClient().sanitize_for_serialization(kpo.build_pod_request_obj(context, dry_run=True))
        actual = strip(pod)["spec"]
        __import__("test_parity").strip_token_volume(actual, built.get("spec") or {})
        missing = carries(as_stored(actual), strip(built)["spec"])
        assert not missing, f"{task_id}: " + "\n".join(missing)
        if task_id != "write-xcom":  # the example labels the other two
            assert pod["metadata"]["labels"]["foo"] == "bar"
        assert pod["metadata"]["labels"]["task_id"] == task_id
    spec = recorder.pods["task"]["spec"]
    assert spec["priorityClassName"] == "medium" and spec["priority"] == 1000
    assert [c["name"] for c in spec["initContainers"]] == ["init-container"]
    assert recorder.pods["task-two"]["spec"]["imagePullSecrets"] == [{"name": "testquay"}]
    assert [c["name"] for c in recorder.pods["write-xcom"]["spec"]["containers"]] == [
        "base", "airflow-xcom-sidecar"
    ]
    assert sim.pods(f"dag_id={DAG_ID}") == []


def run_arguments(dags: Path, stubs: Path, task_id: str) -> dict[str, Any]:
    """The KPO arguments the example gives `task_id` (parsed as the worker parsed it)."""
    sys.path.insert(0, str(stubs))
    try:
        try:
            from airflow.dag_processing.dagbag import DagBag
        except ImportError:  # Airflow 2
            from airflow.models.dagbag import DagBag  # type: ignore[no-redef,attr-defined,unused-ignore]
        bag = DagBag(dag_folder=str(dags))
    finally:
        sys.path.remove(str(stubs))
    task = bag.dags[DAG_ID].get_task(task_id)
    return dict(task.kpo_arguments)
