"""Issue 30: how long a try's pod outlives a lost worker (podline._retry), unit by unit."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

from podline import _mapping, _retry


def task(**kw: object) -> SimpleNamespace:
    base: dict[str, object] = {
        "retries": 1,
        "retry_delay": timedelta(minutes=5),
        "retry_exponential_backoff": 0,
        "max_retry_delay": None,
    }
    base.update(kw)
    return SimpleNamespace(**base)


def ti(try_number: int, max_tries: int | None) -> SimpleNamespace:
    return SimpleNamespace(try_number=try_number, max_tries=max_tries)


def test_a_try_is_retried_while_its_number_is_at_most_max_tries() -> None:
    assert _retry.will_be_retried(task(retries=1), ti(1, 1))
    assert not _retry.will_be_retried(task(retries=1), ti(2, 1))
    assert not _retry.will_be_retried(task(retries=0), ti(1, 0))
    # A cleared task instance gets more tries: max_tries grows past retries.
    assert _retry.will_be_retried(task(retries=1), ti(2, 2))
    # No max_tries on the task instance: the task's retries.
    assert _retry.will_be_retried(task(retries=2), ti(2, None))


def test_the_retry_delay_bound_follows_airflows_backoff() -> None:
    assert _retry.retry_delay_bound(task(), 1) == 300
    # Airflow 2's bool: 10 s * 2 ** (3 - 1) = 40 s, plus up to as much jitter.
    assert _retry.retry_delay_bound(task(retry_delay=10, retry_exponential_backoff=True), 3) == 80
    # Airflow 3.3's multiplier: 60 s * 5 ** 1 = 300 s, jitter to 600 s.
    assert _retry.retry_delay_bound(task(retry_delay=60, retry_exponential_backoff=5), 2) == 600
    # Multiplier 1 is no backoff; max_retry_delay caps; Airflow caps at a day.
    assert _retry.retry_delay_bound(task(retry_exponential_backoff=1.0), 4) == 300
    capped = task(retry_exponential_backoff=True, max_retry_delay=timedelta(minutes=7))
    assert _retry.retry_delay_bound(capped, 5) == 420
    huge = task(retry_delay=timedelta(hours=1), retry_exponential_backoff=True)
    assert _retry.retry_delay_bound(huge, 40) == 24 * 3600


def test_keep_for_retry_is_the_heartbeat_timeout_the_delay_and_a_margin_or_nothing() -> None:
    heartbeat = _retry.heartbeat_timeout()
    assert heartbeat > 0
    keep = _retry.keep_for_retry_seconds(task(), ti(1, 1))
    assert keep == int(heartbeat) + 300 + _retry.MARGIN_SECONDS
    assert _retry.keep_for_retry_seconds(task(), ti(2, 1)) == 0
    huge = task(retry_delay=timedelta(hours=20), retry_exponential_backoff=True)
    assert _retry.keep_for_retry_seconds(huge, ti(3, 5)) == _retry.MAX_KEEP_SECONDS


def test_the_keep_travels_as_podline_runs_flag_only_when_set() -> None:
    request = _mapping.RunRequest(name="p", task_id="t", keep_for_retry=660)
    argv = request.argv("podline", Path("pod.json"), Path("result.json"))
    assert argv[argv.index("--keep-for-retry") + 1] == "660s"
    plain = _mapping.RunRequest(name="p", task_id="t").argv("podline", Path("p"), Path("r"))
    assert "--keep-for-retry" not in plain
