"""podline from Python: find the ``podline`` binary and run it.

The Airflow operator lives in :mod:`podline.airflow` (``from podline.airflow import
PodlineOperator``); this module stays importable without Airflow.
"""

from __future__ import annotations

from podline._binary import BinaryNotFound, find_binary

__all__ = ["BinaryNotFound", "find_binary"]
