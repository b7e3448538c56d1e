"""KubernetesPodOperator's log parameters and callbacks, on ``podline run``'s JSON stream.

``podline run --log-format json`` writes one JSON object a line on its stdout: a container's
log line (``{"container": .., "line": ..}``) or a lifecycle event of the pod (``{"event": ..,
"pod": {..}}``: created, reattached, started, completed, teardown, cleanup). Following the logs
(which containers, init containers first, each resumed exactly after a cut stream) is podline's
job; this module only maps KPO's parameters to its flags (:func:`log_flags`), formats each line
as KPO's pod manager does (:meth:`LogStream.format`), and calls KPO's callbacks at the points
KPO calls them (:class:`LogStream`).

Pure Python: the provider is only touched through the objects handed in (the KPO instance,
its callbacks), so the mapping is tested without Airflow.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: KPO's XCom sidecar, which ``container_logs=True`` leaves out (the provider's
#: ``PodManager.get_container_names``).
XCOM_SIDECAR = "airflow-xcom-sidecar"


def _names(requested: Any, actual: Sequence[str]) -> tuple[list[str], list[str]]:
    """KPO's reading of ``container_logs`` / ``init_container_logs`` (``PodManager.
    _reconcile_requested_log_containers``): True is every container, a string one, an
    iterable those; returns (the names the pod has, in the pod's order for True, the names it
    does not)."""
    if requested is None or requested is False:
        return [], []
    if requested is True:
        return list(actual), []
    wanted = [requested] if isinstance(requested, str) else [str(n) for n in requested]
    return [n for n in wanted if n in actual], [n for n in wanted if n not in actual]


@dataclass
class LogSelection:
    """Which containers' logs a task shows, read from KPO's parameters and the pod."""

    containers: list[str] = field(default_factory=list)
    init_containers: list[str] = field(default_factory=list)
    #: Requested names the pod does not have (KPO logs an error for each and goes on).
    missing: list[str] = field(default_factory=list)

    def flags(self) -> list[str]:
        """``podline run``'s flags for this selection (JSON stream included)."""
        argv = ["--log-format", "json"]
        for name in self.containers:
            argv += ["--logs-container", name]
        for name in self.init_containers:
            argv += ["--init-logs-container", name]
        return argv


def select(kpo: Any, pod: Mapping[str, Any]) -> LogSelection:
    """The containers whose logs KPO would show for ``pod`` (its manifest): ``container_logs``
    (KPO's default: the base container) when ``get_logs``, and ``init_container_logs``."""
    spec = pod.get("spec") or {}
    regular = [str(c.get("name")) for c in spec.get("containers") or []]
    init = [str(c.get("name")) for c in spec.get("initContainers") or []]
    out = LogSelection()
    if getattr(kpo, "get_logs", True):
        requested = getattr(kpo, "container_logs", None)
        if requested is None:
            requested = getattr(kpo, "base_container_name", None) or regular[:1]
        visible = [n for n in regular if n != XCOM_SIDECAR]
        out.containers, missing = _names(requested, visible)
        out.missing += missing
    init_requested = getattr(kpo, "init_container_logs", None)
    if init_requested:
        out.init_containers, missing = _names(init_requested, init)
        out.missing += missing
    return out


def _level(message: str) -> int:
    """The logging level KPO logs a pod's line at (its ``_parse_log_level``, from the line's
    prefix such as ``ERROR:``), INFO where the installed provider has no such function."""
    try:
        from airflow.providers.cncf.kubernetes.utils import pod_manager
    except ImportError:  # pragma: no cover - tests without the provider
        return logging.INFO
    parse = getattr(pod_manager, "_parse_log_level", None)
    return int(parse(message)) if parse is not None else logging.INFO


def _is_group_marker(message: str) -> bool:
    """Airflow's log group markers (``::group::``), which KPO prints as they are."""
    try:
        from airflow.providers.cncf.kubernetes.utils.pod_manager import is_log_group_marker
    except ImportError:
        return False
    return bool(is_log_group_marker(message))


def v1_pod(doc: Mapping[str, Any] | None) -> Any:
    """A pod's JSON as the kubernetes client's ``V1Pod`` (the provider's own deserialization,
    the object KPO hands its callbacks)."""
    if doc is None:
        return None
    from airflow.providers.cncf.kubernetes.pod_generator import PodGenerator

    return PodGenerator.deserialize_model_dict(dict(doc))


