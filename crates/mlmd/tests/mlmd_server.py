#!/usr/bin/env python3
"""A gRPC MetadataStoreService backed by the real ML Metadata library.

The `ml-metadata` wheel embeds MLMD's C++ store (over SQLite) but ships no
gRPC server. This test helper serves `ml_metadata.MetadataStoreService` and
hands every RPC, as serialized bytes, to the library's own C++ entry points,
so MLMD's own logic, schema and constraints answer podline's requests.

Usage:
    mlmd_server.py [--port N] [--db PATH] [--delay-ms N] [--stats PATH]

`--port 0` (the default) picks a free port. The chosen port is printed on
stdout as `LISTENING <port>` once the server accepts connections. `--db`
names a SQLite file (created if missing, so a restarted server keeps its
data; put in WAL mode, one sync per commit, as a production database
would); without it the store lives in memory. `--delay-ms` adds that much
latency to every call (outside the store's lock, like network distance),
and `--stats` keeps a JSON file with the calls served and the most served
at once, for tests of the client's concurrency. SIGTERM/SIGINT stop it.
"""

import argparse
import json
import os
import signal
import sqlite3
import sys
import threading
import time
from concurrent import futures

import grpc
from ml_metadata.metadata_store.pywrap.metadata_store_extension import (
    metadata_store as cc,
)
from ml_metadata.proto import metadata_store_pb2

SERVICE = "ml_metadata.MetadataStoreService"

# MLMD's status codes are absl codes, which are numerically gRPC's.
_CODES = {c.value[0]: c for c in grpc.StatusCode}


def _methods():
    """Every RPC the C++ extension exposes (Put*/Get*), by gRPC method name."""
    return sorted(
        name
        for name in dir(cc)
        if name[:3] in ("Put", "Get") and callable(getattr(cc, name))
    )


class Store:
    """The MLMD store handle, with calls serialized: the SQLite connection is
    not meant to be shared between threads."""

    def __init__(self, db_path, delay_ms=0, stats_path=None):
        config = metadata_store_pb2.ConnectionConfig()
        if db_path:
            # WAL survives in the file; MLMD's own connection then syncs once
            # per commit instead of several times (same SQL semantics).
            con = sqlite3.connect(db_path)
            con.execute("PRAGMA journal_mode=WAL")
            con.close()
            config.sqlite.filename_uri = db_path
            config.sqlite.connection_mode = (
                metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
            )
        else:
            config.sqlite.SetInParent()
        migration = metadata_store_pb2.MigrationOptions()
        self._handle = cc.CreateMetadataStore(
            config.SerializeToString(), migration.SerializeToString()
        )
        self._lock = threading.Lock()
        self._delay = delay_ms / 1000.0
        self._stats_path = stats_path
        self._stats_lock = threading.Lock()
        self._in_flight = 0
        self._stats = {"calls": 0, "max_concurrent": 0}

    def _enter(self):
        with self._stats_lock:
            self._in_flight += 1
            self._stats["calls"] += 1
            self._stats["max_concurrent"] = max(self._stats["max_concurrent"], self._in_flight)
            if self._stats_path:
                tmp = self._stats_path + ".tmp"
                with open(tmp, "w") as f:
                    json.dump(self._stats, f)
                os.replace(tmp, self._stats_path)

    def _leave(self):
        with self._stats_lock:
            self._in_flight -= 1

    def handler(self, method):
        fn = getattr(cc, method)

        def call(request_bytes, context):
            self._enter()
            try:
                if self._delay:
                    time.sleep(self._delay)
                with self._lock:
                    response, message, code = fn(self._handle, request_bytes)
            finally:
                self._leave()
            if code != 0:
                if isinstance(message, bytes):
                    message = message.decode("utf-8", "replace")
                context.abort(_CODES.get(code, grpc.StatusCode.UNKNOWN), message)
            return response

        return grpc.unary_unary_rpc_method_handler(
            call,
            request_deserializer=None,  # raw bytes in
            response_serializer=None,  # raw bytes out
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--db", default="")
    parser.add_argument("--delay-ms", type=int, default=0)
    parser.add_argument("--stats", default=None)
    args = parser.parse_args()

    store = Store(args.db, args.delay_ms, args.stats)
    handlers = {m: store.handler(m) for m in _methods()}
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, handlers),)
    )
    port = server.add_insecure_port(f"127.0.0.1:{args.port}")
    if port == 0:
        print(f"cannot bind 127.0.0.1:{args.port}", file=sys.stderr, flush=True)
        sys.exit(2)
    server.start()
    print(f"LISTENING {port}", flush=True)

    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    # Also stop when the parent (the Rust test) goes away and closes stdin.
    threading.Thread(
        target=lambda: (sys.stdin.read(), done.set()), daemon=True
    ).start()
    done.wait()
    server.stop(grace=None)


if __name__ == "__main__":
    main()
