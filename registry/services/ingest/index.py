"""Rows second, for a pushed carton: carton, files, model version and tag.

Runs in the push's indexing transaction once every file has its row
(``chunkstore.index.record_files``); concurrent pushes of the same manifest or
model meet at unique keys, and the loser reads the winner's rows.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.carton.config import CartonConfig
from registry.carton.manifest import Manifest
from registry.carton.names import split_name
from registry.db.queries import insert_ignore
from registry.db.tables import Carton, CartonFile, Model, Tag, Version, utcnow
from registry.services.access import hidden_namespaces
from registry.services.listing import refresh_model_listing


def index_carton(
    session: Session,
    manifest: Manifest,
    config: CartonConfig,
    toml_bytes: bytes,
    sizes: dict[str, int],
    name: str | None,
    tag: str | None,
) -> tuple[bool, str | None, int | None]:
    """Rows second (the files' rows are already in): carton, files, model version, tag.

    Returns (created, model name, version).
    """
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
                runner_name=runner.runner_name,
                framework_version=runner.required_framework_version,
                runner_compat_version=runner.runner_compat_version,
                required_platforms=list(config.required_platforms),
                file_count=len(manifest.entries),
                total_bytes=sum(sizes[e.sha256] for e in manifest.entries),
            )
        )
        session.flush()
        session.execute(
            CartonFile.__table__.insert(),
            [
                {
                    "manifest_sha256": manifest.sha256,
                    "path": e.path,
                    "blob_sha256": e.sha256,
                    "size": sizes[e.sha256],
                }
                for e in manifest.entries
            ],
        )
        created = True
    if name is None:
        # Unnamed push of a carton already versioned under a name (given by ?model= then):
        # the answer names that first version, as a re-push answers the same name and version.
        return (created, *_first_version(session, manifest.sha256))
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


def _first_version(session: Session, manifest_sha256: str) -> tuple[str | None, int | None]:
    """(model name, version) of the carton's first version the caller may see, else Nones."""
    first = session.execute(
        select(Model.name, Version.version)
        .join(Model, Model.id == Version.model_id)
        .where(
            Version.manifest_sha256 == manifest_sha256,
            Model.namespace.not_in(sorted(hidden_namespaces(session))),
        )
        .order_by(Version.id)
        .limit(1)
    ).first()
    return (first[0], first[1]) if first else (None, None)


def indexed_version(
    session: Session, manifest_sha256: str, name: str | None
) -> tuple[str | None, int | None] | None:
    """What ``index_carton`` would answer (name, version) for a carton it already holds under
    ``name``, without a tag: nothing to write. None when it would write (a new carton, model
    or version)."""
    if session.get(Carton, manifest_sha256) is None:
        return None
    if name is None:
        return _first_version(session, manifest_sha256)
    version = session.scalar(
        select(Version.version)
        .join(Model, Model.id == Version.model_id)
        .where(Model.name == name, Version.manifest_sha256 == manifest_sha256)
    )
    return None if version is None else (name, version)


def _get_or_create_model(session: Session, name: str) -> Model:
    insert_ignore(
        session,
        Model.__table__,
        [
            {
                "name": name,
                "namespace": split_name(name)[0],
                "last_version": 0,
                "created_at": utcnow(),
                "updated_at": utcnow(),
            }
        ],
    )
    model = session.scalar(select(Model).where(Model.name == name).with_for_update())
    assert model is not None
    return model
