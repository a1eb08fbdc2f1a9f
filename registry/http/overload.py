"""Overload: a bounded number of ingests per process, the rest queue briefly, then 503.

An ingest (push, ``PUT`` blob, chunk upload, assembly, v2 load: every upload) holds a
database connection, a lease heartbeat, a worker thread and upload bandwidth for seconds
or minutes; 45 at once answered ``database is locked`` 500s and starved reads.
``IngestGate.slot()`` wraps whatever an ingest handler does, reading its body included:
at most ``REGISTRY_MAX_CONCURRENT_PUSHES`` run at once, a request waits for a slot up to
``REGISTRY_INGEST_QUEUE_TIMEOUT`` and then answers ``Overloaded`` (503, ``Retry-After``).

One client (its token; its address when anonymous, see ``ingest_client``) holds at most
``REGISTRY_MAX_CONCURRENT_PUSHES_PER_CLIENT`` slots: its further ingests wait for one of
its own to end (the same queue timeout) without taking a slot meanwhile, so a few
hostile or runaway connections cannot take every slot, and other clients keep pushing.

A slot comes with the ``CapacityLimiter`` its worker threads must run under
(``anyio.to_thread.run_sync(..., limiter=...)``): ingests never take the threads of
anyio's default limiter, which every read uses, so reads stay responsive while writes
queue.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from litestar import Request
from litestar.datastructures import State

from registry.errors import Overloaded
from registry.http.auth import bearer_token
from registry.settings import Settings


@dataclass
class _ClientSlots:
    semaphore: anyio.Semaphore
    users: int = 0  # requests holding or waiting for one: the entry goes when none is left


class IngestGate:
    """At most ``slots`` ingests at once, ``per_client`` of them one client's (0: no such
    limit); their worker threads under their own limiter."""

    def __init__(self, slots: int, queue_timeout: float, per_client: int = 0) -> None:
        self.slots = slots
        self.queue_timeout = queue_timeout
        self.per_client = per_client
        self._semaphore = anyio.Semaphore(slots)
        self._clients: dict[str, _ClientSlots] = {}
        # One thread per ingest at a time (its body's writes, then its ingest), never more.
        self.limiter = anyio.CapacityLimiter(slots)

    @classmethod
    def from_settings(cls, settings: Settings) -> IngestGate:
        return cls(
            settings.max_concurrent_pushes,
            settings.ingest_queue_timeout,
            settings.max_concurrent_pushes_per_client,
        )

    def _overloaded(self, message: str) -> Overloaded:
        return Overloaded(message, retry_after=max(1, math.ceil(self.queue_timeout)))

    @asynccontextmanager
    async def slot(self, client: str | None = None) -> AsyncIterator[anyio.CapacityLimiter]:
        """Hold one ingest slot for the block, or raise ``Overloaded`` after the queue wait.

        ``client``: who asks (``ingest_client``); None: counted against no client's share.
        """
        key = client if self.per_client else None
        own = None
        if key is not None:
            own = self._clients.get(key)
            if own is None:
                own = self._clients[key] = _ClientSlots(anyio.Semaphore(self.per_client))
            own.users += 1
        try:
            async with self._slot(own) as limiter:
                yield limiter
        finally:
            if key is not None and own is not None:
                own.users -= 1
                if not own.users:
                    del self._clients[key]

    @asynccontextmanager
    async def _slot(self, own: _ClientSlots | None) -> AsyncIterator[anyio.CapacityLimiter]:
        have_own = acquired = False
        with anyio.move_on_after(self.queue_timeout):
            if own is not None:
                await own.semaphore.acquire()
                have_own = True
            await self._semaphore.acquire()
            acquired = True
        try:
            if not have_own and own is not None:
                raise self._overloaded(
                    f"this client already has {self.per_client} uploads in progress "
                    "(REGISTRY_MAX_CONCURRENT_PUSHES_PER_CLIENT); retry later"
                )
            if not acquired:
                raise self._overloaded(
                    f"too many uploads in progress ({self.slots} at once, "
                    "REGISTRY_MAX_CONCURRENT_PUSHES); retry later"
                )
            try:
                yield self.limiter
            finally:
                self._semaphore.release()
        finally:
            if have_own:
                assert own is not None
                own.semaphore.release()


def ingest_client(request: Request[Any, Any, Any]) -> str:
    """Whose share of the ingest slots a request takes: its token's (the auth guard has
    checked it) when ``REGISTRY_AUTH`` is on, else its address (where any token is
    unchecked and so could be made up per request)."""
    token = bearer_token(request) if request.app.state.ctx.settings.auth != "off" else None
    if token is not None:
        return "token:" + hashlib.sha256(token.encode()).hexdigest()
    client = request.client
    return "address:" + (client.host if client is not None else "")


def provide_ingest_gate(state: State) -> IngestGate:
    gate: IngestGate = state.ingest_gate
    return gate
