"""Read side and metadata verbs: cartons, models, versions, tags, references, stats."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, or_, select
from sqlalchemy.orm import Session

from registry.carton.manifest import is_sha256
from registry.db.tables import Blob, Carton, CartonFile, Model, Tag, Version, utcnow
from registry.errors import InvalidRequest, NotFound, PreconditionFailed
from registry.services import changes
from registry.services.context import RegistryContext
from registry.services.ingest import validate_model_name, validate_tag_name
from registry.services.listing import refresh_model_listing

DEFAULT_PAGE = 50
MAX_PAGE = 500
MAX_VERSION = 2**31 - 1  # versions are 32-bit integers in the database


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def require_sha256(value: str, what: str = "manifest hash") -> str:
    if not is_sha256(value):
        raise InvalidRequest(f"invalid {what} {value!r}: expected 64 lowercase hex characters")
    return value


def get_carton_row(session: Session, manifest_sha256: str) -> Carton:
    require_sha256(manifest_sha256)
    carton = session.get(Carton, manifest_sha256)
    if carton is None:
        raise NotFound(f"no carton with manifest hash {manifest_sha256}")
    return carton


def carton_json(session: Session, carton: Carton) -> dict[str, Any]:
    """Metadata of one carton: parsed carton.toml, files, and where it is versioned/tagged."""
    from registry.carton.config import parse_carton_toml

    config = parse_carton_toml(carton.carton_toml)
    versions = session.execute(
        select(Model.name, Version.version, Version.state, Version.state_reason, Version.id)
        .join(Model, Model.id == Version.model_id)
        .where(Version.manifest_sha256 == carton.manifest_sha256)
        .order_by(Model.name, Version.version)
    ).all()
    tags_by_version: dict[int, list[str]] = {}
    if versions:
        for tag_name, version_id in session.execute(
            select(Tag.name, Tag.version_id).where(Tag.version_id.in_([v.id for v in versions]))
        ):
            tags_by_version.setdefault(version_id, []).append(tag_name)
    return {
        "manifest_sha256": carton.manifest_sha256,
        # carton.toml's name, else the model it was first pushed under (?model=NAME).
        "model_name": carton.model_name
        or (min(versions, key=lambda v: v.id).name if versions else None),
        "short_description": carton.short_description,
        "description": carton.description,
        "spec_version": carton.spec_version,
        "runner": {
            "runner_name": carton.runner_name,
            "required_framework_version": carton.framework_version,
            "runner_compat_version": carton.runner_compat_version,
            "opts": config.runner.opts if config.runner else {},
        },
        "required_platforms": carton.required_platforms,
        "inputs": [_tensor_spec_json(t) for t in config.inputs],
        "outputs": [_tensor_spec_json(t) for t in config.outputs],
        "self_tests": [
            {
                "name": t.name,
                "description": t.description,
                "inputs": t.inputs,
                "expected_out": t.expected_out,
            }
            for t in config.self_tests
        ],
        "examples": [
            {
                "name": e.name,
                "description": e.description,
                "inputs": e.inputs,
                "sample_out": e.sample_out,
            }
            for e in config.examples
        ],
        "carton_toml": carton.carton_toml,
        "files": [{"path": f.path, "sha256": f.blob_sha256, "size": f.size} for f in carton.files],
        "file_count": carton.file_count,
        "bytes_total": carton.total_bytes,
        "created_at": _iso(carton.created_at),
        "versions": [
            {
                "model_name": v.name,
                "version": v.version,
                "state": v.state,
                "reason": v.state_reason,
                "tags": sorted(tags_by_version.get(v.id, [])),
            }
            for v in versions
        ],
    }


def _tensor_spec_json(spec: Any) -> dict[str, Any]:
    shape = spec.shape if isinstance(spec.shape, str) else list(spec.shape)
    return {
        "name": spec.name,
        "dtype": spec.dtype,
        "shape": shape,
        "description": spec.description,
    }


def get_carton(ctx: RegistryContext, manifest_sha256: str) -> dict[str, Any]:
    with ctx.sessions() as session:
        return carton_json(session, get_carton_row(session, manifest_sha256))


# --- models ---------------------------------------------------------------------------


def _encode_cursor(values: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, *types: type) -> list[Any]:
    """The values of a cursor made by ``_encode_cursor``, checked against ``types``."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidRequest(f"invalid cursor {cursor!r}") from exc
    if (
        not isinstance(values, list)
        or len(values) != len(types)
        or not all(
            isinstance(v, t) and not isinstance(v, bool) for v, t in zip(values, types, strict=True)
        )
    ):
        raise InvalidRequest(f"invalid cursor {cursor!r}")
    return values


