"""Who is asking, and what they may read and change (DESIGN.md "Namespaces").

A request runs as one ``Access``: its token's id, scopes and namespaces (None: a
global token, or none at all) and the ``REGISTRY_AUTH`` mode. The HTTP edge sets
it for the whole request (``acting_as``); it rides along into worker threads as a
context variable, so the services that read a model, a carton or a blob check it
where the row is read (``get_model_row``, ``get_carton_row``, blob serving)
instead of every controller remembering to. Outside a request (operator commands,
tests of services) the caller is the operator, who sees everything.

Reads: the root namespace and public namespaces are read as ``REGISTRY_AUTH``
says (the route guards decide); a private namespace needs a token with ``pull``
that is global or names the namespace. Anyone else is told what a name that does
not exist would tell them (``ModelNotFound``, ``CartonNotFound``, 404).

Writes (under ``AUTH`` other than ``off``): the scope (checked by the guard) and a
global token, or one naming the namespace; a namespaced token does not write in the
root namespace. A write to a private namespace the token cannot read is a 404 too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, not_, select
from sqlalchemy.orm import Session

from registry.blobstore import BlobNotFound
from registry.db.tables import BlobUpload, CartonFile, Model, Namespace, Version, utcnow
from registry.errors import CartonNotFound, PermissionDenied
from registry.services.context import RegistryContext
from registry.services.freshness import current_generation

ROOT = ""


@dataclass(frozen=True)
class Access:
    """The caller of one request."""

    token_id: int | None = None
    scopes: frozenset[str] = frozenset()
    # None: a global token (or no token); else the namespaces the token acts in.
    namespaces: frozenset[str] | None = None
    auth: str = "off"
    operator: bool = False

    @property
    def global_reader(self) -> bool:
        """Reads every namespace: the operator, or a global token with ``pull``."""
        return self.operator or (
            self.token_id is not None and self.namespaces is None and "pull" in self.scopes
        )

    @property
    def upload_key(self) -> int:
        """Whose uploads these are (``blob_uploads.token_id``): 0 without a token."""
        return self.token_id or 0

    def reads_private(self, namespace: str) -> bool:
        if self.global_reader:
            return True
        return (
            "pull" in self.scopes and self.namespaces is not None and namespace in self.namespaces
        )

    def may_write(self, namespace: str, scope: str) -> bool:
        if self.operator or self.auth == "off":
            return True
        if scope not in self.scopes:
            return False
        return self.namespaces is None or namespace in self.namespaces

    def describe(self) -> str:
        if self.namespaces is None:
            return "a global token" if self.token_id is not None else "an anonymous caller"
        return "a token of namespace(s) " + ", ".join(sorted(self.namespaces))


OPERATOR = Access(operator=True)

_current: ContextVar[Access] = ContextVar("registry_access", default=OPERATOR)


def current_access() -> Access:
    return _current.get()


@contextmanager
def acting_as(access: Access) -> Iterator[Access]:
    """Run the block (and the worker threads it starts through anyio) as ``access``."""
    token = _current.set(access)
    try:
        yield access
    finally:
        _current.reset(token)


def private_namespaces(session: Session) -> frozenset[str]:
    return frozenset(
        session.scalars(select(Namespace.name).where(Namespace.visibility == "private"))
    )


def hidden_namespaces(session: Session, access: Access | None = None) -> frozenset[str]:
    """The private namespaces this caller may not read (empty: it reads everything)."""
    access = access or current_access()
    if access.global_reader:
        return frozenset()
    return frozenset(ns for ns in private_namespaces(session) if not access.reads_private(ns))


def visible_models(hidden: frozenset[str]) -> ColumnElement[bool] | None:
    """A filter on ``Model`` for the caller that cannot read ``hidden``; None: no filter."""
    return Model.namespace.not_in(sorted(hidden)) if hidden else None


def model_readable(session: Session, namespace: str) -> bool:
    if namespace == ROOT:
        return True
    return namespace not in hidden_namespaces(session)


def _carton_namespaces(session: Session, manifest_sha256: str) -> set[str]:
    """The namespaces of the models whose versions name the carton."""
    return set(
        session.scalars(
            select(Model.namespace)
            .join(Version, Version.model_id == Model.id)
            .where(Version.manifest_sha256 == manifest_sha256)
            .distinct()
        )
    )


def carton_readable(session: Session, manifest_sha256: str, hidden: frozenset[str]) -> bool:
    """A carton is read through a version of a model the caller may read; a carton that no
    version names (pushed unnamed) is in the root namespace."""
    if not hidden:
        return True
    spaces = _carton_namespaces(session, manifest_sha256)
    return not spaces or bool(spaces - hidden)


def carton_is_private(session: Session, manifest_sha256: str) -> bool:
    """Only private namespaces' models hold the carton (its slim form signs its LINKS)."""
    private = private_namespaces(session)
    if not private:
        return False
    spaces = _carton_namespaces(session, manifest_sha256)
    return bool(spaces) and spaces <= private


