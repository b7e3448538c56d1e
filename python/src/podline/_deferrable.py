"""``PodlineOperator(deferrable=True)``: the worker's half (:func:`start`: create the pod with
podline's create guarantees, then defer) and the resumed task's (:func:`complete`: clean up,
then report). The waiting is :class:`podline.triggers.PodlineTrigger`'s, in the triggerer.

Kept apart from :mod:`podline.airflow` (the synchronous path runs ``podline run``); both build
the same pod from KubernetesPodOperator's arguments.
"""

from __future__ import annotations

import json
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
    op.defer(
        trigger=PodlineTrigger(
            namespace=started["namespace"],
            pod_name=started["name"],
            launch_id=started["launchId"],
            base_container=started["mainContainer"],
            kubeconfig=kubeconfig,
            cluster_context=access.context,
        ),
        method_name=COMPLETE_METHOD,
    )


def complete(op: PodlineOperator, context: Any, event: dict[str, Any]) -> Any:
    """Cleans the pod up as ``on_finish_action`` says, then reports the outcome: the return
    value (``do_xcom_push``: the base container's termination message, JSON), a skip
    (``skip_on_exit_code``) or an AirflowException naming the exit code."""
    kpo = op.kubernetes_pod_operator()
    on_finish = _mapping.ON_FINISH[str(getattr(kpo.on_finish_action, "value", kpo.on_finish_action))]
    succeeded = bool(event.get("succeeded"))
    where = f"{event.get('namespace')}/{event.get('pod')}"
    _clean_up(op, kpo, event, delete=on_finish == "delete" or (on_finish == "delete-succeeded" and succeeded))
    code = event.get("exitCode")
    skip = _mapping.skip_codes(kpo.skip_on_exit_code or None)
    if code is not None and code in skip:
        raise AirflowSkipException(
            f"pod {where}: the main container exited with {code}, listed in skip_on_exit_code"
        )
    if event.get("error"):
        raise AirflowException(f"pod {where}: {event['error']}")
    if not succeeded:
        head = f"pod {where} failed"
        if code is not None:
            head += f": exit code {code}"
        details = [f"{k}: {event[k]}" for k in ("phase", "reason", "message") if event.get(k)]
        raise AirflowException("\n".join([head, *details]))
    if not op.do_xcom_push:
        return None
    message = event.get("message")
    if not message:
        op.log.warning(
            "do_xcom_push: the main container wrote no termination message "
            "(/dev/termination-log); the return value is None"
        )
        return None
    try:
        return json.loads(message)
    except json.JSONDecodeError as err:
        raise AirflowException(
            f"do_xcom_push: the termination message is not JSON ({err}): {message[:200]!r}"
        ) from err


def _clean_up(op: PodlineOperator, kpo: Any, event: dict[str, Any], *, delete: bool) -> None:
    """Deletes the pod if ``delete`` and it still carries this task's launch id."""
    from podline import _native

    if not delete or event.get("gone"):
        return
    access = op.cluster_access(kpo)
    kubeconfig = None if access.in_cluster else access.kubeconfig_path
    try:
        grace = _mapping.seconds(
            "termination_grace_period", kpo.termination_grace_period, allow_zero=True
        )
    except ValueError:
        grace = None
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
