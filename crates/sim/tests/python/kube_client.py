"""The official Kubernetes Python client against the sim: list, create, get, watch, delete.

Usage: kube_client.py KUBECONFIG. Prints "ok" and exits 0 when every step worked.
"""

import sys

from kubernetes import client, config, watch


def main(kubeconfig: str) -> None:
    config.load_kube_config(config_file=kubeconfig)
    v1 = client.CoreV1Api()
    before = v1.list_namespaced_pod("default")
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="from-python", labels={"app": "py"}),
        spec=client.V1PodSpec(
            restart_policy="Never",
            containers=[client.V1Container(name="main", image="busybox")],
        ),
    )
    v1.create_namespaced_pod("default", pod)
    got = v1.read_namespaced_pod("from-python", "default")
    assert got.metadata.labels == {"app": "py"}, got.metadata.labels
    seen = False
    w = watch.Watch()
    for event in w.stream(
        v1.list_namespaced_pod,
        "default",
        label_selector="app=py",
        resource_version=before.metadata.resource_version,
        timeout_seconds=10,
    ):
        if event["object"].metadata.name == "from-python":
            seen = True
            w.stop()
    assert seen, "the watch never showed the new pod"
    v1.delete_namespaced_pod("from-python", "default")
    names = [p.metadata.name for p in v1.list_namespaced_pod("default").items]
    assert "from-python" not in names, names
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
