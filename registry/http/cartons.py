"""Carton downloads, and the redirects to them by version and by tag.

- ``GET``/``HEAD /cartons/{sha256}.carton[?form=slim|full]``: a byte-deterministic
  Stored zip (``registry.services.export``): exact ``Content-Length``, a strong
  ``ETag``, ``If-None-Match`` -> 304, one ``Range`` -> 206 (416 when it cannot be
  satisfied), immutable caching (``registry.http.conditional``).
- ``GET``/``HEAD /models/{name}/versions/{N}.carton`` and ``.../tags/{tag}.carton``:
  307 to the manifest-hash URL, ``?form=`` kept.

``/cartons/{x}`` without the ``.carton`` suffix is the web page: Litestar cannot
register two handlers on ``/cartons/{param}``, so these handlers own the path and
hand other names to ``registry.http.web.carton_page``.

A carton this process has served before is answered from memory, small cartons'
bytes included (``registry.services.export.cached_carton``); otherwise the layout
(and a small carton's bytes with it) is read in one worker-thread trip before the
body starts. No DB connection is held while streaming.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import anyio
import anyio.to_thread
from litestar import HttpMethod, Request, Response, get, head, route
from litestar.response import Stream

from registry.errors import InvalidName, NotFound
from registry.http import web
from registry.http.conditional import (
    IMMUTABLE,
    Unsatisfiable,
    not_modified,
    range_not_satisfiable,
    requested_span,
)
from registry.http.streaming import coalesce, empty_response, open_stream
from registry.services.access import gate_needed, require_carton_readable
from registry.services.context import RegistryContext
from registry.services.export import (
    ExportedCarton,
    build_carton,
    cached_carton,
    validate_form,
)
from registry.services.lookups import tag_manifest, version_manifest
from registry.services.names import require_version

CARTON_SUFFIX = ".carton"
ZIP = "application/zip"


def _carton_headers(exported: ExportedCarton) -> dict[str, str]:
    return {
        "ETag": exported.etag,
        "Cache-Control": IMMUTABLE,
        "Accept-Ranges": "bytes",
        "Content-Disposition": f'attachment; filename="{exported.filename}"',
    }


async def serve_carton(
    request: Request, ctx: RegistryContext, manifest_sha256: str, *, is_head: bool
) -> Response[Any]:
    form = validate_form(request.query_params.get("form", "slim"))
    if gate_needed(ctx):
        await anyio.to_thread.run_sync(require_carton_readable, ctx, manifest_sha256)
    exported = cached_carton(ctx, manifest_sha256, form)
    if exported is None:
        exported = await anyio.to_thread.run_sync(build_carton, ctx, manifest_sha256, form)
    headers = _carton_headers(exported)
    size = exported.size
    if not_modified(request, exported.etag):
        return empty_response(304, headers, ZIP)
    if is_head:  # Range is defined for GET only
        return empty_response(200, {**headers, "Content-Length": str(size)}, ZIP)
    try:
        span = requested_span(request, exported.etag, size)
    except Unsatisfiable:
        return range_not_satisfiable(request, size, "the carton")
    headers.update(span.headers())
    if exported.whole is not None:
        body = exported.whole[span.start : span.end]
        return Response(body, status_code=span.status, headers=headers, media_type=ZIP)
    stream = await open_stream(lambda: coalesce(exported.iter_bytes(span.start, span.end)))
    return Stream(stream, status_code=span.status, headers=headers, media_type=ZIP)


async def _carton_page(ctx: RegistryContext, ref: str) -> Response[Any]:
    """The web page; for HEAD too (``middleware.HeadWithoutBody`` drops the body)."""
    return await anyio.to_thread.run_sync(web.carton_page, ctx, ref)


@get("/cartons/{file:str}", summary="A rebuilt carton (slim, or ?form=full); or its web page")
async def carton_get(request: Request, ctx: RegistryContext, file: str) -> Response[Any]:
    if not file.endswith(CARTON_SUFFIX):
        return await _carton_page(ctx, file)
    return await serve_carton(request, ctx, file[: -len(CARTON_SUFFIX)], is_head=False)


@head("/cartons/{file:str}", summary="Headers of a rebuilt carton")
async def carton_head(request: Request, ctx: RegistryContext, file: str) -> Response[None]:
    if not file.endswith(CARTON_SUFFIX):
        return await _carton_page(ctx, file)
    return await serve_carton(request, ctx, file[: -len(CARTON_SUFFIX)], is_head=True)


# --- redirects by version / tag -----------------------------------------------------------


def _redirect_to_carton(request: Request, manifest_sha256: str) -> Response[bytes]:
    location = f"/cartons/{manifest_sha256}{CARTON_SUFFIX}"
    form = request.query_params.get("form")
    if form is not None:
        location += f"?form={quote(form, safe='')}"
    return empty_response(307, {"Location": location, "Cache-Control": "no-cache"})


def _strip_suffix(value: str, what: str) -> str:
    if not value.endswith(CARTON_SUFFIX) or len(value) == len(CARTON_SUFFIX):
        raise NotFound(f"not a carton URL: {what} {value!r} (expected ...{CARTON_SUFFIX})")
    return value[: -len(CARTON_SUFFIX)]


@route(
    "/models/{name:str}/versions/{file:str}",
    http_method=[HttpMethod.GET, HttpMethod.HEAD],
    summary="Redirect to the carton of a model version",
)
async def version_redirect(
    request: Request, ctx: RegistryContext, name: str, file: str
) -> Response[bytes]:
    text = _strip_suffix(file, "version")
    try:
        number = require_version(text)
    except InvalidName:  # a file name, not a version ("+1" too): no such carton URL
        raise NotFound(f"model {name!r} has no version {text!r}") from None
    manifest = await anyio.to_thread.run_sync(version_manifest, ctx, name, number)
    return _redirect_to_carton(request, manifest)


@route(
    "/models/{name:str}/tags/{file:str}",
    http_method=[HttpMethod.GET, HttpMethod.HEAD],
    summary="Redirect to the carton a tag points at",
)
async def tag_redirect(
    request: Request, ctx: RegistryContext, name: str, file: str
) -> Response[bytes]:
    tag = _strip_suffix(file, "tag")
    manifest = await anyio.to_thread.run_sync(tag_manifest, ctx, name, tag)
    return _redirect_to_carton(request, manifest)


ROUTES: list[Any] = [carton_get, carton_head, version_redirect, tag_redirect]
