"""What the diff, lineage and file pages show: framework-free, from the services' reads.

- ``diff_view``: two versions of one model compared (``diff.diff_cartons``), with the
  model's versions for the page's selectors;
- ``lineage_panel``: a carton's parent and derivatives, and for a model page the family
  (each version's parent), computed now for versions that have no lineage row yet;
- ``file_view`` / ``raw_file``: one file of a carton, for the viewer (carton.toml, text,
  Markdown, images under ``misc/``), by its path in the MANIFEST.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from registry.carton.digests import is_sha256
from registry.carton.paths import CARTON_TOML, MISC_DIR
from registry.errors import NotFound
from registry.services import cartons, diff, lineage, models
from registry.services.context import RegistryContext
from registry.services.diff import changed_counts
from registry.services.names import validate_model_name
from registry.services.stored_blobs import blob_bytes, read_blob, stored_blob

FAMILY_MAX = 100
"""A model page computes and shows the lineage of at most this many of its newest versions."""
TEXT_MAX_BYTES = 1024 * 1024
MARKDOWN = (".md", ".markdown")
TEXT = (
    *(".txt", ".toml", ".json", ".yaml", ".yml", ".cfg", ".ini", ".csv", ".tsv", ".rst"),
    *(".py", ".sh", ".js", ".html", ".xml", ".jinja", ".j2", ".log", ".license"),
)
IMAGE_TYPES = {
    b"\x89PNG\r\n\x1a\n": "image/png",
    b"\xff\xd8\xff": "image/jpeg",
    b"GIF87a": "image/gif",
    b"GIF89a": "image/gif",
    b"BM": "image/bmp",
}
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".avif")


# --- diff -------------------------------------------------------------------------------


def diff_view(
    ctx: RegistryContext, name: str, old: int | None, new: int | None, *, exact: bool
) -> dict[str, Any]:
    """Versions ``old`` and ``new`` of model ``name`` compared; ``new`` defaults to the
    latest, ``old`` to the version before ``new``."""
    validate_model_name(name)
    model = models.get_model(ctx, name)
    numbers = sorted(v["version"] for v in model["versions"])
    if not numbers:
        raise NotFound(f"model {name!r} has no versions")
    new = new if new is not None else numbers[-1]
    if old is None:
        earlier = [n for n in numbers if n < new]
        old = earlier[-1] if earlier else new
    result = diff.diff_cartons(ctx, f"{name}:{old}", f"{name}:{new}", exact=exact)
    for f in result["files"]:
        f["tensor_counts"] = changed_counts(f["tensors"]) if f["tensors"] is not None else None
    total = result["bytes_shared"] + result["bytes_changed"]
    return {
        "model": model,
        "old": old,
        "new": new,
        "diff": result,
        "bytes_total": total,
        "shared_percent": 100.0 * result["bytes_shared"] / total if total else 0.0,
    }


# --- lineage ----------------------------------------------------------------------------


def lineage_panel(
    ctx: RegistryContext, manifest_sha256: str, versions: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The carton's lineage, and the family of ``versions`` (a model's, newest first)."""
    shown = (versions or [])[:FAMILY_MAX]
    lineage.record(ctx, {manifest_sha256, *(v["manifest_sha256"] for v in shown)})
    with ctx.sessions() as session:
        mine = lineage.lineage_of(session, manifest_sha256)
        parents = lineage.parents_of(session, [v["manifest_sha256"] for v in shown])
    family = [{**v, "parent": parents.get(v["manifest_sha256"])} for v in shown]
    return {"lineage": mine, "family": family}


# --- files ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ViewedFile:
    manifest_sha256: str
    path: str
    sha256: str
    size: int
    kind: str  # "toml", "markdown", "text", "image" or "binary"
    text: str | None
    misc: dict[str, str]  # for Markdown: misc path -> sha256
    model_name: str | None


def viewer_kind(path: str, size: int) -> str | None:
    """How the viewer shows a file, judged by its path and size; None: no viewer (a blob)."""
    lower = path.lower()
    if path == CARTON_TOML:
        return "toml"
    if path.startswith(MISC_DIR) and lower.endswith(IMAGE_EXTENSIONS):
        return "image"
    if size > TEXT_MAX_BYTES:
        return None
    if lower.endswith(MARKDOWN):
        return "markdown"
    if lower.endswith(TEXT) or "." not in lower.rsplit("/", 1)[-1]:
        return "text"
    return None


def _carton_file(
    ctx: RegistryContext, manifest_sha256: str, path: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The carton's metadata and one of its files; a page URL with no such thing is a 404."""
    if not is_sha256(manifest_sha256):
        raise NotFound(f"no carton with manifest hash {manifest_sha256!r}")
    with ctx.sessions() as session:
        carton = cartons.carton_json(session, cartons.get_carton_row(session, manifest_sha256))
    for f in carton["files"]:
        if f["path"] == path:
            return carton, f
    raise NotFound(f"carton {manifest_sha256} has no file {path!r}")


def file_view(ctx: RegistryContext, manifest_sha256: str, path: str) -> ViewedFile:
    carton, f = _carton_file(ctx, manifest_sha256, path)
    kind = viewer_kind(path, f["size"]) or "binary"
    text = None
    if kind in ("toml", "markdown", "text"):
        try:
            text = blob_bytes(ctx, f["sha256"]).decode("utf-8")
        except UnicodeDecodeError:
            kind = "binary"
    if kind == "image" and image_type(blob_bytes(ctx, f["sha256"], 0, 16)) is None:
        kind = "binary"
    misc = {
        p["path"][len(MISC_DIR) :]: p["sha256"]
        for p in carton["files"]
        if p["path"].startswith(MISC_DIR)
    }
    return ViewedFile(
        manifest_sha256, path, f["sha256"], f["size"], kind, text, misc, carton["model_name"]
    )


def image_type(head: bytes) -> str | None:
    """The media type of a raster image by its first bytes (never SVG: it runs script)."""
    for magic, media_type in IMAGE_TYPES.items():
        if head.startswith(magic):
            return media_type
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[4:12] in (b"ftypavif", b"ftypavis"):
        return "image/avif"
    return None


def raw_file(
    ctx: RegistryContext, manifest_sha256: str, path: str
) -> tuple[str, int, Iterator[bytes]]:
    """(media type, size, bytes) of a file for the viewer: a raster image as its type,
    a UTF-8 text as text/plain, anything else as octets."""
    _carton, f = _carton_file(ctx, manifest_sha256, path)
    blob = stored_blob(ctx, f["sha256"])
    head = b"".join(read_blob(ctx, blob, 0, 16))
    media_type = image_type(head)
    if media_type is None and viewer_kind(path, f["size"]) in ("toml", "markdown", "text"):
        try:
            b"".join(read_blob(ctx, blob)).decode("utf-8")
            media_type = "text/plain"  # the HTTP layer adds "; charset=utf-8"
        except UnicodeDecodeError:
            media_type = None
    return media_type or "application/octet-stream", blob.size, read_blob(ctx, blob)
