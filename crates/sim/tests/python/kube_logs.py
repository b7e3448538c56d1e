"""The official Kubernetes Python client follows a pod's log on the sim.

The client sends `follow=True` (Python's spelling of the boolean), which kube-apiserver's
parameter codec reads as true; the sim must too. Usage: kube_logs.py KUBECONFIG. Prints "ok"
and exits 0 when the followed log is the pod's whole output.
"""

import sys
import time

from kubernetes import client, config


def main(kubeconfig: str) -> None:
    config.load_kube_config(config_file=kubeconfig)
    v1 = client.CoreV1Api()
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(
            name="py-logs",
            annotations={
                "sim.podline.io/logs": "first\nsecond\nthird",
                "sim.podline.io/duration": "600ms",
            },
        ),
        spec=client.V1PodSpec(
            restart_policy="Never",
            containers=[client.V1Container(name="main", image="busybox")],
        ),
    )
    v1.create_namespaced_pod("default", pod)
    deadline = time.monotonic() + 20
    while v1.read_namespaced_pod("py-logs", "default").status.phase == "Pending":
        assert time.monotonic() < deadline, "the pod never started"
        time.sleep(0.02)
    resp = v1.read_namespaced_pod_log(
        "py-logs", "default", follow=True, _preload_content=False
    )
    text = b"".join(resp.stream()).decode()
    assert text == "first\nsecond\nthird\n", repr(text)
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
