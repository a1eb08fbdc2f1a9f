"""Push, rows second: blobs, carton, files, model version and tag in one transaction.

Runs only once every byte is stored and verified (``ingest_bytes``); concurrent pushes
of the same manifest or model meet at unique keys, and the loser reads the winner's rows.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.carton.config import CartonConfig
from registry.carton.manifest import Manifest
from registry.db.queries import insert_ignore
from registry.db.tables import Blob, Carton, CartonFile, Model, Tag, Version, utcnow
from registry.services.ingest_bytes import BlobFacts
from registry.services.listing import refresh_model_listing


def index_carton(
    session: Session,
    manifest: Manifest,
    config: CartonConfig,
    toml_bytes: bytes,
    facts: dict[str, BlobFacts],
    name: str | None,
    tag: str | None,
) -> tuple[bool, str | None, int | None]:
    """Rows second: blobs, carton, files, model version, tag.

    Returns (created, model name, version).
    """
    insert_ignore(
        session,
        Blob.__table__,  # type: ignore[arg-type]
        [{"sha256": s, "size": f.size, "crc32": f.crc32} for s, f in sorted(facts.items())],
    )
    created = False
    if session.get(Carton, manifest.sha256) is None:
        runner = config.runner
        session.add(
            Carton(
                manifest_sha256=manifest.sha256,
                manifest=manifest.raw,
                carton_toml=toml_bytes.decode("utf-8"),
                spec_version=config.spec_version,
                model_name=config.model_name,
                short_description=config.short_description,
                description=config.model_description,
                runner_name=runner.runner_name if runner else None,
                framework_version=runner.required_framework_version if runner else None,
                runner_compat_version=runner.runner_compat_version if runner else None,
                required_platforms=list(config.required_platforms),
                file_count=len(manifest.entries),
                total_bytes=sum(facts[e.sha256].size for e in manifest.entries),
            )
        )
        session.flush()
        session.execute(
            CartonFile.__table__.insert(),  # type: ignore[attr-defined]
            [
                {
                    "manifest_sha256": manifest.sha256,
                    "path": e.path,
                    "blob_sha256": e.sha256,
                    "size": facts[e.sha256].size,
                }
                for e in manifest.entries
            ],
        )
        created = True
    if name is None:
        # Unnamed push of a carton already versioned under a name (given by ?model= then):
        # the answer names that first version, as a re-push answers the same name and version.
        first = session.execute(
            select(Model.name, Version.version)
            .join(Model, Model.id == Version.model_id)
            .where(Version.manifest_sha256 == manifest.sha256)
            .order_by(Version.id)
            .limit(1)
        ).first()
        return created, (first[0] if first else None), (first[1] if first else None)
    model = _get_or_create_model(session, name)
    version = session.scalar(
        select(Version).where(
            Version.model_id == model.id, Version.manifest_sha256 == manifest.sha256
        )
    )
    if version is None:
        model.last_version += 1
        model.updated_at = utcnow()
        version = Version(
            model_id=model.id, version=model.last_version, manifest_sha256=manifest.sha256
        )
        session.add(version)
        session.flush()
        refresh_model_listing(session, model)
        created = True
    if tag is not None:
        existing = session.get(Tag, (model.id, tag))
        if existing is None:
            session.add(Tag(model_id=model.id, name=tag, version_id=version.id))
        elif existing.version_id != version.id:
            existing.version_id = version.id
            existing.updated_at = utcnow()
    return created, name, version.version


def _get_or_create_model(session: Session, name: str) -> Model:
    insert_ignore(
        session,
        Model.__table__,  # type: ignore[arg-type]
        [{"name": name, "last_version": 0, "created_at": utcnow(), "updated_at": utcnow()}],
    )
    model = session.scalar(select(Model).where(Model.name == name).with_for_update())
    assert model is not None
    return model
