"""ASGI middleware applied to every route: request ids, access logs and metrics.

Plain ASGI classes (``Cls(app=...)``), which Litestar accepts in
``middleware=[...]``; the first in the list is the outermost. None of them
buffers a body: they only count the bytes of the messages passing through.
Every request pays for them, so they do little (a few microseconds, measured by
``bench/``'s overhead figure) and nothing that blocks: the access-log line is
encoded and written by a logging thread when ``serve`` runs the app.

A client that goes away before its answer starts (mid-upload, say) is logged and
counted with nginx's status 499, whatever the app then made of it: never a 5xx. An
answer sent before the request's body was read whole (a refusal, a queue that ran out)
closes the connection, so a client cannot keep it by trickling a body nobody reads.

Litestar runs app middleware after routing, so ``scope["path_template"]`` is
known (metrics are labelled by route template, never by raw path, which would
explode their cardinality); requests that match no route (404/405 from the
router) bypass middleware. Auth is not middleware: each route carries its
guard (``registry.http.auth``).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

import litestar.types

from registry.http import metrics
from registry.http.body_socket import TakenBody, body_taker, offer_body
from registry.http.errors import CLIENT_CLOSED_REQUEST

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


def _header(scope: Scope, name: bytes) -> str | None:
    headers: Iterable[tuple[bytes, bytes]] = scope.get("headers") or ()
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


CLOSE = (b"connection", b"close")


def _has_body(scope: Scope) -> bool:
    """Whether the request announces a body (a Content-Length over 0, or a chunked one)."""
    for key, value in scope.get("headers") or ():
        name = key.lower()
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip(b"0 ")):
            return True
    return False


def _route(scope: Scope) -> str:
    return scope.get("path_template") or "<unmatched>"


class AccessRecord(dict[str, Any]):
    """An access-log record that becomes its JSON line only when a handler formats it.

    ``registry.cli.server_commands`` hands records to a logging thread, so the
    event loop never encodes or writes a log line.
    """

    def __str__(self) -> str:
        return json.dumps(self, separators=(",", ":"))


class ObservedRequestMiddleware:
    """``X-Request-ID`` in (kept when sane) and out; one JSON access-log line; the HTTP metrics.

    One middleware for all three, so a request pays for one wrapper of ``send`` and
    ``receive``; metrics children are looked up once per (method, route).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = _header(scope, REQUEST_ID_HEADER.encode())
        request_id = incoming if incoming and _REQUEST_ID.match(incoming) else _new_request_id()
        request_id_header = (b"x-request-id", request_id.encode("latin-1"))
        started = time.perf_counter()
        # status, bytes out, bytes in, client gone before the answer, body received whole
        facts = [0, 0, 0, 0, 0]

        def counting_body(size: int, whole: bool) -> None:  # also a body read from its socket
            facts[2] += size
            if whole:
                facts[4] = 1

        async def counting_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                counting_body(len(message.get("body") or b""), not message.get("more_body", False))
            elif message["type"] == "http.disconnect" and not facts[0]:
                facts[3] = 1
            return message

        async def observing_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                facts[0] = message["status"]
                headers = [
                    (k, v) for k, v in message.get("headers") or () if k.lower() != b"x-request-id"
                ]
                headers.append(request_id_header)
                if not facts[4] and _has_body(scope):
                    headers.append(CLOSE)  # answered before its body: nobody waits for the rest
                message = {**message, "headers": headers}
            elif message["type"] == "http.response.body":
                facts[1] += len(message.get("body") or b"")
            await send(message)

        take_body = body_taker(scope)
        if take_body is not None:

            def take_counted() -> TakenBody | None:
                taken = take_body()
                if taken is not None:
                    taken.observers.append(counting_body)
                return taken

            scope = dict(scope)  # the app's copy: uvicorn's own stays as it was
            offer_body(scope, take_counted)

        error: str | None = None
        try:
            await self.app(scope, counting_receive, observing_send)
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            elapsed = time.perf_counter() - started
            status, sent, received = facts[0] or 500, facts[1], facts[2]
            if facts[3]:  # whatever the app made of it, nobody was there to answer: nginx's 499
                status = CLIENT_CLOSED_REQUEST
            method, route = scope.get("method", ""), _route(scope)
            metrics.observe_request(method, route, status, elapsed, received, sent)
            if access_log.isEnabledFor(logging.INFO):
                record = AccessRecord(
                    event="request",
                    request_id=request_id,
                    method=method,
                    path=scope.get("path"),
                    route=route,
                    status=status,
                    duration_ms=round(elapsed * 1000, 3),
                    bytes=sent,
                    bytes_in=received,
                    pid=os.getpid(),  # which worker, under serve --workers N
                )
                client = scope.get("client")
                if client:
                    record["client"] = client[0]
                if error:
                    record["error"] = error
                access_log.info("%s", record, extra={"access": record})


# Pages run no inline script or style and no third-party code; images in descriptions may
# come from https: (the Markdown renderer keeps no other scheme); nobody may frame them.
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' https:; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
# On every answer: no MIME sniffing (blobs are application/octet-stream and stay so), and
# no registry URL leaks to other sites through Referer.
ALWAYS = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]
ON_PAGES = [
    (b"content-security-policy", PAGE_POLICY.encode()),
    (b"x-frame-options", b"DENY"),  # frame-ancestors for browsers without CSP 2
]


async def add_security_headers(
    message: litestar.types.Message, scope: litestar.types.Scope
) -> None:
    """A ``before_send`` hook (it sees every answer, unrouted 404s too): ``nosniff`` and
    ``Referrer-Policy`` everywhere; on HTML, a CSP without inline script and no framing."""
    if message["type"] != "http.response.start":
        return
    headers = list(message.get("headers") or ())
    names = {k.lower() for k, _ in headers}
    content_type = next((v for k, v in headers if k.lower() == b"content-type"), b"")
    extra = ALWAYS + (ON_PAGES if content_type.startswith(b"text/html") else [])
    message["headers"] = headers + [(k, v) for k, v in extra if k not in names]


class HeadWithoutBody:
    """Drops the body of every answer to HEAD, keeping its status and headers.

    Read routes run the GET handler for HEAD (``registry.http.routing.get``); the
    ``Content-Length`` it computed stays, as HTTP asks.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "HEAD":
            await self.app(scope, receive, send)
            return
        finished = False

        async def send_headers_only(message: Message) -> None:
            nonlocal finished
            if message["type"] != "http.response.body":
                await send(message)
            elif not finished:
                finished = True
                await send({"type": "http.response.body", "body": b"", "more_body": False})

        await self.app(scope, receive, send_headers_only)


def middleware() -> list[Any]:
    """Outermost first: request ids, access logs and metrics, then HEAD's empty bodies."""
    return [ObservedRequestMiddleware, HeadWithoutBody]
