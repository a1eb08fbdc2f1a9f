"""Response bodies from synchronous iterators, with constant memory and a free event loop.

The services and the blob store produce bodies as sync iterators of ~1 MiB
chunks. ``open_stream`` pulls them through ``anyio.to_thread.run_sync``, so the
event loop never blocks on a read: up to ``BATCH_BYTES`` per trip to a worker
thread (a trip costs about as much as copying a MiB), each chunk still sent as
its own message. It pulls the first chunk before the response starts, so a
missing blob or an unreachable store still gets a proper error response.
Iterators are closed when the body ends or the client goes away.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator

import anyio
import anyio.to_thread
from litestar import Response

OCTETS = "application/octet-stream"
STREAM_CHUNK = 256 * 1024  # coalesce small pieces (zip headers, compressor output) to this
BATCH_BYTES = 4 * 1024 * 1024  # pulled per worker-thread trip


def close_iterator(it: object) -> None:
    """Close ``it`` if it can be closed (generators, store readers)."""
    close = getattr(it, "close", None)
    if close is not None:
        close()


def coalesce(chunks: Iterable[bytes], target: int = STREAM_CHUNK) -> Iterator[bytes]:
    """Join small chunks into pieces of at least ``target`` bytes (big ones pass as they are)."""
    buf: list[bytes] = []
    n = 0
    try:
        for chunk in chunks:
            if not chunk:
                continue
            if not n and len(chunk) >= target:
                yield chunk
                continue
            buf.append(chunk)
            n += len(chunk)
            if n >= target:
                yield b"".join(buf)
                buf, n = [], 0
        if buf:
            yield b"".join(buf)
    finally:
        close_iterator(chunks)


async def open_stream(make: Callable[[], Iterator[bytes]]) -> AsyncIterator[bytes]:
    """Start a sync iterator in a worker thread and pull its first chunk there.

    Errors before the first byte (a missing blob, an unreachable store) surface
    here, while a proper error response can still be sent.
    """

    def start() -> tuple[Iterator[bytes], bytes | None]:
        it = make()
        try:
            return it, next(it, None)
        except BaseException:
            close_iterator(it)
            raise

    it, first = await anyio.to_thread.run_sync(start)
    return _drain(it, first)


def _next_batch(it: Iterator[bytes]) -> list[bytes]:
    """The next chunks, up to ``BATCH_BYTES``; empty at the end."""
    batch: list[bytes] = []
    size = 0
    for chunk in it:
        batch.append(chunk)
        size += len(chunk)
        if size >= BATCH_BYTES:
            break
    return batch


async def _drain(it: Iterator[bytes], first: bytes | None) -> AsyncIterator[bytes]:
    try:
        if first is None:
            return
        yield first
        while batch := await anyio.to_thread.run_sync(_next_batch, it):
            for chunk in batch:
                yield chunk
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(close_iterator, it)


def empty_response(
    status: int, headers: dict[str, str], media_type: str = OCTETS
) -> Response[bytes]:
    """A bodiless answer (HEAD, 304, redirects) that keeps the headers it is given."""
    return Response(b"", status_code=status, headers=headers, media_type=media_type)
