#!/usr/bin/env python3
"""A gRPC MetadataStoreService backed by the real ML Metadata library.

The `ml-metadata` wheel embeds MLMD's C++ store (over SQLite) but ships no
gRPC server. This test helper serves `ml_metadata.MetadataStoreService` and
hands every RPC, as serialized bytes, to the library's own C++ entry points,
so MLMD's own logic, schema and constraints answer podline's requests.

Usage:
    mlmd_server.py [--port N] [--db PATH]

`--port 0` (the default) picks a free port. The chosen port is printed on
stdout as `LISTENING <port>` once the server accepts connections. `--db`
names a SQLite file (created if missing, so a restarted server keeps its
data); without it the store lives in memory. SIGTERM/SIGINT stop it.
"""

import argparse
import signal
import sys
import threading
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

    def __init__(self, db_path):
        config = metadata_store_pb2.ConnectionConfig()
        if db_path:
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

    def handler(self, method):
        fn = getattr(cc, method)

        def call(request_bytes, context):
            with self._lock:
                response, message, code = fn(self._handle, request_bytes)
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
    args = parser.parse_args()

    store = Store(args.db)
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
