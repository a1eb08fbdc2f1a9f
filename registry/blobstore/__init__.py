"""Blob storage: one BlobStore interface (``base``), three backends, their errors (``errors``).

Imports only ``registry.carton``'s stdlib-only helpers (``streams``, ``digests``) and, for
``open_blobstore``'s type, ``registry.settings``; it raises its own errors, never the
registry's. ``open_blobstore(settings)`` picks the backend from ``settings.blob_store``:

- ``file:///abs/path``, ``file://relative/path`` or a plain path: FilesystemBlobStore
- ``s3://bucket/prefix`` (optionally ``?region=...``): S3BlobStore, with
  ``settings.s3_endpoint_url`` and ``settings.s3_presign_downloads``
- ``memory://``: MemoryBlobStore (tests)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from registry.blobstore.base import (
    BlobInfo,
    BlobStore,
    PutResult,
    blob_key,
    validate_sha256,
)
from registry.blobstore.errors import (
    BlobDigestMismatch,
    BlobNotFound,
    BlobStoreError,
    BlobStoreUnavailable,
)
from registry.blobstore.filesystem import FilesystemBlobStore
from registry.blobstore.memory import MemoryBlobStore
from registry.blobstore.s3 import S3BlobStore

if TYPE_CHECKING:
    from registry.settings import Settings

__all__ = [
    "BlobDigestMismatch",
    "BlobInfo",
    "BlobNotFound",
    "BlobStore",
    "BlobStoreError",
    "BlobStoreUnavailable",
    "FilesystemBlobStore",
    "MemoryBlobStore",
    "PutResult",
    "S3BlobStore",
    "blob_key",
    "open_blobstore",
    "parse_blob_store_url",
    "validate_sha256",
]


def parse_blob_store_url(url: str) -> tuple[str, dict[str, str]]:
    """Split a ``REGISTRY_BLOB_STORE`` value into (kind, parts).

    kind is ``file`` (parts: ``path``), ``s3`` (``bucket``, ``prefix``, ``region``)
    or ``memory``. Raises ``ValueError`` for anything else.
    """
    text = (url or "").strip()
    if not text:
        raise ValueError("REGISTRY_BLOB_STORE is empty (use file:///path, s3://bucket/prefix)")
    if "://" not in text:
        return "file", {"path": text}
    scheme, _, rest = text.partition("://")
    scheme = scheme.lower()
    if scheme == "file":
        if rest.startswith("localhost/"):
            rest = rest[len("localhost") :]
        if not rest:
            raise ValueError(f"REGISTRY_BLOB_STORE {url!r} names no folder")
        return "file", {"path": rest}
    if scheme == "memory":
        return "memory", {}
    if scheme == "s3":
        parts = urlsplit(text)
        bucket = parts.netloc
        if not bucket:
            raise ValueError(f"REGISTRY_BLOB_STORE {url!r} names no bucket (s3://bucket/prefix)")
        query = parse_qs(parts.query)
        unknown = set(query) - {"region"}
        if unknown:
            raise ValueError(
                f"REGISTRY_BLOB_STORE {url!r}: unknown option(s) {', '.join(sorted(unknown))}"
            )
        return "s3", {
            "bucket": bucket,
            "prefix": parts.path.strip("/"),
            "region": query.get("region", [""])[-1],
        }
    raise ValueError(
        f"unsupported REGISTRY_BLOB_STORE {url!r}: use file:///abs/path, a plain path, "
        "s3://bucket/prefix or memory://"
    )


def open_blobstore(settings: Settings) -> BlobStore:
    """The BlobStore that ``settings.blob_store`` names."""
    kind, parts = parse_blob_store_url(settings.blob_store)
    if kind == "file":
        return FilesystemBlobStore(Path(parts["path"]))
    if kind == "memory":
        return MemoryBlobStore()
    return S3BlobStore(
        parts["bucket"],
        parts["prefix"],
        endpoint_url=settings.s3_endpoint_url,
        presign=settings.s3_presign_downloads,
        region=parts["region"] or None,
    )
