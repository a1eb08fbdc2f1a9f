"""Overload: a bounded number of ingests per process, the rest queue briefly, then 503.

An ingest (push, ``PUT`` blob, v2 load: every upload) holds a database connection, a
lease heartbeat, a worker thread and upload bandwidth for seconds or minutes; 45 at once
answered ``database is locked`` 500s and starved reads. ``IngestGate.slot()`` wraps
whatever an ingest handler does, reading its body included: at most
``REGISTRY_MAX_CONCURRENT_PUSHES`` run at once, a request waits for a slot up to
``REGISTRY_INGEST_QUEUE_TIMEOUT`` and then answers ``Overloaded`` (503, ``Retry-After``).

A slot comes with the ``CapacityLimiter`` its worker threads must run under
(``anyio.to_thread.run_sync(..., limiter=...)``): ingests never take the threads of
anyio's default limiter, which every read uses, so reads stay responsive while writes
queue.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from litestar.datastructures import State

from registry.errors import Overloaded
from registry.settings import Settings


class IngestGate:
    """At most ``slots`` ingests at once; their worker threads under their own limiter."""

    def __init__(self, slots: int, queue_timeout: float) -> None:
        self.slots = slots
        self.queue_timeout = queue_timeout
        self._semaphore = anyio.Semaphore(slots)
        # One thread per ingest at a time (its body's writes, then its ingest), never more.
        self.limiter = anyio.CapacityLimiter(slots)

    @classmethod
    def from_settings(cls, settings: Settings) -> IngestGate:
        return cls(settings.max_concurrent_pushes, settings.ingest_queue_timeout)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[anyio.CapacityLimiter]:
        """Hold one ingest slot for the block, or raise ``Overloaded`` after the queue wait."""
        acquired = False
        with anyio.move_on_after(self.queue_timeout):
            await self._semaphore.acquire()
            acquired = True
        if not acquired:
            raise Overloaded(
                f"too many uploads in progress ({self.slots} at once, "
                "REGISTRY_MAX_CONCURRENT_PUSHES); retry later",
                retry_after=max(1, math.ceil(self.queue_timeout)),
            )
        try:
            yield self.limiter
        finally:
            self._semaphore.release()


def provide_ingest_gate(state: State) -> IngestGate:
    return state.ingest_gate  # type: ignore[no-any-return]
