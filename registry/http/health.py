"""Liveness and readiness: ``GET /healthz`` (always anonymous)."""

from __future__ import annotations

import anyio
from litestar import Response

from registry.http.routing import get
from registry.services.context import RegistryContext
from registry.services.health import readiness


@get("/healthz", summary="Liveness; ?ready=1 also checks the database and blob store")
async def healthz(ctx: RegistryContext, ready: bool = False) -> Response:
    if not ready:
        return Response({"status": "ok"})
    checks = await anyio.to_thread.run_sync(readiness, ctx)
    ok = all(v == "ok" for v in checks.values())
    return Response(
        {"status": "ok" if ok else "unavailable", **checks}, status_code=200 if ok else 503
    )
