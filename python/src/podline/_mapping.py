"""What PodlineOperator does with KubernetesPodOperator's parameters and the pod KPO builds:
pure functions and tables, no Airflow, no provider.

Kept apart from :mod:`podline.airflow` so they are tested without Airflow, and so the docs'
parameter table is generated from the same tables the operator runs on.

The division of labour: every parameter that shapes the pod is KPO's own business: the pod is
the one ``KubernetesPodOperator.build_pod_request_obj(context)`` builds (the provider is
called, not re-implemented). What podline changes in that pod is listed in one place:
:func:`podline_pod` (the Python side) and :data:`PODLINE_ADDITIONS` (what ``podline run`` adds
when it creates the pod). The parameters that are about *running* the pod, not its shape, are
in :data:`BEHAVIOUR`: each says what podline does with it.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: KubernetesPodOperator's ``on_finish_action`` values and podline's ``--on-finish`` for each.
#: ``delete_active_pod`` is podline's behaviour anyway for a pod still pending or running when
#: the task ends; unlike KPO it also deletes a finished pod.
ON_FINISH = {
    "delete_pod": "delete",
    "delete_succeeded_pod": "delete-succeeded",
    "delete_active_pod": "delete",
    "keep_pod": "keep",
}

#: Name of the container KPO adds for ``do_xcom_push`` (the provider's
#: ``xcom_sidecar.PodDefaults.SIDECAR_CONTAINER_NAME``; the operator reads it from the provider
#: at run time, this is the fallback for tests without it).
XCOM_SIDECAR = "airflow-xcom-sidecar"


@dataclass(frozen=True)
class Behaviour:
    """What podline does with one KPO parameter that is about running the pod."""

    #: ``"same"``: same meaning; ``"ignored"``: accepted, no effect on podline (the reason
    #: says why that is the parameter's meaning here); ``"refused"``: a value other than
    #: ``allowed`` fails the DAG's import, naming the parameter.
    kind: str
    text: str
    #: For ``refused``: the values that are accepted (KPO's default, and what podline can do).
    allowed: tuple[Any, ...] = (None,)


def _same(text: str) -> Behaviour:
    return Behaviour("same", text)


def _ignored(text: str) -> Behaviour:
    return Behaviour("ignored", text)


def _refused(text: str, *allowed: Any) -> Behaviour:
    return Behaviour("refused", text, allowed or (None,))


#: KPO parameters that are not about the pod's shape. Every other KPO parameter shapes the pod
#: and goes through ``build_pod_request_obj`` as in KPO (the parity test covers each).
BEHAVIOUR: dict[str, Behaviour] = {
    "kubernetes_conn_id": _same(
        "the connection's in_cluster, kube_config_path, kube_config (written to a private "
        "0600 file, removed after), cluster_context and disable_verify_ssl are podline's "
        "cluster access; its namespace goes into the pod through KPO; disable_tcp_keepalive "
        "has no effect (podline checks its connections with HTTP/2 PINGs); the XCom sidecar "
        "fields go into the pod through KPO"
    ),
    "in_cluster": _same("the pod's service account only: every kubeconfig is hidden from podline"),
    "config_file": _same("podline's --kubeconfig"),
    "cluster_context": _same("podline's --context"),
    "reattach_on_restart": _same(
        "a new try follows the running pod of an earlier try (podline's --task-id label, a hash "
        "of dag_id, task_id, run_id and map_index) instead of creating a second one"
    ),
    "durable": _same("as reattach_on_restart (KPO: its Airflow 3.3+ name)"),
    "on_finish_action": _same(
        "podline's --on-finish; delete_active_pod also deletes a finished pod"
    ),
    "on_kill_action": _refused(
        "podline always deletes the pod when the task is killed, unless on_finish_action is "
        "keep_pod",
        "delete_pod",
    ),
    "is_delete_operator_pod": _ignored(
        "as in KPO 10.x, which accepts and ignores it (on_finish_action decides)"
    ),
    "startup_timeout_seconds": _same("podline's --startup-timeout"),
    "schedule_timeout_seconds": _same("podline's --schedule-timeout (default: the startup timeout)"),
    "get_logs": _same("the main container's lines go into the task log as they come"),
    "container_logs": _same(
        "the containers whose lines go into the task log (True: all but the XCom sidecar, a "
        "name or a list; default the base container), each followed by podline and resumed "
        "exactly after a cut stream (podline's --logs-container; a name the pod lacks is "
        "logged as an error, as KPO does)"
    ),
    "init_container_logs": _same(
        "the init containers whose logs go into the task log before the others, each whole, "
        "in the pod's order (podline's --init-logs-container)"
    ),
    "container_name_log_prefix_enabled": _same(
        "each line is logged as `[container] line` (KPO's format) when True, the default"
    ),
    "log_formatter": _same(
        "called with (container name, line) for every line; its result is logged instead"
    ),
    "skip_on_exit_code": _same("the main container's exit code"),
    "base_container_name": _same(
        "the task's outcome is this container's: the task ends when it terminates (a sidecar "
        "that never exits does not hold it; on_finish_action then applies)"
    ),
    "do_xcom_push": _same(
        "KPO's sidecar reads /airflow/xcom/return.json through pods/exec once the base "
        "container has terminated (then it is stopped, as KPO does); the value is the task's "
        "return value (multiple_outputs too), pushed also when the base container failed. "
        "podline's extra: without a return.json, the base container's termination message "
        "(JSON) is the value"
    ),
    "termination_grace_period": _same(
        "in the pod (KPO), and the grace period of podline's deletes, at the end and on kill"
    ),
    "deferrable": _same(
        "the pod is created by the task (podline's create retries and adoption), then the task "
        "defers to PodlineTrigger, which awaits the pod on one shared watch per namespace in "
        "the triggerer; defaults to [operators] default_deferrable, as KPO"
    ),
    "poll_interval": _ignored("podline's trigger watches the pod instead of polling"),
    "logging_interval": _ignored("deferrable mode only; podline streams logs as they come"),
    "trigger_kwargs": _ignored("deferrable mode only"),
    "startup_check_interval_seconds": _ignored("podline watches the pod instead of polling"),
    "base_container_status_polling_interval": _ignored(
        "podline watches the pod instead of polling"
    ),
    "log_events_on_failure": _ignored("podline's failure report always has the Warning events"),
    "log_events_on_startup": _ignored("podline reports scheduling and pull problems itself"),
    "log_pod_spec_on_failure": _ignored("the pod's manifest is what KPO builds; not logged again"),
    "callbacks": _same(
        "the KubernetesPodOperatorCallback classes are called in sync mode at KPO's points "
        "(on_sync_client_creation, on_pod_manifest_created, on_pod_creation, on_pod_starting, "
        "on_pod_completion, on_pod_teardown, on_pod_cleanup, progress_callback per line) with "
        "V1Pod objects built from the pod podline reports on its JSON stream; KPO's client; "
        "not called with deferrable=True"
    ),
    "progress_callback": _ignored(
        "as in KPO 10.x, which stores it and never calls it (the callbacks' "
        "progress_callback is called for every line)"
    ),
    "xcom_sidecar_container_security_context": _same("the XCom sidecar's, in the pod (KPO)"),
}

#: What ``podline run`` adds to the pod it is handed (besides :func:`podline_pod`'s changes):
#: the parity test strips exactly these before comparing with KPO's pod.
PODLINE_ADDITIONS = {
    "labels": (
        "podline.io/launch-id",  # the create's idempotency key (AlreadyExists adoption)
        "podline.io/task-id",  # reattach: the same for every try of a task instance
        "podline.io/launcher",  # the liveness Lease of the podline that runs it
    ),
    # keep_pod only: tells the reaper to leave the pod alone.
    "annotations": ("podline.io/on-finish",),
    # the podline's liveness Lease owns the pod (a killed worker's pod is collected)
    "ownerReferences": ("Lease",),
    # only with PODLINE_FINALIZER / --finalizer, which the operator does not pass
    "finalizers": ("podline.io/record",),
}


def refusal(name: str, value: Any) -> str | None:
    """Why ``name=value`` is refused, or None if podline accepts it."""
    behaviour = BEHAVIOUR.get(name)
    if behaviour is None or behaviour.kind != "refused":
        return None
    if any(value is a or (type(value) is type(a) and value == a) for a in behaviour.allowed):
        return None
    return behaviour.text


def podline_pod(
    pod: Mapping[str, Any], *, base_container: str, xcom_sidecar: str = XCOM_SIDECAR
) -> dict[str, Any]:
    """The pod ``podline run`` creates from the one KPO built: a copy, unchanged. KPO's XCom
    sidecar (``xcom_sidecar``, with ``do_xcom_push=True``) stays: ``podline run`` reads
    ``/airflow/xcom/return.json`` through it with ``pods/exec`` once the base container has
    terminated, then stops it, as KPO does.

    Raises ValueError if the base container is not the pod's first (podline's main container
    is the first one; KPO's reconcile puts it there).
    """
    out = copy.deepcopy(dict(pod))
    spec = out.get("spec") or {}
    containers = list(spec.get("containers") or [])
    if not containers or containers[0].get("name") != base_container:
        names = [c.get("name") for c in containers]
        raise ValueError(
            f"the pod's first container must be the base container {base_container!r} "
            f"(podline follows the first one); KPO built {names}"
        )
    return out


@dataclass(frozen=True)
class TaskInstanceKey:
    """What identifies one task instance across tries (plus the try itself)."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int = -1
    try_number: int = 1

    def podline_task_id(self) -> str:
        """podline's ``--task-id``: the same for every try of this task instance, so a new try
        after a worker restart reattaches to the pod the lost one started."""
        key = "\0".join([self.dag_id, self.task_id, self.run_id, str(self.map_index)])
        return "airflow-" + hashlib.sha256(key.encode()).hexdigest()[:40]


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


