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

A blob that is not one store object (content-defined chunks in packs) changes
``StoredBlob``, ``load_blobs``, ``stored_blob``'s store check and ``read_blob``,
and nothing else.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.blobstore import BlobNotFound
from registry.carton.streams import MiB
from registry.db.queries import in_chunks
from registry.db.tables import Blob
from registry.errors import StorageUnavailable
from registry.services.context import RegistryContext
from registry.services.freshness import current_generation
from registry.services.names import require_sha256

# Pieces of a MiB: fresh allocations of this size reuse freed heap memory; larger ones
# are mapped and unmapped by malloc each time, and their page faults cost more than a copy.
READ_PIECE = MiB


@dataclass(frozen=True)
class StoredBlob:
    """An immutable stored blob: its identity and the facts needed to serve its bytes.

    ``crc32`` is None for a blob stored but not yet indexed.
    """

    sha256: str
    size: int
    crc32: int | None


def load_blobs(session: Session, hashes: Iterable[str]) -> dict[str, StoredBlob]:
    """The indexed blobs among ``hashes`` (one query per thousand)."""
    found: dict[str, StoredBlob] = {}
    for batch in in_chunks(sorted(set(hashes))):
        for row in session.execute(
            select(Blob.sha256, Blob.size, Blob.crc32).where(Blob.sha256.in_(batch))
        ):
            found[row.sha256] = StoredBlob(row.sha256, int(row.size), int(row.crc32))
    return found


def cached_blob(ctx: RegistryContext, sha256: str) -> StoredBlob | None:
    """The blob's facts if this process knows them and still trusts them; never any I/O."""
    facts = ctx.caches.facts
    if facts.current() is None:
        return None
    return facts.blobs.get(sha256)


def stored_blob(ctx: RegistryContext, sha256: str) -> StoredBlob:
    """A blob the read path can serve; ``BlobNotFound`` when absent (see the module doc)."""
    require_sha256(sha256, "sha256")
    generation = current_generation(ctx)
    facts = ctx.caches.facts
    blob = facts.blobs.get(sha256)
    if blob is not None:
        return blob
    with ctx.sessions() as session:
        blob = load_blobs(session, [sha256]).get(sha256)
    in_store = ctx.blobs.stat(sha256)
    if blob is None:
        if in_store is None:
            raise BlobNotFound(sha256)
        blob = StoredBlob(sha256, in_store, None)
    elif in_store != blob.size:
        held = "nothing" if in_store is None else f"{in_store} bytes"
        raise StorageUnavailable(
            f"blob {sha256}: the store holds {held}, the index says {blob.size} bytes (run fsck)"
        )
    facts.remember(facts.blobs, sha256, blob, generation)
    return blob


def read_blob(
    ctx: RegistryContext, blob: StoredBlob, start: int = 0, end: int | None = None
) -> Iterator[bytes]:
    """The blob's bytes ``[start, end)`` (``end`` clamped to its size), in pieces of a MiB.

    A blob that is a local file is read with ``os.pread``: one copy from the page
    cache into each piece, none through buffered or ranged file objects.
    """
    stop = blob.size if end is None else min(end, blob.size)
    if start >= stop:
        return iter(())
    path = ctx.blobs.local_path(blob.sha256)
    if path is None:
        return ctx.blobs.iter_chunks(blob.sha256, start, stop, READ_PIECE)
    return _pread(path, blob.sha256, start, stop)


def _pread(path: Path, sha256: str, start: int, stop: int) -> Iterator[bytes]:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise BlobNotFound(sha256) from None
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


def verified_small_blob(ctx: RegistryContext, blob: StoredBlob, generation: int) -> bytes:
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
