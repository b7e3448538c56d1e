"""``PodlineOperator(deferrable=True)``: the worker's half (:func:`start`: create the pod with
podline's create guarantees, then defer) and the resumed task's (:func:`complete`: clean up,
then report). The waiting is :class:`podline.triggers.PodlineTrigger`'s, in the triggerer.

Kept apart from :mod:`podline.airflow` (the synchronous path runs ``podline run``); both build
the same pod from KubernetesPodOperator's arguments.
"""

from __future__ import annotations

import datetime
import json
import time
from typing import TYPE_CHECKING, Any

from podline import _mapping

try:  # Airflow 3.x
    from airflow.sdk.exceptions import AirflowException, AirflowSkipException
except ImportError:  # pragma: no cover - Airflow 2.11
    from airflow.exceptions import (  # type: ignore[no-redef,assignment,attr-defined,unused-ignore]
        AirflowException,
        AirflowSkipException,
    )

if TYPE_CHECKING:
    from podline.airflow import PodlineOperator

#: The method Airflow calls when the trigger fires.
COMPLETE_METHOD = "execute_complete"


def is_deferrable(kpo: Any) -> bool:
    """KPO's own ``deferrable``, which defaults to Airflow's ``[operators] default_deferrable``."""
    return bool(getattr(kpo, "deferrable", False))


def start(op: PodlineOperator, context: Any) -> None:
    """Creates (or reattaches to) the task's pod, pushes ``pod_name`` / ``pod_namespace`` and
    defers to a :class:`~podline.triggers.PodlineTrigger`. Raises AirflowException if the pod
    cannot be created (nothing is then left behind)."""
    from podline import _native
    from podline.triggers import PodlineTrigger

    pod = op.build_pod(context)
    kpo = op.kubernetes_pod_operator()
    request = op.run_request(kpo, pod, context)
    access = op.cluster_access(kpo)
    if access.kubeconfig_text is not None:
        raise AirflowException(
            "deferrable=True: a connection with an inline kube_config (or disable_verify_ssl) "
            "is not supported yet; give the connection a kube_config_path"
        )
    kubeconfig = None if access.in_cluster else access.kubeconfig_path
    namespace = (pod.get("metadata") or {}).get("namespace")
    try:
        started = json.loads(
            _native.start_pod(
                kubeconfig,
                access.context,
                namespace,
                json.dumps(pod),
                task_id=request.task_id,
                reattach=request.reattach,
            )
        )
    except _native.PodlineError as err:
        raise AirflowException(f"pod {namespace}/{request.name} was not created: {err}") from err
    ti = context["ti"]
    ti.xcom_push(key="pod_name", value=started["name"])
    ti.xcom_push(key="pod_namespace", value=started["namespace"])
    if started.get("reattached"):
        op.log.info("reattached to the running pod %s/%s", started["namespace"], started["name"])
    elif started.get("adopted"):
        op.log.info("pod %s/%s: the create's answer was lost; adopted by launch id", started["namespace"], started["name"])
    op.log.info(
        "pod %s/%s created (%s create call(s)); deferring to the triggerer",
        started["namespace"],
        started["name"],
        started.get("attempts"),
    )
    deadline, timeout = execution_deadline(op, context)
    op.defer(
        trigger=PodlineTrigger(
            namespace=started["namespace"],
            pod_name=started["name"],
            launch_id=started["launchId"],
            base_container=started["mainContainer"],
            kubeconfig=kubeconfig,
            cluster_context=access.context,
            on_kill_action=str(getattr(kpo.on_kill_action, "value", kpo.on_kill_action)),
            execution_deadline=deadline,
            grace_seconds=_grace(kpo),
            schedule_timeout=request.schedule_timeout or request.startup_timeout,
            startup_timeout=request.startup_timeout,
            own_pod=_mapping.ON_FINISH[str(getattr(kpo.on_finish_action, "value", kpo.on_finish_action))] != "keep",
        ),
        method_name=COMPLETE_METHOD,
        timeout=timeout,
    )


#: How long after the execution deadline Airflow's own deferral timeout falls: the trigger's
#: timed-out event (which deletes the pod first) must come before Airflow's ``__fail__``.
DEADLINE_MARGIN = datetime.timedelta(seconds=60)


def execution_deadline(op: Any, context: Any) -> tuple[float | None, datetime.timedelta | None]:
    """The task's ``execution_timeout`` as an absolute deadline (epoch seconds, anchored on the
    try's start, so a re-deferral keeps it) for the trigger, and the deferral's own timeout
    (the deadline plus :data:`DEADLINE_MARGIN`): Airflow's backstop if no triggerer runs."""
    limit = getattr(op, "execution_timeout", None)
    if limit is None:
        return None, None
    start = getattr(context["ti"], "start_date", None)
    begun = start.timestamp() if start is not None else time.time()
    deadline = begun + limit.total_seconds()
    left = max(deadline - time.time(), 0.0)
    return deadline, datetime.timedelta(seconds=left) + DEADLINE_MARGIN


def _grace(kpo: Any) -> int | None:
    try:
        return _mapping.seconds("termination_grace_period", kpo.termination_grace_period, allow_zero=True)
    except ValueError:
        return None


