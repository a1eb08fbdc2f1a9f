"""Downloads: rebuilt cartons, version/tag redirects, and blobs (the LINKS target).

- ``GET``/``HEAD /cartons/{sha256}.carton[?form=slim|full]``: a byte-deterministic
  Stored zip (``registry.services.export``): exact ``Content-Length``, a strong
  ``ETag``, ``If-None-Match`` -> 304, one ``Range`` -> 206 (416 when it cannot be
  satisfied), immutable caching. Several ranges in one request get the whole body
  (200), as HTTP allows.
- ``GET``/``HEAD /models/{name}/versions/{N}.carton`` and ``.../tags/{tag}.carton``:
  307 to the manifest-hash URL, ``?form=`` kept.
- ``GET``/``HEAD /blobs/{sha256}``: HEAD is always answered here (200, exact
  ``Content-Length`` of the identity bytes, ``ETag: "<sha256>"``, ``Accept-Ranges``),
  never redirected. GET:

  * ``If-None-Match`` matching -> 304;
  * with ``REGISTRY_S3_PRESIGN_DOWNLOADS`` and a store that presigns: 307 to the
    presigned URL, whatever the Range or Accept-Encoding (the object store honours
    Range, and identity is always an acceptable answer);
  * a ``Range`` header -> identity bytes, 206/416 (or 200 when the header is
    ignored: not ``bytes=``, malformed, several ranges, or ``If-Range`` not matching);
  * else, when ``Accept-Encoding`` allows zstd, br, gzip or deflate (best client
    q-value wins; ties prefer zstd > br > gzip > deflate; an explicit
    ``identity`` with a higher q wins over them) and the blob is over 1 KiB and
    its first 64 KiB compress below 90 %: a streamed compressed body with exactly
    that ``Content-Encoding`` and no ``Content-Length``;
  * otherwise identity with ``Content-Length``.

  Every blob answer carries ``Vary: Accept-Encoding``.

``/cartons/{x}`` without the ``.carton`` suffix is the web page: Litestar cannot
register two handlers on ``/cartons/{param}``, so these handlers own the path and
hand other names to ``registry.http.web.carton_page``.

All blob-store and DB work runs in worker threads (anyio); rows are read before
the body starts, and no DB connection is held while streaming. Bodies stream
with constant memory: a sync iterator of ~1 MiB chunks is pulled one chunk at a
time through ``anyio.to_thread.run_sync``, so the event loop never blocks.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from functools import partial
from typing import Any
from urllib.parse import quote

import anyio
import anyio.to_thread
from litestar import HttpMethod, Request, Response, get, head, route
from litestar.response import Stream

from registry.errors import NotFound
from registry.http.errors import error_response
from registry.services import references
from registry.services.context import RegistryContext
from registry.services.export import ExportedCarton, blob_size, build_carton, validate_form

CARTON_SUFFIX = ".carton"
IMMUTABLE = "public, max-age=31536000, immutable"
ZIP = "application/zip"
OCTETS = "application/octet-stream"
STREAM_CHUNK = 256 * 1024  # coalesce small pieces (zip headers, compressor output) to this

COMPRESS_MIN_BYTES = 1024
SNIFF_BYTES = 64 * 1024
SNIFF_MAX_RATIO = 0.9
CODINGS = ("zstd", "br", "gzip", "deflate")  # preference on equal q

_DIGITS = re.compile(r"[0-9]+")


# --- HTTP helpers -----------------------------------------------------------------------


class Unsatisfiable(Exception):
    pass


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """One ``bytes=`` range as half-open ``(start, end)``; None to answer the whole body.

    Malformed headers, other units and multiple ranges are ignored (None).
    ``Unsatisfiable`` when the range starts past the end (or the body is empty).
    """
    if not header:
        return None
    unit, sep, spec = header.partition("=")
    if not sep or unit.strip().lower() != "bytes":
        return None
    specs = [s.strip() for s in spec.split(",") if s.strip()]
    if len(specs) != 1:
        return None
    first, dash, last = specs[0].partition("-")
    first, last = first.strip(), last.strip()
    if not dash:
        return None
    if not first:
        if not _DIGITS.fullmatch(last):
            return None
        n = int(last)
        if n == 0 or size == 0:
            raise Unsatisfiable
        return max(0, size - n), size
    if not _DIGITS.fullmatch(first) or (last and not _DIGITS.fullmatch(last)):
        return None
    start = int(first)
    if last and int(last) < start:
        return None
    if start >= size:
        raise Unsatisfiable
    end = size if not last else min(int(last) + 1, size)
    return start, end


def _etag_list(header: str) -> list[str]:
    out = []
    for item in header.split(","):
        item = item.strip()
        if item.startswith("W/"):
            item = item[2:]
        if item:
            out.append(item)
    return out


def not_modified(request: Request, etag: str) -> bool:
    """``If-None-Match`` (weak comparison) matches ``etag``."""
    header = request.headers.get("if-none-match")
    if not header:
        return False
    tags = _etag_list(header)
    return "*" in tags or etag in tags


def range_applies(request: Request, etag: str) -> bool:
    """False when ``If-Range`` is present and is not our (strong) ETag."""
    if_range = request.headers.get("if-range")
    return if_range is None or if_range.strip() == etag


def parse_accept_encoding(header: str) -> dict[str, float]:
    prefs: dict[str, float] = {}
    for part in header.split(","):
        name, *params = (p.strip() for p in part.split(";"))
        if not name:
            continue
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = min(1.0, max(0.0, float(value.strip())))
                except ValueError:
                    q = 0.0
        prefs.setdefault(name.lower(), q)
    return prefs


def choose_encoding(header: str | None) -> str | None:
    """The content coding to answer with, or None for identity."""
    if not header:
        return None
    prefs = parse_accept_encoding(header)
    star = prefs.get("*", 0.0)
    best, best_q = None, 0.0
    for coding in CODINGS:
        q = prefs.get(coding)
        if q is None and coding == "gzip":
            q = prefs.get("x-gzip")
        if q is None:
            q = star
        if q > best_q:
            best, best_q = coding, q
    identity_q = prefs.get("identity")
    if best is None or (identity_q is not None and identity_q > best_q):
        return None
    return best


def _compressor(coding: str) -> tuple[Callable[[bytes], bytes], Callable[[], bytes]]:
    if coding == "zstd":
        import zstandard

        z = zstandard.ZstdCompressor(level=3).compressobj()
        return z.compress, z.flush
    if coding == "br":
        import brotli

        b = brotli.Compressor(quality=4)
        return b.process, b.finish
    wbits = 31 if coding == "gzip" else 15  # gzip framing / zlib (RFC 1950) for "deflate"
    c = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return c.compress, c.flush


def worth_compressing(sample: bytes) -> bool:
    if len(sample) <= COMPRESS_MIN_BYTES:
        return False
    return len(zlib.compress(sample, 1)) <= SNIFF_MAX_RATIO * len(sample)


def _close(it: object) -> None:
    close = getattr(it, "close", None)
    if close is not None:
        close()


def coalesce(chunks: Iterable[bytes], target: int = STREAM_CHUNK) -> Iterator[bytes]:
    """Join small chunks into pieces of at least ``target`` bytes (big ones pass as they are)."""
    buf: list[bytes] = []
    n = 0
    try:
        for chunk in chunks:
            if not chunk:
                continue
            if not n and len(chunk) >= target:
                yield chunk
                continue
            buf.append(chunk)
            n += len(chunk)
            if n >= target:
                yield b"".join(buf)
                buf, n = [], 0
        if buf:
            yield b"".join(buf)
    finally:
        _close(chunks)


def compressed(chunks: Iterable[bytes], coding: str) -> Iterator[bytes]:
    compress, flush = _compressor(coding)
    try:
        for chunk in chunks:
            out = compress(chunk)
            if out:
                yield out
        tail = flush()
        if tail:
            yield tail
    finally:
        _close(chunks)


async def open_stream(make: Callable[[], Iterator[bytes]]) -> AsyncIterator[bytes]:
    """Start a sync iterator in a worker thread and pull its first chunk there.

    Errors before the first byte (a missing blob, an unreachable store) surface
    here, while a proper error response can still be sent.
    """

    def start() -> tuple[Iterator[bytes], bytes | None]:
        it = make()
        try:
            return it, next(it, None)
        except BaseException:
            _close(it)
            raise

    it, first = await anyio.to_thread.run_sync(start)
    return _drain(it, first)


async def _drain(it: Iterator[bytes], first: bytes | None) -> AsyncIterator[bytes]:
    try:
        chunk = first
        while chunk is not None:
            yield chunk
            chunk = await anyio.to_thread.run_sync(next, it, None)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_close, it)


def _range_not_satisfiable(request: Request, size: int, what: str) -> Response[Any]:
    asked = request.headers.get("range")
    response = error_response(
        request, 416, f"range {asked!r} not satisfiable: {what} is {size} bytes"
    )
    response.headers["Content-Range"] = f"bytes */{size}"
    return response


def _empty(status: int, headers: dict[str, str], media_type: str = OCTETS) -> Response[None]:
    return Response(b"", status_code=status, headers=headers, media_type=media_type)


# --- cartons ----------------------------------------------------------------------------


def _form(request: Request) -> str:
    return validate_form(request.query_params.get("form", "slim"))


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
    form = _form(request)

    def build() -> tuple[ExportedCarton, bytes | None]:
        # One trip to a worker thread: the layout, and a small carton's bytes with it.
        exported = build_carton(ctx, manifest_sha256, form)
        return exported, (None if is_head else exported.small_bytes())

    exported, whole = await anyio.to_thread.run_sync(build)
    headers = _carton_headers(exported)
    size = exported.size
    if not_modified(request, exported.etag):
        return _empty(304, headers, ZIP)
    if is_head:  # Range is defined for GET only
        return _empty(200, {**headers, "Content-Length": str(size)}, ZIP)
    span = None
    if range_applies(request, exported.etag):
        try:
            span = parse_range(request.headers.get("range"), size)
        except Unsatisfiable:
            return _range_not_satisfiable(request, size, "the carton")
    start, end = span or (0, size)
    headers["Content-Length"] = str(end - start)
    status = 200
    if span is not None:
        status = 206
        headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
    if whole is not None:
        return Response(whole[start:end], status_code=status, headers=headers, media_type=ZIP)
    body = await open_stream(lambda: coalesce(exported.iter_bytes(start, end)))
    return Stream(body, status_code=status, headers=headers, media_type=ZIP)


async def _web_carton_page(
    request: Request, ctx: RegistryContext, ref: str, *, is_head: bool
) -> Response[Any]:
    from registry.http import web

    handler = getattr(web, "carton_page", None)
    fn = getattr(handler, "fn", None)
    if fn is None:
        raise NotFound(f"no carton page {ref!r}")
    page = await anyio.to_thread.run_sync(partial(fn, ctx=ctx, ref=ref))
    if is_head:
        return _empty(page.status_code, dict(page.headers), page.media_type or "text/html")
    return page  # type: ignore[no-any-return]


@get("/cartons/{file:str}", summary="A rebuilt carton (slim, or ?form=full); or its web page")
async def carton_get(request: Request, ctx: RegistryContext, file: str) -> Response[Any]:
    ref = file
    if not ref.endswith(CARTON_SUFFIX):
        return await _web_carton_page(request, ctx, ref, is_head=False)
    return await serve_carton(request, ctx, ref[: -len(CARTON_SUFFIX)], is_head=False)


@head("/cartons/{file:str}", summary="Headers of a rebuilt carton")
async def carton_head(request: Request, ctx: RegistryContext, file: str) -> Response[None]:
    ref = file
    if not ref.endswith(CARTON_SUFFIX):
        return await _web_carton_page(request, ctx, ref, is_head=True)
    return await serve_carton(request, ctx, ref[: -len(CARTON_SUFFIX)], is_head=True)


# --- redirects by version / tag -----------------------------------------------------------


def _redirect_to_carton(request: Request, manifest_sha256: str) -> Response[None]:
    location = f"/cartons/{manifest_sha256}{CARTON_SUFFIX}"
    form = request.query_params.get("form")
    if form is not None:
        location += f"?form={quote(form, safe='')}"
    return _empty(307, {"Location": location, "Cache-Control": "no-cache"})


def _strip_suffix(value: str, what: str) -> str:
    if not value.endswith(CARTON_SUFFIX) or len(value) == len(CARTON_SUFFIX):
        raise NotFound(f"not a carton URL: {what} {value!r} (expected ...{CARTON_SUFFIX})")
    return value[: -len(CARTON_SUFFIX)]


def _resolve_version(ctx: RegistryContext, name: str, version: int) -> str:
    with ctx.sessions() as session:
        return references.resolve_version(session, name, version).manifest_sha256


def _resolve_tag(ctx: RegistryContext, name: str, tag: str) -> str:
    with ctx.sessions() as session:
        return references.resolve_tag(session, name, tag).manifest_sha256


@route(
    "/models/{name:str}/versions/{file:str}",
    http_method=[HttpMethod.GET, HttpMethod.HEAD],
    summary="Redirect to the carton of a model version",
)
async def version_redirect(
    request: Request, ctx: RegistryContext, name: str, file: str
) -> Response[None]:
    number = _strip_suffix(file, "version")
    if not _DIGITS.fullmatch(number):
        raise NotFound(f"model {name!r} has no version {number!r}")
    manifest = await anyio.to_thread.run_sync(_resolve_version, ctx, name, int(number))
    return _redirect_to_carton(request, manifest)


@route(
    "/models/{name:str}/tags/{file:str}",
    http_method=[HttpMethod.GET, HttpMethod.HEAD],
    summary="Redirect to the carton a tag points at",
)
async def tag_redirect(
    request: Request, ctx: RegistryContext, name: str, file: str
) -> Response[None]:
    tag = _strip_suffix(file, "tag")
    manifest = await anyio.to_thread.run_sync(_resolve_tag, ctx, name, tag)
    return _redirect_to_carton(request, manifest)


# --- blobs ------------------------------------------------------------------------------


def _blob_headers(sha256: str) -> dict[str, str]:
    return {
        "ETag": f'"{sha256}"',
        "Cache-Control": IMMUTABLE,
        "Accept-Ranges": "bytes",
        "Vary": "Accept-Encoding",
    }


async def serve_blob(
    request: Request, ctx: RegistryContext, sha256: str, *, is_head: bool
) -> Response[Any]:
    size = await anyio.to_thread.run_sync(blob_size, ctx, sha256)
    etag = f'"{sha256}"'
    headers = _blob_headers(sha256)
    if not_modified(request, etag):
        return _empty(304, headers)
    if is_head:
        return _empty(200, {**headers, "Content-Length": str(size)})
    if ctx.settings.s3_presign_downloads:
        url = await anyio.to_thread.run_sync(ctx.blobs.presigned_get_url, sha256)
        if url:
            return _empty(
                307, {"Location": url, "Vary": "Accept-Encoding", "Cache-Control": "no-store"}
            )
    blobs = ctx.blobs
    range_header = request.headers.get("range")
    if range_header is not None:
        span = None
        if range_applies(request, etag):
            try:
                span = parse_range(range_header, size)
            except Unsatisfiable:
                response = _range_not_satisfiable(request, size, "the blob")
                response.headers["Vary"] = "Accept-Encoding"
                return response
        start, end = span or (0, size)
        headers["Content-Length"] = str(end - start)
        status = 200
        if span is not None:
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        body = await open_stream(lambda: blobs.iter_chunks(sha256, start, end))
        return Stream(body, status_code=status, headers=headers, media_type=OCTETS)

    coding = choose_encoding(request.headers.get("accept-encoding"))
    if coding is not None and size > COMPRESS_MIN_BYTES:

        def sniff() -> tuple[bytes, bool]:
            sample = blobs.read_bytes(sha256, 0, SNIFF_BYTES)
            return sample, worth_compressing(sample)

        sample, worth = await anyio.to_thread.run_sync(sniff)
        if worth:

            def make() -> Iterator[bytes]:
                def source() -> Iterator[bytes]:
                    yield sample
                    if len(sample) < size:
                        yield from blobs.iter_chunks(sha256, len(sample))

                return coalesce(compressed(source(), coding))

            body = await open_stream(make)
            headers["Content-Encoding"] = coding
            return Stream(body, status_code=200, headers=headers, media_type=OCTETS)

    headers["Content-Length"] = str(size)
    body = await open_stream(lambda: blobs.iter_chunks(sha256))
    return Stream(body, status_code=200, headers=headers, media_type=OCTETS)


@get("/blobs/{sha256:str}", summary="A blob's bytes (Range, ETag, Accept-Encoding)")
async def blob_get(request: Request, ctx: RegistryContext, sha256: str) -> Response[Any]:
    return await serve_blob(request, ctx, sha256, is_head=False)


@head("/blobs/{sha256:str}", summary="A blob's size and ETag (never redirected)")
async def blob_head(request: Request, ctx: RegistryContext, sha256: str) -> Response[None]:
    return await serve_blob(request, ctx, sha256, is_head=True)


ROUTES: list[Any] = [
    carton_get,
    carton_head,
    version_redirect,
    tag_redirect,
    blob_get,
    blob_head,
]
