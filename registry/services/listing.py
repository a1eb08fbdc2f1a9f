"""The listing columns on ``models``: the highest live version, its size and search text.

Kept by every verb that adds or removes a version, so listing and searching
100k models reads one index range instead of grouping every version.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.db.tables import Carton, Model, Version


def search_text(name: str, carton: Carton | None) -> str:
    parts = [name]
    if carton is not None:
        parts += [
            carton.short_description or "",
            carton.description or "",
            carton.runner_name or "",
        ]
    return " ".join(p for p in parts if p).lower()


def refresh_model_listing(session: Session, model: Model) -> None:
    row = session.execute(
        select(Version.version, Carton)
        .join(Carton, Carton.manifest_sha256 == Version.manifest_sha256)
        .where(Version.model_id == model.id)
        .order_by(Version.version.desc())
        .limit(1)
    ).first()
    if row is None:
        model.latest_version = None
        model.latest_bytes = None
        model.search_text = search_text(model.name, None)
        return
    version, carton = row
    model.latest_version = version
    model.latest_bytes = carton.total_bytes
    model.search_text = search_text(model.name, carton)
