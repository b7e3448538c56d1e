"""``PodlineTrigger``: the triggerer's half of ``PodlineOperator(deferrable=True)``.

The trigger awaits its pod's end through podline's native extension: every podline trigger of
one triggerer process that watches the same cluster and namespace shares ONE watch (and one
connection) on podline's launch-id label, resumed without a re-list after a break and re-listed
only on 410, so the API server's load does not grow with the number of deferred tasks. The end
is judged on the base container (a sidecar that never exits does not hold the task).

The trigger holds only what finds the pod again: the cluster (a kubeconfig path and context, or
the triggerer's own lookup), the namespace, the pod's name and launch id, and the base
container. A trigger re-created on another triggerer (the first one died) reattaches by those:
a pod that ended meanwhile resolves at once, and nothing is created.

Who deletes the pod before its end (KubernetesPodOperator's ``on_kill_action``):

- the task is cleared, marked failed or marked success while deferred (a user's kill): the pod
  is deleted. Airflow 3.3+ tells a trigger so by calling :meth:`PodlineTrigger.on_kill`; older
  Airflow (2.11, 3.0-3.2) only cancels the trigger and calls :meth:`PodlineTrigger.cleanup`,
  which deletes the pod only when the task has left the deferred state;
- the triggerer stops or dies (restart, rolling deploy, ``kill -9``): the pod is NOT deleted;
  the task is still deferred and its trigger re-created on a triggerer reattaches to it;
- the task's ``execution_timeout`` passes: the trigger deletes the pod itself and fires a
  timed-out event (the operator then fails the task), so a pod never outlives its timeout even
  if the worker that resumes the task never runs.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

__all__ = ["PodlineTrigger"]


def _airflow_version() -> tuple[int, int]:
    from airflow import __version__

    major, minor = __version__.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


#: Bounds of a triggerer's Lease duration (podline's launcher accepts 1 s to an hour).
LEASE_BOUNDS = (10, 3600)


def lease_seconds() -> int:
    """How long this triggerer's Lease (the owner of the pods it waits for) lives unrenewed:
    ``PODLINE_TRIGGERER_LEASE_SECONDS``, else twice Airflow's ``[triggerer]
    triggerer_health_check_threshold`` plus a minute, so that the pods of a dead triggerer are
    reaped only after Airflow re-assigned its triggers and a new triggerer had time to start and
    take the pods over. Bounded to :data:`LEASE_BOUNDS`; a bad value falls back, with a warning."""
    import logging
    import os

    low, high = LEASE_BOUNDS
    given = os.environ.get("PODLINE_TRIGGERER_LEASE_SECONDS")
    if given:
        try:
            value = int(given)
            if low <= value <= high:
                return value
        except ValueError:
            pass
        logging.getLogger(__name__).warning(
            "PODLINE_TRIGGERER_LEASE_SECONDS=%r is not a whole number from %d to %d; ignored", given, low, high
        )
    try:
        from airflow.configuration import conf

        threshold = conf.getint("triggerer", "triggerer_health_check_threshold", fallback=30)
    except Exception:  # noqa: BLE001 - no Airflow configuration: its default
        threshold = 30
    return max(low, min(high, 2 * threshold + 60))


class PodlineTrigger(BaseTrigger):  # type: ignore[misc,unused-ignore]
    """Fires once, with the pod's outcome (podline's ``Outcome``: ``succeeded``, ``exitCode``,
    ``phase``, ``reason``, ``message``, ``gone``, ``error``; ``timedOut`` at the execution
    deadline) plus what the clean-up needs."""

    def __init__(
        self,
        *,
        namespace: str,
        pod_name: str,
        launch_id: str,
        base_container: str,
        kubeconfig: str | None = None,
        cluster_context: str | None = None,
        on_kill_action: str = "delete_pod",
        execution_deadline: float | None = None,
        grace_seconds: int | None = None,
        own_pod: bool = True,
        schedule_timeout: float | None = None,
        startup_timeout: float | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call,unused-ignore]
        self.namespace = namespace
        self.pod_name = pod_name
        self.launch_id = launch_id
        self.base_container = base_container
        self.kubeconfig = kubeconfig
        self.cluster_context = cluster_context
        self.on_kill_action = on_kill_action
        self.execution_deadline = execution_deadline
        self.grace_seconds = grace_seconds
        self.own_pod = own_pod
        self.schedule_timeout = schedule_timeout
        self.startup_timeout = startup_timeout
        self._fired = False

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "namespace": self.namespace,
                "pod_name": self.pod_name,
                "launch_id": self.launch_id,
                "base_container": self.base_container,
                "kubeconfig": self.kubeconfig,
                "cluster_context": self.cluster_context,
                "on_kill_action": self.on_kill_action,
                "execution_deadline": self.execution_deadline,
                "grace_seconds": self.grace_seconds,
                "own_pod": self.own_pod,
                "schedule_timeout": self.schedule_timeout,
                "startup_timeout": self.startup_timeout,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from podline import _native

        where = {
            "namespace": self.namespace,
            "pod": self.pod_name,
            "launchId": self.launch_id,
            "container": self.base_container,
        }
        wait = _native.wait_pod(
            self.kubeconfig,
            self.cluster_context,
            self.namespace,
            self.pod_name,
            self.launch_id,
            self.base_container,
            lease_seconds=lease_seconds() if self.own_pod else None,
            schedule_timeout=self.schedule_timeout,
            startup_timeout=self.startup_timeout,
        )
        remaining = None if self.execution_deadline is None else self.execution_deadline - time.time()
        try:
            if remaining is None:
                text = await wait
            else:
                text = await asyncio.wait_for(wait, timeout=max(remaining, 0.0))
        except asyncio.TimeoutError:
            # The execution deadline: the pod must not outlive the task (delete first, then
            # fire, so that no resumed task is needed for the clean-up).
            deleted = await self._delete("the task's execution_timeout passed")
            self._fired = True
            yield TriggerEvent(  # type: ignore[no-untyped-call,unused-ignore]
                {
                    **where,
                    "succeeded": False,
                    "timedOut": True,
                    "deleted": deleted,
                    "error": "the task's execution_timeout passed while the pod ran; the pod was deleted",
                }
            )
            return
        except _native.PodlineError as err:
            self._fired = True
            yield TriggerEvent({**where, "succeeded": False, "error": str(err)})  # type: ignore[no-untyped-call,unused-ignore]
            return
        outcome = json.loads(text)
        self._fired = True
        yield TriggerEvent({**outcome, **where})  # type: ignore[no-untyped-call,unused-ignore]

    async def on_kill(self) -> None:
        """Airflow 3.3+: the task was cleared or marked while deferred (a user's kill, never a
        triggerer's shutdown): deletes the pod unless ``on_kill_action`` keeps it."""
        if not self._fired and self.on_kill_action != "keep_pod":
            await self._delete("the task was killed while deferred")

    async def cleanup(self) -> None:
        """Airflow before 3.3 (no :meth:`on_kill`): called on every exit of the trigger, a
        triggerer's shutdown included; deletes the pod only if the task has left the deferred
        state (cleared or marked), so a triggerer restart never deletes a pod."""
        if _airflow_version() >= (3, 3) or self._fired or self.on_kill_action == "keep_pod":
            return
        try:
            state = await self._task_state()
        except Exception as err:  # noqa: BLE001 - unknown state: keep the pod, say why
            self.log.warning(
                "pod %s/%s kept: the task's state could not be read (%s)", self.namespace, self.pod_name, err
            )
            return
        if state == "deferred":
            return  # a triggerer's shutdown or a move: the trigger will be re-created
        await self._delete(f"the task left the deferred state ({state})")

    async def _task_state(self) -> str | None:
        """The task instance's state now, from the metadata DB (2.x) or the execution API."""
        ti = getattr(self, "task_instance", None)
        if ti is None:
            raise RuntimeError("the triggerer gave the trigger no task instance")
        if _airflow_version() >= (3, 0):
            from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

            def read() -> Any:
                states = RuntimeTaskInstance.get_task_states(
                    dag_id=ti.dag_id, task_ids=[ti.task_id], run_ids=[ti.run_id], map_index=ti.map_index
                )
                key = f"{ti.task_id}_{ti.map_index}" if ti.map_index >= 0 else ti.task_id
                return states[ti.run_id][key]

            found = await asyncio.to_thread(read)
        else:
            from airflow.models.taskinstance import TaskInstance
            from airflow.utils.session import create_session

            def read() -> Any:
                with create_session() as session:
                    row = (
                        session.query(TaskInstance.state)
                        .filter(
                            TaskInstance.dag_id == ti.dag_id,
                            TaskInstance.task_id == ti.task_id,
                            TaskInstance.run_id == ti.run_id,
                            TaskInstance.map_index == ti.map_index,
                        )
                        .one_or_none()
                    )
                    return None if row is None else row[0]

            found = await asyncio.to_thread(read)
        return None if found is None else str(getattr(found, "value", found))

    async def _delete(self, why: str) -> bool:
        """Deletes the pod if it still carries this task's launch id (never another's)."""
        from podline import _native

        try:
            deleted = await asyncio.to_thread(
                _native.delete_pod,
                self.kubeconfig,
                self.cluster_context,
                self.namespace,
                self.pod_name,
                self.launch_id,
                self.grace_seconds,
            )
        except _native.PodlineError as err:
            self.log.warning("could not delete pod %s/%s (%s): %s", self.namespace, self.pod_name, why, err)
            return False
        if deleted:
            self.log.info("deleted pod %s/%s: %s", self.namespace, self.pod_name, why)
        return bool(deleted)
