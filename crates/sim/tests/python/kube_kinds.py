"""The official Kubernetes Python client with Secrets, ConfigMaps and ServiceAccounts against
the sim: a Secret created with string_data reads back base64 in data (string_data is never
returned) and its models decode; an immutable ConfigMap refuses a change with kube's 422; the
`default` ServiceAccount of `default` is listed; a watch of secrets sees a change; a
PersistentVolumeClaim is bound at once to the default StorageClass.

Usage: kube_kinds.py KUBECONFIG. Prints "ok" and exits 0 when every step worked.
"""

import base64
import json
import sys
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException


def main(kubeconfig: str) -> None:
    config.load_kube_config(config_file=kubeconfig)
    v1 = client.CoreV1Api()

    secret = v1.create_namespaced_secret(
        "default",
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="creds"),
            string_data={"password": "s3cret"},
        ),
    )
    assert secret.type == "Opaque", secret.type
    assert secret.string_data is None, secret.string_data
    assert base64.b64decode(secret.data["password"]) == b"s3cret", secret.data
    got = v1.read_namespaced_secret("creds", "default")
    assert got.data == secret.data, got.data

    v1.create_namespaced_config_map(
        "default",
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="settings"),
            data={"mode": "fast"},
            immutable=True,
        ),
    )
    try:
        v1.patch_namespaced_config_map("settings", "default", {"data": {"mode": "slow"}})
        raise AssertionError("an immutable ConfigMap was changed")
    except ApiException as e:
        assert e.status == 422, e.status
        message = json.loads(e.body)["message"]
        assert message == (
            'ConfigMap "settings" is invalid: data: Forbidden: '
            "field is immutable when `immutable` is set"
        ), message

    accounts = v1.list_namespaced_service_account("default")
    names = [a.metadata.name for a in accounts.items]
    assert names == ["default"], names

    listed = v1.list_namespaced_secret("default")
    v1.patch_namespaced_secret("creds", "default", {"stringData": {"more": "x"}})
    seen = []
    for event in watch.Watch().stream(
        v1.list_namespaced_secret,
        "default",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=2,
    ):
        seen.append((event["type"], sorted(event["object"].data)))
    assert seen == [("MODIFIED", ["more", "password"])], seen

    # A claim with no class gets the default class and is bound at once; the models decode.
    v1.create_namespaced_persistent_volume_claim(
        "default",
        client.V1PersistentVolumeClaim(
            metadata=client.V1ObjectMeta(name="data"),
            spec=client.V1PersistentVolumeClaimSpec(
                access_modes=["ReadWriteOnce"],
                resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}),
            ),
        ),
    )
    for _ in range(200):
        claim = v1.read_namespaced_persistent_volume_claim("data", "default")
        if claim.status.phase == "Bound":
            break
        time.sleep(0.05)
    assert claim.status.phase == "Bound", claim.status
    assert claim.spec.storage_class_name == "standard", claim.spec
    assert claim.status.capacity == {"storage": "1Gi"}, claim.status
    classes = client.StorageV1Api().list_storage_class()
    defaults = [
        c.metadata.name
        for c in classes.items
        if (c.metadata.annotations or {}).get("storageclass.kubernetes.io/is-default-class") == "true"
    ]
    assert defaults == ["standard"], defaults
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
