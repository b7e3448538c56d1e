"""Runs one test DAG with Airflow's own dag.test() and prints a RESULT line (JSON) with every
task instance's state and XComs. A subprocess per DAG run, as a worker would be.

Usage: run_dag.py DAG [LOGICAL_DATE [RUN_ID]]

DAG is an attribute of dags/podline_test_dags.py, or FILE.py::DAG_ID: a DAG file of its own
(e.g. KubernetesPodOperator's example, fetched by the test)."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone

sys.path.insert(0, __import__("os").path.join(__import__("os").path.dirname(__file__), "dags"))

import podline_log_dags  # noqa: E402
import podline_test_dags  # noqa: E402
from airflow import __version__ as AIRFLOW_VERSION  # noqa: E402

AIRFLOW_2 = AIRFLOW_VERSION.startswith("2.")


def load(name: str) -> object:
    """The DAG to run: ``FILE.py::DAG_ID`` from that file, else from podline_test_dags or
    podline_log_dags."""
    if "::" not in name:
        return getattr(podline_test_dags, name, None) or getattr(podline_log_dags, name)
    import importlib.util

    path, dag_id = name.split("::", 1)
    spec = importlib.util.spec_from_file_location("podline_dag_under_test", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dags = [v for v in vars(module).values() if getattr(v, "dag_id", None) == dag_id]
    assert dags, f"{path} defines no DAG {dag_id}"
    return dags[0]


def main() -> None:
    dag = load(sys.argv[1])
    logical_date = datetime.fromisoformat(sys.argv[2]) if len(sys.argv) > 2 else None
    if logical_date is not None and logical_date.tzinfo is None:
        logical_date = logical_date.replace(tzinfo=timezone.utc)
    if len(sys.argv) > 3:
        # dag.test() names each run after the time it starts; a test of "the same task
        # instance on another worker" needs the run id kept.
        from airflow.models.dagrun import DagRun

        run_id = sys.argv[3]
        DagRun.generate_run_id = staticmethod(lambda *_, **__: run_id)  # type: ignore[method-assign]
    if AIRFLOW_2:
        try:  # DagRunNote's user_id refers to FAB's ab_user table: register its models (a
            # dag.test() of an existing run deletes it, and with it its note)
            import airflow.providers.fab.auth_manager.models  # noqa: F401
        except ImportError:
            pass
    dr = None
    try:
        if logical_date is None:
            dr = dag.test()
        elif AIRFLOW_2:
            dr = dag.test(execution_date=logical_date)
        else:
            dr = dag.test(logical_date=logical_date)
    except BaseException as err:
        # Airflow 2: AirflowTaskTimeout and AirflowTaskTerminated are BaseExceptions, which
        # dag.test() lets through (a worker's task runner handles them); the task instance's
        # state is committed before they are raised.
        if not AIRFLOW_2:
            raise
        print(f"dag.test() raised {type(err).__name__}: {err}", flush=True)

    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    if AIRFLOW_2:
        from airflow.models.xcom import XCom as XComModel

        def value(x: object) -> object:
            raw = x.value  # type: ignore[attr-defined]
            if isinstance(raw, bytes):
                return XComModel.deserialize_value(x)
            try:
                return json.loads(raw)
            except (TypeError, ValueError):
                return raw
    else:
        from airflow.models.xcom import XComModel  # type: ignore[no-redef]

        def value(x: object) -> object:
            return x.value  # type: ignore[attr-defined]

    with create_session() as session:
        if dr is None:
            from airflow.models.dagrun import DagRun as DagRunModel

            dr = (
                session.query(DagRunModel)
                .filter(DagRunModel.dag_id == dag.dag_id)
                .order_by(DagRunModel.id.desc())
                .first()
            )
        assert dr is not None, "dag.test() created no DAG run"
        tis = session.query(TaskInstance).filter(
            TaskInstance.dag_id == dag.dag_id, TaskInstance.run_id == dr.run_id
        )
        states = {ti.task_id: str(getattr(ti.state, "value", ti.state)) for ti in tis}
        tries = {ti.task_id: ti.try_number for ti in tis}
        xcoms: dict[str, dict[str, object]] = {}
        for x in session.query(XComModel).filter(
            XComModel.dag_id == dag.dag_id, XComModel.run_id == dr.run_id
        ):
            xcoms.setdefault(x.task_id, {})[x.key] = value(x)
    result = {"run_id": dr.run_id, "states": states, "tries": tries, "xcoms": xcoms}
    print("RESULT " + json.dumps(result, default=str), flush=True)


if __name__ == "__main__":
    main()