@dataclass(frozen=True)
class ModelPage:
    items: list[dict[str, Any]]
    next_cursor: str | None


SORTS = ("name", "recent", "size")


def _like_pattern(q: str) -> str:
    return "%" + re.sub(r"([\\%_])", r"\\\1", q.lower()) + "%"


def list_models(
    session: Session,
    *,
    q: str | None = None,
    sort: str = "name",
    limit: int = DEFAULT_PAGE,
    cursor: str | None = None,
) -> ModelPage:
    """Models with their latest version, keyset-paginated (stable and fast at any depth)."""
    if sort not in SORTS:
        raise InvalidRequest(f"invalid sort {sort!r}: one of {', '.join(SORTS)}")
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidRequest(f"limit must be between 1 and {MAX_PAGE}")
    stmt = (
        select(Model, Version, Carton)
        .join(
            Version,
            (Version.model_id == Model.id) & (Version.version == Model.latest_version),
        )
        .join(Carton, Carton.manifest_sha256 == Version.manifest_sha256)
        .where(Model.latest_version.is_not(None))
    )
    if q:
        stmt = stmt.where(Model.search_text.like(_like_pattern(q), escape="\\"))
    if sort == "name":
        order = [Model.name.asc()]
        if cursor:
            (last_name,) = _decode_cursor(cursor, str)
            stmt = stmt.where(Model.name > last_name)
    elif sort == "recent":
        order = [Model.updated_at.desc(), Model.id.desc()]
        if cursor:
            last_time, last_id = _decode_cursor(cursor, str, int)
            try:
                when = datetime.fromisoformat(last_time)
            except ValueError as exc:
                raise InvalidRequest(f"invalid cursor {cursor!r}") from exc
            stmt = stmt.where(
                or_(Model.updated_at < when, (Model.updated_at == when) & (Model.id < last_id))
            )
    else:
        order = [Model.latest_bytes.desc(), Model.id.desc()]
        if cursor:
            last_size, last_id = _decode_cursor(cursor, int, int)
            stmt = stmt.where(
                or_(
                    Model.latest_bytes < last_size,
                    (Model.latest_bytes == last_size) & (Model.id < last_id),
                )
            )
    rows = session.execute(stmt.order_by(*order).limit(limit + 1)).all()
    more = len(rows) > limit
    rows = rows[:limit]
    items = [
        {
            "name": model.name,
            "latest_version": version.version,
            "manifest_sha256": version.manifest_sha256,
            "short_description": carton.short_description,
            "description_first_line": first_line(carton.short_description or carton.description),
            "runner_name": carton.runner_name,
            "bytes_total": carton.total_bytes,
            "updated_at": _iso(model.updated_at),
            "state": version.state,
        }
        for model, version, carton in rows
    ]
    next_cursor = None
    if more and rows:
        model, _version, carton = rows[-1]
        if sort == "name":
            next_cursor = _encode_cursor([model.name])
        elif sort == "recent":
            next_cursor = _encode_cursor([model.updated_at.isoformat(), model.id])
        else:
            next_cursor = _encode_cursor([carton.total_bytes, model.id])
    return ModelPage(items=items, next_cursor=next_cursor)


