"""References to a carton: a manifest hash, ``name``, ``name:version`` or ``name@tag``.

``name`` alone means the ``latest`` tag when set, else the highest version (DESIGN.md
"References"); version numbers are never reused.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.carton.digests import DIGEST_SCHEME, is_hash_prefix, is_sha256
from registry.carton.names import MAX_VERSION
from registry.db.tables import Model, Tag, Version
from registry.errors import InvalidReference, TagNotFound, VersionNotFound
from registry.services.cartons import find_carton_row, get_carton_row
from registry.services.context import RegistryContext
from registry.services.models import get_model_row
from registry.services.names import require_version, validate_model_name, validate_tag_name


@dataclass(frozen=True)
class Resolved:
    manifest_sha256: str
    model_name: str | None
    version: int | None


def resolve_version(session: Session, name: str, version: int) -> Version:
    model = get_model_row(session, name)
    if not 1 <= version <= MAX_VERSION:
        raise VersionNotFound(f"model {name!r} has no version {version}")
    row = session.scalar(
        select(Version).where(Version.model_id == model.id, Version.version == version)
    )
    if row is None:
        raise VersionNotFound(f"model {name!r} has no version {version}")
    return row


def resolve_tag(session: Session, name: str, tag: str) -> Version:
    model = get_model_row(session, name)
    row = session.get(Tag, (model.id, tag))
    if row is None:
        raise TagNotFound(f"model {name!r} has no tag {tag!r}")
    return row.version


def resolve_latest(session: Session, name: str) -> Version:
    """`name` alone: the `latest` tag when set, else the highest version."""
    model = get_model_row(session, name)
    tag = session.get(Tag, (model.id, "latest"))
    if tag is not None:
        return tag.version
    row = session.scalar(
        select(Version).where(Version.model_id == model.id).order_by(Version.version.desc())
    )
    if row is None:
        raise VersionNotFound(f"model {name!r} has no versions")
    return row


def resolve_ref(ctx: RegistryContext, ref: str) -> Resolved:
    """A manifest hash, `name`, `name:version` or `name@tag`."""
    if is_sha256(ref):
        with ctx.sessions() as session:
            get_carton_row(session, ref)
        return Resolved(ref, None, None)
    # Model names hold neither '@' nor ':' (DESIGN.md "Names"), so the split is unambiguous.
    name, at, tag = ref.partition("@")
    name, colon, number = name.partition(":")
    validate_model_name(name)
    version = require_version(number) if colon else None
    if at:
        validate_tag_name(tag)
        if colon:
            raise InvalidReference(f"invalid reference {ref!r}: a version or a tag, not both")
    with ctx.sessions() as session:
        if at:
            row = resolve_tag(session, name, tag)
        elif version is not None:
            row = resolve_version(session, name, version)
        else:
            row = resolve_latest(session, name)
        return Resolved(row.manifest_sha256, name, row.version)


def find_ref(session: Session, ref: str) -> Resolved:
    """Any reference the CLI takes: a manifest hash (bare, ``sha256:`` or a unique prefix of
    8+ hex digits), ``name``, ``name:version`` or ``name@tag``.

    A bare hex string that is also a model's name means the model (as the CLI resolves it).
    """
    digest = ref.removeprefix(DIGEST_SCHEME)
    if is_sha256(digest):
        get_carton_row(session, digest)
        return Resolved(digest, None, None)
    if ref.startswith(DIGEST_SCHEME) or (
        is_hash_prefix(ref) and session.scalar(select(Model.id).where(Model.name == ref)) is None
    ):
        return Resolved(find_carton_row(session, ref).manifest_sha256, None, None)
    name, at, tag = ref.partition("@")
    name, colon, number = name.partition(":")
    validate_model_name(name)
    if at:
        validate_tag_name(tag)
        if colon:
            raise InvalidReference(f"invalid reference {ref!r}: a version or a tag, not both")
        row = resolve_tag(session, name, tag)
    elif colon:
        row = resolve_version(session, name, require_version(number))
    else:
        row = resolve_latest(session, name)
    return Resolved(row.manifest_sha256, name, row.version)
