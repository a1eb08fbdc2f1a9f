"""Index totals: models, cartons, blobs, logical and stored bytes, the dedup ratio."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from registry.db.tables import Blob, Carton, CartonFile, Model, Pack, Version
from registry.services.access import hidden_namespaces, readable_carton_condition
from registry.services.context import RegistryContext
from registry.services.namespaces import get_namespace_row


def stats(session: Session, namespace: str | None = None) -> dict[str, Any]:
    """logical: bytes of every carton's files; stored: what the blob store holds for them.

    Stored counts whole blobs and packs (with their unreferenced chunks, until GC
    rewrites the pack), not the files inside packs: a ``du`` of the store.

    A caller that may not read some private namespace, or that asks for one namespace,
    sees the totals of what it may read (``partial_stats``).
    """
    hidden = hidden_namespaces(session)
    if hidden or namespace is not None:
        return partial_stats(session, hidden, namespace)
    # A model whose versions were all removed keeps its row (numbers are never reused), but
    # it is no longer listed, so it is not counted either.
    models = (
        session.scalar(
            select(func.count()).select_from(Model).where(Model.latest_version.is_not(None))
        )
        or 0
    )
    cartons = session.scalar(select(func.count()).select_from(Carton)) or 0
    logical = session.scalar(select(func.coalesce(func.sum(Carton.total_bytes), 0))) or 0
    blobs = session.scalar(select(func.count()).select_from(Blob)) or 0
    whole = session.scalar(
        select(func.coalesce(func.sum(Blob.size), 0)).where(Blob.chunked.is_(False))
    )
    packs = session.scalar(select(func.coalesce(func.sum(Pack.size), 0)))
    stored = int(whole or 0) + int(packs or 0)
    return _totals(models, cartons, blobs, logical, stored)


def partial_stats(
    session: Session, hidden: frozenset[str], namespace: str | None
) -> dict[str, Any]:
    """The totals of the models and cartons a caller may read (of one namespace).

    Storage is shared, so a part of it has no ``du``: ``stored_bytes`` here is the size
    of the distinct files those cartons hold (what they would take stored alone, before
    chunk dedup), and ``blobs`` counts those files.
    """
    model_filter: list[ColumnElement[bool]] = (
        [Model.namespace.not_in(sorted(hidden))] if hidden else []
    )
    if namespace is not None:
        model_filter.append(Model.namespace == namespace)
        manifests = (
            select(Version.manifest_sha256)
            .join(Model, Model.id == Version.model_id)
            .where(*model_filter)
        )
        carton_filter: ColumnElement[bool] = Carton.manifest_sha256.in_(manifests)
    else:
        carton_filter = readable_carton_condition(hidden, Carton.manifest_sha256)
    models = session.scalar(select(func.count()).select_from(Model).where(*model_filter)) or 0
    cartons = session.scalar(select(func.count()).select_from(Carton).where(carton_filter)) or 0
    logical = (
        session.scalar(select(func.coalesce(func.sum(Carton.total_bytes), 0)).where(carton_filter))
        or 0
    )
    files = (
        select(CartonFile.blob_sha256)
        .join(Carton, Carton.manifest_sha256 == CartonFile.manifest_sha256)
        .where(carton_filter)
        .distinct()
        .subquery()
    )
    blobs, stored = session.execute(
        select(func.count(), func.coalesce(func.sum(Blob.size), 0)).where(
            Blob.sha256.in_(select(files.c.blob_sha256))
        )
    ).one()
    return _totals(models, cartons, blobs, logical, stored)


def get_stats(ctx: RegistryContext, namespace: str | None = None) -> dict[str, Any]:
    with ctx.sessions() as session:
        if namespace:
            get_namespace_row(session, namespace)
        return stats(session, namespace)


def cached_stats(ctx: RegistryContext, session: Session) -> dict[str, Any]:
    """``stats()`` for page headers: it sums every blob row, so it is reused briefly.

    Exact after this context's own writes (keyed on its local generation); other
    processes' writes appear within the TTL (see ``registry.services.caches``).
    """
    if hidden_namespaces(session):
        return stats(session)  # a partial view: not the one cached for everyone
    generation = ctx.caches.local_generation
    value = ctx.caches.totals.get(generation)
    if value is None:
        value = stats(session)
        ctx.caches.totals.put(generation, value)
    return dict(value)


def _totals(models: Any, cartons: Any, blobs: Any, logical: Any, stored: Any) -> dict[str, Any]:
    """The stats document, from the counts as the database returns them."""
    return {
        "models": int(models),
        "cartons": int(cartons),
        "blobs": int(blobs),
        "logical_bytes": int(logical),
        "stored_bytes": int(stored),
        "dedup_ratio": (int(logical) / int(stored)) if stored else None,
    }
