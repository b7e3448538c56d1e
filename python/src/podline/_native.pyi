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
) -> Awaitable[str]: ...
def delete_pod(
    kubeconfig: str | None,
    context: str | None,
    namespace: str,
    name: str,
    launch_id: str,
    grace_seconds: int | None = None,
) -> bool: ...
