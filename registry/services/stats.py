"""Index totals: models, cartons, blobs, logical and stored bytes, the dedup ratio."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from registry.db.tables import Blob, Carton, Model, Pack
from registry.services.context import RegistryContext


def stats(session: Session) -> dict[str, Any]:
    """logical: bytes of every carton's files; stored: what the blob store holds for them.

    Stored counts whole blobs and packs (with their unreferenced chunks, until GC
    rewrites the pack), not the files inside packs: a ``du`` of the store.
    """
    models = session.scalar(select(func.count()).select_from(Model)) or 0
    cartons = session.scalar(select(func.count()).select_from(Carton)) or 0
    logical = session.scalar(select(func.coalesce(func.sum(Carton.total_bytes), 0))) or 0
    blobs = session.scalar(select(func.count()).select_from(Blob)) or 0
    whole = session.scalar(
        select(func.coalesce(func.sum(Blob.size), 0)).where(Blob.chunked.is_(False))
    )
    packs = session.scalar(select(func.coalesce(func.sum(Pack.size), 0)))
    stored = int(whole or 0) + int(packs or 0)
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


def cached_stats(ctx: RegistryContext, session: Session) -> dict[str, Any]:
    """``stats()`` for page headers: it sums every blob row, so it is reused briefly.

    Exact after this context's own writes (keyed on its local generation); other
    processes' writes appear within the TTL (see ``registry.services.caches``).
    """
    generation = ctx.caches.local_generation
    value = ctx.caches.totals.get(generation)
    if value is None:
        value = stats(session)
        ctx.caches.totals.put(generation, value)
    return dict(value)
