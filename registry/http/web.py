"""Server-rendered web pages: listing, model, carton, stats, and HTML error pages.

Templates are rendered with a module-level Jinja2 environment (autoescaping
on) and returned as ``text/html`` responses, so the pages need nothing from
the application's template config.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from litestar import MediaType, Response
from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup

from registry import __version__, humanize
from registry.errors import NotFound
from registry.http.routing import get
from registry.services import webviews
from registry.services.context import RegistryContext
from registry.services.names import is_namespace, parse_version

PACKAGE_DIR = Path(__file__).resolve().parents[1]
TEMPLATES_DIR = PACKAGE_DIR / "templates"
STATIC_DIR = PACKAGE_DIR / "static"
HTML = MediaType.HTML  # Litestar appends "; charset=utf-8" itself
SORT_LABELS = {"name": "Name", "recent": "Recently pushed", "size": "Size"}


# --- formatting ---------------------------------------------------------------------------

MISSING = "—"


def human_bytes(n: int | None) -> str:
    return humanize.human_bytes(n, MISSING)


def absolute_time(value: str | datetime | None) -> str:
    return humanize.absolute_time(value, MISSING)


def relative_time(value: str | datetime | None) -> str:
    return humanize.relative_time(value, MISSING)


def shape_text(shape: Any) -> str:
    if shape is None:
        return MISSING
    if isinstance(shape, str):
        return shape
    if len(shape) == 0:
        return "scalar"
    return "[" + ", ".join(str(d) for d in shape) + "]"


def blob_url(sha256: str) -> str:
    return f"/blobs/{sha256}"


# --- safe Markdown ----------------------------------------------------------------------------

_MISC = "@misc/"


def _allowed_link(url: str) -> bool:
    return url.lower().startswith("https://") or url.startswith(_MISC)


@lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False})
    md.validateLink = _allowed_link  # type: ignore[method-assign]  # markdown-it's own hook
    return md


def render_markdown(text: str | None, misc: dict[str, str]) -> Markup:
    """Description Markdown as safe HTML.

    Raw HTML is escaped (``html: False``); links and images are kept only for
    ``https:`` URLs and ``@misc/PATH`` (resolved to ``/blobs/{sha256}`` through
    the MANIFEST); anything else stays literal text, with no href or src.
    """
    if not text:
        return Markup("")
    md = _markdown()
    tokens = md.parse(text)
    for token in tokens:
        if token.children:
            token.children = _sanitize_inline(token.children, misc)
    return Markup(md.renderer.render(tokens, md.options, {}))


def _resolve(url: str, misc: dict[str, str]) -> str | None:
    if url.lower().startswith("https://"):
        return url
    if url.startswith(_MISC):
        from urllib.parse import unquote

        sha = misc.get(unquote(url[len(_MISC) :]))
        return blob_url(sha) if sha else None
    return None


def _sanitize_inline(children: list[Token], misc: dict[str, str]) -> list[Token]:
    out: list[Token] = []
    for token in children:
        if token.type == "link_open":
            target = _resolve(str(token.attrGet("href") or ""), misc)
            if target is None:
                token.attrs.pop("href", None)
            else:
                token.attrSet("href", target)
                if target.startswith("https://"):
                    token.attrSet("rel", "nofollow noopener noreferrer")
        elif token.type == "image":
            target = _resolve(str(token.attrGet("src") or ""), misc)
            if target is None:
                alt = Token("text", "", 0, content=token.content or "")
                out.append(alt)
                continue
            token.attrSet("src", target)
        if token.children:
            token.children = _sanitize_inline(token.children, misc)
        out.append(token)
    return out


# --- templates --------------------------------------------------------------------------


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        autoescape=jinja2.select_autoescape(["html", "xml"], default=True),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(
        human_bytes=human_bytes,
        absolute_time=absolute_time,
        relative_time=relative_time,
        percent=humanize.percent,
        shape=shape_text,
        blob_url=blob_url,
    )
    env.globals.update(version=__version__, sort_labels=SORT_LABELS)
    return env


def render(name: str, **context: Any) -> str:
    context.setdefault("q", "")
    return environment().get_template(name).render(**context)


def page(name: str, status: int = 200, **context: Any) -> Response[str]:
    return Response(
        render(name, **context),
        status_code=status,
        media_type=HTML,
        headers={"Cache-Control": "no-cache"},
    )


def render_error_page(status: int, message: str) -> str:
    """The HTML body of an error page (used by registry.http.errors for browsers)."""
    titles = {
        400: "Bad request",
        401: "Sign-in required",
        403: "Forbidden",
        404: "Not found",
        405: "Method not allowed",
        500: "Something went wrong",
    }
    return render("error.html", status=status, title=titles.get(status, "Error"), message=message)


# --- handlers ---------------------------------------------------------------------------

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@get("/", sync_to_thread=True, include_in_schema=False)
def index_page(
    ctx: RegistryContext, q: str | None = None, sort: str = "name", cursor: str | None = None
) -> Response[str]:
    q = (q or "").strip()
    data = webviews.listing(ctx, q=q, sort=sort, cursor=cursor or None)
    return page("index.html", q=q, sort=sort, cursor=cursor or "", **data)


@get("/{namespace:str}", sync_to_thread=True, include_in_schema=False)
def namespace_page(
    ctx: RegistryContext,
    namespace: str,
    q: str | None = None,
    sort: str = "name",
    cursor: str | None = None,
) -> Response[str]:
    """``/acme``: a namespace's models (404, as for none, when it is private to others)."""
    if not is_namespace(namespace):  # any other top-level path: not a page
        raise NotFound(f"no page at /{namespace}")
    q = (q or "").strip()
    data = webviews.listing(ctx, q=q, sort=sort, cursor=cursor or None, namespace=namespace)
    return page("index.html", q=q, sort=sort, cursor=cursor or "", **data)


