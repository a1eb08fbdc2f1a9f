"""Namespaces over HTTP: ``namespace/model`` in model URLs, who is asking, the namespace API.

**Paths.** A model route takes the full name: ``/api/v1/models/acme/bert``,
``/models/acme/bert/versions/3.carton``, ``/v2/models/acme/bert/config``. Route
templates match one segment per parameter, so before routing
(``NamespacedPaths``) the two segments of a namespaced name are joined with a
character no name may hold, and after routing (``AccessMiddleware``) the path
parameters get their ``/`` back and the path is what the client sent. The two
segments after ``/models/`` are one name unless the second is a route word
(``diff``, ``config``, ``versions``, ``tags``, ...), which a model inside a
namespace may not be named (``registry.carton.names.RESERVED_MODEL_WORDS``); so
``/models/acme/diff`` is the diff page of root model ``acme`` and
``/models/acme/bert/diff`` that of ``acme/bert``. ``tritonclient`` quotes model
names with ``/`` kept as it is, and a client that sends ``%2F`` arrives the same
way (the server decodes the path): both work.

**Access.** ``AccessMiddleware`` resolves the bearer token (from the cache, else in a
thread) and runs the request as its ``registry.services.access.Access``. It never
refuses: an unknown token reads as anonymous here, and the route's guard answers 401
where ``REGISTRY_AUTH`` asks for a token.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from litestar import Controller, Request, Response, put
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

from registry.http import schemas
from registry.http.auth import bearer_token, require_admin
from registry.http.routing import get
from registry.http.schemas import MAX_JSON_BODY_BYTES, StrictJSON, as_body
from registry.services import namespaces
from registry.services.access import Access, acting_as
from registry.services.auth import authenticate_grant, cached_grant
from registry.services.context import RegistryContext
from registry.services.names import RESERVED_MODEL_WORDS, is_namespace

JOIN = "\x00"  # no model or namespace name holds it
MODEL_PREFIXES = ("/api/v1/models/", "/v2/repository/models/", "/v2/models/", "/models/")
ORIGINAL_PATH = "registry.original_path"


def join_namespaced_name(path: str) -> str:
    """``path`` with a namespaced model name made one segment (module docstring)."""
    for prefix in MODEL_PREFIXES:
        if path.startswith(prefix):
            rest = path[len(prefix) :]
            first, slash, tail = rest.partition("/")
            if not slash or JOIN in rest:
                return path
            second = tail.partition("/")[0]
            if second and second not in RESERVED_MODEL_WORDS and is_namespace(first):
                return prefix + first + JOIN + tail
            return path
    return path


class NamespacedPaths:
    """Before routing: join the two segments of ``namespace/model`` in model routes."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == ScopeType.HTTP:
            path = scope["path"]
            joined = join_namespaced_name(path)
            if joined != path:
                scope["state"][ORIGINAL_PATH] = path
                scope["path"] = joined
        await self.app(scope, receive, send)


async def resolve_access(ctx: RegistryContext, token: str | None) -> Access:
    auth = ctx.settings.auth
    if token is None:
        return Access(auth=auth)
    grant = cached_grant(ctx, token) or await anyio.to_thread.run_sync(
        authenticate_grant, ctx, token
    )
    if grant is None:
        return Access(auth=auth)
    return Access(
        token_id=grant.token_id, scopes=grant.scopes, namespaces=grant.namespaces, auth=auth
    )


class AccessMiddleware:
    """After routing: restore the path and its ``/``, then run the request as its caller."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        original = scope["state"].pop(ORIGINAL_PATH, None)
        if original is not None:
            scope["path"] = original
            params: dict[str, Any] = scope["path_params"]
            for key, value in list(params.items()):
                if isinstance(value, str) and JOIN in value:
                    params[key] = value.replace(JOIN, "/")
        ctx: RegistryContext = scope["litestar_app"].state.ctx
        access = await resolve_access(ctx, bearer_token(Request(scope)))
        with acting_as(access):
            await self.app(scope, receive, send)


class NamespacesController(Controller):
    path = "/api/v1/namespaces"
    tags = ["api"]

    @get("/", summary="The namespaces the caller may see")
    async def list_namespaces(self, ctx: RegistryContext) -> schemas.NamespaceList:
        rows = await anyio.to_thread.run_sync(namespaces.list_namespaces, ctx)
        return schemas.NamespaceList(namespaces=as_body(rows, list[schemas.NamespaceSummary]))

    @get("/{namespace:str}", summary="One namespace: its visibility and models")
    async def get_namespace(self, ctx: RegistryContext, namespace: str) -> schemas.NamespaceDetail:
        body = await anyio.to_thread.run_sync(namespaces.get_namespace, ctx, namespace)
        return as_body(body, schemas.NamespaceDetail)

    @put(
        "/{namespace:str}",
        status_code=200,
        guards=[require_admin],
        dto=StrictJSON[schemas.NamespacePut],
        return_dto=None,
        request_max_body_size=MAX_JSON_BODY_BYTES,
        summary="Create a namespace or change its visibility (global admin)",
    )
    async def put_namespace(
        self, ctx: RegistryContext, namespace: str, data: schemas.NamespacePut | None = None
    ) -> Response[schemas.NamespaceSummary]:
        if data is None:
            raise schemas.NamespacePut.invalid()
        body, created = await anyio.to_thread.run_sync(
            namespaces.put_namespace, ctx, namespace, data.visibility
        )
        return Response(
            as_body(body, schemas.NamespaceSummary), status_code=201 if created else 200
        )
