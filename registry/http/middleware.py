"""ASGI middleware applied to every route: request ids + access logs, metrics, auth.

Plain ASGI classes (``Cls(app=...)``), which Litestar accepts in
``middleware=[...]``; the first in the list is the outermost. None of them
buffers a body: they only count the bytes of the messages passing through.

Litestar runs app middleware after routing, so ``scope["path_template"]`` is
known (metrics are labelled by route template, never by raw path, which would
explode their cardinality); requests that match no route (404/405 from the
router) bypass middleware. Settings come from the ``RegistryContext`` that
``create_app`` puts in the app state (``scope["app"].state.ctx``), so the
middleware list is the same for every app.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio

from registry.http import metrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

access_log = logging.getLogger("registry.access")

REQUEST_ID_HEADER = "x-request-id"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")
# Request ids: a random per-process prefix and a counter (unique without a syscall each).
_ID_PREFIX = os.urandom(8).hex()
_ID_COUNTER = itertools.count(1)


def _new_request_id() -> str:
    return f"{_ID_PREFIX}{next(_ID_COUNTER):016x}"


ANONYMOUS_PATHS = frozenset({"/healthz", "/metrics"})
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_V2_LOAD_UNLOAD = re.compile(r"^/v2/repository/models/[^/]+/(load|unload)/?$")


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _route(scope: Scope) -> str:
    return scope.get("path_template") or "<unmatched>"


def _state(scope: Scope) -> MutableMapping[str, Any]:
    state = scope.get("state")
    if state is None:
        state = scope["state"] = {}
    return state  # type: ignore[no-any-return]


def _ctx(scope: Scope) -> Any:
    app = scope.get("app")
    state = getattr(app, "state", None)
    if state is None:
        return None
    try:
        return state["ctx"]
    except (KeyError, TypeError):
        return getattr(state, "ctx", None)


class RequestLogMiddleware:
    """``X-Request-ID`` in (kept when sane) and out; one JSON access-log line per request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = _header(scope, REQUEST_ID_HEADER.encode())
        request_id = incoming if incoming and _REQUEST_ID.match(incoming) else _new_request_id()
        _state(scope)["request_id"] = request_id
        started = time.perf_counter()
        facts = {"status": 0, "bytes": 0, "bytes_in": 0}

        async def counting_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                facts["bytes_in"] += len(message.get("body") or b"")
            return message

        async def tagging_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                facts["status"] = message["status"]
                headers = [
                    (k, v) for k, v in message.get("headers") or () if k.lower() != b"x-request-id"
                ]
                headers.append((b"x-request-id", request_id.encode("latin-1")))
                message = {**message, "headers": headers}
            elif message["type"] == "http.response.body":
                facts["bytes"] += len(message.get("body") or b"")
            await send(message)

        error: str | None = None
        try:
            await self.app(scope, counting_receive, tagging_send)
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            record: dict[str, Any] = {
                "event": "request",
                "request_id": request_id,
                "method": scope.get("method"),
                "path": scope.get("path"),
                "route": _route(scope),
                "status": facts["status"] or 500,
                "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                "bytes": facts["bytes"],
                "bytes_in": facts["bytes_in"],
            }
            client = scope.get("client")
            if client:
                record["client"] = client[0]
            if error:
                record["error"] = error
            access_log.info(json.dumps(record, separators=(",", ":")), extra={"access": record})


class MetricsMiddleware:
    """Requests by method, route template and status; bytes in and out; durations."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "")
        route = _route(scope)
        started = time.perf_counter()
        status = [0]
        bytes_in = metrics.HTTP_BYTES_IN.labels(method, route)
        bytes_out = metrics.HTTP_BYTES_OUT.labels(method, route)

        async def counting_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                size = len(message.get("body") or b"")
                if size:
                    bytes_in.inc(size)
            return message

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            elif message["type"] == "http.response.body":
                size = len(message.get("body") or b"")
                if size:
                    bytes_out.inc(size)
            await send(message)

        try:
            await self.app(scope, counting_receive, counting_send)
        finally:
            metrics.HTTP_REQUESTS.labels(method, route, str(status[0] or 500)).inc()
            metrics.HTTP_DURATION.labels(method, route).observe(time.perf_counter() - started)


def required_scope(mode: str, method: str, path: str) -> str | None:
    """The scope a request needs under ``REGISTRY_AUTH=mode`` (None: anonymous is fine)."""
    if mode == "off" or path in ANONYMOUS_PATHS:
        return None
    method = method.upper()
    if path == "/api/v1" or path.startswith("/api/v1/"):
        if method == "DELETE":
            return "delete"
        if method not in READ_METHODS:
            return "push"
    elif method == "POST" and _V2_LOAD_UNLOAD.match(path):
        return "push"
    return "pull" if mode == "all" else None


def _bearer(scope: Scope) -> str | None:
    value = _header(scope, b"authorization")
    if not value:
        return None
    kind, _, token = value.strip().partition(" ")
    if kind.lower() != "bearer":
        return None
    return token.strip() or None


async def _deny(send: Send, status: int, message: str, challenge: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", challenge.encode("latin-1")),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


class AuthMiddleware:
    """Bearer tokens per ``REGISTRY_AUTH`` (DESIGN.md "Auth scopes"): 401 unknown, 403 scope."""

    realm = 'Bearer realm="carton-registry"'

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ctx = _ctx(scope) if scope["type"] == "http" else None
        if ctx is None:
            await self.app(scope, receive, send)
            return
        needed = required_scope(ctx.settings.auth, scope.get("method", "GET"), scope["path"])
        if needed is None:
            await self.app(scope, receive, send)
            return
        token = _bearer(scope)
        if token is None:
            await _deny(
                send,
                401,
                f"authentication required: send 'Authorization: Bearer <token>' "
                f"with a token holding the {needed!r} scope",
                self.realm,
            )
            return
        from registry.services.auth import authenticate

        scopes = await anyio.to_thread.run_sync(authenticate, ctx, token)
        if scopes is None:
            await _deny(
                send,
                401,
                "invalid or revoked token",
                f'{self.realm}, error="invalid_token"',
            )
            return
        if needed not in scopes:
            have = ", ".join(sorted(scopes)) or "none"
            await _deny(
                send,
                403,
                f"this token's scopes ({have}) do not include {needed!r}, "
                f"which {scope.get('method')} {scope['path']} needs",
                f'{self.realm}, error="insufficient_scope", scope="{needed}"',
            )
            return
        _state(scope)["auth_scopes"] = scopes
        await self.app(scope, receive, send)


def middleware() -> list[Any]:
    """Outermost first: request ids and access logs, metrics, then auth."""
    return [RequestLogMiddleware, MetricsMiddleware, AuthMiddleware]