@dataclass
class ClusterAccess:
    """How podline reaches the cluster, from the operator's parameters and its connection.

    ``kubeconfig_text`` (a connection's inline kube_config, or a rewritten one) is a secret:
    it is only ever written to a private file; ``repr`` leaves it out."""

    in_cluster: bool = False
    kubeconfig_path: str | None = None
    kubeconfig_text: str | None = field(default=None, repr=False)
    context: str | None = None


@dataclass
class RunRequest:
    """Everything one ``podline run`` of a task needs besides the pod itself."""

    name: str
    task_id: str
    on_finish: str = "delete"
    reattach: bool = True
    startup_timeout: int = 120
    schedule_timeout: int | None = None
    delete_grace: int | None = None
    all_containers: bool = False
    #: ``podline run``'s log flags (containers, init containers, the JSON stream), from
    #: :func:`podline._logs.select`.
    log_flags: tuple[str, ...] = ()
    #: Seconds the pod outlives podline's death for the next try to reattach (0: none), see
    #: :mod:`podline._retry`.
    keep_for_retry: int = 0

    def argv(
        self,
        binary: str,
        pod_file: Path,
        result_file: Path,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
    ) -> list[str]:
        """The command line: the pod travels in ``pod_file`` (never env values or credentials
        on the command line, which any local user can read); the name KPO chose is kept as is
        (``--exact-name``: KPO already added the random suffix)."""
        argv = [binary, "run", "--pod-template", str(pod_file), "--result-file", str(result_file)]
        if kubeconfig:
            argv += ["--kubeconfig", kubeconfig]
        if context:
            argv += ["--context", context]
        argv += ["--name", self.name, "--exact-name"]
        argv += ["--on-finish", self.on_finish, "--task-id", self.task_id]
        if self.reattach:
            argv.append("--reattach")
        argv += ["--startup-timeout", f"{self.startup_timeout}s"]
        argv += ["--schedule-timeout", f"{self.schedule_timeout or self.startup_timeout}s"]
        if self.delete_grace:
            argv += ["--delete-grace", f"{self.delete_grace}s"]
        if self.all_containers:
            argv.append("--all-containers")
        argv += list(self.log_flags)
        if self.keep_for_retry:
            argv += ["--keep-for-retry", f"{self.keep_for_retry}s"]
        return argv


def parameter_table(parameters: Iterable[str], template_fields: Iterable[str]) -> str:
    """docs/airflow.md's parameter table: every KPO parameter (in KPO's order) and what podline
    does with it, from :data:`BEHAVIOUR` (generated, so the docs cannot drift from the code)."""
    templated = set(template_fields)
    rows = ["| KubernetesPodOperator parameter | PodlineOperator |", "|---|---|"]
    for name in parameters:
        behaviour = BEHAVIOUR.get(name)
        if behaviour is None:
            text = "in the pod, as KPO's `build_pod_request_obj` builds it"
        elif behaviour.kind == "same":
            text = f"same meaning: {behaviour.text}"
        elif behaviour.kind == "ignored":
            text = f"accepted, no effect: {behaviour.text}"
        else:
            allowed = ", ".join("`None` (default)" if a is None else f"`{a!r}`" for a in behaviour.allowed)
            text = f"accepted as {allowed}; other values are refused at parse time: {behaviour.text}"
        mark = " (templated)" if name in templated else ""
        rows.append(f"| `{name}`{mark} | {text} |")
    return "\n".join(rows) + "\n"
