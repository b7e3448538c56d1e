"""Airflow's provider registration (the ``apache_airflow_provider`` entry point).

Airflow's ProvidersManager lists every distribution that declares this entry point as a
provider (``airflow providers list``), so an installed podline shows up next to the
cncf.kubernetes provider it builds on. Kept free of imports: Airflow calls it while it
discovers providers.
"""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    """The provider's description, in Airflow's provider_info schema (name and description
    are required; ``package-name`` is how ``airflow providers list`` names it)."""
    return {
        "package-name": "podline",
        "name": "podline",
        "description": (
            "PodlineOperator: KubernetesPodOperator's pods, run through podline's crash-proof "
            "launcher (create retry, exact log resume, no orphan pods)."
        ),
    }
