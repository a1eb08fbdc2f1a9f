"""Readiness: can the registry reach its database and blob store right now?"""

from __future__ import annotations

from sqlalchemy import text

from registry.errors import StorageUnavailable
from registry.services.context import RegistryContext


def readiness(ctx: RegistryContext) -> dict[str, str]:
    """``"ok"`` or ``"error: ..."`` for each dependency; reports, never raises."""
    checks: dict[str, str] = {}
    try:
        with ctx.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"error: {type(exc).__name__}"
    try:
        ctx.blobs.check_available()
        checks["blob_store"] = "ok"
    except StorageUnavailable as exc:
        checks["blob_store"] = f"error: {exc}"
    return checks
