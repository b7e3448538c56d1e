"""Pure unit tests: what podline does with KubernetesPodOperator's parameters and pod."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from podline import _mapping
from podline._binary import BinaryNotFound, find_binary

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def test_the_reattach_key_is_the_same_for_every_try_and_differs_otherwise() -> None:
    key = _mapping.TaskInstanceKey("etl", "load", "manual__2026-12-01T10:00:00+00:00", -1, 2)
    retry = _mapping.TaskInstanceKey("etl", "load", key.run_id, -1, 3)
    assert retry.podline_task_id() == key.podline_task_id()
    other_run = _mapping.TaskInstanceKey("etl", "load", "manual__other", -1, 2)
    assert other_run.podline_task_id() != key.podline_task_id()
    other_index = _mapping.TaskInstanceKey("etl", "load", key.run_id, 0, 2)
    assert other_index.podline_task_id() != key.podline_task_id()
    assert LABEL_VALUE.match(key.podline_task_id()) and len(key.podline_task_id()) <= 63


def test_seconds_and_skip_codes_validation() -> None:
    assert _mapping.seconds("x", 5) == 5
    assert _mapping.seconds("x", None) is None
    assert _mapping.seconds("g", 0, allow_zero=True) == 0
    for bad in (0, -1, "10", True, 1.5):
        with pytest.raises(ValueError, match="x must be"):
            _mapping.seconds("x", bad)
    assert _mapping.skip_codes(None) == frozenset()
    assert _mapping.skip_codes(99) == {99}
    assert _mapping.skip_codes([1, 2]) == {1, 2}
    with pytest.raises(ValueError, match="skip_on_exit_code"):
        _mapping.skip_codes("99")


def test_refusals_apply_only_to_values_podline_cannot_honour() -> None:
    assert _mapping.refusal("deferrable", True) is None  # PodlineTrigger (issue 31)
    assert _mapping.refusal("deferrable", False) is None
    assert _mapping.refusal("deferrable", None) is None
    assert _mapping.refusal("container_logs", True) is None
    assert _mapping.refusal("container_logs", ["base", "sidecar"]) is None
    assert _mapping.refusal("callbacks", None) is None
    assert _mapping.refusal("callbacks", [object]) is None
    assert _mapping.refusal("on_kill_action", "delete_pod") is None
    assert _mapping.refusal("on_kill_action", "keep_pod") is not None
    # Everything that shapes the pod is KPO's business: never refused.
    for name in ("volumes", "secrets", "affinity", "tolerations", "pod_template_dict"):
        assert _mapping.refusal(name, [1]) is None


def pod(*containers: str) -> dict[str, object]:
    return {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": c, "image": "i"} for c in containers],
            "volumes": [{"name": "xcom", "emptyDir": {}}],
        },
    }


def test_podline_pod_keeps_the_xcom_sidecar_and_copies() -> None:
    kpo = pod("base", "extra", _mapping.XCOM_SIDECAR)
    out = _mapping.podline_pod(kpo, base_container="base")
    assert out == kpo, "the sidecar stays: podline reads the value through it"
    assert out is not kpo
    out["spec"]["containers"].pop()  # type: ignore[index]
    assert len(kpo["spec"]["containers"]) == 3, "KPO's pod is not modified"  # type: ignore[index]
    unchanged = pod("base")
    assert _mapping.podline_pod(unchanged, base_container="base") == unchanged


def test_podline_pod_needs_the_base_container_first() -> None:
    with pytest.raises(ValueError, match="base container 'main'.*'base'"):
        _mapping.podline_pod(pod("base"), base_container="main")


def test_run_request_carries_no_pod_content_only_the_run() -> None:
    req = _mapping.RunRequest(
        name="load-abc12345",
        task_id="airflow-abc",
        on_finish="keep",
        reattach=True,
        startup_timeout=30,
        schedule_timeout=None,
        delete_grace=5,
        all_containers=True,
    )
    argv = req.argv(
        "podline", Path("/t/pod.json"), Path("/t/result.json"), kubeconfig="/t/kc", context="prod"
    )
    joined = " ".join(argv)
    for part in [
        "podline run --pod-template /t/pod.json --result-file /t/result.json",
        "--kubeconfig /t/kc",
        "--context prod",
        "--name load-abc12345 --exact-name",
        "--on-finish keep",
        "--task-id airflow-abc --reattach",
        "--startup-timeout 30s",
        "--schedule-timeout 30s",
        "--delete-grace 5s",
        "--all-containers",
    ]:
        assert part in joined, part
    for flag in ("--env", "--image", "--label", "--annotation", "--"):
        assert flag not in argv, flag
    quiet = _mapping.RunRequest(name="n", task_id="t", reattach=False).argv("p", Path("a"), Path("b"))
    assert "--reattach" not in quiet and "--kubeconfig" not in quiet and "--delete-grace" not in quiet


def test_cluster_access_never_shows_the_kubeconfig_text() -> None:
    access = _mapping.ClusterAccess(kubeconfig_text="token: s3cr3t-marker")
    assert "s3cr3t-marker" not in repr(access)


def test_on_finish_actions_map_to_podline() -> None:
    assert _mapping.ON_FINISH["delete_pod"] == "delete"
    assert _mapping.ON_FINISH["delete_succeeded_pod"] == "delete-succeeded"
    assert _mapping.ON_FINISH["keep_pod"] == "keep"


def test_binary_lookup_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = tmp_path / "podline"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PODLINE_BIN", str(exe))
    assert find_binary() == str(exe)
    monkeypatch.setenv("PODLINE_BIN", str(tmp_path / "missing"))
    with pytest.raises(BinaryNotFound, match="PODLINE_BIN"):
        find_binary()
    monkeypatch.delenv("PODLINE_BIN")
    monkeypatch.setattr("podline._binary._wheel_binary", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_binary() == str(exe)
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(BinaryNotFound, match="pip install"):
        find_binary()
