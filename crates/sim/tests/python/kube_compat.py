"""The official Kubernetes Python client against the sim: a watch with bookmarks, `kubectl get`
style tables, and deletecollection.

Usage: kube_compat.py KUBECONFIG. Prints "ok" and exits 0 when every step worked.
"""

import json
import sys
import threading

from kubernetes import client, config, watch

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def main(kubeconfig: str) -> None:
    config.load_kube_config(config_file=kubeconfig)
    v1 = client.CoreV1Api()
    start = v1.list_namespaced_pod("default").metadata.resource_version

    def create(name: str) -> None:
        v1.create_namespaced_pod(
            "default",
            client.V1Pod(
                metadata=client.V1ObjectMeta(name=name, labels={"app": "compat"}),
                spec=client.V1PodSpec(
                    restart_policy="Never",
                    containers=[client.V1Container(name="main", image="busybox")],
                ),
            ),
        )

    create("compat-1")
    # A watch with bookmarks: the client decodes kube-shaped BOOKMARK objects (sent once the
    # resource changed after the watch began, hence the second pod, created during the watch).
    threading.Timer(0.5, create, args=("compat-2",)).start()
    types = []
    w = watch.Watch()
    for event in w.stream(
        v1.list_namespaced_pod,
        "default",
        resource_version=start,
        allow_watch_bookmarks=True,
        timeout_seconds=4,
    ):
        types.append(event["type"])
        if event["type"] == "BOOKMARK":
            w.stop()
    assert types[:2] == ["ADDED", "ADDED"], types
    assert "BOOKMARK" in types, types
    # A table, as kubectl asks for it.
    cfg = v1.api_client.configuration
    headers = {"Accept": TABLE}
    path = "/api/v1/namespaces/default/pods"
    v1.api_client.update_params_for_auth(headers, [], ["BearerToken"], path, "GET", None)
    response = v1.api_client.call_api("GET", cfg.host + path, header_params=headers)
    table = json.loads(response.read())
    assert table["kind"] == "Table", table
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names[:5] == ["Name", "Ready", "Status", "Restarts", "Age"], names
    assert sorted(r["cells"][0] for r in table["rows"]) == ["compat-1", "compat-2"], table
    # deletecollection with a label selector.
    v1.delete_collection_namespaced_pod("default", label_selector="app=compat", grace_period_seconds=0)
    left = v1.list_namespaced_pod("default", label_selector="app=compat").items
    assert all(p.metadata.deletion_timestamp for p in left), [p.metadata.name for p in left]
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
