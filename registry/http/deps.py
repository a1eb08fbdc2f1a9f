"""Request-scoped access to the RegistryContext, and request bodies for the controllers."""

from __future__ import annotations

import io

import anyio
import anyio.from_thread
from litestar import Request
from litestar.datastructures import State

from registry.errors import TruncatedUpload, UploadTooLarge
from registry.services.context import RegistryContext


def provide_ctx(state: State) -> RegistryContext:
    return state.ctx  # type: ignore[no-any-return]


PIECE = 1024 * 1024
"""Bytes gathered on the event loop per hand-off to the worker thread reading a body."""


class StreamedBody(io.RawIOBase):
    """A request body as a blocking stream, for the worker thread that consumes it.

    Each read that finds nothing buffered hops to the event loop once and gathers
    about ``PIECE`` bytes there, so a multi-GB upload costs a few thousand hops,
    not one per network packet. The limits are enforced as the bytes arrive: a
    declared or received size over ``max_bytes`` is ``UploadTooLarge``, and a body
    that ends short of its ``Content-Length`` is ``TruncatedUpload``; both surface
    in the consumer, which then publishes nothing.
    """

    def __init__(self, request: Request, max_bytes: int) -> None:
        super().__init__()
        declared = request.headers.get("content-length")
        self._declared = int(declared) if declared is not None and declared.isdigit() else None
        if self._declared is not None and self._declared > max_bytes:
            raise UploadTooLarge(
                f"upload of {declared} bytes exceeds REGISTRY_MAX_UPLOAD_BYTES ({max_bytes} bytes)"
            )
        self._stream = request.stream()
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
            try:
                chunk = await self._stream.__anext__()
            except StopAsyncIteration:
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


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The whole body, for small documents only: 413 past ``max_bytes`` (declared or received)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise UploadTooLarge(
            f"request body of {declared} bytes exceeds the limit of {max_bytes} bytes"
        )
    parts: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > max_bytes:
            raise UploadTooLarge(f"request body exceeds the limit of {max_bytes} bytes")
        parts.append(chunk)
    return b"".join(parts)
