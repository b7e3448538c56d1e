"""The official Kubernetes Python client doing server-side apply of a pod against the sim:
create by apply, a change applied by the same field manager, a conflict with another manager
without force (409 with kube's message), then the same apply with force (200).

Usage: kube_ssa.py KUBECONFIG. Prints "ok" and exits 0 when every step worked.
"""

import json
import sys

from kubernetes import client, config
from kubernetes.client.rest import ApiException

APPLY = "application/apply-patch+yaml"


def manifest(image: str, tier: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ssa", "labels": {"tier": tier}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": image}],
        },
    }


def main(kubeconfig: str) -> None:
    config.load_kube_config(config_file=kubeconfig)
    v1 = client.CoreV1Api()

    def apply(body: dict, manager: str, force: bool = False):
        return v1.patch_namespaced_pod_with_http_info(
            "ssa",
            "default",
            body,
            field_manager=manager,
            force=force,
            _content_type=APPLY,
        )

    pod, status, _ = apply(manifest("busybox:1.36", "one"), "python-ssa")
    assert status == 201, status
    assert pod.metadata.labels == {"tier": "one"}, pod.metadata.labels
    pod, status, _ = apply(manifest("busybox:1.36", "two"), "python-ssa")
    assert status == 200, status
    assert pod.metadata.labels == {"tier": "two"}, pod.metadata.labels
    owners = [(f.manager, f.operation) for f in pod.metadata.managed_fields]
    assert owners == [("python-ssa", "Apply")], owners
    try:
        apply(manifest("busybox:1.37", "two"), "other")
        raise AssertionError("a conflicting apply without force succeeded")
    except ApiException as err:
        assert err.status == 409, (err.status, err.body)
        status_body = json.loads(err.body)
        assert status_body["reason"] == "Conflict", status_body
        message = status_body["message"]
        assert 'conflict with "python-ssa"' in message, message
        assert '.spec.containers[name="main"].image' in message, message
    pod, status, _ = apply(manifest("busybox:1.37", "two"), "other", force=True)
    assert status == 200, status
    assert pod.spec.containers[0].image == "busybox:1.37", pod.spec.containers[0].image
    managers = {f.manager for f in pod.metadata.managed_fields}
    assert managers == {"python-ssa", "other"}, managers
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
