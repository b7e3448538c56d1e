"""``PodlineOperator``: KubernetesPodOperator's pod, run through ``podline run``.

Switch with one import::

    from podline.airflow import PodlineOperator as KubernetesPodOperator

Supports Airflow 2.11+ and 3.x, with apache-airflow-providers-cncf-kubernetes installed (its
parameters and pod construction are reused; it is imported when a task runs, not when the DAG
file is parsed).
"""

from __future__ import annotations

import inspect
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from podline import _deferrable, _kpo_surface, _logs, _mapping, _retry
from podline._binary import find_binary

try:  # Airflow 3.x: the task SDK.
    from airflow.sdk import BaseOperator
except ImportError:  # pragma: no cover - Airflow 2.11
    from airflow.models import BaseOperator  # type: ignore[no-redef,attr-defined,unused-ignore]

try:  # Airflow 3.x
    from airflow.sdk.exceptions import AirflowException, AirflowSkipException
except ImportError:  # pragma: no cover - Airflow 2.11
    from airflow.exceptions import (  # type: ignore[no-redef,assignment,attr-defined,unused-ignore]
        AirflowException,
        AirflowSkipException,
    )

__all__ = ["PodlineOperator"]

#: podline's exit codes for SIGINT / SIGTERM (the pod was deleted).
_KILLED_EXIT_CODES = (130, 143)
#: How long on_kill waits, beyond the grace period, for podline to delete the pod and exit.
_KILL_WAIT_SECONDS = 30.0


#: The installed provider's KubernetesPodOperator surface, read without importing it (see
#: podline._kpo_surface: the provider's import would cost every DAG parse about 1.4 s).
_SURFACE = _kpo_surface.surface()
_KPO_PARAMETERS = frozenset(_SURFACE.parameters)


def _init_signature() -> inspect.Signature:
    """``PodlineOperator.__init__``'s signature as Airflow sees it: every KPO keyword.

    Airflow reads an operator's ``__init__`` signature to apply ``default_args`` (only to the
    parameters it names) and to check ``partial()`` / ``expand()`` arguments, so the names
    must be KPO's; the defaults are KPO's too, applied by KPO when the task runs (None here
    only means "optional")."""
    kinds = inspect.Parameter
    params = [kinds("self", kinds.POSITIONAL_OR_KEYWORD)]
    params += [kinds(n, kinds.KEYWORD_ONLY, default=None) for n in _SURFACE.parameters]
    params.append(kinds("kwargs", kinds.VAR_KEYWORD))
    return inspect.Signature(params)