def complete(op: PodlineOperator, context: Any, event: dict[str, Any]) -> Any:
    """Writes the base container's log into the task log (``get_logs``, bounded by
    :data:`LOG_LIMIT_BYTES`), reads the return value (``do_xcom_push``:
    ``/airflow/xcom/return.json`` through KPO's sidecar, as in sync mode; without a sidecar, the
    base container's termination message), cleans the pod up as ``on_finish_action`` says, then
    reports the outcome: the return value, a skip (``skip_on_exit_code``) or an
    AirflowException naming the exit code."""
    kpo = op.kubernetes_pod_operator()
    on_finish = _mapping.ON_FINISH[str(getattr(kpo.on_finish_action, "value", kpo.on_finish_action))]
    succeeded = bool(event.get("succeeded"))
    where = f"{event.get('namespace')}/{event.get('pod')}"
    ended = not event.get("gone") and not event.get("timedOut") and event.get("pod")
    if ended and getattr(kpo, "get_logs", True):
        _write_log(op, kpo, event)
    value: Any = None
    xcom_error: str | None = None
    if ended and op.do_xcom_push:
        try:
            value = _return_value(op, kpo, event)
        except AirflowException as err:
            xcom_error = str(err)
    _clean_up(op, kpo, event, delete=on_finish == "delete" or (on_finish == "delete-succeeded" and succeeded))
    code = event.get("exitCode")
    skip = _mapping.skip_codes(kpo.skip_on_exit_code or None)
    if code is not None and code in skip:
        raise AirflowSkipException(
            f"pod {where}: the main container exited with {code}, listed in skip_on_exit_code"
        )
    if event.get("timedOut"):
        raise AirflowException(f"pod {where}: {event.get('error')} (execution_timeout)")
    if event.get("error"):
        raise AirflowException(f"pod {where}: {event['error']}")
    if not succeeded:
        if value is not None:  # as KPO: the value a failed pod left is pushed all the same
            context["ti"].xcom_push(key="return_value", value=value)
        head = f"pod {where} failed"
        if code is not None:
            head += f": exit code {code}"
        details = [f"{k}: {event[k]}" for k in ("phase", "reason", "message") if event.get(k)]
        raise AirflowException("\n".join([head, *details]))
    if xcom_error is not None:
        raise AirflowException(xcom_error)
    return value if op.do_xcom_push else None


#: The most of the base container's log a resumed task reads (the server's ``limitBytes``):
#: the task log shows its beginning and says it was cut.
LOG_LIMIT_BYTES = 8 * 1024 * 1024


def _write_log(op: PodlineOperator, kpo: Any, event: dict[str, Any]) -> None:
    """The base container's log, line by line, into the task log; a failure is a warning."""
    from podline import _native

    access = op.cluster_access(kpo)
    kubeconfig = None if access.in_cluster else access.kubeconfig_path
    container = str(event.get("container") or kpo.base_container_name or "base")
    try:
        log = json.loads(
            _native.read_log(
                kubeconfig, access.context, str(event["namespace"]), str(event["pod"]), container, LOG_LIMIT_BYTES
            )
        )
    except _native.PodlineError as err:
        op.log.warning("could not read the log of pod %s/%s: %s", event["namespace"], event["pod"], err)
        return
    for line in str(log.get("text") or "").splitlines():
        op.log.info("[%s] %s", container, line)
    if log.get("truncated"):
        op.log.warning("[%s] the log is longer than %d bytes: the rest is not shown", container, LOG_LIMIT_BYTES)


def _return_value(op: PodlineOperator, kpo: Any, event: dict[str, Any]) -> Any:
    """``/airflow/xcom/return.json`` through KPO's sidecar (parsed), or without a sidecar the
    termination message (JSON), or None."""
    from podline import _native

    access = op.cluster_access(kpo)
    kubeconfig = None if access.in_cluster else access.kubeconfig_path
    try:
        xcom = json.loads(
            _native.read_xcom(kubeconfig, access.context, str(event["namespace"]), str(event["pod"]))
        )
    except _native.PodlineError as err:
        raise AirflowException(f"do_xcom_push: {err}") from err
    if xcom.get("sidecar"):
        value, source = xcom.get("value"), "/airflow/xcom/return.json"
    else:
        value, source = event.get("message"), "the termination message (/dev/termination-log)"
    if not value:
        op.log.info("do_xcom_push: the base container wrote no value (%s); the return value is None", source)
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as err:
        raise AirflowException(f"do_xcom_push: {source} is not JSON ({err}): {value[:200]!r}") from err


def _clean_up(op: PodlineOperator, kpo: Any, event: dict[str, Any], *, delete: bool) -> None:
    """Deletes the pod if ``delete`` and it still carries this task's launch id."""
    from podline import _native

    if not delete or event.get("gone"):
        return
    access = op.cluster_access(kpo)
    kubeconfig = None if access.in_cluster else access.kubeconfig_path
    grace = _grace(kpo)
    try:
        deleted = _native.delete_pod(
            kubeconfig,
            access.context,
            str(event["namespace"]),
            str(event["pod"]),
            str(event["launchId"]),
            grace,
        )
    except _native.PodlineError as err:
        op.log.warning("could not delete pod %s/%s: %s", event["namespace"], event["pod"], err)
        return
    if deleted:
        op.log.info("deleted pod %s/%s", event["namespace"], event["pod"])
