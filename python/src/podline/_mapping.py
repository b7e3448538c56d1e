"""KubernetesPodOperator's parameters mapped onto ``podline run``: pure functions, no Airflow.

Kept apart from :mod:`podline.airflow` so the mapping (labels, flags, the pod template) is
tested without Airflow and reused by anything else that drives podline from Python.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: KubernetesPodOperator's ``on_finish_action`` values and podline's ``--on-finish`` for each.
#: ``delete_active_pod`` is podline's behaviour anyway: a pod still pending or running when the
#: task ends is deleted unless ``keep_pod``.
ON_FINISH = {
    "delete_pod": "delete",
    "delete_succeeded_pod": "delete-succeeded",
    "delete_active_pod": "delete",
    "keep_pod": "keep",
}

#: KubernetesPodOperator parameters PodlineOperator does not take, each with what to do instead.
#: They are refused by name when the DAG is parsed: silently ignoring one would run a different
#: pod than the DAG describes.
UNSUPPORTED: dict[str, str] = {
    "kubernetes_conn_id": "use config_file / cluster_context / in_cluster",
    "pod_template_dict": "write it to a file and pass pod_template_file",
    "full_pod_spec": "write it to a file and pass pod_template_file",
    "env_from": "put envFrom in pod_template_file",
    "secrets": "put the secret volumes or envFrom in pod_template_file",
    "configmaps": "put envFrom in pod_template_file",
    "pod_runtime_info_envs": "put the env entries with valueFrom in pod_template_file",
    "volumes": "put them in pod_template_file",
    "volume_mounts": "put them in pod_template_file",
    "ports": "put them in pod_template_file",
    "tolerations": "put them in pod_template_file",
    "affinity": "put it in pod_template_file",
    "init_containers": "put them in pod_template_file",
    "host_aliases": "put them in pod_template_file",
    "hostnetwork": "put hostNetwork in pod_template_file",
    "dnspolicy": "put dnsPolicy in pod_template_file",
    "dns_config": "put dnsConfig in pod_template_file",
    "hostname": "put it in pod_template_file",
    "subdomain": "put it in pod_template_file",
    "schedulername": "put schedulerName in pod_template_file",
    "priority_class_name": "put priorityClassName in pod_template_file",
    "security_context": "put it in pod_template_file",
    "container_security_context": "put it in pod_template_file",
    "image_pull_secrets": "put imagePullSecrets in pod_template_file",
    "image_pull_policy": "put imagePullPolicy in pod_template_file",
    "automount_service_account_token": "put it in pod_template_file",
    "base_container_name": "the main container is the template's first one ('base' by default)",
    "container_logs": "podline follows the main container's logs",
    "init_container_logs": "podline follows the main container's logs",
    "termination_message_policy": "put terminationMessagePolicy in pod_template_file",
    "deferrable": "podline needs no triggerer: the task's process waits on a pod watch",
    "poll_interval": "podline watches the pod instead of polling",
    "logging_interval": "podline streams logs as they come",
    "trigger_kwargs": "there is no trigger",
    "callbacks": "not supported",
    "progress_callback": "not supported",
    "log_events_on_failure": "podline's failure report always has the last Warning events",
    "log_pod_spec_on_failure": "not supported",
    "startup_check_interval_seconds": "podline watches the pod instead of polling",
    "base_container_status_polling_interval": "podline watches the pod instead of polling",
    "container_name_log_prefix_enabled": "podline logs the main container, unprefixed",
    "log_formatter": "not supported",
    "is_delete_operator_pod": "use on_finish_action",
    "cancel_on_kill": "on_kill always deletes the pod (podline's SIGTERM handling)",
    "kubernetes_pod_operator_callback": "not supported",
}

_LABEL_OK = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_MAX_LABEL = 63
_HASH_LEN = 9


def safe_label_value(value: object) -> str:
    """``value`` as a valid Kubernetes label value (at most 63 of ``[A-Za-z0-9_.-]``, starting
    and ending alphanumeric). A value that had to change, or was too long, gets a short hash of
    the original, so two different run ids never map to the same label."""
    text = str(value)
    if len(text) <= _MAX_LABEL and _LABEL_OK.match(text):
        return text
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)
    cleaned = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", cleaned)
    digest = hashlib.sha256(text.encode()).hexdigest()[:_HASH_LEN]
    head = cleaned[: _MAX_LABEL - _HASH_LEN - 1].rstrip("-_.")
    return f"{head}-{digest}" if head else digest


@dataclass(frozen=True)
class TaskInstanceKey:
    """What identifies one task instance across tries (plus the try itself)."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int = -1
    try_number: int = 1

    def labels(self) -> dict[str, str]:
        """Airflow's own pod labels (as KubernetesPodOperator sets them), sanitised."""
        labels = {
            "dag_id": safe_label_value(self.dag_id),
            "task_id": safe_label_value(self.task_id),
            "run_id": safe_label_value(self.run_id),
            "try_number": safe_label_value(self.try_number),
            "kubernetes_pod_operator": "True",
        }
        if self.map_index >= 0:
            labels["map_index"] = safe_label_value(self.map_index)
        return labels

    def podline_task_id(self) -> str:
        """podline's ``--task-id``: the same for every try of this task instance, so a new try
        after a worker restart reattaches to the pod the lost one started."""
        key = "\0".join([self.dag_id, self.task_id, self.run_id, str(self.map_index)])
        return "airflow-" + hashlib.sha256(key.encode()).hexdigest()[:40]


