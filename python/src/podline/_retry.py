"""How long a task's pod must outlive its worker: until the task's next try can reattach to it.

A worker lost to SIGKILL (or OOM, or its host) takes ``podline run`` with it; its liveness
Lease stops being renewed and a reaper deletes the pod once the Lease expired (about 20 s).
Airflow's next try comes much later: after the scheduler notices the lost task (its heartbeat
timeout, 300 s by default, when the whole worker died) and then the task's retry delay (300 s by
default, growing with ``retry_exponential_backoff``). So a try that will be retried asks
``podline run --keep-for-retry`` to keep its pod that long past the Lease's expiry; the next
try (``reattach_on_restart``) reattaches to the pod and moves it to its own Lease. A try that
will not be retried asks for nothing: its pod is reaped promptly.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

#: ``podline run --keep-for-retry``'s bound (the launcher's MAX_KEEP_FOR_RETRY): a day.
MAX_KEEP_SECONDS = 24 * 3600
#: Added to the computed wait: the scheduler's loop, queueing and starting the next try.
MARGIN_SECONDS = 60
#: Airflow's cap on a retry delay with exponential backoff (its MAX_RETRY_DELAY).
_AIRFLOW_MAX_RETRY_DELAY = 24 * 3600
#: Airflow's default heartbeat timeout: how long the scheduler waits before it fails (and
#: schedules a retry of) a task whose worker stopped heartbeating.
_DEFAULT_HEARTBEAT_TIMEOUT = 300


def will_be_retried(task: Any, ti: Any) -> bool:
    """Whether a failure of this try is followed by another: Airflow retries while the try
    number is at most ``max_tries`` (``retries``, raised when the task is cleared)."""
    retries = int(getattr(task, "retries", 0) or 0)
    max_tries = getattr(ti, "max_tries", None)
    if max_tries is None:
        max_tries = retries
    try_number = int(getattr(ti, "try_number", 1) or 1)
    return bool(retries) and try_number <= int(max_tries)


def _seconds(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)


def retry_delay_bound(task: Any, try_number: int) -> float:
    """The longest delay Airflow can wait, after this try fails, before the next one
    (``TaskInstance.next_retry_datetime``): ``retry_delay``, or with
    ``retry_exponential_backoff`` up to twice ``retry_delay * multiplier ** (try_number - 1)``
    (its jitter adds up to the same again), capped at a day and at ``max_retry_delay``. A
    delay a RetryPolicy (Airflow 3.3) decides at the failure cannot be known here. An upper
    bound on purpose: keeping the pod a little long costs less than losing it."""
    delay = _seconds(getattr(task, "retry_delay", None))
    backoff = getattr(task, "retry_exponential_backoff", 0)
    # Airflow 2 takes a bool (a multiplier of 2); Airflow 3.3 a multiplier (0 and 1: none).
    if isinstance(backoff, bool):
        multiplier = 2.0 if backoff else 0.0
    else:
        multiplier = float(backoff or 0)
    if multiplier > 0 and multiplier != 1.0:
        try:
            minimum = max(math.ceil(delay * multiplier ** max(try_number - 1, 0)), 1)
        except OverflowError:
            minimum = _AIRFLOW_MAX_RETRY_DELAY
        # The jitter: between the minimum and twice it.
        delay = float(min(2 * minimum, _AIRFLOW_MAX_RETRY_DELAY))
    cap = getattr(task, "max_retry_delay", None)
    if cap is not None:
        delay = min(delay, _seconds(cap))
    return delay


def heartbeat_timeout() -> float:
    """How long the scheduler waits for a silent task before failing it, from Airflow's
    configuration (``[scheduler] task_instance_heartbeat_timeout``, formerly
    ``scheduler_zombie_task_threshold``)."""
    try:
        from airflow.configuration import conf
    except ImportError:  # pragma: no cover
        return float(_DEFAULT_HEARTBEAT_TIMEOUT)
    for key in ("task_instance_heartbeat_timeout", "scheduler_zombie_task_threshold"):
        try:
            if conf.has_option("scheduler", key):
                return float(conf.getint("scheduler", key))
        except (ValueError, TypeError):
            continue
    return float(_DEFAULT_HEARTBEAT_TIMEOUT)


def keep_for_retry_seconds(task: Any, ti: Any) -> int:
    """``podline run --keep-for-retry`` for this try, in whole seconds: 0 when no retry
    follows a failure; else the scheduler's heartbeat timeout plus the longest retry delay plus
    a margin, at most :data:`MAX_KEEP_SECONDS`."""
    if not will_be_retried(task, ti):
        return 0
    try_number = int(getattr(ti, "try_number", 1) or 1)
    wait = heartbeat_timeout() + retry_delay_bound(task, try_number) + MARGIN_SECONDS
    return min(MAX_KEEP_SECONDS, math.ceil(wait))


__all__ = [
    "MARGIN_SECONDS",
    "MAX_KEEP_SECONDS",
    "heartbeat_timeout",
    "keep_for_retry_seconds",
    "retry_delay_bound",
    "will_be_retried",
]
