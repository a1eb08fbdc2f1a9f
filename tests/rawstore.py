"""A blob store's objects reached behind its interface, at the documented key layout.

The conformance suite checks what the interface wrote and reads what was written
behind its back with these; the integration tests damage a registry's store with them
(a disk that rots, a backup restored short, an object deleted by hand). Keys are
relative to the store's root (``registry/blobstore/base.py``): the filesystem's folder,
the S3 ``bucket/prefix``; the memory store keeps its objects by name, so its key is
read for the name. Imports ``registry.blobstore`` only.
"""

from __future__ import annotations

import contextlib
import os
import stat
from datetime import UTC, datetime

from registry.blobstore import BlobStore, FilesystemBlobStore, MemoryBlobStore, S3BlobStore


def layout_key(sha256: str) -> str:
    """Where every backend keeps a blob, relative to its root."""
    return f"sha256/{sha256[:2]}/{sha256[2:4]}/{sha256}"


def pack_layout_key(name: str) -> str:
    """Where every backend keeps a pack, relative to its root."""
    return f"packs/{name[:2]}/{name}"


def _memory_objects(store: MemoryBlobStore, key: str) -> tuple[dict, str]:
    """The memory store's dict that holds ``key``, and the object's name in it."""
    folder, name = key.split("/", 1)[0], key.rsplit("/", 1)[-1]
    if folder == "sha256":
        return store._blobs, name
    if folder == "packs":
        return store._packs, name
    raise ValueError(f"the memory store has no objects under {key!r}")


def raw_get(store: BlobStore, key: str) -> bytes | None:
    """The bytes under ``key``, or None."""
    if isinstance(store, FilesystemBlobStore):
        path = store.root / key
        return path.read_bytes() if path.is_file() else None
    if isinstance(store, S3BlobStore):
        try:
            response = store.client.get_object(Bucket=store.bucket, Key=store.prefix + key)
        except store.client.exceptions.NoSuchKey:
            return None
        return response["Body"].read()
    if isinstance(store, MemoryBlobStore):
        objects, name = _memory_objects(store, key)
        entry = objects.get(name)
        return None if entry is None else entry[0]
    raise TypeError(f"no raw access to {store!r}")


def raw_set(store: BlobStore, key: str, data: bytes) -> None:
    """Write ``data`` under ``key``, replacing what is there, without any check."""
    if isinstance(store, FilesystemBlobStore):
        path = store.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)  # published objects are read-only
        path.write_bytes(data)
    elif isinstance(store, S3BlobStore):
        store.client.put_object(Bucket=store.bucket, Key=store.prefix + key, Body=data)
    elif isinstance(store, MemoryBlobStore):
        objects, name = _memory_objects(store, key)
        objects[name] = (data, datetime.now(UTC))
    else:
        raise TypeError(f"no raw access to {store!r}")


def raw_delete(store: BlobStore, key: str) -> None:
    """Remove the object under ``key`` (nothing if absent)."""
    if isinstance(store, FilesystemBlobStore):
        with contextlib.suppress(FileNotFoundError):
            (store.root / key).unlink()
    elif isinstance(store, S3BlobStore):
        store.client.delete_object(Bucket=store.bucket, Key=store.prefix + key)
    elif isinstance(store, MemoryBlobStore):
        objects, name = _memory_objects(store, key)
        objects.pop(name, None)
    else:
        raise TypeError(f"no raw access to {store!r}")


def incomplete_uploads(store: BlobStore) -> list[str]:
    """Uploads in progress or abandoned: temp files, incomplete multipart uploads (keys)."""
    if isinstance(store, FilesystemBlobStore):
        if not store.tmp_dir.is_dir():
            return []
        return sorted(p.name for p in store.tmp_dir.iterdir())
    if isinstance(store, S3BlobStore):
        response = store.client.list_multipart_uploads(Bucket=store.bucket, Prefix=store.prefix)
        return sorted(u["Key"] for u in response.get("Uploads", []))
    if isinstance(store, MemoryBlobStore):
        return []  # a memory pack is held by its writer until committed
    raise TypeError(f"no raw access to {store!r}")


def stored_object_bytes(store: BlobStore) -> int:
    """Every byte the backend holds under the store's root: files on disk, objects listed."""
    if isinstance(store, FilesystemBlobStore):
        return sum(p.stat().st_size for p in store.root.rglob("*") if p.is_file())
    if isinstance(store, S3BlobStore):
        pages = store.client.get_paginator("list_objects_v2").paginate(
            Bucket=store.bucket, Prefix=store.prefix
        )
        return sum(int(o["Size"]) for page in pages for o in page.get("Contents", []))
    if isinstance(store, MemoryBlobStore):
        objects = [*store._blobs.values(), *store._packs.values()]
        return sum(len(data) for data, _ in objects)
    raise TypeError(f"no raw access to {store!r}")
