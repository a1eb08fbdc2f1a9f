"""The model version a v2 URL names, and the carton.toml it serves."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.carton.config import CartonConfig, parse_carton_toml
from registry.db.tables import Carton, Version
from registry.services import references
from registry.services.names import validate_model_name

# Version states as Triton names them (the only two a stored version has).
READY = "READY"
UNAVAILABLE = "UNAVAILABLE"


def resolve_version(session: Session, name: str, version: int | None) -> Version:
    """The version row of ``name`` (its latest when ``version`` is None)."""
    validate_model_name(name)
    if version is None:
        return references.resolve_latest(session, name)
    return references.resolve_version(session, name, version)


def version_numbers(session: Session, model_id: int) -> list[str]:
    rows = session.scalars(
        select(Version.version).where(Version.model_id == model_id).order_by(Version.version)
    )
    return [str(v) for v in rows]


def stored_config(session: Session, row: Version) -> CartonConfig:
    """The carton.toml of the carton ``row`` points at."""
    carton = session.get(Carton, row.manifest_sha256)
    assert carton is not None  # foreign key
    return parse_carton_toml(carton.carton_toml)
