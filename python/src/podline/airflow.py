"""``PodlineOperator``: KubernetesPodOperator's common uses, run through ``podline run``.

Switch with one import::

    from podline.airflow import PodlineOperator as KubernetesPodOperator

Supports Airflow 2.10+ and 3.x.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection, Container, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from podline import _mapping
from podline._binary import find_binary

try:  # Airflow 3.x: the task SDK.
    from airflow.sdk import BaseOperator
except ImportError:  # pragma: no cover - Airflow 2.10
    from airflow.models import BaseOperator  # type: ignore[no-redef,attr-defined,unused-ignore]

try:  # Airflow 3.x
    from airflow.sdk.exceptions import AirflowException, AirflowSkipException
except ImportError:  # pragma: no cover - Airflow 2.10
    from airflow.exceptions import (  # type: ignore[no-redef,assignment,attr-defined,unused-ignore]
        AirflowException,
        AirflowSkipException,
    )

__all__ = ["PodlineOperator"]

#: podline's exit codes for SIGINT / SIGTERM (the pod was deleted).
_KILLED_EXIT_CODES = (130, 143)
#: How long on_kill waits, beyond the grace period, for podline to delete the pod and exit.
_KILL_WAIT_SECONDS = 30.0


class PodlineOperator(BaseOperator):  # type: ignore[misc,unused-ignore]
    """Run a task as a Kubernetes pod through podline, a drop-in for KubernetesPodOperator's
    common uses (same parameter names and defaults where the meaning is the same).

    What it adds to KubernetesPodOperator, all of it podline's:

    * create retry with full-jitter backoff on 409 Conflict / 429 / 5xx / network errors, and
      AlreadyExists adoption: a create whose response was lost finds its own pod (by a launch
      id) instead of failing or leaving an orphan;
    * exact log resume: a broken or stalled log stream reconnects from the last line, with no
      line lost or repeated;
    * the crash-proof launcher: a pod still pending or running when the task fails, times out
      or is killed is deleted (``on_finish_action="keep_pod"`` aside), the server's
      ``activeDeadlineSeconds`` backs that up, and a new try after a worker restart reattaches
      to the running pod (``reattach_on_restart``) instead of starting a second one;
    * one failure report: phase, reason, every container's exit code and termination message,
      and the pod's last Warning events, as the AirflowException's message.

    The task's process runs ``podline run`` and waits for it; container log lines go into the
    task log as they come. ``pod_name`` and ``pod_namespace`` are pushed to XCom before the pod
    is created. With ``do_xcom_push=True`` the return value is the main container's
    termination message (what it wrote to ``/dev/termination-log``), parsed as JSON: there is
    no sidecar. Parameters of KubernetesPodOperator that it does not support are refused by
    name when the DAG is parsed, with what to do instead (most go into ``pod_template_file``).

    :param image: image of the main container (templated).
    :param cmds: the container's command (entrypoint); templated.
    :param arguments: the command's arguments; templated. Without ``cmds`` they become the
        container's ``args`` and the image's entrypoint runs.
    :param namespace: namespace of the pod (default: the kubeconfig context's, else
        ``default``); templated.
    :param name: base pod name (default: the task id), sanitised like KubernetesPodOperator's;
        templated.
    :param random_name_suffix: add a random 8-character suffix to ``name`` (default True).
    :param env_vars: a dict or a list of ``V1EnvVar`` with literal values; templated.
    :param labels: extra pod labels; templated.
    :param annotations: pod annotations; templated.
    :param get_logs: copy the main container's log lines into the task log (default True).
    :param on_finish_action: ``delete_pod`` (default), ``delete_succeeded_pod`` or
        ``keep_pod``; ``delete_active_pod`` is accepted and means ``delete_pod`` (podline
        always deletes a pod still pending or running at the end, unless ``keep_pod``).
    :param reattach_on_restart: a new try follows the still-running pod of an earlier try of
        this task instance instead of creating a second one (default True).
    :param startup_timeout_seconds: limit for the containers to start once the pod is
        scheduled (default 120).
    :param schedule_timeout_seconds: limit for the pod to be scheduled (default: the startup
        timeout).
    :param container_resources: ``V1ResourceRequirements`` or ``{"requests": ..., "limits":
        ...}`` of the main container; templated.
    :param node_selector: node selector; templated.
    :param service_account_name: the pod's service account; templated.
    :param pod_template_file: a pod manifest (YAML/JSON) the parameters are laid over; its
        first container is the main one; templated.
    :param config_file: kubeconfig path (default ``$KUBECONFIG``, then ``~/.kube/config``,
        then in-cluster); templated.
    :param cluster_context: kubeconfig context; templated.
    :param in_cluster: True: use the pod's service account only (no kubeconfig); False or
        None: kubeconfig first, then in-cluster.
    :param active_deadline_seconds: the server stops the pod after this long.
    :param skip_on_exit_code: exit code(s) of the main container that mark the task skipped.
    :param do_xcom_push: push the termination message (JSON) as the return value (default
        False, as KubernetesPodOperator).
    :param termination_grace_period: the pod's ``terminationGracePeriodSeconds`` and the grace
        period of podline's delete (at the end and on kill).
    """

    template_fields: Sequence[str] = (
        "image",
        "cmds",
        "arguments",
        "namespace",
        "name",
        "env_vars",
        "labels",
        "annotations",
        "container_resources",
        "node_selector",
        "service_account_name",
        "pod_template_file",
        "config_file",
        "cluster_context",
    )
    template_ext: Sequence[str] = ()
    ui_color = "#d8f0e4"

    def __init__(
        self,
        *,
        image: str | None = None,
        cmds: list[str] | None = None,
        arguments: list[str] | None = None,
        namespace: str | None = None,
        name: str | None = None,
        random_name_suffix: bool = True,
        env_vars: Any = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        get_logs: bool = True,
        on_finish_action: str = "delete_pod",
        reattach_on_restart: bool = True,
        startup_timeout_seconds: int = 120,
        schedule_timeout_seconds: int | None = None,
        container_resources: Any = None,
        node_selector: Mapping[str, str] | None = None,
        service_account_name: str | None = None,
        pod_template_file: str | None = None,
        config_file: str | None = None,
        cluster_context: str | None = None,
        in_cluster: bool | None = None,
        active_deadline_seconds: int | None = None,
        skip_on_exit_code: int | Container[int] | None = None,
        do_xcom_push: bool = False,
        termination_grace_period: int | None = None,
        **kwargs: Any,
    ) -> None:
        refused = sorted(k for k in kwargs if k in _mapping.UNSUPPORTED)
        if refused:
            details = "; ".join(f"{k}: {_mapping.UNSUPPORTED[k]}" for k in refused)
            raise AirflowException(
                f"PodlineOperator does not support the KubernetesPodOperator parameter"
                f"{'s' if len(refused) > 1 else ''} {', '.join(refused)} ({details})"
            )
        super().__init__(do_xcom_push=do_xcom_push, **kwargs)
        if on_finish_action not in _mapping.ON_FINISH:
            raise AirflowException(
                f"on_finish_action={on_finish_action!r}: expected one of "
                f"{', '.join(sorted(_mapping.ON_FINISH))}"
            )
        if in_cluster and config_file:
            raise AirflowException(
                "in_cluster=True and config_file exclude each other: in-cluster uses the pod's "
                "service account, not a kubeconfig"
            )
        try:
            self.startup_timeout_seconds = _mapping.seconds(
                "startup_timeout_seconds", startup_timeout_seconds
            )
            self.schedule_timeout_seconds = _mapping.seconds(
                "schedule_timeout_seconds", schedule_timeout_seconds
            )
            self.active_deadline_seconds = _mapping.seconds(
                "active_deadline_seconds", active_deadline_seconds
            )
            self.termination_grace_period = _mapping.seconds(
                "termination_grace_period", termination_grace_period, allow_zero=True
            )
            self.skip_on_exit_code = _mapping.skip_codes(skip_on_exit_code)
        except ValueError as err:
            raise AirflowException(str(err)) from err
        self.image = image
        self.cmds = list(cmds or [])
        self.arguments = list(arguments or [])
        self.namespace = namespace
        self.name = name
        self.random_name_suffix = random_name_suffix
        self.env_vars = env_vars
        self.labels = dict(labels or {})
        self.annotations = dict(annotations or {})
        self.get_logs = get_logs
        self.on_finish_action = on_finish_action
        self.reattach_on_restart = reattach_on_restart
        self.container_resources = container_resources
        self.node_selector = dict(node_selector or {})
        self.service_account_name = service_account_name
        self.pod_template_file = pod_template_file
        self.config_file = config_file
        self.cluster_context = cluster_context
        self.in_cluster = in_cluster
        self._process: subprocess.Popen[bytes] | None = None
        self._killed = False
        self._exit_code: int | None = None

    # -- building the command --------------------------------------------------------------

    @staticmethod
    def task_instance_key(context: Mapping[str, Any]) -> _mapping.TaskInstanceKey:
        """The task instance this run belongs to (for labels and reattach)."""
        ti = context["ti"]
        map_index = getattr(ti, "map_index", -1)
        return _mapping.TaskInstanceKey(
            dag_id=str(ti.dag_id),
            task_id=str(ti.task_id),
            run_id=str(getattr(ti, "run_id", None) or context.get("run_id")),
            map_index=-1 if map_index is None else int(map_index),
            try_number=int(getattr(ti, "try_number", 1) or 1),
        )

    def run_request(self, key: _mapping.TaskInstanceKey) -> _mapping.RunRequest:
        """The ``podline run`` this task instance needs (parameters already rendered)."""
        try:
            env = _mapping.env_pairs(self.env_vars)
            resources = _mapping.resource_flags(self.container_resources)
        except ValueError as err:
            raise AirflowException(str(err)) from err
        name = self.name
        if name is None:
            # KubernetesPodOperator's order: the parameter, the template's name, the task id.
            metadata = (self._user_template() or {}).get("metadata") or {}
            name = metadata.get("name") or key.task_id
        return _mapping.RunRequest(
            image=self.image,
            cmds=[str(c) for c in self.cmds],
            arguments=[str(a) for a in self.arguments],
            namespace=self.namespace,
            name=_mapping.sanitize_pod_name(name) if name else None,
            random_name_suffix=self.random_name_suffix,
            env=env,
            labels={**key.labels(), **{str(k): str(v) for k, v in self.labels.items()}},
            annotations={str(k): str(v) for k, v in self.annotations.items()},
            on_finish=_mapping.ON_FINISH[self.on_finish_action],
            task_id=key.podline_task_id(),
            reattach=self.reattach_on_restart,
            startup_timeout=self.startup_timeout_seconds or 120,
            schedule_timeout=self.schedule_timeout_seconds,
            resources=resources,
            node_selector={str(k): str(v) for k, v in self.node_selector.items()},
            service_account=self.service_account_name,
            config_file=self.config_file,
            cluster_context=self.cluster_context,
            active_deadline=self.active_deadline_seconds,
            termination_grace_period=self.termination_grace_period,
        )

    def _template(self) -> dict[str, Any]:
        return _mapping.pod_template(
            self._user_template(),
            arguments_only=self.arguments if not self.cmds else None,
            termination_grace_period=self.termination_grace_period,
        )

    def _user_template(self) -> dict[str, Any] | None:
        user: dict[str, Any] | None = None
        if self.pod_template_file:
            import yaml

            try:
                text = Path(self.pod_template_file).read_text()
                user = yaml.safe_load(text)
            except (OSError, yaml.YAMLError) as err:
                raise AirflowException(
                    f"pod_template_file {self.pod_template_file}: cannot read it as YAML/JSON: "
                    f"{err}"
                ) from err
            if not isinstance(user, dict):
                raise AirflowException(
                    f"pod_template_file {self.pod_template_file}: expected a Pod manifest "
                    "(a mapping)"
                )
        return user

    def _environment(self, home: str) -> dict[str, str]:
        env = dict(os.environ)
        if self.in_cluster:
            # podline's order is kubeconfig first, then in-cluster: hide every kubeconfig.
            env.pop("KUBECONFIG", None)
            env["HOME"] = home
        return env

    # -- running ---------------------------------------------------------------------------

    def execute(self, context: Any) -> Any:
        """Runs the pod through ``podline run`` and returns its termination message (JSON) when
        ``do_xcom_push``; raises AirflowSkipException / AirflowException as the result says."""
        key = self.task_instance_key(context)
        request = self.run_request(key)
        binary = find_binary()
        sweep_stale_directories()
        with tempfile.TemporaryDirectory(prefix=f"{_TMP_PREFIX}{os.getpid()}-") as tmp:
            template = Path(tmp) / "pod.json"
            # The env values are in the template, not on podline's command line; the file is
            # the owner's only (as is the directory).
            fd = os.open(template, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(json.dumps(request.with_env(self._template())))
            result_path = Path(tmp) / "result.json"
            argv = request.argv(binary, template, result_path)
            self.log.info("podline: %s", " ".join(_redact(argv)))
            result = self._run(argv, result_path, context, home=tmp)
        return self._outcome(result)

    def _run(
        self, argv: list[str], result_path: Path, context: Any, home: str
    ) -> dict[str, Any] | None:
        self._killed = False
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self._environment(home),
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
                if item is None:
                    open_streams -= 1
                elif not isinstance(item, bool):
                    prefix, line = item
                    if prefix or self.get_logs:
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

    def _outcome(self, result: dict[str, Any] | None) -> Any:
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
        if container_code is not None and container_code in self.skip_on_exit_code:
            raise AirflowSkipException(
                f"pod {result.get('namespace')}/{result.get('pod')}: the main container exited "
                f"with {container_code}, listed in skip_on_exit_code"
            )
        if not result.get("succeeded"):
            report = str(result.get("failureReport") or "").rstrip()
            pod = f"{result.get('namespace')}/{result.get('pod')}"
            # A pod never created (rejected, retries exhausted) has no uid: it did not fail.
            head = f"pod {pod} failed" if result.get("uid") else f"pod {pod} was not created"
            if container_code is not None:
                head += f": exit code {container_code}"
            raise AirflowException(f"{head}\n{report}" if report else head)
        if not self.do_xcom_push:
            return None
        message = (container or {}).get("message")
        if not message:
            self.log.warning(
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

    def on_kill(self) -> None:
        """Stops podline with SIGTERM: it deletes the pod (grace period as configured) and
        exits; waits for that, bounded."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        self._killed = True
        self.log.info("on_kill: stopping podline (pid %s); it deletes the pod", process.pid)
        process.send_signal(signal.SIGTERM)
        wait = _KILL_WAIT_SECONDS + (self.termination_grace_period or 0)
        deadline = time.monotonic() + wait
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.log.warning("podline did not stop within %ss; killing it", wait)
            process.kill()


#: The temporary directory of a run: ``podline-airflow-<pid of the task process>-<random>``.
_TMP_PREFIX = "podline-airflow-"


def sweep_stale_directories(parent: str | None = None) -> list[str]:
    """Removes the temporary directories (pod template with env values, result file) of task
    processes that died without cleaning up (SIGKILL, OOM: a ``with`` block cannot run then),
    and returns their paths. Only this user's directories whose process no longer exists are
    removed; a directory of a live process (or of a pid reused since) is left alone."""
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
            if not entry.is_dir(follow_symlinks=False) or entry.stat(
                follow_symlinks=False
            ).st_uid != os.getuid():
                continue
        except OSError:
            continue
        pid = int(match.group(1))
        try:
            os.kill(pid, 0)
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


def _redact(argv: list[str]) -> list[str]:
    """The command line for the log, with ``--env`` values hidden (they may be secrets)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(arg.split("=", 1)[0] + "=***")
            hide_next = False
        else:
            out.append(arg)
            hide_next = arg == "--env"
    return out


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
