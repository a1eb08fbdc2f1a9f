"""Blob downloads: ``GET``/``HEAD /blobs/{sha256}``, the target of LINKS.

HEAD is always answered here (200, exact ``Content-Length`` of the identity
bytes, ``ETag: "<sha256>"``, ``Accept-Ranges``), never redirected. GET:

- ``If-None-Match`` matching -> 304;
- a presigned redirect when ``registry.services.blob_serving`` plans one -> 307;
- a ``Range`` header -> identity bytes, 206/416 (or 200 when the header is
  ignored, see ``registry.http.conditional``);
- else the coding the client accepts best (``registry.http.coding``), when the
  service judges the blob worth compressing: a streamed compressed body with
  that ``Content-Encoding`` and no ``Content-Length``;
- otherwise identity with ``Content-Length``.

Every blob answer carries ``Vary: Accept-Encoding``.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread
from litestar import Request, Response, get, head
from litestar.response import Stream

from registry.http.coding import choose_encoding, compressed
from registry.http.conditional import (
    IMMUTABLE,
    Unsatisfiable,
    not_modified,
    range_not_satisfiable,
    requested_span,
)
from registry.http.streaming import OCTETS, coalesce, empty_response, open_stream
from registry.services.access import gate_needed
from registry.services.access import require_blob_readable as require_readable_blob
from registry.services.blob_serving import cached_plan, plan_blob_download
from registry.services.context import RegistryContext
from registry.services.signing import require_valid_signature
from registry.services.stored_blobs import cached_blob, read_blob, stored_blob

VARY = {"Vary": "Accept-Encoding"}


async def serve_blob(
    request: Request, ctx: RegistryContext, sha256: str, *, is_head: bool
) -> Response[Any]:
    expires, sig = request.query_params.get("expires"), request.query_params.get("sig")
    if expires is not None or sig is not None:  # a signed LINKS URL: no token needed
        # altered or expired: 404, as if there were no such blob
        require_valid_signature(ctx.settings, sha256, expires or "", sig or "")
    elif gate_needed(ctx):  # someone who may not read every namespace: is it theirs to read?
        await anyio.to_thread.run_sync(require_readable_blob, ctx, sha256)
    # A blob this process has served before is answered from memory (no worker thread).
    blob = cached_blob(ctx, sha256)
    if blob is None:
        blob = await anyio.to_thread.run_sync(stored_blob, ctx, sha256)
    etag = f'"{sha256}"'
    # A signed URL's bytes may be private: no shared cache keeps them.
    caching = "private, max-age=3600" if sig is not None else IMMUTABLE
    headers = {"ETag": etag, "Cache-Control": caching, "Accept-Ranges": "bytes", **VARY}
    if not_modified(request, etag):
        return empty_response(304, headers)
    if is_head:
        return empty_response(200, {**headers, "Content-Length": str(blob.size)})
    ranged = request.headers.get("range") is not None
    coding = None if ranged else choose_encoding(request.headers.get("accept-encoding"))
    plan = cached_plan(ctx, blob, coding)
    if plan is None:
        plan = await anyio.to_thread.run_sync(plan_blob_download, ctx, blob, coding)
    if plan.redirect_url:
        return empty_response(
            307, {"Location": plan.redirect_url, "Cache-Control": "no-store", **VARY}
        )
    if ranged:
        try:
            span = requested_span(request, etag, blob.size)
        except Unsatisfiable:
            response = range_not_satisfiable(request, blob.size, "the blob")
            response.headers.update(VARY)
            return response
        headers.update(span.headers())
        body = await open_stream(lambda: read_blob(ctx, blob, span.start, span.end))
        return Stream(body, status_code=span.status, headers=headers, media_type=OCTETS)
    if plan.coding is not None:
        coding = plan.coding
        body = await open_stream(lambda: coalesce(compressed(read_blob(ctx, blob), coding)))
        return Stream(
            body,
            status_code=200,
            headers={**headers, "Content-Encoding": coding},
            media_type=OCTETS,
        )
    body = await open_stream(lambda: read_blob(ctx, blob))
    return Stream(
        body,
        status_code=200,
        headers={**headers, "Content-Length": str(blob.size)},
        media_type=OCTETS,
    )


@get("/blobs/{sha256:str}", summary="A blob's bytes (Range, ETag, Accept-Encoding)")
async def blob_get(request: Request, ctx: RegistryContext, sha256: str) -> Response[Any]:
    return await serve_blob(request, ctx, sha256, is_head=False)


@head("/blobs/{sha256:str}", summary="A blob's size and ETag (never redirected)")
async def blob_head(request: Request, ctx: RegistryContext, sha256: str) -> Response[None]:
    return await serve_blob(request, ctx, sha256, is_head=True)


ROUTES: list[Any] = [blob_get, blob_head]
