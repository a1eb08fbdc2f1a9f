"""Deleting versions and models: gone from the index at once, their bytes at the next GC.

"At once" holds in every process: each delete bumps the shared index generation and
returns only when no process can still serve its carton from memory
(``registry.services.freshness``).

A carton that no version references any more goes with its last version; its blobs
stay until garbage collection finds them unreferenced. Cartons whose lineage parent it
was lose their lineage rows with it (a foreign key's cascade) and get a new parent
computed after the delete commits (``registry.services.lineage``).
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from registry.db.tables import Carton, CartonFile, Version, utcnow
from registry.services import lineage
from registry.services.access import require_write
from registry.services.caches import changes_index
from registry.services.context import RegistryContext
from registry.services.freshness import bump_generation, wait_for_readers
from registry.services.listing import refresh_model_listing
from registry.services.models import get_model_row
from registry.services.references import resolve_version

log = logging.getLogger("registry.deletes")


@changes_index
def delete_version(ctx: RegistryContext, name: str, version: int) -> dict[str, Any]:
    """Remove a version now; its carton goes too when nothing else references it.

    Its blobs stay until the next GC finds them unreferenced.
    """
    with ctx.transaction() as session:
        row = resolve_version(session, name, version)
        manifest = row.manifest_sha256
        model = row.model
        require_write(session, model.namespace, "delete", name)
        session.delete(row)
        session.flush()
        model.updated_at = utcnow()
        refresh_model_listing(session, model)
        orphans = lineage.children_of(session, [manifest])
        carton_deleted = _delete_carton_if_unreferenced(session, manifest)
        bump_generation(session)
    wait_for_readers(ctx)
    if carton_deleted:
        _reparent(ctx, orphans)
    return {
        "model_name": name,
        "version": version,
        "manifest_sha256": manifest,
        "carton_deleted": carton_deleted,
    }


@changes_index
def delete_model(ctx: RegistryContext, name: str) -> dict[str, Any]:
    with ctx.transaction() as session:
        model = get_model_row(session, name)
        require_write(session, model.namespace, "delete", name)
        manifests = list(
            session.scalars(select(Version.manifest_sha256).where(Version.model_id == model.id))
        )
        session.delete(model)
        session.flush()
        orphans = lineage.children_of(session, manifests)
        deleted = [m for m in manifests if _delete_carton_if_unreferenced(session, m)]
        bump_generation(session)
    wait_for_readers(ctx)
    if deleted:
        _reparent(ctx, orphans)
    return {"model_name": name, "versions": len(manifests), "cartons_deleted": len(deleted)}


def _delete_carton_if_unreferenced(session: Session, manifest_sha256: str) -> bool:
    still_used = session.scalar(
        select(func.count()).select_from(Version).where(Version.manifest_sha256 == manifest_sha256)
    )
    if still_used:
        return False
    session.execute(delete(CartonFile).where(CartonFile.manifest_sha256 == manifest_sha256))
    session.execute(delete(Carton).where(Carton.manifest_sha256 == manifest_sha256))
    return True


def _reparent(ctx: RegistryContext, children: list[str]) -> None:
    """Lineage for the children of deleted cartons (those still stored and without a row);
    a failure leaves them to be computed when read."""
    try:
        lineage.record(ctx, children)
    except Exception:
        log.warning("lineage of %d cartons not recomputed", len(children), exc_info=True)
