"""Request-scoped access to the RegistryContext, and request bodies for the controllers."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import anyio
import anyio.from_thread
from litestar import Request
from litestar.datastructures import State

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


PIECE = 1024 * 1024
"""Bytes gathered on the event loop per hand-off to the worker thread reading a body."""


class StreamedBody(io.RawIOBase):
    """A request body as a blocking stream, for the worker thread that consumes it.

    Each read that finds nothing buffered hops to the event loop once and gathers
    about ``PIECE`` bytes there, so a multi-GB upload costs a few thousand hops,
    not one per network packet. The limits are enforced as the bytes arrive: a
    declared or received size over ``max_bytes`` is ``UploadTooLarge``, a body
    that ends short of its ``Content-Length`` is ``TruncatedUpload``, and one that
    stalls is ``UploadStalled`` (``body_chunks``); all surface in the consumer,
    which then publishes nothing.
    """

    def __init__(self, request: Request, max_bytes: int) -> None:
        super().__init__()
        self._declared = declared_length(request)
        if self._declared is not None and self._declared > max_bytes:
            raise UploadTooLarge(
                f"upload of {self._declared} bytes exceeds REGISTRY_MAX_UPLOAD_BYTES "
                f"({max_bytes} bytes)"
            )
        self._chunks = body_chunks(request)
        self._max = max_bytes
        self._buf = b""
        self._at = 0
        self._eof = False
        self.received = 0

    def readable(self) -> bool:
        return True

    async def _gather(self) -> bytes:
        parts: list[bytes] = []
        size = 0
        while size < PIECE:
            chunk = await anext(self._chunks, None)
            if chunk is None:
                self._eof = True
                break
            if chunk:
                parts.append(chunk)
                size += len(chunk)
        self.received += size
        if self.received > self._max:
            raise UploadTooLarge(f"upload exceeds REGISTRY_MAX_UPLOAD_BYTES ({self._max} bytes)")
        if self._eof and self._declared is not None and self.received != self._declared:
            raise TruncatedUpload(
                f"truncated upload: received {self.received} of {self._declared} bytes announced"
            )
        return b"".join(parts)

    def read(self, n: int | None = -1) -> bytes:
        if self._at >= len(self._buf):
            if self._eof:
                return b""
            self._buf, self._at = anyio.from_thread.run(self._gather), 0
        if n is None or n < 0:
            n = len(self._buf) - self._at
        out = self._buf[self._at : self._at + n]
        self._at += len(out)
        return out

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        memoryview(buffer).cast("B")[: len(data)] = data
        return len(data)


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
