"""The installed KubernetesPodOperator's surface (its parameter names and template fields),
known without importing the provider.

Why: ``PodlineOperator`` accepts every parameter of the installed provider's
``KubernetesPodOperator`` (so a parameter added by a newer provider is accepted with no podline
release), and Airflow needs those names when the DAG file is parsed: the operator's
``__init__`` signature decides which ``default_args`` apply and which ``partial()`` /
``expand()`` arguments are valid, and ``template_fields`` is read by the serializer. Importing
the provider costs every DAG parse 0.6-1.4 s (measured on a busy 2-core machine: the kubernetes
and kubernetes_asyncio clients; it is what made podline's DAG files parse 31-45x faster than
KPO's), so the names are read from the provider's source with :mod:`ast` instead (20-55 ms for
``import podline.airflow`` and one operator, once per process). If the source
does not have the expected shape, the provider is imported and inspected: slower, never wrong.
A test checks that both ways give the same answer on every provider version CI installs.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
from dataclasses import dataclass, field
from typing import Any

#: The module and class whose surface PodlineOperator takes.
KPO_MODULE = "airflow.providers.cncf.kubernetes.operators.pod"
KPO_CLASS = "KubernetesPodOperator"


class ProviderMissing(ImportError):
    """The provider apache-airflow-providers-cncf-kubernetes is not installed."""


@dataclass(frozen=True)
class Surface:
    """KubernetesPodOperator's keyword parameters (in order) and its template fields."""

    parameters: tuple[str, ...]
    template_fields: tuple[str, ...]
    template_fields_renderers: dict[str, str] = field(default_factory=dict)
    #: ``"source"`` (read with ast) or ``"import"`` (the fallback).
    how: str = "source"


def _kpo_source_path() -> str:
    try:
        spec = importlib.util.find_spec(KPO_MODULE)
    except (ImportError, ValueError) as err:
        raise ProviderMissing(_missing_message()) from err
    if spec is None or not spec.origin:
        raise ProviderMissing(_missing_message())
    return spec.origin


def _missing_message() -> str:
    return (
        "podline.airflow needs apache-airflow-providers-cncf-kubernetes (PodlineOperator reuses "
        "KubernetesPodOperator's parameters and pod construction): pip install 'podline[airflow]'"
    )


def from_source(path: str) -> Surface | None:
    """The surface read from the provider's source file, or None if its shape is unexpected."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None
    cls = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == KPO_CLASS), None
    )
    if cls is None:
        return None
    init = next(
        (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None
    )
    if init is None or init.args.args[1:] or init.args.posonlyargs:
        return None  # positional parameters: not the shape this reader knows
    parameters = tuple(a.arg for a in init.args.kwonlyargs)
    fields: tuple[str, ...] | None = None
    renderers: dict[str, str] = {}
    for node in cls.body:
        target, value = _assignment(node)
        if target == "template_fields" and value is not None:
            try:
                literal = ast.literal_eval(value)
            except ValueError:
                return None
            if not isinstance(literal, (tuple, list)):
                return None
            fields = tuple(str(f) for f in literal)
        elif target == "template_fields_renderers" and value is not None:
            try:
                literal = ast.literal_eval(value)
            except ValueError:
                return None
            if isinstance(literal, dict):
                renderers = {str(k): str(v) for k, v in literal.items()}
    if fields is None or not parameters:
        return None
    return Surface(parameters, fields, renderers, "source")


def _assignment(node: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if isinstance(target, ast.Name):
            return target.id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id, node.value
    return None, None


def from_import() -> Surface:
    """The surface of the imported class (the slow, always-right way)."""
    kpo = kpo_class()
    params = inspect.signature(kpo.__init__).parameters.values()
    names = tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)
    return Surface(
        names,
        tuple(kpo.template_fields),
        dict(getattr(kpo, "template_fields_renderers", {}) or {}),
        "import",
    )


def kpo_class() -> Any:
    """The provider's KubernetesPodOperator class (imports the provider: task run time only)."""
    try:
        module = importlib.import_module(KPO_MODULE)
    except ImportError as err:
        raise ProviderMissing(f"{_missing_message()} ({err})") from err
    return getattr(module, KPO_CLASS)


@functools.lru_cache(maxsize=1)
def surface() -> Surface:
    """The installed provider's surface: read from its source, else by importing it."""
    return from_source(_kpo_source_path()) or from_import()
