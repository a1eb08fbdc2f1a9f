"""API tokens: nested scopes, stored hashed.

Scopes nest: ``admin`` ⊃ ``delete`` ⊃ ``push`` ⊃ ``pull``; a token holding
one scope holds every scope below it. A token is ``crt_`` followed by 43
URL-safe characters (256 random bits); the database keeps only its sha256,
so a leaked database does not leak usable tokens, and a lost token cannot be
shown again (create a new one, revoke the old).

A valid token's scopes are kept in ``ctx.caches.facts`` (``cached_scopes``, no
I/O), so a request under ``AUTH=all`` needs no database round trip; the
database sees the token again once a minute, to mark it used. Revoking bumps
the shared index generation (``registry.services.freshness``): once
``revoke_token`` returns, no process accepts the token.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update

from registry.db.tables import ApiToken, Namespace, utcnow
from registry.errors import (
    InvalidName,
    InvalidScope,
    NamespaceNotFound,
    TokenNameTaken,
    TokenNotFound,
)
from registry.services.context import RegistryContext
from registry.services.freshness import bump_generation, current_generation, wait_for_readers
from registry.services.names import validate_namespace
from registry.services.rendering import iso

SCOPES = ("pull", "push", "delete", "admin")
TOKEN_PREFIX = "crt_"
LAST_USED_RESOLUTION = timedelta(minutes=1)
LAST_USED_SECONDS = LAST_USED_RESOLUTION.total_seconds()


def expand_scopes(granted: str | list[str] | tuple[str, ...] | set[str]) -> frozenset[str]:
    """Every scope implied by the granted ones (``push`` → pull, push)."""
    names = granted.split(",") if isinstance(granted, str) else list(granted)
    result: set[str] = set()
    for name in (n.strip() for n in names):
        if not name:
            continue
        if name not in SCOPES:
            raise InvalidScope(f"unknown scope {name!r} (use one of {', '.join(SCOPES)})")
        result.update(SCOPES[: SCOPES.index(name) + 1])
    return frozenset(result)


def highest_scope(scopes: frozenset[str] | set[str]) -> str | None:
    for name in reversed(SCOPES):
        if name in scopes:
            return name
    return None


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def parse_namespaces(text: str) -> frozenset[str] | None:
    """``api_tokens.namespaces``: None for a global token ("")."""
    names = frozenset(n for n in text.split(",") if n)
    return names or None


@dataclass(frozen=True)
class TokenInfo:
    id: int
    name: str
    scopes: tuple[str, ...]
    created_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None
    namespaces: tuple[str, ...] = ()

    @classmethod
    def of(cls, row: ApiToken) -> TokenInfo:
        return cls(
            id=row.id,
            name=row.name,
            scopes=tuple(s for s in SCOPES if s in expand_scopes(row.scopes)),
            created_at=row.created_at,
            last_used_at=row.last_used_at,
            revoked_at=row.revoked_at,
            namespaces=tuple(sorted(parse_namespaces(row.namespaces or "") or ())),
        )

    @property
    def scope(self) -> str | None:
        return highest_scope(set(self.scopes))

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "scope": self.scope,
            "scopes": list(self.scopes),
            "namespaces": list(self.namespaces) or None,
            "created_at": iso(self.created_at),
            "last_used_at": iso(self.last_used_at),
            "revoked": self.revoked_at is not None,
            "revoked_at": iso(self.revoked_at),
        }


def create_token(
    ctx: RegistryContext, name: str | None, scope: str, namespaces: Sequence[str] = ()
) -> tuple[str, TokenInfo]:
    """A new token; the plaintext is returned here once and never stored.

    With ``namespaces`` it acts only inside them (each must exist); without, it is global.
    """
    spaces = sorted({validate_namespace(ns) for ns in namespaces})
    granted = expand_scopes(scope)
    if not granted:
        raise InvalidScope("a token needs a scope")
    top = highest_scope(granted)
    assert top is not None
    if name is not None and (not name.strip() or len(name) > 255 or name.strip().isdigit()):
        raise InvalidName("token name: 1-255 characters, not only digits (ids are numbers)")
    token = new_token()
    with ctx.transaction() as session:
        unknown = [ns for ns in spaces if session.get(Namespace, ns) is None]
        if unknown:
            raise NamespaceNotFound(f"no namespace named {unknown[0]!r}")
        if name:
            clash = session.scalar(
                select(ApiToken.id).where(ApiToken.name == name, ApiToken.revoked_at.is_(None))
            )
            if clash is not None:
                raise TokenNameTaken(f"an active token named {name!r} exists (id {clash})")
        row = ApiToken(
            name=name or "", token_hash=hash_token(token), scopes=top, namespaces=",".join(spaces)
        )
        session.add(row)
        session.flush()
        if not name:
            row.name = f"{top}-{row.id}"
        info = TokenInfo.of(row)
    return token, info


def list_tokens(ctx: RegistryContext, include_revoked: bool = False) -> list[TokenInfo]:
    with ctx.sessions() as session:
        query = select(ApiToken).order_by(ApiToken.id)
        if not include_revoked:
            query = query.where(ApiToken.revoked_at.is_(None))
        return [TokenInfo.of(row) for row in session.scalars(query)]


def revoke_token(ctx: RegistryContext, id_or_name: str | int) -> list[TokenInfo]:
    """Revoke the token with this id, or every active token with this name."""
    key = str(id_or_name).strip()
    with ctx.transaction() as session:
        query = select(ApiToken).where(ApiToken.revoked_at.is_(None))
        if key.isdigit():
            query = query.where(or_(ApiToken.id == int(key), ApiToken.name == key))
        else:
            query = query.where(ApiToken.name == key)
        rows = list(session.scalars(query))
        if not rows:
            raise TokenNotFound(f"no active token with id or name {key!r}")
        now = utcnow()
        for row in rows:
            row.revoked_at = now
        revoked = [TokenInfo.of(row) for row in rows]
        bump_generation(session)
    wait_for_readers(ctx)
    return revoked


@dataclass(frozen=True)
class Grant:
    """A valid token's scopes, and when this process last had the database mark it used."""

    scopes: frozenset[str]
    marked_at: float  # time.monotonic()
    token_id: int = 0
    namespaces: frozenset[str] | None = None  # None: a global token