@get("/models/{name:str}", sync_to_thread=True, include_in_schema=False)
def model_page(ctx: RegistryContext, name: str, version: str | None = None) -> Response[str]:
    view = webviews.model_view(ctx, name, parse_version(version))
    return _carton_page(ctx, view)


def carton_page(ctx: RegistryContext, ref: str) -> Response[str]:
    """The page of ``/cartons/{ref}``: not a route of its own, see ``ROUTES`` below."""
    if not _SHA256.match(ref):
        raise NotFound(f"no carton with manifest hash {ref!r}")
    return _carton_page(ctx, webviews.carton_view(ctx, ref))


def _carton_page(ctx: RegistryContext, view: webviews.CartonView) -> Response[str]:
    sha = view.carton["manifest_sha256"]
    public_url = ctx.settings.public_url.rstrip("/")
    return page(
        "carton.html",
        view=view,
        c=view.carton,
        model=view.model,
        description=render_markdown(view.carton["description"], view.misc),
        slim_url=f"/cartons/{sha}.carton",
        full_url=f"/cartons/{sha}.carton?form=full",
        download_sizes=webviews.download_sizes(ctx, sha),
        snippet=[  # lines: each wraps on its own, continuations indented (style.css)
            "import cartonml as carton",
            f'model = await carton.load("{public_url}/cartons/{sha}.carton")',
        ],
    )


@get("/stats", sync_to_thread=True, include_in_schema=False)
def stats_page(ctx: RegistryContext) -> Response[str]:
    return page("stats.html", **webviews.storage_stats(ctx))


# The files under static/, by name, read once: served from memory, so no client-chosen
# path ever reaches the file system (a NUL or a 5,000-character name is a plain 404).
STATIC_TYPES = {".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}


@lru_cache(maxsize=1)
def static_files() -> dict[str, tuple[bytes, str]]:
    return {
        path.name: (path.read_bytes(), STATIC_TYPES[path.suffix])
        for path in STATIC_DIR.iterdir()
        if path.suffix in STATIC_TYPES
    }


@get("/static/{name:str}", sync_to_thread=False, include_in_schema=False)
def static_file(name: str) -> Response[bytes]:
    found = static_files().get(name)
    if found is None:
        raise NotFound("no such static file")
    body, media_type = found
    return Response(body, media_type=media_type, headers={"Cache-Control": "max-age=3600"})


# ``carton_page`` is not registered here: registry.http.cartons owns ``/cartons/{file}``
# (Litestar allows one handler per path) and calls it for names without ``.carton``.
ROUTES: list[Any] = [index_page, namespace_page, model_page, stats_page, static_file]
