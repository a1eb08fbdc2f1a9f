"""Request-scoped access to the RegistryContext, and request bodies for the controllers."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from litestar import Request
from litestar.datastructures import State

from registry.carton.streams import ReadStream
from registry.errors import TruncatedUpload, UploadStalled, UploadTooLarge
from registry.services.context import RegistryContext


def provide_ctx(state: State) -> RegistryContext:
    return state.ctx  # type: ignore[no-any-return]


async def body_chunks(request: Request) -> AsyncIterator[bytes]:
    """The request body's chunks; ``UploadStalled`` (408) when none comes for
    ``REGISTRY_BODY_IDLE_TIMEOUT``, so a trickling client cannot hold a slot forever."""
    idle = request.app.state.ctx.settings.body_idle_timeout
    stream = request.stream()
    while True:
        with anyio.move_on_after(idle) as waited:
            chunk = await anext(stream, None)
        if waited.cancelled_caught:
            raise UploadStalled(f"request body stalled: nothing received for {idle:g} s")
        if chunk is None:
            return
        yield chunk


def declared_length(request: Request) -> int | None:
    """The body size ``Content-Length`` announces; None when absent or not plain digits."""
    value = request.headers.get("content-length")
    if value is None or not value.isascii() or not value.isdigit() or len(value) > 19:
        return None
    return int(value)


BUFFERED_BYTES = 4 * 1024 * 1024
"""Body bytes received ahead of the worker thread before the event loop stops reading."""
WAKE_BYTES = 1024 * 1024
"""Body bytes queued before a waiting worker thread is woken (or the body's end)."""


class StreamedBody(ReadStream):
    """A request body as a blocking stream, for the worker thread that consumes it.

    A task on the event loop (``feeding``) receives the body's pieces as they arrive
    and queues them for the thread, up to ``BUFFERED_BYTES`` ahead of it: no hop to
    the event loop per read, no joining of pieces (a read returns bytes of one
    received piece). The limits are enforced as the bytes arrive: a declared or
    received size over ``max_bytes`` is ``UploadTooLarge``, a body that ends short of
    its ``Content-Length`` is ``TruncatedUpload``, and one that stalls (nothing
    received for ``REGISTRY_BODY_IDLE_TIMEOUT`` while the thread waits for more) is
    ``UploadStalled``; all surface in the consumer's next read, which then publishes
    nothing.
    """

    def __init__(self, request: Request, max_bytes: int) -> None:
        super().__init__()
        self._declared = declared_length(request)
        if self._declared is not None and self._declared > max_bytes:
            raise UploadTooLarge(
                f"upload of {self._declared} bytes exceeds REGISTRY_MAX_UPLOAD_BYTES "
                f"({max_bytes} bytes)"
            )
        self._request = request
        self._idle: float = request.app.state.ctx.settings.body_idle_timeout
        self._max = max_bytes
        self._queue: deque[bytes] = deque()
        self._queued = 0
        self._ready = threading.Condition()
        self._ended = False
        self._failure: Exception | None = None
        self._room = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._buf = b""
        self._at = 0
        self.received = 0

    def readable(self) -> bool:
        return True

    @asynccontextmanager
    async def feeding(self) -> AsyncIterator[StreamedBody]:
        """The body, fed from the event loop while the context is open."""
        self._loop = asyncio.get_running_loop()
        task = self._loop.create_task(self._feed())
        try:
            yield self
        finally:
            task.cancel()
            with anyio.CancelScope(shield=True), contextlib.suppress(asyncio.CancelledError):
                await task

    async def _feed(self) -> None:
        loop = asyncio.get_running_loop()
        watchdog = _IdleWatchdog(loop, self._idle)
        try:
            with anyio.CancelScope() as scope:
                watchdog.start(scope)
                await self._receive(watchdog)
            if scope.cancelled_caught:
                raise UploadStalled(f"request body stalled: nothing received for {self._idle:g} s")
        except Exception as exc:
            self._failure = exc
        finally:
            watchdog.stop()
            with self._ready:
                if not self._ended and self._failure is None:  # cancelled: not a whole body
                    self._failure = TruncatedUpload("request body not received to its end")
                self._ended = True
                self._ready.notify()

    async def _receive(self, watchdog: _IdleWatchdog) -> None:
        async for piece in self._request.stream():
            watchdog.heard()
            if not piece:
                continue
            self.received += len(piece)
            if self.received > self._max:
                raise UploadTooLarge(
                    f"upload exceeds REGISTRY_MAX_UPLOAD_BYTES ({self._max} bytes)"
                )
            with self._ready:
                self._queue.append(piece)
                self._queued += len(piece)
                full = self._queued >= BUFFERED_BYTES
                if full or self._queued >= WAKE_BYTES:  # not per piece: a wake-up costs more
                    self._ready.notify()
                if full:
                    self._room.clear()
            if full:  # the thread is behind: waiting for it is not the client stalling
                watchdog.paused = True
                await self._room.wait()
                watchdog.paused = False
                watchdog.heard()
        if self._declared is not None and self.received != self._declared:
            raise TruncatedUpload(
                f"truncated upload: received {self.received} of {self._declared} bytes announced"
            )
        with self._ready:
            self._ended = True
            self._ready.notify()

    def _next_piece(self) -> bool:
        """Wait for the next received piece; False at the end of the body."""
        with self._ready:
            while not self._queue and not self._ended:
                self._ready.wait()
            if self._failure is not None:
                raise self._failure
            if not self._queue:
                return False
            self._buf, self._at = self._queue.popleft(), 0
            was_full = self._queued >= BUFFERED_BYTES
            self._queued -= len(self._buf)
            if was_full and self._queued < BUFFERED_BYTES and self._loop is not None:
                self._loop.call_soon_threadsafe(self._room.set)
        return True

    def read(self, n: int | None = -1) -> bytes:
        """At most ``n`` bytes of one received piece: the piece itself when it fits, else
        a slice of it."""
        if self._at >= len(self._buf) and not self._next_piece():
            return b""
        if n is None or n < 0:
            n = len(self._buf) - self._at
        if self._at == 0 and n >= len(self._buf):
            out = self._buf
        else:
            out = self._buf[self._at : self._at + n]
        self._at += len(out)
        return out


class _IdleWatchdog:
    """Cancels a scope once nothing was heard for ``idle`` seconds (outside pauses): one
    timer per ``idle`` seconds, not one per piece received."""

    def __init__(self, loop: asyncio.AbstractEventLoop, idle: float) -> None:
        self._loop = loop
        self._idle = idle
        self._last = loop.time()
        self._timer: asyncio.TimerHandle | None = None
        self._scope: anyio.CancelScope | None = None
        self.paused = False

    def start(self, scope: anyio.CancelScope) -> None:
        self._scope = scope
        self._timer = self._loop.call_at(self._last + self._idle, self._check)

    def heard(self) -> None:
        self._last = self._loop.time()

    def _check(self) -> None:
        now = self._loop.time()
        if self.paused:
            self._last = now
        elif now - self._last >= self._idle:
            self._timer = None
            assert self._scope is not None
            self._scope.cancel()
            return
        self._timer = self._loop.call_at(self._last + self._idle, self._check)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


async def read_body(request: Request, max_bytes: int) -> bytearray:
    """The whole body, for bounded documents only: 413 past ``max_bytes`` (declared or
    received). One buffer, grown in place: never the chunks and their join at once."""
    declared = declared_length(request)
    if declared is not None and declared > max_bytes:
        raise UploadTooLarge(
            f"request body of {declared} bytes exceeds the limit of {max_bytes} bytes"
        )
    body = bytearray()
    async for chunk in body_chunks(request):
        if len(body) + len(chunk) > max_bytes:
            raise UploadTooLarge(f"request body exceeds the limit of {max_bytes} bytes")
        body += chunk
    return body
