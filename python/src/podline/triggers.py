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
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

__all__ = ["PodlineTrigger"]


class PodlineTrigger(BaseTrigger):  # type: ignore[misc,unused-ignore]
    """Fires once, with the pod's outcome (podline's ``Outcome``: ``succeeded``, ``exitCode``,
    ``phase``, ``reason``, ``message``, ``gone``, ``error``) plus what the clean-up needs."""

    def __init__(
        self,
        *,
        namespace: str,
        pod_name: str,
        launch_id: str,
        base_container: str,
        kubeconfig: str | None = None,
        cluster_context: str | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call,unused-ignore]
        self.namespace = namespace
        self.pod_name = pod_name
        self.launch_id = launch_id
        self.base_container = base_container
        self.kubeconfig = kubeconfig
        self.cluster_context = cluster_context

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
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from podline import _native

        where = {
            "namespace": self.namespace,
            "pod": self.pod_name,
            "launchId": self.launch_id,
        }
        try:
            text = await _native.wait_pod(
                self.kubeconfig,
                self.cluster_context,
                self.namespace,
                self.pod_name,
                self.launch_id,
                self.base_container,
            )
        except _native.PodlineError as err:
            yield TriggerEvent({**where, "succeeded": False, "error": str(err)})  # type: ignore[no-untyped-call,unused-ignore]
            return
        outcome = json.loads(text)
        yield TriggerEvent({**outcome, **where})  # type: ignore[no-untyped-call,unused-ignore]
