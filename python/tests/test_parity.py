"""Parity by construction: for each KubernetesPodOperator parameter (a table of cases), the pod
PodlineOperator creates, read back from `podline sim`, equals the pod the installed provider's
`KubernetesPodOperator.build_pod_request_obj(context)` builds for the same arguments, except
podline's listed changes (`_mapping.podline_pod`, `_mapping.PODLINE_ADDITIONS`) and the fields
the API server fills in (listed below, as kube-apiserver's defaulting and admission set them).

Some cases reference Secrets, ConfigMaps or a claim that do not exist; as on a real cluster
their pods then wait (FailedMount, CreateContainerConfigError, or Pending on the claim) until
the task's startup timeout (a short one here). A pod that cannot start is still compared,
since the created object is what is asserted.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conftest import Sim
from podline import _kpo_surface, _mapping
from podline.airflow import AirflowException, PodlineOperator

from kubernetes.client import ApiClient
from kubernetes.client import models as k8s

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.providers.cncf.kubernetes.secret import Secret

HERE = Path(__file__).resolve().parent

#: Fields kube-apiserver sets on a pod it creates (defaulting: SetDefaults_Pod and friends in
#: pkg/apis/core/v1/defaults.go; admission: ServiceAccount, DefaultTolerationSeconds,
#: Priority; the scheduler: nodeName). Removed from the read-back pod where KPO's has none; so
#: are the ServiceAccount admission's token volume and mounts (below).
SERVER_POD_FIELDS = {
    "dnsPolicy",
    "enableServiceLinks",
    "nodeName",
    "preemptionPolicy",
    "priority",
    "schedulerName",
    "securityContext",
    "serviceAccount",
    "serviceAccountName",
    "terminationGracePeriodSeconds",
}
SERVER_CONTAINER_FIELDS = {
    "imagePullPolicy",
    "resources",
    "terminationMessagePath",
    "terminationMessagePolicy",
}
#: DefaultTolerationSeconds admission: these two are added unless the pod has them.
DEFAULT_TOLERATION_KEYS = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
#: ServiceAccount admission (plugin/pkg/admission/serviceaccount/admission.go): unless the
#: pod or its account sets automountServiceAccountToken false, a projected volume named
#: ``kube-api-access-<5 random>`` and its read-only mount at this path in every container.
TOKEN_VOLUME_PREFIX = "kube-api-access-"
TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
SERVER_METADATA_FIELDS = {
    "creationTimestamp",
    "generation",
    "managedFields",
    "resourceVersion",
    "uid",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
}

TEMPLATE = HERE / "pod_template.yaml"

QUICK = ["sh", "-c", "true"]

#: One case per group of parameters; every pod-shaping KPO parameter appears at least once
#: (test_every_kpo_parameter_has_a_parity_case).
CASES: dict[str, dict[str, Any]] = {
    "basics": dict(
        image="busybox:1.36",
        cmds=["sh", "-c"],
        arguments=["echo {{ ti.task_id }} $A"],
        namespace="default",
        labels={"team": "data", "task": "{{ ti.task_id }}"},
        annotations={"note": "{{ ti.task_id }} here"},
        env_vars={"A": "{{ ti.task_id }}", "B": "two"},
        container_resources=k8s.V1ResourceRequirements(
            requests={"cpu": "100m", "memory": "64Mi"}, limits={"memory": "128Mi"}
        ),
        node_selector={"disk": "ssd"},
        service_account_name="runner",
        image_pull_policy="IfNotPresent",
        termination_message_policy="FallbackToLogsOnError",
        active_deadline_seconds=600,
        termination_grace_period=7,
        random_name_suffix=True,
    ),
    "template_file_and_value_from": dict(
        pod_template_file=str(TEMPLATE),
        cmds=QUICK,
        env_vars=[
            k8s.V1EnvVar(name="LITERAL", value="x"),
            k8s.V1EnvVar(
                name="FROM_SECRET",
                value_from=k8s.V1EnvVarSource(
                    secret_key_ref=k8s.V1SecretKeySelector(name="creds", key="token")
                ),
            ),
        ],
        pod_runtime_info_envs=[
            k8s.V1EnvVar(
                name="MY_POD_IP",
                value_from=k8s.V1EnvVarSource(
                    field_ref=k8s.V1ObjectFieldSelector(field_path="status.podIP")
                ),
            )
        ],
    ),
    "template_dict_and_full_spec": dict(
        pod_template_dict={
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"labels": {"from-dict": "yes"}},
            "spec": {"containers": [{"name": "base", "image": "busybox:1.36"}]},
        },
        full_pod_spec=k8s.V1Pod(
            metadata=k8s.V1ObjectMeta(annotations={"full": "spec"}),
            spec=k8s.V1PodSpec(
                containers=[k8s.V1Container(name="base", working_dir="/tmp")],
                restart_policy="Never",
            ),
        ),
        cmds=QUICK,
    ),
    "volumes_secrets_env_from": dict(
        image="busybox:1.36",
        cmds=QUICK,
        volumes=[
            k8s.V1Volume(
                name="data",
                persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(
                    claim_name="claim-{{ ti.task_id }}"
                ),
            ),
            k8s.V1Volume(name="scratch", empty_dir=k8s.V1EmptyDirVolumeSource()),
        ],
        volume_mounts=[
            k8s.V1VolumeMount(name="data", mount_path="/data", read_only=True),
            k8s.V1VolumeMount(name="scratch", mount_path="/scratch"),
        ],
        secrets=[
            Secret("volume", "/etc/sql_conn", "airflow-secrets", "sql_alchemy_conn"),
            Secret("env", "SQL_CONN", "airflow-secrets", "sql_alchemy_conn"),
            Secret("env", None, "airflow-secrets-2"),
        ],
        env_from=[k8s.V1EnvFromSource(config_map_ref=k8s.V1ConfigMapEnvSource(name="cm-1"))],
        configmaps=["cm-2"],
    ),
    "scheduling_and_network": dict(
        image="busybox:1.36",
        cmds=QUICK,
        affinity=k8s.V1Affinity(
            node_affinity=k8s.V1NodeAffinity(
                preferred_during_scheduling_ignored_during_execution=[
                    k8s.V1PreferredSchedulingTerm(
                        weight=1,
                        preference=k8s.V1NodeSelectorTerm(
                            match_expressions=[
                                k8s.V1NodeSelectorRequirement(
                                    key="disktype", operator="In", values=["ssd"]
                                )
                            ]
                        ),
                    )
                ]
            )
        ),
        tolerations=[k8s.V1Toleration(key="key", operator="Equal", value="value")],
        init_containers=[
            k8s.V1Container(name="init", image="busybox:1.36", command=["sh", "-c", "true"])
        ],
        ports=[k8s.V1ContainerPort(name="http", container_port=80)],
        host_aliases=[k8s.V1HostAlias(ip="10.1.2.3", hostnames=["db.local"])],
        hostnetwork=True,
        dnspolicy="ClusterFirstWithHostNet",
        dns_config=k8s.V1PodDNSConfig(nameservers=["10.0.0.10"], searches=["svc.local"]),
        hostname="parity-host",
        subdomain="parity-sub",
        priority_class_name="medium",
        runtime_class_name="runc",
    ),
    "security_and_pull": dict(
        image="busybox:1.36",
        cmds=QUICK,
        security_context=k8s.V1PodSecurityContext(run_as_user=1000, fs_group=2000),
        container_security_context=k8s.V1SecurityContext(
            allow_privilege_escalation=False, read_only_root_filesystem=True
        ),
        image_pull_secrets=[k8s.V1LocalObjectReference("registry-creds")],
        automount_service_account_token=False,
        base_container_name="main",
    ),
    "xcom_and_connection": dict(
        image="busybox:1.36",
        cmds=QUICK,
        do_xcom_push=True,
        # The sidecar's exec is scripted (the value; and KPO's kill line, which `--exec`
        # would otherwise run as a host process).
        annotations={"sim.podline.io/exec-airflow-xcom-sidecar": '{"stdout": "{\\"k\\": 1}"}'},
        kubernetes_conn_id="podline_parity",
        namespace=None,  # the connection's namespace
    ),
    "custom_scheduler": dict(
        image="busybox:1.36",
        cmds=QUICK,
        schedulername="default-scheduler",
    ),
}


@pytest.fixture(autouse=True)
def parity_connection(sim: Sim, kube_default: None) -> Iterator[None]:
    """A connection whose namespace (and only that) KPO puts in the pod."""
    from kubernetes.client.exceptions import ApiException

    try:
        sim.core().create_namespace({"metadata": {"name": "parity-ns"}})
    except ApiException as err:
        if err.status != 409:
            raise
    # The PriorityClass a case names must exist, as on a real cluster: kube-apiserver's Priority
    # admission refuses a pod whose class is unknown (403) and resolves spec.priority from it.
    from kubernetes import client

    try:
        client.SchedulingV1Api(sim.core().api_client).create_priority_class(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "medium"},
                "value": 1000,
            }
        )
    except ApiException as err:
        if err.status != 409:
            raise
    # The ServiceAccount a case names must exist too: the ServiceAccount admission refuses a
    # pod whose account is unknown (403).
    try:
        sim.core().create_namespaced_service_account("default", {"metadata": {"name": "runner"}})
    except ApiException as err:
        if err.status != 409:
            raise
    name = "AIRFLOW_CONN_PODLINE_PARITY"
    os.environ[name] = json.dumps({"conn_type": "kubernetes", "extra": {"namespace": "parity-ns"}})
    yield
    os.environ.pop(name, None)


class FakeTI:
    """What build_pod_request_obj and the operator read from a task instance."""

    def __init__(self, task_id: str) -> None:
        self.dag_id = "podline_parity"
        self.task_id = task_id
        self.run_id = f"manual__parity-{uuid.uuid4().hex[:8]}"
        self.try_number = 1
        self.map_index = -1
        self.xcoms: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value


def make_context(task_id: str) -> dict[str, Any]:
    ti = FakeTI(task_id)
    return {"ti": ti, "task_instance": ti, "run_id": ti.run_id, "dag": SimpleNamespace()}


def secret_volume_names(pod: dict[str, Any]) -> dict[str, Any]:
    """KPO's Secret names its volumes ``secretvol<uuid4>``, new at every build: number them."""
    text = json.dumps(pod)
    names = dict.fromkeys(re.findall(r"secretvol[0-9a-f]{8}-[0-9a-f-]{27}", text))
    for i, found in enumerate(names):
        text = text.replace(found, f"secretvol-{i}")
    return json.loads(text)  # type: ignore[no-any-return]


