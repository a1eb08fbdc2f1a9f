"""Request-scoped access to the RegistryContext and helpers shared by controllers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from litestar import Request
from litestar.datastructures import State

from registry.errors import TruncatedUpload, UploadStalled, UploadTooLarge
from registry.services.context import RegistryContext
from registry.services.uploads import upload_file


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


@asynccontextmanager
async def spooled_request(
    request: Request, ctx: RegistryContext, max_bytes: int, limiter: anyio.CapacityLimiter
) -> AsyncIterator[Path]:
    """Stream the body to a locked temp file (no DB connection held while it arrives).

    The file is removed when the block ends; GC skips it while it is locked. Its writes
    run under ``limiter`` (the ingest's, ``registry.http.overload``).
    """
    declared = declared_length(request)
    if declared is not None and declared > max_bytes:
        raise UploadTooLarge(
            f"upload of {declared} bytes exceeds REGISTRY_MAX_UPLOAD_BYTES ({max_bytes} bytes)"
        )
    with upload_file(ctx) as (path, out):
        total = 0
        pending: list[bytes] = []
        pending_size = 0
        async for chunk in body_chunks(request):
            total += len(chunk)
            if total > max_bytes:
                raise UploadTooLarge(
                    f"upload exceeds REGISTRY_MAX_UPLOAD_BYTES ({max_bytes} bytes)"
                )
            pending.append(chunk)
            pending_size += len(chunk)
            if pending_size >= 4 * 1024 * 1024:
                data = b"".join(pending)
                pending, pending_size = [], 0
                await anyio.to_thread.run_sync(out.write, data, limiter=limiter)
        if pending:
            await anyio.to_thread.run_sync(out.write, b"".join(pending), limiter=limiter)
        if declared is not None and total != declared:
            raise TruncatedUpload(
                f"truncated upload: received {total} of {declared} bytes announced"
            )
        yield path


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
