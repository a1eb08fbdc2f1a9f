"""CPU time per request inside one process, without sockets: the app, and its middleware alone.

Run as ``python -m bench.harness.overhead DATA_DIR MANIFEST BLOB`` against a registry's
data dir (read only); prints one JSON object of microseconds per request (best of 5
batches of ``time.process_time()``, so other load on the machine counts little). Logging
is set up as ``serve`` sets it up (a logging thread writing JSON lines, here to
/dev/null), and that thread's CPU counts too.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

Asgi = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
BATCH = 2000


def _scope(method: str, path: str) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"bench"), (b"user-agent", b"bench")],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8080),
    }


async def _per_request(app: Asgi, method: str, path: str) -> float:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    for _ in range(200):  # warm: caches, route children, code paths
        await app(_scope(method, path), receive, send)
    if statuses[-1] != 200:
        raise RuntimeError(f"{method} {path} answered {statuses[-1]}")
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        for _ in range(BATCH):
            await app(_scope(method, path), receive, send)
        best = min(best, (time.process_time() - started) / BATCH)
    return best * 1e6


async def _bare(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The least an app can do: one header, a two-byte body."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"x", b"y")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def measure(manifest: str, blob: str) -> dict[str, float]:
    from registry.app import create_app
    from registry.http.middleware import middleware

    app = create_app()
    wrapped: Asgi = _bare
    for layer in reversed(middleware()):
        wrapped = layer(wrapped)
    route = {"path_template": "/bare"}
    return {
        "bare ASGI app": await _per_request(_bare, "GET", "/bare"),
        "bare ASGI app + the registry's middleware": await _per_request(
            lambda s, r, w: wrapped({**s, **route}, r, w), "GET", "/bare"
        ),
        "GET /healthz": await _per_request(app, "GET", "/healthz"),
        "HEAD /blobs/{sha}": await _per_request(app, "HEAD", f"/blobs/{blob}"),
        "HEAD /cartons/{sha}.carton": await _per_request(
            app, "HEAD", f"/cartons/{manifest}.carton"
        ),
        "GET /cartons/{sha}.carton (slim)": await _per_request(
            app, "GET", f"/cartons/{manifest}.carton"
        ),
    }


def main() -> None:
    data_dir, manifest, blob = sys.argv[1:4]
    os.environ.update(
        REGISTRY_DATA_DIR=str(Path(data_dir)),
        REGISTRY_AUTH="off",
        REGISTRY_MIGRATE_ON_START="false",
    )
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the access log goes here
    from registry.worker import configure_logging

    configure_logging()
    import uvloop

    print(json.dumps(uvloop.run(measure(manifest, blob))))


if __name__ == "__main__":
    main()
