"""Moving and deleting tags; with ``If-Match`` a move or delete is a compare-and-swap."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from registry.db.tables import Model, Tag, Version, utcnow
from registry.errors import InvalidBody, ModelNotFound, TagMoved, TagNotFound, VersionNotFound
from registry.services.access import model_readable, require_write
from registry.services.context import RegistryContext
from registry.services.models import get_model_row
from registry.services.names import require_sha256, validate_model_name, validate_tag_name
from registry.services.references import resolve_version


def _strip_etag(value: str) -> str:
    value = value.strip()
    if value.startswith("W/"):
        value = value[2:]
    return value.strip('"')


def put_tag(
    ctx: RegistryContext,
    name: str,
    tag: str,
    *,
    manifest_sha256: str | None = None,
    version: int | None = None,
    if_match: str | None = None,
) -> dict[str, Any]:
    """Move (or create) a tag; with If-Match it is a compare-and-swap (412 when it moved)."""
    validate_model_name(name)
    validate_tag_name(tag)
    if (manifest_sha256 is None) == (version is None):
        raise InvalidBody('give exactly one of "manifest_sha256" or "version"')
    with ctx.transaction() as session:
        model = session.scalar(select(Model).where(Model.name == name).with_for_update())
        if model is None or not model_readable(session, model.namespace):
            raise ModelNotFound(f"no model named {name!r}")
        require_write(session, model.namespace, "push", name)
        target: Version | None
        if version is not None:
            target = resolve_version(session, name, version)
        else:
            require_sha256(manifest_sha256 or "")
            target = session.scalar(
                select(Version).where(
                    Version.model_id == model.id, Version.manifest_sha256 == manifest_sha256
                )
            )
            if target is None:
                raise VersionNotFound(
                    f"model {name!r} has no version with manifest {manifest_sha256}"
                )
        existing = session.get(Tag, (model.id, tag))
        if if_match is not None:
            expected = _strip_etag(if_match)
            current = existing.version.manifest_sha256 if existing else None
            if expected != "*" and current != expected:
                raise TagMoved(
                    f"tag {tag!r} of {name!r} points at {current or 'nothing'}, not {expected}"
                )
            if expected == "*" and existing is None:
                raise TagMoved(f"tag {tag!r} of {name!r} does not exist")
        if existing is None:
            session.add(Tag(model_id=model.id, name=tag, version_id=target.id))
        else:
            existing.version_id = target.id
            existing.updated_at = utcnow()
        return {
            "model_name": name,
            "tag": tag,
            "version": target.version,
            "manifest_sha256": target.manifest_sha256,
        }


def delete_tag(ctx: RegistryContext, name: str, tag: str, *, if_match: str | None = None) -> None:
    with ctx.transaction() as session:
        model = get_model_row(session, name)
        require_write(session, model.namespace, "delete", name)
        existing = session.get(Tag, (model.id, tag))
        if existing is None:
            raise TagNotFound(f"model {name!r} has no tag {tag!r}")
        if if_match is not None and _strip_etag(if_match) not in (
            "*",
            existing.version.manifest_sha256,
        ):
            raise TagMoved(f"tag {tag!r} of {name!r} points at {existing.version.manifest_sha256}")
        session.delete(existing)