def readable_carton_condition(hidden: frozenset[str], manifest: Any = None) -> ColumnElement[bool]:
    """SQL: the carton named by ``manifest`` (``CartonFile``'s by default) is one the
    caller may read (``carton_readable``)."""
    column = CartonFile.manifest_sha256 if manifest is None else manifest
    named = select(Version.id).where(Version.manifest_sha256 == column)
    visible = (
        select(Version.id)
        .join(Model, Model.id == Version.model_id)
        .where(Version.manifest_sha256 == column)
        .where(Model.namespace.not_in(sorted(hidden)))
    )
    return not_(exists(named)) | exists(visible)


def readable_blobs(
    session: Session,
    hashes: list[str],
    access: Access | None = None,
    *,
    uploads_within: float | None,
) -> set[str]:
    """Those of ``hashes`` a carton the caller may read holds (and, with ``fresh_uploads``,
    those it uploaded itself within ``uploads_within`` seconds), when some namespace is hidden
    from it; all of them otherwise. Says nothing about whether the bytes are stored."""
    access = access or current_access()
    hidden = hidden_namespaces(session, access)
    if not hidden or not hashes:
        return set(hashes)
    found: set[str] = set()
    for start in range(0, len(hashes), 500):
        batch = hashes[start : start + 500]
        found |= set(
            session.scalars(
                select(CartonFile.blob_sha256)
                .where(CartonFile.blob_sha256.in_(batch), readable_carton_condition(hidden))
                .distinct()
            )
        )
        if uploads_within is not None:
            since = utcnow() - timedelta(seconds=uploads_within)
            found |= set(
                session.scalars(
                    select(BlobUpload.sha256).where(
                        and_(
                            BlobUpload.token_id == access.upload_key,
                            BlobUpload.sha256.in_(batch),
                            BlobUpload.uploaded_at >= since,
                        )
                    )
                )
            )
    return found


def require_write(session: Session, namespace: str, scope: str, what: str) -> None:
    """``PermissionDenied`` unless the caller may ``scope`` in ``namespace``.

    A namespace it may not even read answers as a missing one (``not_found``)."""
    access = current_access()
    if access.may_write(namespace, scope):
        return
    if namespace != ROOT and namespace in hidden_namespaces(session, access):
        from registry.errors import ModelNotFound

        raise ModelNotFound(f"no model named {what!r}")
    where = f"namespace {namespace!r}" if namespace else "the root namespace"
    raise PermissionDenied(
        f"{access.describe()} may not {scope} in {where}",
        challenge=f'Bearer realm="carton-registry", error="insufficient_scope", scope="{scope}"',
    )


# --- the read path: blobs and cartons, answered from memory when nothing is private -------


def known_private_namespaces(ctx: RegistryContext) -> frozenset[str] | None:
    """The private namespaces if this process knows them under a trusted generation; no I/O."""
    facts = ctx.caches.facts
    if facts.current() is None:
        return None
    return facts.private.get("")


def load_private_namespaces(ctx: RegistryContext) -> frozenset[str]:
    """The private namespaces (read once per index generation)."""
    generation = current_generation(ctx)
    facts = ctx.caches.facts
    known = facts.private.get("")
    if known is not None:
        return known
    with ctx.sessions() as session:
        value = private_namespaces(session)
    facts.remember(facts.private, "", value, generation)
    return value


def gate_needed(ctx: RegistryContext) -> bool:
    """Whether this caller's blob and carton reads must be checked; no I/O once known.

    False when it reads everything (a global token, or no namespace is private)."""
    access = current_access()
    if access.global_reader:
        return False
    known = known_private_namespaces(ctx)
    if known is None:
        return True  # unknown without a query: the (threaded) check finds out
    return any(not access.reads_private(ns) for ns in known)


def require_blob_readable(ctx: RegistryContext, sha256: str) -> None:
    """``BlobNotFound`` (as for a blob never stored) unless the caller may read the blob."""
    access = current_access()
    hidden = frozenset(ns for ns in load_private_namespaces(ctx) if not access.reads_private(ns))
    if not hidden or access.global_reader:
        return
    with ctx.sessions() as session:
        readable = readable_blobs(session, [sha256], access, uploads_within=ctx.settings.gc_grace)
    if sha256 not in readable:
        raise BlobNotFound(sha256)


def require_carton_readable(ctx: RegistryContext, manifest_sha256: str) -> None:
    """``CartonNotFound`` (as for a carton never pushed) unless the caller may read it."""
    access = current_access()
    hidden = frozenset(ns for ns in load_private_namespaces(ctx) if not access.reads_private(ns))
    if not hidden or access.global_reader:
        return
    with ctx.sessions() as session:
        if not carton_readable(session, manifest_sha256, hidden):
            raise CartonNotFound(f"no carton with manifest hash {manifest_sha256}")