class PodlineOperator(BaseOperator):  # type: ignore[misc,unused-ignore]
    """KubernetesPodOperator's pod, run through podline: switch with one import.

    Takes every parameter of the installed provider's ``KubernetesPodOperator`` (KPO). When
    the task runs, the provider is imported, a KPO is made from the same arguments, renders its
    templates as KPO does, and builds the pod with its own ``build_pod_request_obj(context)``
    (pod template file or dict, full pod spec, volumes, secrets, env, affinity, init
    containers, ... and the connection's namespace). That pod, with the changes listed in
    :func:`podline._mapping.podline_pod` and :data:`podline._mapping.PODLINE_ADDITIONS`, is
    handed to ``podline run`` as a private file; the parameters about running it are in
    :data:`podline._mapping.BEHAVIOUR`. The provider is not imported when the DAG file is
    parsed (its parameter names are read from its source).

    What podline adds to KubernetesPodOperator:

    * create retry with full-jitter backoff on 409 Conflict / 429 / 5xx / network errors, and
      AlreadyExists adoption: a create whose response was lost finds its own pod (by a launch
      id) instead of failing or leaving an orphan;
    * exact log resume: a broken or stalled log stream reconnects from the last line, with no
      line lost or repeated;
    * the crash-proof launcher: a pod still pending or running when the task fails, times out
      or is killed is deleted (``on_finish_action="keep_pod"`` aside), a liveness Lease owns
      it so a reaper deletes the pod of a worker lost to SIGKILL, and a new try after a worker
      restart reattaches to the running pod (``reattach_on_restart``);
    * one failure report: phase, reason, every container's exit code and termination message,
      and the pod's last Warning events, as the AirflowException's message.

    ``pod_name`` and ``pod_namespace`` are pushed to XCom before the pod is created. With
    ``do_xcom_push=True`` the return value is ``/airflow/xcom/return.json`` as KPO's XCom
    sidecar serves it (``podline run`` reads it through ``pods/exec`` once the base container
    has terminated, then stops the sidecar), parsed as JSON, and pushed also when the base
    container failed, as KPO does; podline's extra: without a ``return.json``, the base
    container's termination message (``/dev/termination-log``).
    """

    template_fields: Sequence[str] = _SURFACE.template_fields
    template_fields_renderers = dict(_SURFACE.template_fields_renderers)
    template_ext: Sequence[str] = ()
    ui_color = "#d8f0e4"

    def __init__(self, **kwargs: Any) -> None:
        kpo_args = {k: kwargs.pop(k) for k in list(kwargs) if k in _KPO_PARAMETERS}
        refused = {
            k: why for k, v in kpo_args.items() if (why := _mapping.refusal(k, v)) is not None
        }
        if refused:
            details = "; ".join(f"{k}={kpo_args[k]!r}: {why}" for k, why in sorted(refused.items()))
            raise AirflowException(
                f"PodlineOperator does not support the KubernetesPodOperator parameter"
                f"{'s' if len(refused) > 1 else ''} {', '.join(sorted(refused))} ({details})"
            )
        _check_values(kpo_args)
        # KPO's parameter and BaseOperator's, with KPO's default (False; BaseOperator's is True).
        kwargs["do_xcom_push"] = bool(kpo_args.get("do_xcom_push", False))
        super().__init__(**kwargs)
        #: The KPO arguments as given (templates unrendered); the rendered template fields are
        #: this operator's attributes, as for any operator.
        self.kpo_arguments: dict[str, Any] = kpo_args
        for name in self.template_fields:
            setattr(self, name, kpo_args.get(name))
        self._kpo_instance: Any = None
        self._process: subprocess.Popen[bytes] | None = None
        self._killed = False
        self._exit_code: int | None = None
        self._skip_codes: frozenset[int] = frozenset()
        self._get_logs = True
        #: The task's reader of podline's JSON stream (logs and callbacks), set by execute.
        self._log_stream: _logs.LogStream | None = None
        self._grace: int | None = None

    __init__.__signature__ = _init_signature()  # type: ignore[attr-defined]

    # -- KubernetesPodOperator, made when the task runs -----------------------------------

    def _new_kpo(self) -> Any:
        """A KubernetesPodOperator with this task's arguments (imports the provider)."""
        kpo_class = _kpo_surface.kpo_class()
        with warnings.catch_warnings():
            # reattach_on_restart's deprecation is KPO's to give, at parse time; not per run.
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", UserWarning)
            return kpo_class(task_id=self.task_id, **self.kpo_arguments)

    def kubernetes_pod_operator(self) -> Any:
        """The KubernetesPodOperator this task's pod is built with: the one that rendered the
        templates, with this operator's (rendered) template fields laid on it."""
        kpo = self._kpo_instance
        if kpo is None:
            kpo = self._kpo_instance = self._new_kpo()
        for name in self.template_fields:
            value = getattr(self, name, None)
            if value is not None:
                setattr(kpo, name, value)
        return kpo

    def _do_render_template_fields(
        self,
        parent: Any,
        template_fields: Any,
        context: Any,
        jinja_env: Any,
        seen_oids: set[int],
    ) -> None:
        """Templates are rendered by KPO itself (its env_vars conversion and nested V1 objects),
        then copied here so Airflow shows and stores them as this task's rendered fields."""
        if parent is not self:
            super()._do_render_template_fields(parent, template_fields, context, jinja_env, seen_oids)
            return
        kpo = self._kpo_instance = self._new_kpo()
        kpo._do_render_template_fields(kpo, template_fields, context, jinja_env, seen_oids)
        for name in template_fields:
            setattr(self, name, getattr(kpo, name, None))

    def build_pod(self, context: Any) -> dict[str, Any]:
        """The pod manifest ``podline run`` is handed: KPO's ``build_pod_request_obj(context)``
        as JSON, with :func:`podline._mapping.podline_pod`'s changes."""
        from kubernetes.client import ApiClient

        from airflow.providers.cncf.kubernetes.utils.xcom_sidecar import PodDefaults

        kpo = self.kubernetes_pod_operator()
        set_name = getattr(kpo, "_set_name", None)  # KPO's execute validates the name so
        if set_name is not None:
            kpo.name = set_name(kpo.name)
        pod = kpo.build_pod_request_obj(context)
        manifest = ApiClient().sanitize_for_serialization(pod)
        try:
            return _mapping.podline_pod(
                manifest,
                base_container=str(kpo.base_container_name),
                xcom_sidecar=PodDefaults.SIDECAR_CONTAINER_NAME,
            )
        except ValueError as err:
            raise AirflowException(str(err)) from err

    def cluster_access(self, kpo: Any) -> _mapping.ClusterAccess:
        """How podline reaches the cluster: KPO's parameters first, then the connection's
        fields, as KubernetesHook.get_conn reads them."""
        hook = kpo.hook
        get_field = getattr(hook, "_get_field", None)

        def field(name: str) -> Any:
            return get_field(name) if get_field is not None and kpo.kubernetes_conn_id else None

        in_cluster = _first(kpo.in_cluster, field("in_cluster"))
        context = _first(kpo.cluster_context, field("cluster_context"))
        path = _first(kpo.config_file, field("kube_config_path"))
        inline = field("kube_config")
        insecure = _truthy(field("disable_verify_ssl"))
        if _truthy(in_cluster):
            if insecure:
                raise AirflowException(
                    f"connection {kpo.kubernetes_conn_id}: disable_verify_ssl with in_cluster is "
                    "not supported by podline (in-cluster access verifies the service account's CA)"
                )
            return _mapping.ClusterAccess(in_cluster=True)
        text: str | None = None
        if inline is not None:
            text = json.dumps(inline) if isinstance(inline, dict) else str(inline)
        if insecure:
            if text is None:
                text = _read_kubeconfig(path)
            return _mapping.ClusterAccess(kubeconfig_text=_insecure(text), context=context)
        if text is not None:
            return _mapping.ClusterAccess(kubeconfig_text=text, context=context)
        return _mapping.ClusterAccess(kubeconfig_path=path, context=context)

    @staticmethod
    def task_instance_key(context: Mapping[str, Any]) -> _mapping.TaskInstanceKey:
        """The task instance this run belongs to (for podline's reattach key)."""
        ti = context["ti"]
        map_index = getattr(ti, "map_index", -1)
        return _mapping.TaskInstanceKey(
            dag_id=str(ti.dag_id),
            task_id=str(ti.task_id),
            run_id=str(getattr(ti, "run_id", None) or context.get("run_id")),
            map_index=-1 if map_index is None else int(map_index),
            try_number=int(getattr(ti, "try_number", 1) or 1),
        )

    def run_request(self, kpo: Any, pod: Mapping[str, Any], context: Any) -> _mapping.RunRequest:
        """The ``podline run`` flags for this task (the pod itself travels as a file)."""
        on_finish = getattr(kpo.on_finish_action, "value", kpo.on_finish_action)
        try:
            startup = _mapping.seconds("startup_timeout_seconds", kpo.startup_timeout_seconds)
            schedule = _mapping.seconds("schedule_timeout_seconds", kpo.schedule_timeout_seconds)
            grace = _mapping.seconds(
                "termination_grace_period", kpo.termination_grace_period, allow_zero=True
            )
        except ValueError as err:
            raise AirflowException(str(err)) from err
        return _mapping.RunRequest(
            name=str(pod["metadata"]["name"]),
            task_id=self.task_instance_key(context).podline_task_id(),
            on_finish=_mapping.ON_FINISH[str(on_finish)],
            reattach=bool(kpo.reattach_on_restart),
            startup_timeout=startup or 120,
            schedule_timeout=schedule,
            delete_grace=grace,
            log_flags=tuple(_logs.select(kpo, pod).flags()),
            keep_for_retry=self.keep_for_retry(kpo, on_finish, context),
        )

    def keep_for_retry(self, kpo: Any, on_finish: Any, context: Any) -> int:
        """Seconds the pod outlives a lost worker, so this task's next try can reattach to it
        (:mod:`podline._retry`): only when a next try follows a failure and would reattach."""
        if not kpo.reattach_on_restart or str(on_finish) == "keep_pod":
            return 0
        keep = _retry.keep_for_retry_seconds(self, context["ti"])
        if keep:
            self.log.info(
                "a retry follows a failure of this try: if this worker is lost, the pod is kept "
                "%ss past podline's liveness Lease for the next try to reattach to it",
                keep,
            )
        return keep

    # -- running ---------------------------------------------------------------------------

    def execute(self, context: Any) -> Any:
        """Builds KPO's pod, runs it through ``podline run`` and returns its XCom value
        (JSON) when ``do_xcom_push``; raises AirflowSkipException / AirflowException as the
        result says. With ``deferrable=True`` (or ``[operators] default_deferrable``) the pod
        is created here and the task defers to the triggerer (:mod:`podline._deferrable`)."""
        if _deferrable.is_deferrable(self.kubernetes_pod_operator()):
            _deferrable.start(self, context)  # raises TaskDeferred
        pod = self.build_pod(context)
        kpo = self.kubernetes_pod_operator()
        request = self.run_request(kpo, pod, context)
        access = self.cluster_access(kpo)
        self._skip_codes = _mapping.skip_codes(kpo.skip_on_exit_code or None)
        self._get_logs = bool(kpo.get_logs)
        self._grace = request.delete_grace
        stream = self._log_stream = self._new_log_stream(kpo, pod, context)
        binary = find_binary()
        # A private directory (0700) with private files (0600), removed at the end: the pod
        # (env values) and a connection's kubeconfig (credentials) never reach a command line.
        sweep_stale_directories()
        with tempfile.TemporaryDirectory(prefix=f"{_TMP_PREFIX}{os.getpid()}-") as tmp:
            pod_file = _write_private(Path(tmp) / "pod.json", json.dumps(pod))
            kubeconfig = access.kubeconfig_path
            if access.kubeconfig_text is not None:
                kubeconfig = str(_write_private(Path(tmp) / "kubeconfig", access.kubeconfig_text))
            result_path = Path(tmp) / "result.json"
            argv = request.argv(
                binary, pod_file, result_path, kubeconfig=kubeconfig, context=access.context
            )
            self.log.info("podline: %s", " ".join(argv))
            env = _environment(access, home=tmp)
            try:
                result = self._run(argv, result_path, context, env, pod_file)
            finally:
                stream.finished(stream.pod_request)
        return self._outcome(result, context)

    def _new_log_stream(self, kpo: Any, pod: Mapping[str, Any], context: Any) -> _logs.LogStream:
        """The reader of ``podline run --log-format json`` for this task: KPO's log parameters
        and callbacks (:mod:`podline._logs`); calls ``on_pod_manifest_created`` now."""
        selection = _logs.select(kpo, pod)
        stream = _logs.LogStream(
            log=self.log,
            kpo=kpo,
            context=context,
            operator=self,
            show=selection.containers + selection.init_containers,
        )
        stream.report_missing(selection.missing, str(pod["metadata"]["name"]))
        stream.pod_request = _logs.v1_pod(pod) if stream.callbacks else None
        stream.manifest_created(stream.pod_request)
        return stream

    def _run(
        self,
        argv: list[str],
        result_path: Path,
        context: Any,
        env: dict[str, str],
        pod_file: Path | None = None,
    ) -> dict[str, Any] | None:
        self._killed = False
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        self._process = process
        assert process.stdout is not None and process.stderr is not None  # PIPE above
        # Reader threads only read; this thread logs and pushes XComs (Airflow's task logger
        # and XCom channel belong to the task's thread).
        lines: queue.Queue[tuple[str, str] | None] = queue.Queue()
        item: tuple[str, str] | None | bool
        readers = [
            threading.Thread(target=_pump, args=(process.stdout, "", lines), daemon=True),
            threading.Thread(
                target=_pump, args=(process.stderr, "[podline] ", lines), daemon=True
            ),
        ]
        for reader in readers:
            reader.start()
        announced = False
        open_streams = len(readers)
        try:
            while open_streams:
                try:
                    item = lines.get(timeout=0.05)
                except queue.Empty:
                    item = False
                if not announced:
                    announced = self._announce(result_path, context)
                    if announced and pod_file is not None:
                        # podline read the pod before naming it: its env values need not wait
                        # on disk for the task's end (nor survive a worker's SIGKILL).
                        pod_file.unlink(missing_ok=True)
                if item is None:
                    open_streams -= 1
                elif not isinstance(item, bool):
                    prefix, line = item
                    if not prefix and self._log_stream is not None:
                        self._log_stream.feed(line)
                    elif prefix or self._get_logs:
                        self.log.info("%s%s", prefix, line)
            process.wait()
        finally:
            if process.poll() is None:  # interrupted (e.g. execution_timeout): stop podline
                process.terminate()
                process.wait()
        if not announced:
            self._announce(result_path, context)
        self._exit_code = process.returncode
        doc = _read_doc(result_path)
        if doc is not None and doc.get("stage") == "finished":
            return doc
        return None

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        """``deferrable=True``: the trigger fired with the pod's outcome; cleans up and reports
        (:func:`podline._deferrable.complete`)."""
        return _deferrable.complete(self, context, event)

    def _announce(self, result_path: Path, context: Any) -> bool:
        """Pushes pod_name / pod_namespace once podline has written them."""
        doc = _read_doc(result_path)
        if doc is None or not doc.get("pod"):
            return False
        ti = context["ti"]
        ti.xcom_push(key="pod_name", value=doc["pod"])
        ti.xcom_push(key="pod_namespace", value=doc.get("namespace"))
        if doc.get("reattach"):
            self.log.info("reattaching to the running pod %s/%s", doc["namespace"], doc["pod"])
        return True

    def _outcome(self, result: dict[str, Any] | None, context: Any = None) -> Any:
        code = self._exit_code
        if self._killed or code in _KILLED_EXIT_CODES:
            raise AirflowException(
                f"the task was killed: podline stopped (exit code {code}) and deleted the pod"
            )
        if result is None:
            raise AirflowException(
                f"podline exited with code {code} without a result (see the [podline] lines "
                "above for its error)"
            )
        container = _main_container(result)
        container_code = container.get("exitCode") if container else None
        if container_code is not None and container_code in self._skip_codes:
            raise AirflowSkipException(
                f"pod {result.get('namespace')}/{result.get('pod')}: the main container exited "
                f"with {container_code}, listed in skip_on_exit_code"
            )
        if not result.get("succeeded"):
            if self.do_xcom_push and context is not None and not result.get("xcomError"):
                # As KPO's cleanup: the value the failed pod left is pushed all the same.
                try:
                    self._push_return_value(context["ti"], self._return_value(result, container))
                except AirflowException as err:
                    self.log.warning("do_xcom_push: %s", err)
            report = str(result.get("failureReport") or "").rstrip()
            pod_name = f"{result.get('namespace')}/{result.get('pod')}"
            # A pod never created (rejected, retries exhausted) has no uid: it did not fail.
            head = f"pod {pod_name} " + ("failed" if result.get("uid") else "was not created")
            if container_code is not None:
                head += f": exit code {container_code}"
            raise AirflowException(f"{head}\n{report}" if report else head)
        if not self.do_xcom_push:
            return None
        return self._return_value(result, container)

    def _return_value(self, result: Mapping[str, Any], container: Mapping[str, Any] | None) -> Any:
        """The task's return value: ``/airflow/xcom/return.json`` as KPO's sidecar served it
        (``podline run`` reads it through ``pods/exec``), parsed; without one, podline's extra,
        the base container's termination message (JSON); else None."""
        if result.get("xcomError"):
            raise AirflowException(
                f"do_xcom_push: cannot read /airflow/xcom/return.json: {result['xcomError']}"
            )
        value = result.get("xcom")
        source = "/airflow/xcom/return.json"
        if value is None:
            value = (container or {}).get("message")
            source = "the termination message"
        if not value:
            self.log.info("do_xcom_push: the base container wrote no value; the return value is None")
            return None
        try:
            return json.loads(value)
        except json.JSONDecodeError as err:
            raise AirflowException(
                f"do_xcom_push: {source} is not JSON ({err}): {value[:200]!r}"
            ) from err

    def _push_return_value(self, ti: Any, value: Any) -> None:
        """Pushes ``return_value`` (and with ``multiple_outputs`` each key of a dict), as the
        task runner does for a returned value and KPO does on a failure."""
        if value is None:
            return
        if self.multiple_outputs and isinstance(value, Mapping):
            for key, item in value.items():
                ti.xcom_push(key=str(key), value=item)
        ti.xcom_push(key="return_value", value=value)

    def on_kill(self) -> None:
        """Stops podline with SIGTERM: it deletes the pod (grace period as configured) and
        exits; waits for that, bounded."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        self._killed = True
        self.log.info("on_kill: stopping podline (pid %s); it deletes the pod", process.pid)
        process.send_signal(signal.SIGTERM)
        wait = _KILL_WAIT_SECONDS + (self._grace or 0)
        deadline = time.monotonic() + wait
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.log.warning("podline did not stop within %ss; killing it", wait)
            process.kill()


def _check_values(kpo_args: Mapping[str, Any]) -> None:
    """Parse-time checks of values podline must be able to run with (KPO checks the rest)."""
    action = kpo_args.get("on_finish_action")
    if action is not None and str(getattr(action, "value", action)) not in _mapping.ON_FINISH:
        raise AirflowException(
            f"on_finish_action={action!r}: expected one of {', '.join(sorted(_mapping.ON_FINISH))}"
        )
    try:
        for name in ("startup_timeout_seconds", "schedule_timeout_seconds"):
            _mapping.seconds(name, kpo_args.get(name))
        _mapping.seconds(
            "termination_grace_period", kpo_args.get("termination_grace_period"), allow_zero=True
        )
        _mapping.skip_codes(kpo_args.get("skip_on_exit_code"))
    except ValueError as err:
        raise AirflowException(str(err)) from err


def _environment(access: _mapping.ClusterAccess, home: str) -> dict[str, str]:
    """podline's environment: the worker's, and for ``in_cluster`` no kubeconfig at all
    (podline's order is kubeconfig first, then in-cluster: ``$KUBECONFIG`` goes and ``HOME``
    becomes an empty private directory, so no ``~/.kube/config`` is found)."""
    env = dict(os.environ)
    if access.in_cluster:
        env.pop("KUBECONFIG", None)
        env["HOME"] = home
    return env


def _first(*values: Any) -> Any:
    """The first value that is not None (KubernetesHook's order: parameter, then connection)."""
    return next((v for v in values if v is not None), None)


def _truthy(value: Any) -> bool:
    """A connection field as a bool (the UI stores booleans; JSON extras may hold strings)."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def _read_kubeconfig(path: str | None) -> str:
    """The kubeconfig podline would read: ``path``, else ``$KUBECONFIG``'s first file, else
    ``~/.kube/config``."""
    if not path:
        env = os.environ.get("KUBECONFIG", "")
        path = next((p for p in env.split(os.pathsep) if p), None) or str(
            Path.home() / ".kube" / "config"
        )
    try:
        return Path(path).read_text()
    except OSError as err:
        raise AirflowException(f"cannot read the kubeconfig {path}: {err.strerror}") from err


def _insecure(kubeconfig: str) -> str:
    """``disable_verify_ssl``: the kubeconfig with every cluster's TLS verification off
    (``insecure-skip-tls-verify``, which excludes a CA, as kubectl's loader says)."""
    import yaml

    try:
        doc = yaml.safe_load(kubeconfig)
    except yaml.YAMLError as err:
        # The message of a YAML error may quote the text: keep only where it was.
        where = getattr(err, "problem_mark", None)
        raise AirflowException(f"the connection's kubeconfig is not YAML/JSON (at {where})") from None
    if not isinstance(doc, dict):
        raise AirflowException("the connection's kubeconfig is not a kubeconfig (a mapping)")
    for entry in doc.get("clusters") or []:
        cluster = (entry or {}).get("cluster") or {}
        cluster.pop("certificate-authority", None)
        cluster.pop("certificate-authority-data", None)
        cluster["insecure-skip-tls-verify"] = True
    return json.dumps(doc)


def _write_private(path: Path, text: str) -> Path:
    """Writes ``text`` to a new file only its owner can read (0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path



#: The temporary directory of a run: ``podline-airflow-<pid of the task process>-<random>``.
_TMP_PREFIX = "podline-airflow-"


def sweep_stale_directories(parent: str | None = None) -> list[str]:
    """Removes the temporary directories (pod file, a connection's kubeconfig, result file) of
    task processes that died without cleaning up (SIGKILL, OOM: a ``with`` block cannot run
    then), and returns their paths. Only this user's directories whose process no longer exists
    are removed; a directory of a live process (or of a pid reused since) is left alone."""
    import re
    import shutil

    parent = parent or tempfile.gettempdir()
    pattern = re.compile(re.escape(_TMP_PREFIX) + r"([0-9]+)-")
    removed: list[str] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.match(entry.name)
        if not match:
            continue
        try:
            if (
                not entry.is_dir(follow_symlinks=False)
                or entry.stat(follow_symlinks=False).st_uid != os.getuid()
            ):
                continue
        except OSError:
            continue
        try:
            os.kill(int(match.group(1)), 0)
            continue  # alive (or another user's process with that pid)
        except ProcessLookupError:
            pass
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed

def _pump(stream: IO[bytes], prefix: str, lines: queue.Queue[tuple[str, str] | None]) -> None:
    """Reads `stream` line by line into `lines`, then None at end of file."""
    try:
        for raw in iter(stream.readline, b""):
            lines.put((prefix, raw.decode("utf-8", errors="replace").rstrip("\r\n")))
    finally:
        lines.put(None)


def _read_doc(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _main_container(result: Mapping[str, Any]) -> dict[str, Any] | None:
    name = result.get("mainContainer")
    containers: Collection[Any] = result.get("containers") or []
    for c in containers:
        if isinstance(c, dict) and c.get("name") == name:
            return c
    return None


def _prctl() -> Any:
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - not glibc/musl
        return None


_PRCTL = _prctl() if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL podline if the task's process dies (a worker lost
    with SIGKILL or OOM). Not SIGTERM: that would delete the pod, and the next try should
    reattach to it (the pod's activeDeadlineSeconds is the backstop if none comes)."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)