def sanitize_pod_name(name: str) -> str:
    """KubernetesPodOperator's name rule: lower-cased, runs of ``[^a-z0-9-]`` become ``-``,
    trimmed to 63 characters with no leading or trailing ``-``."""
    lowered = re.sub(r"[^a-z0-9-]+", "-", name.lower())
    return lowered[:_MAX_LABEL].strip("-") or "pod"


def env_pairs(env_vars: Any) -> list[tuple[str, str]]:
    """``env_vars`` (a dict, or a list of ``V1EnvVar`` / ``{"name", "value"}``) as pairs.

    Entries with ``value_from`` are refused: podline's flags carry literal values; put such
    entries in ``pod_template_file``.
    """
    if env_vars is None:
        return []
    if isinstance(env_vars, Mapping):
        return [(str(k), "" if v is None else str(v)) for k, v in env_vars.items()]
    pairs: list[tuple[str, str]] = []
    for entry in env_vars:
        if isinstance(entry, Mapping):
            name, value = entry.get("name"), entry.get("value")
            value_from = entry.get("value_from") or entry.get("valueFrom")
        else:
            name = getattr(entry, "name", None)
            value = getattr(entry, "value", None)
            value_from = getattr(entry, "value_from", None)
        if not name:
            raise ValueError(f"env_vars: entry {entry!r} has no name")
        if value_from is not None:
            raise ValueError(
                f"env_vars: {name} uses value_from, which PodlineOperator does not pass; "
                "put that entry in pod_template_file"
            )
        pairs.append((str(name), "" if value is None else str(value)))
    return pairs


def resource_flags(container_resources: Any) -> list[str]:
    """``container_resources`` (``V1ResourceRequirements`` or ``{"requests", "limits"}``) as
    ``--requests`` / ``--limits`` flags."""
    if container_resources is None:
        return []
    flags: list[str] = []
    for kind in ("requests", "limits"):
        if isinstance(container_resources, Mapping):
            values = container_resources.get(kind)
        else:
            values = getattr(container_resources, kind, None)
        if values:
            joined = ",".join(f"{k}={v}" for k, v in dict(values).items())
            flags += [f"--{kind}", joined]
    if isinstance(container_resources, Mapping):
        extra = set(container_resources) - {"requests", "limits"}
        if extra:
            raise ValueError(
                f"container_resources: unknown keys {sorted(extra)}; expected requests, limits"
            )
    return flags


def seconds(name: str, value: Any, *, allow_zero: bool = False) -> int | None:
    """A positive (or, with ``allow_zero``, non-negative) whole number of seconds; ``None``
    stays ``None``; anything else is refused with the parameter's name."""
    if value is None:
        return None
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
        what = "a non-negative" if allow_zero else "a positive"
        raise ValueError(f"{name} must be {what} whole number of seconds, got {value!r}")
    if int(value) != value:
        raise ValueError(f"{name} must be a whole number of seconds, got {value!r}")
    return int(value)


def skip_codes(skip_on_exit_code: Any) -> frozenset[int]:
    """``skip_on_exit_code`` (None, an int or a collection of ints) as a set."""
    if skip_on_exit_code is None:
        return frozenset()
    if isinstance(skip_on_exit_code, int) and not isinstance(skip_on_exit_code, bool):
        return frozenset({skip_on_exit_code})
    if isinstance(skip_on_exit_code, Iterable) and not isinstance(skip_on_exit_code, str):
        codes = list(skip_on_exit_code)
        if all(isinstance(c, int) and not isinstance(c, bool) for c in codes):
            return frozenset(codes)
    raise ValueError(
        f"skip_on_exit_code must be an int or a list of ints, got {skip_on_exit_code!r}"
    )


