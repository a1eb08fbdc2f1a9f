"""What the web pages show, beyond the API's reads: framework-free, synchronous, few queries.

Every function runs a fixed number of indexed queries whatever the size of
the index (no N+1): per-file share counts are one GROUP BY over
``carton_files`` restricted to one carton's blob hashes; what versions share
below the file is two queries per model page (``chunk_savings``); the per-model
storage accounting of ``/stats`` (``storage_accounting``) is three, computed in the
background and cached until the index changes.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from registry.carton.paths import MISC_DIR, MISC_REF_PREFIX, TENSOR_INDEX, TENSOR_REF_PREFIX
from registry.carton.tensor_data import parse_tensor_index
from registry.db.tables import Blob, CartonFile, Version
from registry.errors import RegistryError
from registry.services import (
    cartons,
    chunk_savings,
    lineage_views,
    models,
    references,
    stats,
)
from registry.services.access import (
    hidden_namespaces,
    private_namespaces,
    readable_carton_condition,
)
from registry.services.caches import BackgroundValue
from registry.services.context import RegistryContext
from registry.services.listing import DEFAULT_PAGE, list_models
from registry.services.namespaces import get_namespace_row
from registry.services.storage_accounting import TOP, model_storage
from registry.services.stored_blobs import blob_bytes
from registry.services.tensor_preview import tensor_preview

log = logging.getLogger("registry.web")

MAX_FILES_SHOWN = 500
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".avif")
_MAGIC = (
    b"\x89PNG\r\n\x1a\n",
    b"\xff\xd8\xff",
    b"GIF87a",
    b"GIF89a",
    b"BM",
)
MAX_SNIFFS = 16


# --- listing --------------------------------------------------------------------------


def listing(
    ctx: RegistryContext,
    *,
    q: str | None,
    sort: str,
    cursor: str | None,
    limit: int = DEFAULT_PAGE,
    namespace: str | None = None,
) -> dict[str, Any]:
    """The home page (or a namespace's): totals and one page of models."""
    with ctx.sessions() as session:
        private = private_namespaces(session)
        if namespace is not None:
            row = get_namespace_row(session, namespace)
            totals = stats.stats(session, namespace)
        else:
            totals = stats.cached_stats(ctx, session)
        page = list_models(
            session, q=q or None, sort=sort, limit=limit, cursor=cursor, namespace=namespace
        )
    return {
        "totals": _with_saved(totals),
        "items": page.items,
        "next_cursor": page.next_cursor,
        "namespace": namespace,
        "namespace_private": namespace is not None and row.visibility == "private",
        "private_namespaces": private,
    }


def _with_saved(totals: dict[str, Any]) -> dict[str, Any]:
    logical, stored = totals["logical_bytes"], totals["stored_bytes"]
    saved = max(logical - stored, 0)
    return {
        **totals,
        "saved_bytes": saved,
        "saved_percent": (100.0 * saved / logical) if logical else 0.0,
    }


# --- model and carton pages ------------------------------------------------------------


@dataclass
class CartonView:
    """Everything the carton detail template needs."""

    carton: dict[str, Any]
    files: list[dict[str, Any]]
    files_total: int
    misc: dict[str, str]  # misc path (after "misc/") -> blob sha256
    self_tests: list[dict[str, Any]]
    examples: list[dict[str, Any]]
    model: dict[str, Any] | None = None
    selected_version: int | None = None
    tags: list[str] = field(default_factory=list)
    version_shares: dict[int, chunk_savings.VersionShare] = field(default_factory=dict)
    lineage: dict[str, Any] | None = None  # parent and derivatives (``lineage_views``)
    family: list[dict[str, Any]] = field(default_factory=list)  # each version's parent
    private: bool = False  # the model is in a private namespace (its page shows a badge)


def model_view(ctx: RegistryContext, name: str, version: int | None = None) -> CartonView:
    with ctx.sessions() as session:
        if version is None:
            row = references.resolve_latest(session, name)
        else:
            row = references.resolve_version(session, name, version)
        model_row = models.get_model_row(session, name)
        model = models.model_json(session, model_row)
        private = model_row.namespace in private_namespaces(session)
        view = _carton_view(ctx, session, row.manifest_sha256)
        view.private = private
        view.version_shares = chunk_savings.version_shares(ctx, session, model["versions"])
    view.model = model
    view.selected_version = row.version
    panel = lineage_views.lineage_panel(ctx, row.manifest_sha256, model["versions"])
    view.lineage, view.family = panel["lineage"], panel["family"]
    view.tags = sorted(t for t, v in model["tags"].items() if v["version"] == row.version)
    return view


def carton_view(ctx: RegistryContext, manifest_sha256: str) -> CartonView:
    with ctx.sessions() as session:
        view = _carton_view(ctx, session, manifest_sha256)
    view.lineage = lineage_views.lineage_panel(ctx, manifest_sha256)["lineage"]
    return view


def _carton_view(ctx: RegistryContext, session: Session, manifest_sha256: str) -> CartonView:
    carton = cartons.carton_json(session, cartons.get_carton_row(session, manifest_sha256))
    files = carton["files"]
    shares = file_share_counts(session, manifest_sha256)
    by_path = {f["path"]: f["sha256"] for f in files}
    sizes = {f["path"]: f["size"] for f in files}
    misc = {p[len(MISC_DIR) :]: sha for p, sha in by_path.items() if p.startswith(MISC_DIR)}
    tensors = _tensor_index(ctx, by_path.get(TENSOR_INDEX))
    sniffer = _ImageSniffer(ctx)

    def describe(refs: dict[str, str] | None) -> list[dict[str, Any]]:
        out = []
        for key, ref in (refs or {}).items():
            item: dict[str, Any] = {"name": key, "ref": ref}
            if ref.startswith(MISC_REF_PREFIX):
                path = ref[len(MISC_REF_PREFIX) :]
                sha = misc.get(path)
                item["kind"] = "misc"
                item["sha256"] = sha
                item["is_image"] = sha is not None and sniffer.is_image(path, sha)
            elif ref.startswith(TENSOR_REF_PREFIX):
                entry = tensors.get(ref[len(TENSOR_REF_PREFIX) :])
                item["kind"] = "tensor"
                if entry is not None:
                    item["dtype"] = entry.dtype
                    item["shape"] = list(entry.shape) if entry.shape is not None else None
                    item["inner"] = list(entry.inner)
                    item["preview"] = tensor_preview(ctx, entry, by_path, sizes)
            else:
                item["kind"] = "other"
            out.append(item)
        return out

    self_tests = [
        {**t, "inputs": describe(t["inputs"]), "expected_out": describe(t["expected_out"])}
        for t in carton["self_tests"]
    ]
    examples = [
        {**e, "inputs": describe(e["inputs"]), "sample_out": describe(e["sample_out"])}
        for e in carton["examples"]
    ]
    shown = [
        {
            **f,
            "shared_with": shares.get(f["sha256"], 0),
            "viewer": lineage_views.viewer_kind(f["path"], f["size"]),
        }
        for f in files[:MAX_FILES_SHOWN]
    ]
    return CartonView(
        carton=carton,
        files=shown,
        files_total=len(files),
        misc=misc,
        self_tests=self_tests,
        examples=examples,
    )


def file_share_counts(session: Session, manifest_sha256: str) -> dict[str, int]:
    """blob sha256 -> how many OTHER cartons hold it; one grouped, index-driven query."""
    mine = aliased(CartonFile)
    other = aliased(CartonFile)
    hidden = hidden_namespaces(session)
    rows = session.execute(
        select(other.blob_sha256, func.count(func.distinct(other.manifest_sha256)))
        .where(
            other.blob_sha256.in_(
                select(mine.blob_sha256).where(mine.manifest_sha256 == manifest_sha256)
            ),
            other.manifest_sha256 != manifest_sha256,
            *(  # cartons the viewer may not read share nothing with it, as far as it knows
                [readable_carton_condition(hidden, other.manifest_sha256)] if hidden else []
            ),
        )
        .group_by(other.blob_sha256)
    ).all()
    return {sha: int(n) for sha, n in rows}


def _tensor_index(ctx: RegistryContext, sha256: str | None) -> dict[str, Any]:
    if sha256 is None:
        return {}
    try:
        raw = blob_bytes(ctx, sha256)
        return {e.name: e for e in parse_tensor_index(raw)}
    except Exception:  # a page never fails because of an unreadable index: just no summary
        return {}


class _ImageSniffer:
    """Is a misc file an image? By extension, else by its first bytes (bounded reads)."""

    def __init__(self, ctx: RegistryContext) -> None:
        self.ctx = ctx
        self.cache: dict[str, bool] = {}
        self.reads = 0

    def is_image(self, path: str, sha256: str) -> bool:
        if path.lower().endswith(IMAGE_EXTENSIONS):
            return True
        if "." in path.rsplit("/", 1)[-1]:
            return False
        if sha256 not in self.cache:
            if self.reads >= MAX_SNIFFS:
                return False
            self.reads += 1
            try:
                head = blob_bytes(self.ctx, sha256, 0, 16)
            except Exception:
                head = b""
            self.cache[sha256] = head.startswith(_MAGIC) or (
                head[:4] == b"RIFF" and head[8:12] == b"WEBP"
            )
        return self.cache[sha256]


# --- stats -----------------------------------------------------------------------------


STATS_WAIT_SECONDS = 2.0


def _refresh(ctx: RegistryContext, cache: BackgroundValue, fingerprint: tuple[Any, ...]) -> None:
    try:
        with ctx.sessions() as session:
            heavy = {"largest_blobs": largest_blobs(session), **model_storage(session)}
        with cache.lock:
            cache.fingerprint, cache.value = fingerprint, heavy
            cache.computed_at = datetime.now(UTC)
    except Exception:
        log.exception("computing the storage statistics failed")
    finally:
        with cache.lock:
            done = cache.running
            cache.running = None
        if done is not None:
            done[1].set()


def storage_stats(ctx: RegistryContext, wait: float = STATS_WAIT_SECONDS) -> dict[str, Any]:
    """/stats: totals (what file and chunk dedup each save), top sharing models, largest
    blobs, exclusive bytes per model.

    The per-model aggregate reads every carton_files row, so it is computed in a
    background thread and kept until the index changes (fingerprint: the totals
    and the versions count and max id). A request waits for a refresh at most
    ``wait`` seconds, then shows the previous result (``stale``) or none yet
    (``pending``): the page stays fast on a big index.
    """
    with ctx.sessions() as session:
        if hidden_namespaces(session):
            # Someone who may not read every namespace sees its own totals, and no
            # per-blob or per-model figures (they would name others' models and sizes).
            partial = _with_saved(stats.stats(session))
            distinct = partial["stored_bytes"]  # a partial view's stored bytes: its files'
            partial.update(
                distinct_file_bytes=distinct,
                file_saved_bytes=max(partial["logical_bytes"] - distinct, 0),
                chunk_saved_bytes=0,
                chunk_saved_percent=0.0,
            )
            return {
                "totals": partial,
                "largest_blobs": [],
                "top_sharing": [],
                "exclusive": [],
                "pending": False,
                "stale": False,
                "computed_at": None,
            }
        totals = _with_saved(stats.stats(session))
        totals.update(chunk_savings.dedup_levels(session, totals))
        n_versions, max_version_id = session.execute(
            select(func.count(), func.coalesce(func.max(Version.id), 0)).select_from(Version)
        ).one()
    fingerprint = (
        totals["models"],
        totals["cartons"],
        totals["blobs"],
        totals["logical_bytes"],
        totals["stored_bytes"],
        int(n_versions),
        int(max_version_id),
    )
    cache = ctx.caches.storage
    with cache.lock:
        fresh = cache.fingerprint == fingerprint and cache.value is not None
        event = None
        if not fresh:
            if cache.running is None:  # one refresh at a time; a later request starts the next
                cache.running = (fingerprint, threading.Event())
                threading.Thread(
                    target=_refresh, args=(ctx, cache, fingerprint), daemon=True, name="web-stats"
                ).start()
            event = cache.running[1]
    if event is not None:
        event.wait(wait)
    with cache.lock:
        heavy, computed_at = cache.value, cache.computed_at
        stale = cache.fingerprint != fingerprint
    empty: dict[str, Any] = {"largest_blobs": [], "top_sharing": [], "exclusive": []}
    return {
        "totals": totals,
        **(heavy or empty),
        "pending": heavy is None,
        "stale": heavy is not None and stale,
        "computed_at": computed_at,
    }


def largest_blobs(session: Session, limit: int = TOP) -> list[dict[str, Any]]:
    """The biggest blobs and how many cartons use each (two queries, the second on <= 20)."""
    blobs = session.execute(
        select(Blob.sha256, Blob.size).order_by(Blob.size.desc(), Blob.sha256).limit(limit)
    ).all()
    if not blobs:
        return []
    used = dict(
        session.execute(
            select(CartonFile.blob_sha256, func.count(func.distinct(CartonFile.manifest_sha256)))
            .where(CartonFile.blob_sha256.in_([b.sha256 for b in blobs]))
            .group_by(CartonFile.blob_sha256)
        ).all()
    )
    return [
        {"sha256": sha, "size": int(size), "cartons": int(used.get(sha, 0))} for sha, size in blobs
    ]


def download_sizes(ctx: RegistryContext, manifest_sha256: str) -> dict[str, int | None]:
    """Bytes of the slim and full downloads (the layouts are cached; None if one cannot be
    rebuilt now, e.g. a blob is missing: the page still renders)."""
    from registry.services.export import build_carton

    sizes: dict[str, int | None] = {}
    for form in ("slim", "full"):
        try:
            sizes[form] = build_carton(ctx, manifest_sha256, form).size
        except RegistryError:
            sizes[form] = None
    return sizes