def prune(value: Any) -> Any:
    """Empty and absent are the same to the API: drop None, {} and [] recursively."""
    if isinstance(value, dict):
        out = {k: prune(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [prune(v) for v in value]
    return value


def strip_token_volume(spec: dict[str, Any], want_spec: dict[str, Any]) -> None:
    """Removes from the pod spec `spec` (in place) the token volume and mounts the API server's
    ServiceAccount admission added, as a real cluster adds them, unless `want_spec` has them."""
    added = {
        v.get("name") for v in spec.get("volumes") or []
        if v.get("name", "").startswith(TOKEN_VOLUME_PREFIX)
    } - {v.get("name") for v in want_spec.get("volumes") or []}
    spec["volumes"] = [v for v in spec.get("volumes") or [] if v.get("name") not in added]
    for kind in ("containers", "initContainers"):
        for container in spec.get(kind) or []:
            container["volumeMounts"] = [
                m for m in container.get("volumeMounts") or []
                if not (m.get("name") in added and m.get("mountPath") == TOKEN_MOUNT_PATH)
            ]


def without_server_and_podline_fields(actual: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(actual))
    out.pop("status", None)
    meta = out.setdefault("metadata", {})
    for key in SERVER_METADATA_FIELDS:
        meta.pop(key, None)
    for key in _mapping.PODLINE_ADDITIONS["labels"]:
        (meta.get("labels") or {}).pop(key, None)
    for key in _mapping.PODLINE_ADDITIONS["annotations"]:
        (meta.get("annotations") or {}).pop(key, None)
    meta["ownerReferences"] = [
        o for o in meta.get("ownerReferences") or []
        if o.get("kind") not in _mapping.PODLINE_ADDITIONS["ownerReferences"]
    ]
    meta["finalizers"] = [
        f for f in meta.get("finalizers") or [] if f not in _mapping.PODLINE_ADDITIONS["finalizers"]
    ]
    spec = out.setdefault("spec", {})
    want_spec = expected.get("spec") or {}
    for key in SERVER_POD_FIELDS:
        if key not in want_spec:
            spec.pop(key, None)
    wanted_tolerations = {t.get("key") for t in want_spec.get("tolerations") or []}
    spec["tolerations"] = [
        t for t in spec.get("tolerations") or []
        if t.get("key") not in DEFAULT_TOLERATION_KEYS or t.get("key") in wanted_tolerations
    ]
    strip_token_volume(spec, want_spec)
    for kind in ("containers", "initContainers"):
        wanted = {c.get("name"): c for c in want_spec.get(kind) or []}
        for container in spec.get(kind) or []:
            for key in SERVER_CONTAINER_FIELDS:
                if key not in wanted.get(container.get("name"), {}):
                    container.pop(key, None)
    return out


def kpo_pod(task_id: str, kwargs: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    """What the provider builds, independently of PodlineOperator."""
    kpo = KubernetesPodOperator(task_id=task_id, **kwargs)
    kpo.render_template_fields(context)
    kpo.name = kpo._set_name(kpo.name)
    pod = kpo.build_pod_request_obj(context)
    return ApiClient().sanitize_for_serialization(pod)  # type: ignore[no-any-return]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_pod_created_is_the_pod_kpo_builds(case: str, sim: Sim) -> None:
    task_id = f"parity_{case}"
    name = f"parity-{case.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
    kwargs = {
        "name": name,
        "random_name_suffix": False,
        "on_finish_action": "keep_pod",
        # Pods of the cases whose references do not exist never start: the created object is
        # what is compared, so their tasks need not wait long.
        "startup_timeout_seconds": 8,
        **{k: v for k, v in CASES[case].items() if k != "random_name_suffix"},
    }
    if CASES[case].get("random_name_suffix"):
        # The suffix is random: both pods get KPO's name rule, then the name is compared
        # without it.
        kwargs["random_name_suffix"] = True
    op = PodlineOperator(task_id=task_id, **kwargs)
    context = make_context(task_id)
    op.render_template_fields(context)
    try:
        op.execute(context)
    except AirflowException as err:
        print(f"{case}: the task failed ({err}); the created pod is compared")
    pod_name = context["ti"].xcoms.get("pod_name")
    namespace = context["ti"].xcoms.get("pod_namespace")
    assert pod_name, f"{case}: no pod was created"
    read = sim.core().read_namespaced_pod(pod_name, namespace)
    actual = ApiClient().sanitize_for_serialization(read)
    expected = kpo_pod(task_id, kwargs, make_context(task_id) | {"run_id": context["run_id"], "ti": _same_ti(context)})
    if kwargs["random_name_suffix"]:
        assert actual["metadata"]["name"].startswith(name + "-")
        assert len(actual["metadata"]["name"]) == len(expected["metadata"]["name"])
        actual["metadata"]["name"] = expected["metadata"]["name"]
    try:
        got = secret_volume_names(without_server_and_podline_fields(actual, expected))
        assert prune(got) == prune(secret_volume_names(expected))
    finally:
        sim.core().delete_namespaced_pod(pod_name, namespace, grace_period_seconds=0)
    if case == "xcom_and_connection":
        assert namespace == "parity-ns"
        names = [c["name"] for c in actual["spec"]["containers"]]
        assert names == ["base", _mapping.XCOM_SIDECAR], "KPO's XCom sidecar is in the pod"
        assert any(v["name"] == "xcom" for v in actual["spec"]["volumes"])


def _same_ti(context: dict[str, Any]) -> FakeTI:
    """A task instance equal to the one the operator ran with (labels use its run id)."""
    ti = FakeTI(context["ti"].task_id)
    ti.run_id = context["ti"].run_id
    return ti


def test_every_kpo_parameter_has_a_parity_case_or_a_behaviour() -> None:
    """A parameter a newer provider adds fails here until it has a case (or a behaviour row):
    never silently ignored."""
    # Every case also passes name, random_name_suffix (see the test above).
    covered = {"name", "random_name_suffix"}
    covered |= set(_mapping.BEHAVIOUR).union(*(set(c) for c in CASES.values()))
    missing = [p for p in _kpo_surface.surface().parameters if p not in covered]
    assert missing == [], f"KPO parameters with no parity case: {missing}"