class LogStream:
    """Reads ``podline run``'s JSON stream for one task: logs each container line as KPO does
    and calls KPO's callbacks at KPO's points. Runs on the task's thread (Airflow's logger and
    the callbacks belong to it)."""

    def __init__(
        self,
        *,
        log: logging.Logger | Any,
        kpo: Any,
        context: Any,
        operator: Any,
        show: Iterable[str] = (),
    ) -> None:
        self.log = log
        self.kpo = kpo
        self.context = context
        self.operator = operator
        #: The containers whose lines reach the task log (the others are podline's extra).
        self.show = set(show)
        self.prefix = bool(getattr(kpo, "container_name_log_prefix_enabled", True))
        self.formatter: Callable[[str, str], str] | None = getattr(kpo, "log_formatter", None)
        self.callbacks: list[Any] = list(getattr(kpo, "callbacks", None) or [])
        #: The pod as the last lifecycle event had it (a ``V1Pod``), for on_pod_cleanup.
        self.pod: Any = None
        #: KPO's pod request as a ``V1Pod`` (set by the operator when there are callbacks).
        self.pod_request: Any = None

    def format(self, container: str, message: str) -> str:
        """The line as KPO logs it: ``log_formatter(container, message)`` if given, else
        ``[container] message`` with the prefix enabled (KPO's default), else the message."""
        if self.formatter is not None:
            return str(self.formatter(container, message))
        return f"[{container}] {message}" if self.prefix else message

    def feed(self, raw: str) -> None:
        """One line of podline's stdout."""
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            # Not podline's JSON (it writes nothing else there): shown as is.
            self.log.info("%s", raw)
            return
        if "event" in doc:
            self._event(str(doc["event"]), doc.get("pod"))
            return
        container = str(doc.get("container") or "")
        message = str(doc.get("line") or "")
        if container not in self.show:
            return
        if self.callbacks:
            self._call(
                "progress_callback",
                line=message,
                container_name=container,
                timestamp=None,
                pod=self.pod,
            )
        if _is_group_marker(message):
            print(message)
            return
        self.log.log(_level(message), "%s", self.format(container, message))

    # -- callbacks -------------------------------------------------------------------------

    def _client(self) -> Any:
        """KPO's ``client`` (its first use calls ``on_sync_client_creation``, as in KPO)."""
        return self.kpo.client

    def _call(self, hook: str, **kwargs: Any) -> None:
        from airflow.providers.cncf.kubernetes.callbacks import ExecutionMode

        client = self._client()
        for callback in self.callbacks:
            method = getattr(callback, hook, None)
            if method is None:
                continue
            args = dict(kwargs, client=client, mode=ExecutionMode.SYNC)
            if hook != "progress_callback":
                args.update(context=self.context, operator=self.kpo)
            method(**args)

    def manifest_created(self, pod_request: Any) -> None:
        """Before podline starts: ``on_pod_manifest_created`` with KPO's V1Pod."""
        if self.callbacks:
            self._call("on_pod_manifest_created", pod_request=pod_request)

    def _event(self, event: str, pod: Mapping[str, Any] | None) -> None:
        if not self.callbacks:
            return
        v1 = v1_pod(pod) if pod is not None else None
        if v1 is not None:
            self.pod = v1
        if event in ("created", "reattached"):
            self._call("on_pod_creation", pod=v1)
        elif event == "started":
            self._call("on_pod_starting", pod=v1)
        elif event == "completed":
            # KPO calls both once the base container completed (execute_sync).
            self._call("on_pod_completion", pod=v1)
            self._call("on_pod_teardown", pod=v1)

    def finished(self, pod_request: Any) -> None:
        """After podline exits, whatever happened: ``on_pod_cleanup`` (KPO calls it in its
        ``finally``) with the last pod seen, else the request."""
        if self.callbacks:
            self._call("on_pod_cleanup", pod=self.pod if self.pod is not None else pod_request)

    def report_missing(self, missing: Iterable[str], pod_name: str) -> None:
        """KPO's error for each requested container the pod does not have."""
        for name in missing:
            self.log.error(
                "container %s whose logs were requested not found in the pod %s", name, pod_name
            )
