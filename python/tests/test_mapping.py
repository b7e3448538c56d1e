"""Pure unit tests: label sanitising, KubernetesPodOperator parameters -> podline flags."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from podline import _mapping
from podline._binary import BinaryNotFound, find_binary

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@pytest.mark.parametrize(
    "value",
    [
        "manual__2026-12-01T10:00:00+00:00",
        "scheduled__2026-12-01T10:05:00.123456+00:00",
        "a" * 200,
        "--weird..",
        "ünïcode task",
        "",
        "___",
        3,
    ],
)
def test_label_values_are_valid_and_bounded(value: object) -> None:
    out = _mapping.safe_label_value(value)
    assert len(out) <= 63
    assert LABEL_VALUE.match(out), out


def test_valid_label_values_are_kept_and_changed_ones_stay_distinct() -> None:
    assert _mapping.safe_label_value("extract_orders") == "extract_orders"
    assert _mapping.safe_label_value(7) == "7"
    a = _mapping.safe_label_value("manual__2026-12-01T10:00:00+00:00")
    b = _mapping.safe_label_value("manual__2026-12-01T10:00:00+01:00")
    assert a != b
    assert a.startswith("manual__2026-12-01T10-00-00-00-00")


def test_airflow_labels_and_the_reattach_key() -> None:
    key = _mapping.TaskInstanceKey("etl", "load", "manual__2026-12-01T10:00:00+00:00", -1, 2)
    labels = key.labels()
    assert labels["dag_id"] == "etl"
    assert labels["task_id"] == "load"
    assert labels["try_number"] == "2"
    assert "map_index" not in labels
    assert all(LABEL_VALUE.match(v) and len(v) <= 63 for v in labels.values())
    mapped = _mapping.TaskInstanceKey("etl", "load", key.run_id, 4, 1).labels()
    assert mapped["map_index"] == "4"
    # The task id ignores the try (a new try finds the pod of the lost one) but not the rest.
    retry = _mapping.TaskInstanceKey("etl", "load", key.run_id, -1, 3)
    assert retry.podline_task_id() == key.podline_task_id()
    other_run = _mapping.TaskInstanceKey("etl", "load", "manual__other", -1, 2)
    assert other_run.podline_task_id() != key.podline_task_id()
    other_index = _mapping.TaskInstanceKey("etl", "load", key.run_id, 0, 2)
    assert other_index.podline_task_id() != key.podline_task_id()
    assert LABEL_VALUE.match(key.podline_task_id()) and len(key.podline_task_id()) <= 63


def test_pod_names_are_sanitised_like_kubernetes_pod_operator() -> None:
    assert _mapping.sanitize_pod_name("My_Task.Name") == "my-task-name"
    assert len(_mapping.sanitize_pod_name("x" * 100)) == 63
    assert _mapping.sanitize_pod_name("__") == "pod"


def test_env_vars_dict_list_and_v1envvar_like() -> None:
    assert _mapping.env_pairs({"A": "1", "B": None}) == [("A", "1"), ("B", "")]
    entries = [{"name": "A", "value": "x=y"}, SimpleNamespace(name="B", value="2", value_from=None)]
    assert _mapping.env_pairs(entries) == [("A", "x=y"), ("B", "2")]
    with pytest.raises(ValueError, match="value_from"):
        _mapping.env_pairs([SimpleNamespace(name="TOKEN", value=None, value_from=object())])


def test_container_resources_become_requests_and_limits() -> None:
    flags = _mapping.resource_flags(
        {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}
    )
    assert flags == ["--requests", "cpu=500m,memory=1Gi", "--limits", "memory=2Gi"]
    v1 = SimpleNamespace(requests={"cpu": "1"}, limits=None)
    assert _mapping.resource_flags(v1) == ["--requests", "cpu=1"]
    with pytest.raises(ValueError, match="requests, limits"):
        _mapping.resource_flags({"request": {"cpu": "1"}})


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


def test_pod_template_keeps_the_users_and_adds_what_podline_has_no_flag_for() -> None:
    empty = _mapping.pod_template(None, arguments_only=None, termination_grace_period=None)
    assert empty["spec"]["containers"] == [{"name": "base"}]
    user = {"spec": {"containers": [{"name": "main", "image": "x"}], "tolerations": [{"key": "k"}]}}
    pod = _mapping.pod_template(user, arguments_only=["--day", "1"], termination_grace_period=0)
    assert pod["spec"]["terminationGracePeriodSeconds"] == 0
    assert pod["spec"]["containers"][0]["args"] == ["--day", "1"]
    assert pod["spec"]["tolerations"] == [{"key": "k"}]
    assert "args" not in user["spec"]["containers"][0], "the user's template is not modified"


def test_run_request_maps_every_parameter_to_a_flag() -> None:
    req = _mapping.RunRequest(
        image="python:3.12",
        cmds=["python", "-c"],
        arguments=["print(1)"],
        namespace="jobs",
        name="load",
        random_name_suffix=False,
        env=[("A", "1")],
        labels={"dag_id": "etl"},
        annotations={"team": "data"},
        on_finish="keep",
        task_id="airflow-abc",
        reattach=True,
        startup_timeout=30,
        schedule_timeout=None,
        resources=["--requests", "cpu=1"],
        node_selector={"disk": "ssd"},
        service_account="runner",
        config_file="/k/config",
        cluster_context="prod",
        active_deadline=600,
        termination_grace_period=5,
    )
    argv = req.argv("podline", Path("/t/pod.json"), Path("/t/result.json"))
    joined = " ".join(argv)
    for part in [
        "podline run --pod-template /t/pod.json --result-file /t/result.json",
        "--kubeconfig /k/config",
        "--context prod",
        "-n jobs",
        "--image python:3.12",
        "--name load --exact-name",
        "--label dag_id=etl",
        "--annotation team=data",
        "--node-selector disk=ssd",
        "--service-account runner",
        "--requests cpu=1",
        "--on-finish keep",
        "--task-id airflow-abc --reattach",
        "--startup-timeout 30s",
        "--schedule-timeout 30s",
        "--active-deadline 600s",
        "--delete-grace 5s",
    ]:
        assert part in joined, part
    assert argv[-4:] == ["--", "python", "-c", "print(1)"]
    # Env values never reach the command line (any local user can read it): the template
    # carries them, replacing a template variable of the same name.
    assert "--env" not in argv and "A=1" not in joined
    template = {"spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "0"},
                                                               {"name": "B", "value": "2"}]}]}}
    pod = req.with_env(template)
    assert pod["spec"]["containers"][0]["env"] == [
        {"name": "B", "value": "2"},
        {"name": "A", "value": "1"},
    ]
    assert template["spec"]["containers"][0]["env"][0]["value"] == "0"  # not changed in place
    multiline = _mapping.RunRequest(image="x", env=[("KEY", "-----BEGIN\nabc\n-----END")])
    assert multiline.with_env({})["spec"]["containers"] == [
        {"name": "base", "env": [{"name": "KEY", "value": "-----BEGIN\nabc\n-----END"}]}
    ]
    # Arguments without cmds go into the template (the image's entrypoint runs), not after --.
    args_only = _mapping.RunRequest(image="x", arguments=["a"], reattach=False, task_id="t")
    argv = args_only.argv("podline", Path("p"), Path("r"))
    assert "--" not in argv and "--reattach" not in argv


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