def first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def get_model_row(session: Session, name: str) -> Model:
    model = session.scalar(select(Model).where(Model.name == name))
    if model is None:
        raise NotFound(f"no model named {name!r}")
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
        "created_at": _iso(model.created_at),
        "updated_at": _iso(model.updated_at),
        "versions": [
            {
                "version": v.version,
                "manifest_sha256": v.manifest_sha256,
                "created_at": _iso(v.created_at),
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


# --- references -----------------------------------------------------------------------


@dataclass(frozen=True)
class Resolved:
    manifest_sha256: str
    model_name: str | None
    version: int | None


def resolve_version(session: Session, name: str, version: int) -> Version:
    model = get_model_row(session, name)
    if not 1 <= version <= MAX_VERSION:
        raise NotFound(f"model {name!r} has no version {version}")
    row = session.scalar(
        select(Version).where(Version.model_id == model.id, Version.version == version)
    )
    if row is None:
        raise NotFound(f"model {name!r} has no version {version}")
    return row


def resolve_tag(session: Session, name: str, tag: str) -> Version:
    model = get_model_row(session, name)
    row = session.get(Tag, (model.id, tag))
    if row is None:
        raise NotFound(f"model {name!r} has no tag {tag!r}")
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
        raise NotFound(f"model {name!r} has no versions")
    return row


def resolve_ref(ctx: RegistryContext, ref: str) -> Resolved:
    """A manifest hash, `name`, `name:version` or `name@tag`."""
    if is_sha256(ref):
        with ctx.sessions() as session:
            get_carton_row(session, ref)
        return Resolved(ref, None, None)
    with ctx.sessions() as session:
        if "@" in ref:
            name, tag = ref.rsplit("@", 1)
            row = resolve_tag(session, name, tag)
        elif ":" in ref and ref.rsplit(":", 1)[1].isdigit():
            name, number = ref.rsplit(":", 1)
            row = resolve_version(session, name, int(number))
        else:
            name = ref
            row = resolve_latest(session, name)
        return Resolved(row.manifest_sha256, name, row.version)


# --- tags and deletes -----------------------------------------------------------------


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
        raise InvalidRequest('give exactly one of "manifest_sha256" or "version"')
    with ctx.transaction() as session:
        model = session.scalar(select(Model).where(Model.name == name).with_for_update())
        if model is None:
            raise NotFound(f"no model named {name!r}")
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
                raise NotFound(f"model {name!r} has no version with manifest {manifest_sha256}")
        existing = session.get(Tag, (model.id, tag))
        if if_match is not None:
            expected = _strip_etag(if_match)
            current = existing.version.manifest_sha256 if existing else None
            if expected != "*" and current != expected:
                raise PreconditionFailed(
                    f"tag {tag!r} of {name!r} points at {current or 'nothing'}, not {expected}"
                )
            if expected == "*" and existing is None:
                raise PreconditionFailed(f"tag {tag!r} of {name!r} does not exist")
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
        existing = session.get(Tag, (model.id, tag))
        if existing is None:
            raise NotFound(f"model {name!r} has no tag {tag!r}")
        if if_match is not None and _strip_etag(if_match) not in (
            "*",
            existing.version.manifest_sha256,
        ):
            raise PreconditionFailed(
                f"tag {tag!r} of {name!r} points at {existing.version.manifest_sha256}"
            )
        session.delete(existing)


@changes.bumps
def delete_version(ctx: RegistryContext, name: str, version: int) -> dict[str, Any]:
    """Remove a version now; its carton goes too when nothing else references it.

    Its blobs stay until the next GC finds them unreferenced.
    """
    with ctx.transaction() as session:
        row = resolve_version(session, name, version)
        manifest = row.manifest_sha256
        model = row.model
        session.delete(row)
        session.flush()
        model.updated_at = utcnow()
        refresh_model_listing(session, model)
        carton_deleted = _delete_carton_if_unreferenced(session, manifest)
        return {
            "model_name": name,
            "version": version,
            "manifest_sha256": manifest,
            "carton_deleted": carton_deleted,
        }


@changes.bumps
def delete_model(ctx: RegistryContext, name: str) -> dict[str, Any]:
    with ctx.transaction() as session:
        model = get_model_row(session, name)
        manifests = list(
            session.scalars(select(Version.manifest_sha256).where(Version.model_id == model.id))
        )
        session.delete(model)
        session.flush()
        deleted = [m for m in manifests if _delete_carton_if_unreferenced(session, m)]
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


# --- stats ----------------------------------------------------------------------------


def stats(session: Session) -> dict[str, Any]:
    """logical: bytes of every carton's files; stored: bytes of the blobs they reference."""
    models = session.scalar(select(func.count()).select_from(Model)) or 0
    cartons = session.scalar(select(func.count()).select_from(Carton)) or 0
    logical = session.scalar(select(func.coalesce(func.sum(Carton.total_bytes), 0))) or 0
    blobs, stored = session.execute(
        select(func.count(), func.coalesce(func.sum(Blob.size), 0)).select_from(Blob)
    ).one()
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


_TOTALS_TTL_SECONDS = 5.0
_totals_cache: dict[int, tuple[int, float, dict[str, Any]]] = {}


def cached_stats(ctx: RegistryContext, session: Session) -> dict[str, Any]:
    """``stats()`` for page headers: it sums every blob row, so it is reused briefly.

    Exact after this process's own writes (keyed on the change generation);
    other processes' writes appear within the TTL.
    """
    import time

    key = id(ctx)
    now = time.monotonic()
    entry = _totals_cache.get(key)
    generation = changes.generation()
    if entry is not None and entry[0] == generation and now - entry[1] < _TOTALS_TTL_SECONDS:
        return dict(entry[2])
    value = stats(session)
    _totals_cache[key] = (generation, now, value)
    return dict(value)
