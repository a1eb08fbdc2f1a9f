"""Bearer-token auth as route guards (DESIGN.md "Auth scopes").

Every route carries the scope it needs: ``require_pull`` on the router that
holds everything but ``/healthz`` and ``/metrics`` (always anonymous),
``require_push`` on each write, ``require_delete`` on each DELETE. Scopes
nest (``admin`` ⊃ ``delete`` ⊃ ``push`` ⊃ ``pull``), and under
``REGISTRY_AUTH``:

- ``off``: nothing is checked;
- ``write``: push and delete routes need their scope, reads are anonymous;
- ``all``: every guarded route needs at least ``pull``.

A route with several guards is decided by its strongest one (the others stand
aside), so one request authenticates once and its answer names the scope the
route really needs. Missing or unknown token: ``AuthenticationRequired`` (401);
a token without the scope: ``PermissionDenied`` (403); both carry the
``WWW-Authenticate`` challenge and answer through ``registry.http.errors``.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread
from litestar.connection import ASGIConnection
from litestar.handlers import BaseRouteHandler

from registry.errors import AuthenticationRequired, PermissionDenied
from registry.services.auth import SCOPES, authenticate, cached_scopes

REALM = 'Bearer realm="carton-registry"'


class RequireScope:
    """A guard: the request needs a token holding ``scope`` (when ``REGISTRY_AUTH`` asks)."""

    def __init__(self, scope: str) -> None:
        if scope not in SCOPES:
            raise ValueError(f"unknown scope {scope!r}")
        self.scope = scope

    def __repr__(self) -> str:
        return f"RequireScope({self.scope!r})"

    async def __call__(
        self, connection: ASGIConnection[Any, Any, Any, Any], route_handler: BaseRouteHandler
    ) -> None:
        ctx = connection.app.state.ctx
        if ctx.settings.auth == "off" or deciding_guard(route_handler) is not self:
            return
        if self.scope == "pull" and signed_blob_url(connection):
            return  # the handler checks the signature (registry.services.signing)
        needed = required_scope(ctx.settings.auth, route_handler)
        if needed is None:
            return
        token = bearer_token(connection)
        if token is None:
            raise AuthenticationRequired(
                "authentication required: send 'Authorization: Bearer <token>' "
                f"with a token holding the {needed!r} scope",
                challenge=REALM,
            )
        scopes = cached_scopes(ctx, token) or await anyio.to_thread.run_sync(
            authenticate, ctx, token
        )
        if scopes is None:
            raise invalid_token()
        if needed not in scopes:
            have = ", ".join(sorted(scopes)) or "none"
            raise PermissionDenied(
                f"this token's scopes ({have}) do not include {needed!r}, "
                f"which {connection.scope.get('method')} {connection.scope['path']} needs",
                challenge=f'{REALM}, error="insufficient_scope", scope="{needed}"',
            )


require_pull = RequireScope("pull")
require_push = RequireScope("push")
require_delete = RequireScope("delete")
require_admin = RequireScope("admin")


def deciding_guard(route_handler: BaseRouteHandler) -> RequireScope | None:
    """The strongest scope guard over ``route_handler`` (the first, among equals)."""
    guards = [g for g in route_handler.resolve_guards() if isinstance(g, RequireScope)]
    return max(guards, key=lambda g: SCOPES.index(g.scope), default=None)


def required_scope(mode: str, route_handler: BaseRouteHandler) -> str | None:
    """The scope a request to ``route_handler`` needs under ``REGISTRY_AUTH=mode``.

    None: anonymous is fine (auth off, no guard, or a read outside ``all``).
    """
    guard = deciding_guard(route_handler)
    if mode == "off" or guard is None:
        return None
    if guard.scope == "pull" and mode != "all":
        return None
    return guard.scope


def invalid_token() -> AuthenticationRequired:
    return AuthenticationRequired(
        "invalid or revoked token", challenge=f'{REALM}, error="invalid_token"'
    )


def signed_blob_url(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    """A read of ``/blobs/{sha256}`` carrying a signature: the signature, checked by the
    handler (404 when altered or expired), stands in for a token."""
    return connection.scope["path"].startswith("/blobs/") and "sig" in connection.query_params


def bearer_token(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    value = connection.headers.get("authorization")
    if not value:
        return None
    kind, _, token = value.strip().partition(" ")
    if kind.lower() != "bearer":
        return None
    return token.strip() or None
