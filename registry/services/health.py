"""Readiness: can the registry reach its database and blob store right now?"""

from __future__ import annotations

from sqlalchemy import text

from registry.blobstore.errors import BlobStoreUnavailable
from registry.services.context import RegistryContext


def database_problem(ctx: RegistryContext) -> str | None:
    """None when the database answers, else what went wrong (reports, never raises)."""
    try:
        with ctx.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        return f"error: {type(exc).__name__}"
    return None


def readiness(ctx: RegistryContext) -> dict[str, str]:
    """``"ok"`` or ``"error: ..."`` for each dependency; reports, never raises."""
    checks: dict[str, str] = {"database": database_problem(ctx) or "ok"}
    try:
        ctx.blobs.check_available()
        checks["blob_store"] = "ok"
    except BlobStoreUnavailable as exc:
        checks["blob_store"] = f"error: {exc}"
    return checks
