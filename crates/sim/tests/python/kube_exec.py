"""The official Kubernetes Python client execs into a pod of a `--exec` sim through `stream()`.

`stream(connect_get_namespaced_pod_exec, ...)` offers `v5.channel.k8s.io,v4.channel.k8s.io`
over WebSocket. Checked: the preloaded output of a command, stdin written to a command that
reads it, and the exit code read from the error channel's Status. Usage: kube_exec.py
KUBECONFIG. Prints "ok" and exits 0 when all hold.
"""

import sys
import time

from kubernetes import client, config
from kubernetes.stream import stream


def main(kubeconfig: str) -> None:
    config.load_kube_config(config_file=kubeconfig)
    v1 = client.CoreV1Api()
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="py-exec"),
        spec=client.V1PodSpec(
            restart_policy="Never",
            containers=[
                client.V1Container(
                    name="main",
                    image="busybox",
                    command=["sleep", "60"],
                    env=[client.V1EnvVar(name="XCOM", value="from-env")],
                )
            ],
        ),
    )
    v1.create_namespaced_pod("default", pod)
    deadline = time.monotonic() + 20
    while v1.read_namespaced_pod("py-exec", "default").status.phase != "Running":
        assert time.monotonic() < deadline, "the pod never started"
        time.sleep(0.02)

    out = stream(
        v1.connect_get_namespaced_pod_exec,
        "py-exec",
        "default",
        command=["sh", "-c", "echo $XCOM"],
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
    )
    assert out == "from-env\n", repr(out)

    ws = stream(
        v1.connect_get_namespaced_pod_exec,
        "py-exec",
        "default",
        command=["sh", "-c", "read line; echo got $line; exit 4"],
        stderr=True,
        stdin=True,
        stdout=True,
        tty=False,
        _preload_content=False,
    )
    ws.write_stdin("abc\n")
    ws.run_forever(timeout=20)
    stdout = ws.read_stdout()
    assert stdout == "got abc\n", repr(stdout)
    assert ws.returncode == 4, ws.returncode
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
