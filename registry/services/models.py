"""Reading one model: its row, and its versions and tags as the API and the pages show them."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.db.tables import Carton, Model, Tag, Version
from registry.errors import ModelNotFound
from registry.services.access import model_readable
from registry.services.context import RegistryContext
from registry.services.rendering import iso


def get_model_row(session: Session, name: str) -> Model:
    model = session.scalar(select(Model).where(Model.name == name))
    if model is None or not model_readable(session, model.namespace):
        raise ModelNotFound(f"no model named {name!r}")
    return model


def model_json(session: Session, model: Model) -> dict[str, Any]:
    versions = session.execute(
        select(Version, Carton.total_bytes, Carton.file_count)
        .join(Carton, Carton.manifest_sha256 == Version.manifest_sha256)
        .where(Version.model_id == model.id)
        .order_by(Version.version.desc())
    ).all()
    tags = session.execute(
        select(Tag.name, Version.version, Version.manifest_sha256)
        .join(Version, Version.id == Tag.version_id)
        .where(Tag.model_id == model.id)
        .order_by(Tag.name)
    ).all()
    return {
        "name": model.name,
        "created_at": iso(model.created_at),
        "updated_at": iso(model.updated_at),
        "versions": [
            {
                "version": v.version,
                "manifest_sha256": v.manifest_sha256,
                "created_at": iso(v.created_at),
                "state": v.state,
                "reason": v.state_reason,
                "bytes_total": total,
                "files": count,
            }
            for v, total, count in versions
        ],
        "tags": {name: {"version": ver, "manifest_sha256": sha} for name, ver, sha in tags},
    }


def get_model(ctx: RegistryContext, name: str) -> dict[str, Any]:
    with ctx.sessions() as session:
        return model_json(session, get_model_row(session, name))