def pod_template(
    user_template: Mapping[str, Any] | None,
    *,
    arguments_only: Sequence[str] | None,
    termination_grace_period: int | None,
) -> dict[str, Any]:
    """The pod manifest handed to ``--pod-template``: the user's ``pod_template_file`` (or an
    empty pod whose one container is named ``base``, like KubernetesPodOperator's), plus what
    podline has no flag for: ``terminationGracePeriodSeconds``, and ``args`` when only
    ``arguments`` (no ``cmds``) were given, so the image's entrypoint is kept."""
    import copy

    pod: dict[str, Any] = copy.deepcopy(dict(user_template)) if user_template else {}
    pod.setdefault("apiVersion", "v1")
    pod.setdefault("kind", "Pod")
    pod.setdefault("metadata", {})
    spec = pod.setdefault("spec", {}) or {}
    pod["spec"] = spec
    containers = spec.get("containers") or [{"name": "base"}]
    spec["containers"] = containers
    if termination_grace_period is not None:
        spec["terminationGracePeriodSeconds"] = termination_grace_period
    if arguments_only:
        containers[0]["args"] = list(arguments_only)
    return pod


@dataclass
class RunRequest:
    """Everything one ``podline run`` of a task needs, in KubernetesPodOperator's terms."""

    image: str | None
    cmds: list[str] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)
    namespace: str | None = None
    name: str | None = None
    random_name_suffix: bool = True
    env: list[tuple[str, str]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    on_finish: str = "delete"
    task_id: str | None = None
    reattach: bool = True
    startup_timeout: int = 120
    schedule_timeout: int | None = None
    resources: list[str] = field(default_factory=list)
    node_selector: dict[str, str] = field(default_factory=dict)
    service_account: str | None = None
    config_file: str | None = None
    cluster_context: str | None = None
    active_deadline: int | None = None
    termination_grace_period: int | None = None

    def with_env(self, template: Mapping[str, Any]) -> dict[str, Any]:
        """``template`` with ``env`` in its main (first) container, each variable replacing one of
        the same name, as ``--env`` would. Env values go to podline in the pod template file
        (``--pod-template``, in the run's private temporary directory), never on the command
        line, where any local user could read them (``ps``, ``/proc``) for the whole run. A pod
        template carries any value (a multi-line PEM key too), which ``--env-file`` lines cannot.
        """
        import copy

        pod: dict[str, Any] = copy.deepcopy(dict(template))
        if not self.env:
            return pod
        containers = pod.setdefault("spec", {}).setdefault("containers", [{"name": "base"}])
        main = containers[0]
        names = {k for k, _ in self.env}
        env = [e for e in (main.get("env") or []) if e.get("name") not in names]
        env += [{"name": k, "value": v} for k, v in self.env]
        main["env"] = env
        return pod

    def argv(self, binary: str, template: Path, result_file: Path) -> list[str]:
        """The command line: ``podline run`` with a flag per parameter, then ``-- cmds args``.
        Env values are not in it: they go into the pod template (:meth:`with_env`)."""
        argv = [binary, "run", "--pod-template", str(template), "--result-file", str(result_file)]
        if self.config_file:
            argv += ["--kubeconfig", self.config_file]
        if self.cluster_context:
            argv += ["--context", self.cluster_context]
        if self.namespace:
            argv += ["-n", self.namespace]
        if self.image:
            argv += ["--image", self.image]
        if self.name:
            argv += ["--name", self.name]
            if not self.random_name_suffix:
                argv.append("--exact-name")
        for k, v in self.labels.items():
            argv += ["--label", f"{k}={v}"]
        for k, v in self.annotations.items():
            argv += ["--annotation", f"{k}={v}"]
        for k, v in self.node_selector.items():
            argv += ["--node-selector", f"{k}={v}"]
        if self.service_account:
            argv += ["--service-account", self.service_account]
        argv += self.resources
        argv += ["--on-finish", self.on_finish]
        if self.task_id:
            argv += ["--task-id", self.task_id]
            if self.reattach:
                argv.append("--reattach")
        argv += ["--startup-timeout", f"{self.startup_timeout}s"]
        argv += ["--schedule-timeout", f"{self.schedule_timeout or self.startup_timeout}s"]
        if self.active_deadline:
            argv += ["--active-deadline", f"{self.active_deadline}s"]
        if self.termination_grace_period:
            argv += ["--delete-grace", f"{self.termination_grace_period}s"]
        if self.cmds:
            argv += ["--", *self.cmds, *self.arguments]
        return argv
