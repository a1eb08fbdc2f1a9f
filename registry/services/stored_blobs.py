"""Reading stored blobs: the one place that knows where a blob's facts and bytes come from.

- ``load_blobs(session, hashes)``: what the index says of each blob (size, CRC-32);
- ``stored_blob(ctx, sha256)``: one blob as the read path serves it: indexed, and
  present in the store with that size (else ``StorageUnavailable``, 503), or stored
  but not yet indexed (an uploaded blob waiting for its carton); kept in
  ``ctx.caches.facts`` so a HEAD needs neither the database nor the store;
- ``cached_blob(ctx, sha256)``: the same from memory only (no I/O: the event loop
  may call it), None when it must be loaded;
- ``read_blob(ctx, blob, start, end)``: the bytes; every byte the read path sends
  comes through here, and ``verified_small_blob`` for the small ones it keeps.

A blob is a whole store object or a chunked file (content-defined chunks in
packs, ``registry.services.chunkstore``): ``StoredFile`` says which, and
``read_blob`` reads either way, with ``os.pread`` from local files (whole blobs
and packs alike).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from sqlalchemy.orm import Session

from registry.blobstore import BlobNotFound
from registry.blobstore.errors import PackNotFound
from registry.carton.streams import MiB
from registry.errors import StorageUnavailable
from registry.services.chunkstore.reader import StoredFile, load_files, stored_size
from registry.services.context import RegistryContext
from registry.services.freshness import current_generation
from registry.services.names import require_sha256

# Pieces of a MiB: fresh allocations of this size reuse freed heap memory; larger ones
# are mapped and unmapped by malloc each time, and their page faults cost more than a copy.
READ_PIECE = MiB


def load_blobs(session: Session, hashes: Iterable[str]) -> dict[str, StoredFile]:
    """The indexed blobs among ``hashes``, whole or chunked (one query per thousand)."""
    return load_files(session, hashes)


def cached_blob(ctx: RegistryContext, sha256: str) -> StoredFile | None:
    """The blob's facts if this process knows them and still trusts them; never any I/O."""
    facts = ctx.caches.facts
    if facts.current() is None:
        return None
    return facts.blobs.get(sha256)


def stored_blob(ctx: RegistryContext, sha256: str) -> StoredFile:
    """A blob the read path can serve; ``BlobNotFound`` when absent (see the module doc)."""
    require_sha256(sha256, "sha256")
    generation = current_generation(ctx)
    facts = ctx.caches.facts
    blob = facts.blobs.get(sha256)
    if blob is not None:
        return blob
    with ctx.sessions() as session:
        blob = load_blobs(session, [sha256]).get(sha256)
    if blob is None:
        in_store = ctx.blobs.stat(sha256)
        if in_store is None:
            raise BlobNotFound(sha256)
        blob = StoredFile(sha256, in_store, None, None)
    elif (in_store := stored_size(ctx.blobs, blob)) != blob.size:
        held = "nothing" if in_store is None else f"{in_store} bytes"
        raise StorageUnavailable(
            f"blob {sha256}: the store holds {held}, the index says {blob.size} bytes (run fsck)"
        )
    facts.remember(facts.blobs, sha256, blob, generation)
    return blob


def read_blob(
    ctx: RegistryContext, blob: StoredFile, start: int = 0, end: int | None = None
) -> Iterator[bytes]:
    """The blob's bytes ``[start, end)`` (``end`` clamped to its size), in pieces of a MiB.

    A blob that is a local file is read with ``os.pread``: one copy from the page
    cache into each piece, none through buffered or ranged file objects.
    """
    stop = blob.size if end is None else min(end, blob.size)
    if start >= stop:
        return iter(())
    if blob.ranges is not None:
        return _read_chunked(ctx, blob, start, stop)
    path = ctx.blobs.local_path(blob.sha256)
    if path is None:
        return ctx.blobs.iter_chunks(blob.sha256, start, stop, READ_PIECE)
    return _pread(path, blob.sha256, start, stop, BlobNotFound(blob.sha256))


def _read_chunked(ctx: RegistryContext, blob: StoredFile, start: int, stop: int) -> Iterator[bytes]:
    """A chunked file's bytes: ``os.pread`` from local packs, else the store's read-ahead.

    A pack gone from the store is named with the file it breaks (503, run fsck).
    """
    ranges = blob.pack_ranges(start, stop)
    try:
        if ranges and ctx.blobs.local_pack_path(ranges[0][0]) is None:
            yield from ctx.blobs.iter_pack_ranges(ranges, READ_PIECE)
            return
        for name, lo, hi in ranges:
            path = ctx.blobs.local_pack_path(name)
            if path is None:
                raise PackNotFound(name)
            yield from _pread(path, blob.sha256, lo, hi, PackNotFound(name))
    except PackNotFound as exc:
        raise StorageUnavailable(
            f"blob {blob.sha256}: pack {exc.name} is missing from the store (run fsck)"
        ) from exc


def _pread(path: Path, sha256: str, start: int, stop: int, missing: Exception) -> Iterator[bytes]:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise missing from None
    try:
        position = start
        while position < stop:
            piece = os.pread(fd, min(READ_PIECE, stop - position), position)
            if not piece:
                raise StorageUnavailable(
                    f"blob {sha256} ends at byte {position} in the store, the index says "
                    f"{stop} or more (run fsck)"
                )
            position += len(piece)
            yield piece
    finally:
        os.close(fd)


def blob_bytes(ctx: RegistryContext, sha256: str, start: int = 0, end: int | None = None) -> bytes:
    """A small blob (or a range of one) in memory."""
    return b"".join(read_blob(ctx, stored_blob(ctx, sha256), start, end))


def missing_from_store(sha256: str) -> StorageUnavailable:
    """The error for an indexed blob whose bytes the store does not have."""
    return StorageUnavailable(f"blob {sha256} is missing from the store (run fsck)")


def verified_small_blob(ctx: RegistryContext, blob: StoredFile, generation: int) -> bytes:
    """A small blob's bytes, checked against its name, kept in ``ctx.caches.facts``.

    A blob whose stored bytes do not hash to its name (damaged in the store) is a
    ``StorageUnavailable``, never served.
    """
    facts = ctx.caches.facts
    data = facts.small_blobs.get(blob.sha256)
    if data is not None:
        return data
    try:
        data = b"".join(read_blob(ctx, blob))
    except BlobNotFound:
        raise missing_from_store(blob.sha256) from None
    if hashlib.sha256(data).hexdigest() != blob.sha256:
        raise StorageUnavailable(
            f"blob {blob.sha256} is damaged in the store: its bytes do not hash to its name "
            "(run fsck)"
        )
    facts.remember(facts.small_blobs, blob.sha256, data, generation)
    return data
