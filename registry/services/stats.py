"""Index totals: models, cartons, blobs, logical and stored bytes, the dedup ratio."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.db.tables import Blob, Carton, Model
from registry.services import changes
from registry.services.context import RegistryContext


def stats(session: Session) -> dict[str, Any]:
    """logical: bytes of every carton's files; stored: bytes of the blobs they reference."""
    models = session.scalar(select(func.count()).select_from(Model)) or 0
    cartons = session.scalar(select(func.count()).select_from(Carton)) or 0
    logical = session.scalar(select(func.coalesce(func.sum(Carton.total_bytes), 0))) or 0
    blobs, stored = session.execute(
        select(func.count(), func.coalesce(func.sum(Blob.size), 0)).select_from(Blob)
    ).one()
    return {
        "models": int(models),
        "cartons": int(cartons),
        "blobs": int(blobs),
        "logical_bytes": int(logical),
        "stored_bytes": int(stored),
        "dedup_ratio": (int(logical) / int(stored)) if stored else None,
    }


def get_stats(ctx: RegistryContext) -> dict[str, Any]:
    with ctx.sessions() as session:
        return stats(session)


_TOTALS_TTL_SECONDS = 5.0
_totals_cache: dict[int, tuple[int, float, dict[str, Any]]] = {}


def cached_stats(ctx: RegistryContext, session: Session) -> dict[str, Any]:
    """``stats()`` for page headers: it sums every blob row, so it is reused briefly.

    Exact after this process's own writes (keyed on the change generation);
    other processes' writes appear within the TTL.
    """
    import time

    key = id(ctx)
    now = time.monotonic()
    entry = _totals_cache.get(key)
    generation = changes.generation()
    if entry is not None and entry[0] == generation and now - entry[1] < _TOTALS_TTL_SECONDS:
        return dict(entry[2])
    value = stats(session)
    _totals_cache[key] = (generation, now, value)
    return dict(value)
