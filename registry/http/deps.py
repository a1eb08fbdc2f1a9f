"""Request-scoped access to the RegistryContext and helpers shared by controllers."""

from __future__ import annotations

import fcntl
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from litestar import Request
from litestar.datastructures import State

from registry.errors import BadRequest, PayloadTooLarge
from registry.services.context import RegistryContext


def provide_ctx(state: State) -> RegistryContext:
    return state.ctx  # type: ignore[no-any-return]


@asynccontextmanager
async def spooled_request(
    request: Request, ctx: RegistryContext, max_bytes: int
) -> AsyncIterator[Path]:
    """The body in a temp file, flock-ed while in use (GC skips locked spool files)."""
    path = await spool_request(request, ctx, max_bytes)
    try:
        with open(path, "rb") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
            yield path
    finally:
        path.unlink(missing_ok=True)


async def spool_request(request: Request, ctx: RegistryContext, max_bytes: int) -> Path:
    """Stream the request body to a temp file (no DB connection held while it arrives)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLarge(
            f"upload of {declared} bytes exceeds REGISTRY_MAX_UPLOAD_BYTES ({max_bytes} bytes)"
        )
    directory = ctx.settings.data_dir / "uploads"
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="upload-", suffix=".part", dir=directory)
    path = Path(name)
    total = 0
    try:
        with open(fd, "wb", buffering=0) as out:
            fcntl.flock(out.fileno(), fcntl.LOCK_SH)
            pending: list[bytes] = []
            pending_size = 0
            async for chunk in request.stream():
                total += len(chunk)
                if total > max_bytes:
                    raise PayloadTooLarge(
                        f"upload exceeds REGISTRY_MAX_UPLOAD_BYTES ({max_bytes} bytes)"
                    )
                pending.append(chunk)
                pending_size += len(chunk)
                if pending_size >= 4 * 1024 * 1024:
                    data = b"".join(pending)
                    pending, pending_size = [], 0
                    await anyio.to_thread.run_sync(out.write, data)
            if pending:
                await anyio.to_thread.run_sync(out.write, b"".join(pending))
        if declared is not None and declared.isdigit() and total != int(declared):
            raise BadRequest(f"truncated upload: received {total} of {declared} bytes announced")
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path
