"""A server worker process: the app ``serve`` runs, built from the environment it prepared.

Outside ``cli/`` so that a worker does not import the command line (httpx's and the
client's modules, every command): each worker is a fresh interpreter, and what it
imports it holds for its lifetime, once per worker. ``cli.server_commands`` starts the
workers (``WORKER_APP``) and uses the same process setup when it serves in-process.
"""

from __future__ import annotations

import atexit
import logging
import logging.handlers
import os
import queue
import sys
from typing import TYPE_CHECKING, Any

from registry.allocator import keep_freed_memory

if TYPE_CHECKING:
    from litestar import Litestar

WORKER_APP = "registry.worker:worker_app"
LOG_LEVEL_ENV = "REGISTRY_SERVE_LOG_LEVEL"
SERVER_ENV = "REGISTRY_SERVE_SERVER"


class _HandOffHandler(logging.handlers.QueueHandler):
    """Queues records as they are: the logging thread formats them (JSON access lines too)."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record


def configure_logging(level: str = "info") -> None:
    """One line per record on stderr, written by a background thread of this process.

    Like ``logging.basicConfig``, nothing changes when the root logger has handlers
    already (an embedding program's, or pytest's).
    """
    root = logging.getLogger()
    if root.handlers:
        return
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    listener = logging.handlers.QueueListener(records, handler)
    listener.start()
    atexit.register(listener.stop)
    root.addHandler(_HandOffHandler(records))
    root.setLevel(logging.INFO if level in ("info", "debug", "trace") else level.upper())
    logging.getLogger("alembic").setLevel(logging.WARNING)


def freeze_startup_objects() -> None:
    """Move what importing and building the app made (modules, classes, the app: about
    150,000 objects) out of the cyclic collector's reach: they live as long as the
    process, and each full collection walked them all. On a 1 GiB push, collections were
    5 % of the receiving thread's time."""
    import gc

    gc.collect()
    gc.freeze()


def worker_app() -> Any:
    """The app one worker process serves, from the environment ``serve`` prepared."""
    # httpx (link fetching) imports its own command-line client (click, pygments, rich)
    # when they are installed, as ``registry.script`` explains: a worker never runs it.
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None: see above
    from registry.app import create_app

    keep_freed_memory()
    configure_logging(os.environ.get(LOG_LEVEL_ENV, "info"))
    app: Litestar = create_app()
    freeze_startup_objects()
    if os.environ.get(SERVER_ENV) == "granian":  # uvicorn applies them itself
        from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

        return ProxyHeadersMiddleware(
            app,  # type: ignore[arg-type]  # Litestar types ASGI its own way, uvicorn too
            trusted_hosts="127.0.0.1",
        )
    return app
