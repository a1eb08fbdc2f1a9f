"""Request-scoped access to the RegistryContext, and request bodies for the controllers."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

import anyio
from litestar import Request
from litestar.datastructures import State

from registry.carton.streams import ReadStream
from registry.errors import TruncatedUpload, UploadAbandoned, UploadStalled, UploadTooLarge
from registry.http import body_socket
from registry.http.pace import BodyLimits, PaceWatchdog
from registry.services.context import RegistryContext


def provide_ctx(state: State) -> RegistryContext:
    ctx: RegistryContext = state.ctx
    return ctx


async def received_pieces(request: Request) -> AsyncIterator[bytes]:
    """The body's pieces as the server hands them over; ``UploadAbandoned`` (499) when the
    client goes away first (Litestar's own ``stream()`` would make that a 500)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            raise UploadAbandoned("the client closed the connection before its body was received")
        piece = cast("bytes", message.get("body", b""))  # ASGI: http.request bodies are bytes
        if piece:
            yield piece
        if not message.get("more_body", False):
            return


async def body_chunks(request: Request) -> AsyncIterator[bytes]:
    """The request body's chunks; ``UploadStalled`` (408) when it stops arriving or falls
    below the body rates (``registry.http.pace``), so a trickling client cannot hold a slot."""
    watchdog = PaceWatchdog(
        BodyLimits.from_settings(request.app.state.ctx.settings), declared_length(request)
    )
    pieces = received_pieces(request)
    watchdog.start()
    try:
        while watchdog.reason is None:
            chunk = None
            with anyio.CancelScope() as watchdog.scope:
                chunk = await anext(pieces, None)
            watchdog.scope = None
            if chunk is None or watchdog.reason is not None:
                break
            watchdog.heard(len(chunk))
            yield chunk
    finally:
        watchdog.stop()
    if watchdog.reason is not None:
        raise UploadStalled(watchdog.reason)


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
    its ``Content-Length`` is ``TruncatedUpload``, one that stalls or trickles
    (``registry.http.pace``; the time the queue is full does not count) is
    ``UploadStalled``, and one whose client goes away is ``UploadAbandoned``; all surface
    in the consumer's next read, which then publishes nothing.

    A body of ``DIRECT_BODY_MIN_BYTES`` or more, under the registry's own server, is read
    by the consumer from the connection itself (``registry.http.body_socket``): the
    event loop takes no part, and the limits are the same.
    """

    def __init__(
        self, request: Request, max_bytes: int, limit: str = "REGISTRY_MAX_UPLOAD_BYTES"
    ) -> None:
        super().__init__()
        self._declared = declared_length(request)
        if self._declared is not None and self._declared > max_bytes:
            raise UploadTooLarge(
                f"upload of {self._declared} bytes exceeds {limit} ({max_bytes} bytes)"
            )
        self._request = request
        self._limits = BodyLimits.from_settings(request.app.state.ctx.settings)
        self._max = max_bytes
        self._limit_name = limit
        self._queue: deque[bytes] = deque()
        self._queued = 0
        self._ready = threading.Condition()
        self._ended = False
        self._failure: Exception | None = None
        self._room = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._buf = b""
        self._at = 0
        self._socket: body_socket.SocketBody | None = None
        self.received = 0

    def readable(self) -> bool:
        return True

    @asynccontextmanager
    async def feeding(self) -> AsyncIterator[StreamedBody]:
        """The body, fed from the event loop (or read from its connection, class doc)
        while the context is open."""
        self._socket = self._taken_socket()
        if self._socket is not None:
            try:
                yield self
            finally:
                self._socket.close()
            return
        self._loop = asyncio.get_running_loop()
        task = self._loop.create_task(self._feed())
        try:
            yield self
        finally:
            task.cancel()
            with anyio.CancelScope(shield=True), contextlib.suppress(asyncio.CancelledError):
                await task

    def _taken_socket(self) -> body_socket.SocketBody | None:
        declared = self._declared
        if (
            declared is None
            or declared < body_socket.DIRECT_BODY_MIN_BYTES
            or not body_socket.AVAILABLE
            or "transfer-encoding" in self._request.headers
        ):
            return None
        take = body_socket.body_taker(self._request.scope)
        taken = take() if take is not None else None
        if taken is None:
            return None
        return body_socket.SocketBody(taken, declared, self._limits)

    async def _feed(self) -> None:
        watchdog = PaceWatchdog(self._limits, self._declared)
        try:
            with anyio.CancelScope() as watchdog.scope:
                watchdog.start()
                await self._receive(watchdog)
            if watchdog.reason is not None:
                raise UploadStalled(watchdog.reason)
        except Exception as exc:
            self._failure = exc
        finally:
            watchdog.stop()
            with self._ready:
                if not self._ended and self._failure is None:  # cancelled: not a whole body
                    self._failure = TruncatedUpload("request body not received to its end")
                self._ended = True
                self._ready.notify()

    async def _receive(self, watchdog: PaceWatchdog) -> None:
        async for piece in received_pieces(self._request):
            watchdog.heard(len(piece))
            self.received += len(piece)
            if self.received > self._max:
                raise UploadTooLarge(f"upload exceeds {self._limit_name} ({self._max} bytes)")
            with self._ready:
                self._queue.append(piece)
                self._queued += len(piece)
                full = self._queued >= BUFFERED_BYTES
                if full or self._queued >= WAKE_BYTES:  # not per piece: a wake-up costs more
                    self._ready.notify()
                if full:
                    self._room.clear()
            if full:  # the thread is behind: waiting for it is not the client being slow
                watchdog.pause()
                await self._room.wait()
                watchdog.resume()
        if self._declared is not None and self.received != self._declared:
            raise TruncatedUpload(
                f"truncated upload: received {self.received} of {self._declared} bytes announced"
            )
        with self._ready:
            self._ended = True
            self._ready.notify()

    def _next_piece(self) -> bool:
        """Wait for the next received piece; False at the end of the body."""
        if self._socket is not None:
            self._buf, self._at = self._socket.read(), 0
            self.received = self._socket.received
            return bool(self._buf)
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
