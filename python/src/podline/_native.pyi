"""Types of the native extension (crates/pyext)."""

from collections.abc import Awaitable

class PodlineError(RuntimeError): ...

def run_cli(argv: list[str]) -> int: ...
def start_pod(
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    pod_json: str,
    task_id: str | None = None,
    reattach: bool = False,
) -> str: ...
def wait_pod(
    kubeconfig: str | None,
    context: str | None,
    namespace: str,
    name: str,
    launch_id: str,
    base_container: str,
    lease_seconds: int | None = None,
    schedule_timeout: float | None = None,
    startup_timeout: float | None = None,
) -> Awaitable[str]: ...
def delete_pod(
    kubeconfig: str | None,
    context: str | None,
    namespace: str,
    name: str,
    launch_id: str,
    grace_seconds: int | None = None,
) -> bool: ...
def read_xcom(kubeconfig: str | None, context: str | None, namespace: str, name: str) -> str: ...
def read_log(
    kubeconfig: str | None,
    context: str | None,
    namespace: str,
    name: str,
    container: str,
    limit_bytes: int,
) -> str: ...
