#!/usr/bin/env python3
"""Query a KFP v1 run back from MLMD the way the KFP UI does, and print JSON.

Usage: kfp_query.py PORT WORKFLOW_NAME

Uses the real MLMD Python client over gRPC:
get_context_by_type_and_name('KfpRun', workflow), executions by context,
their events, artifacts by context. Also prints store-wide counts so tests
can assert that nothing was duplicated.
"""

import json
import sys

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

STATES = metadata_store_pb2.Execution.State.Name
EVENTS = metadata_store_pb2.Event.Type.Name


def value(v):
    kind = v.WhichOneof("value")
    return None if kind is None else getattr(v, kind)


def props(m):
    return {k: value(v) for k, v in m.items()}


def main(port, workflow):
    config = metadata_store_pb2.MetadataStoreClientConfig(host="127.0.0.1", port=int(port))
    store = metadata_store.MetadataStore(config)
    ctx = store.get_context_by_type_and_name("KfpRun", workflow)
    out = {"context": None, "executions": [], "artifacts": [], "counts": {}}
    if ctx is not None:
        out["context"] = {"id": ctx.id, "name": ctx.name, "external_id": ctx.external_id,
                          "properties": props(ctx.properties)}
        executions = store.get_executions_by_context(ctx.id)
        events = store.get_events_by_execution_ids([e.id for e in executions])
        types = {t.id: t.name for t in store.get_execution_types_by_id(
            list({e.type_id for e in executions}))} if executions else {}
        for e in executions:
            out["executions"].append({
                "id": e.id,
                "type": types.get(e.type_id),
                "external_id": e.external_id,
                "state": STATES(e.last_known_state),
                "properties": props(e.properties),
                "custom_properties": props(e.custom_properties),
                "events": sorted(
                    [{"type": EVENTS(ev.type), "artifact_id": ev.artifact_id,
                      "key": ev.path.steps[0].key if ev.path.steps else None}
                     for ev in events if ev.execution_id == e.id],
                    key=lambda x: (x["type"], x["key"] or "")),
            })
        artifacts = store.get_artifacts_by_context(ctx.id)
        atypes = {t.id: t.name for t in store.get_artifact_types_by_id(
            list({a.type_id for a in artifacts}))} if artifacts else {}
        for a in artifacts:
            out["artifacts"].append({"id": a.id, "uri": a.uri, "type": atypes.get(a.type_id),
                                     "external_id": a.external_id,
                                     "custom_properties": props(a.custom_properties)})
    all_exec = store.get_executions()
    all_art = store.get_artifacts()
    all_ctx = store.get_contexts()
    all_events = store.get_events_by_execution_ids([e.id for e in all_exec]) if all_exec else []
    out["counts"] = {
        "executions": len(all_exec),
        "artifacts": len(all_art),
        "contexts": len(all_ctx),
        "events": len(all_events),
        "distinct_execution_external_ids": len({e.external_id for e in all_exec}),
        "distinct_artifact_external_ids": len({a.external_id for a in all_art}),
    }
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
