"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

import anyio
from litestar import Response, get
from sqlalchemy import text

from registry.blobstore.errors import BlobStoreUnavailable
from registry.services.context import RegistryContext


def _check(ctx: RegistryContext) -> dict[str, Any]:
    checks: dict[str, Any] = {}
    try:
        with ctx.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:  # readiness reports, it does not raise
        checks["database"] = f"error: {type(exc).__name__}"
    try:
        ctx.blobs.check_available()
        checks["blob_store"] = "ok"
    except BlobStoreUnavailable as exc:
        checks["blob_store"] = f"error: {exc}"
    return checks


@get("/healthz", summary="Liveness; ?ready=1 also checks the database and blob store")
async def healthz(ctx: RegistryContext, ready: bool = False) -> Response:
    if not ready:
        return Response({"status": "ok"})
    checks = await anyio.to_thread.run_sync(_check, ctx)
    ok = all(v == "ok" for v in checks.values())
    return Response(
        {"status": "ok" if ok else "unavailable", **checks}, status_code=200 if ok else 503
    )
