"""Web pages for diffs and files: ``/models/{name}/diff``, the file viewer, raw files.

- ``/models/{name}/diff?from=V&to=V[&exact=1]``: two versions compared;
- ``/cartons/{sha256}/files/{path}``: carton.toml, text and Markdown (rendered like
  descriptions: no raw HTML, https and ``@misc/`` links only), images under ``misc/``;
- ``/cartons/{sha256}/raw/{path}``: the file's bytes for the viewer: a raster image as
  its type (by its magic bytes, never SVG), UTF-8 text as ``text/plain``, anything else
  as an ``application/octet-stream`` attachment; always sandboxed by a CSP that runs
  nothing, and ``nosniff`` (on every answer, ``middleware``).
"""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import quote

import anyio.to_thread
from litestar import Response
from litestar.params import QueryParameter
from litestar.response import Stream

from registry.http.conditional import IMMUTABLE
from registry.http.routing import get
from registry.http.streaming import open_stream
from registry.http.web import environment, page, render_markdown
from registry.services import lineage_views
from registry.services.context import RegistryContext
from registry.services.names import parse_version

RAW_POLICY = "default-src 'none'; img-src 'self'; style-src 'none'; sandbox"


def pretty(value: Any) -> str:
    """A carton.toml field for the side-by-side table: strings as they are, else JSON."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


environment().filters.update(pretty=pretty, quote_path=lambda p: quote(p, safe="/"))


@get("/models/{name:str}/diff", sync_to_thread=True, include_in_schema=False)
def diff_page(
    ctx: RegistryContext,
    name: str,
    old: Annotated[str | None, QueryParameter(name="from")] = None,
    new: Annotated[str | None, QueryParameter(name="to")] = None,
    exact: bool = False,
) -> Response[str]:
    """Versions ``from`` and ``to`` (numbers; defaults: the latest and the one before)."""
    view = lineage_views.diff_view(ctx, name, parse_version(old), parse_version(new), exact=exact)
    return page("diff.html", **view, exact=exact)


@get("/cartons/{file:str}/files/{path:path}", sync_to_thread=True, include_in_schema=False)
def file_page(ctx: RegistryContext, file: str, path: str) -> Response[str]:
    viewed = lineage_views.file_view(ctx, file, path.lstrip("/"))
    rendered = render_markdown(viewed.text, viewed.misc) if viewed.kind == "markdown" else None
    return page("file.html", f=viewed, rendered=rendered)


@get("/cartons/{file:str}/raw/{path:path}", include_in_schema=False)
async def raw_file(ctx: RegistryContext, file: str, path: str) -> Stream:
    media_type, size, body = await anyio.to_thread.run_sync(
        lineage_views.raw_file, ctx, file, path.lstrip("/")
    )
    headers = {
        "Content-Length": str(size),
        "Cache-Control": IMMUTABLE,
        "Content-Security-Policy": RAW_POLICY,
    }
    if media_type == "application/octet-stream":
        headers["Content-Disposition"] = "attachment"
    return Stream(await open_stream(lambda: body), media_type=media_type, headers=headers)


ROUTES: list[Any] = [diff_page, file_page, raw_file]
