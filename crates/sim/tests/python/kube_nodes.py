"""The official Kubernetes Python client reads the sim's version and its kubelet's node.

Usage: kube_nodes.py KUBECONFIG. Prints "ok" and exits 0 when every step worked. The client's
models check required fields as they decode, so a Node or a version.Info missing one fails here.
"""

import sys

from kubernetes import client, config


def main(kubeconfig: str) -> None:
    config.load_kube_config(config_file=kubeconfig)
    version = client.VersionApi().get_code()
    assert (version.major, version.minor) == ("1", "32"), version
    assert version.git_version.startswith("v1.32."), version.git_version
    v1 = client.CoreV1Api()
    nodes = v1.list_node().items
    assert len(nodes) == 1, [n.metadata.name for n in nodes]
    node = v1.read_node(nodes[0].metadata.name)
    ready = [c for c in node.status.conditions if c.type == "Ready"]
    assert ready and ready[0].status == "True", node.status.conditions
    assert node.status.node_info.kubelet_version == version.git_version, node.status.node_info
    assert node.metadata.labels["kubernetes.io/hostname"] == node.metadata.name
    v1.patch_node(node.metadata.name, {"spec": {"unschedulable": True}})
    assert v1.read_node(node.metadata.name).spec.unschedulable is True
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
