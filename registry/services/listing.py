"""Listing models: one keyset-paginated page, and the columns on ``models`` that make it cheap.

The listing columns (the highest live version, its size and search text) are kept by
every verb that adds or removes a version, so listing and searching 100k models reads
one index range instead of grouping every version.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, or_, select
from sqlalchemy.orm import Session

from registry.db.tables import Carton, Model, ModelSearchTokens, Version
from registry.errors import InvalidParameter
from registry.services.access import hidden_namespaces, visible_models
from registry.services.rendering import iso
from registry.services.search import search_conditions, search_tokens

DEFAULT_PAGE = 50
MAX_PAGE = 500


def search_text(name: str, carton: Carton | None) -> str:
    parts = [name]
    if carton is not None:
        parts += [
            carton.short_description or "",
            carton.description or "",
            carton.runner_name or "",
        ]
    return " ".join(p for p in parts if p).lower()


def _set_tokens(session: Session, model: Model, tokens: str) -> None:
    """The model's ``field:value`` tokens (``registry.services.search``)."""
    row = session.get(ModelSearchTokens, model.id)
    if row is None:
        session.add(ModelSearchTokens(model_id=model.id, tokens=tokens))
    elif row.tokens != tokens:
        row.tokens = tokens


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
        _set_tokens(session, model, "")
        return
    version, carton = row
    model.latest_version = version
    model.latest_bytes = carton.total_bytes
    model.search_text = search_text(model.name, carton)
    _set_tokens(session, model, search_tokens(carton))


def _encode_cursor(values: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, *types: type) -> list[Any]:
    """The values of a cursor made by ``_encode_cursor``, checked against ``types``."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidParameter(f"invalid cursor {cursor!r}") from exc
    if (
        not isinstance(values, list)
        or len(values) != len(types)
        or not all(
            isinstance(v, t) and not isinstance(v, bool) for v, t in zip(values, types, strict=True)
        )
    ):
        raise InvalidParameter(f"invalid cursor {cursor!r}")
    return values


@dataclass(frozen=True)
class ModelPage:
    items: list[dict[str, Any]]
    next_cursor: str | None


SORTS = ("name", "recent", "size")


def list_models(
    session: Session,
    *,
    q: str | None = None,
    sort: str = "name",
    limit: int = DEFAULT_PAGE,
    cursor: str | None = None,
    namespace: str | None = None,
) -> ModelPage:
    """Models with their latest version, keyset-paginated (stable and fast at any depth).

    Only models the caller may read (``registry.services.access``); ``namespace`` keeps
    one namespace's (``""``: the root namespace's)."""
    if sort not in SORTS:
        raise InvalidParameter(f"invalid sort {sort!r}: one of {', '.join(SORTS)}")
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidParameter(f"limit must be between 1 and {MAX_PAGE}")
    stmt = (
        select(Model, Version, Carton)
        .join(
            Version,
            (Version.model_id == Model.id) & (Version.version == Model.latest_version),
        )
        .join(Carton, Carton.manifest_sha256 == Version.manifest_sha256)
        .where(Model.latest_version.is_not(None))
    )
    shown = visible_models(hidden_namespaces(session))
    if shown is not None:
        stmt = stmt.where(shown)
    if namespace is not None:
        stmt = stmt.where(Model.namespace == namespace)
    if q:
        stmt = stmt.where(*search_conditions(q))
    order: list[ColumnElement[Any]]
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
                raise InvalidParameter(f"invalid cursor {cursor!r}") from exc
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
            "updated_at": iso(model.updated_at),
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