def cached_grant(ctx: RegistryContext, bearer: str) -> Grant | None:
    """A token's grant if this process knows it is valid and marked it used lately; no I/O."""
    facts = ctx.caches.facts
    if facts.current() is None:
        return None
    grant: Grant | None = facts.tokens.get(hash_token(bearer))
    if grant is None or time.monotonic() - grant.marked_at >= LAST_USED_SECONDS:
        return None
    return grant


def cached_scopes(ctx: RegistryContext, bearer: str) -> frozenset[str] | None:
    """A token's scopes if this process knows it is valid and marked it used lately; no I/O."""
    grant = cached_grant(ctx, bearer)
    return None if grant is None else grant.scopes


def authenticate(ctx: RegistryContext, bearer: str | None) -> frozenset[str] | None:
    """The scopes of a valid, unrevoked token, or None. Marks it used (at most once a minute)."""
    grant = authenticate_grant(ctx, bearer)
    return None if grant is None else grant.scopes


def authenticate_grant(ctx: RegistryContext, bearer: str | None) -> Grant | None:
    """A valid, unrevoked token's grant, or None. Marks it used (at most once a minute)."""
    if not bearer or not bearer.startswith(TOKEN_PREFIX) or len(bearer) > 200:
        return None
    generation = current_generation(ctx)  # re-read once trusted no more: facts may be gone
    known = cached_grant(ctx, bearer)
    if known is not None:
        return known
    digest = hash_token(bearer)
    with ctx.sessions() as session:
        row = session.execute(
            select(
                ApiToken.id,
                ApiToken.scopes,
                ApiToken.namespaces,
                ApiToken.last_used_at,
                ApiToken.revoked_at,
            ).where(ApiToken.token_hash == digest)
        ).first()
        session.rollback()
    if row is None or row.revoked_at is not None:
        return None
    # constant-time comparison is moot: the lookup is by hash, not by the secret itself.
    now = datetime.now(UTC)
    last = row.last_used_at
    if last is not None and last.tzinfo is None:
        last = last.replace(tzinfo=UTC)
    if last is None or now - last >= LAST_USED_RESOLUTION:
        try:
            with ctx.transaction() as session:
                session.execute(
                    update(ApiToken).where(ApiToken.id == row.id).values(last_used_at=now)
                )
        except Exception:  # bookkeeping must never fail a request
            pass
    try:
        scopes = expand_scopes(row.scopes)
    except InvalidScope:
        return None
    grant = Grant(scopes, time.monotonic(), row.id, parse_namespaces(row.namespaces or ""))
    facts = ctx.caches.facts
    facts.remember(facts.tokens, digest, grant, generation)
    return grant
