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
``read_blob`` reads either way through the blob store (the filesystem backend
reads with ``os.pread``), and checks every byte before it leaves.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Iterator

from sqlalchemy.orm import Session

from registry.blobstore import BlobNotFound
from registry.carton.streams import MiB
from registry.errors import StorageUnavailable
from registry.services.chunkstore.damage import damaged_files
from registry.services.chunkstore.reader import StoredFile, load_files, stored_size
from registry.services.chunkstore.verified import iter_verified
from registry.services.chunkstore.wholedamage import CORRUPT, WRONG_SIZE, record_blob_damage
from registry.services.context import RegistryContext
from registry.services.freshness import current_generation
from registry.services.names import require_sha256

# Pieces of a MiB: fresh allocations of this size reuse freed heap memory; larger ones
# are mapped and unmapped by malloc each time, and their page faults cost more than a copy.
READ_PIECE = MiB
DAMAGE_LOG = logging.getLogger("registry.chunkstore")


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
        damaged = bool(damaged_files(session, [sha256]))
    if damaged:
        what = "has damaged chunks" if blob is not None and blob.chunked else "is damaged"
        raise StorageUnavailable(
            f"blob {sha256} {what} in the store (found by fsck or a read); "
            "a push of the same bytes heals it"
        )
    if blob is None:
        in_store = ctx.blobs.stat(sha256)
        if in_store is None:
            raise BlobNotFound(sha256)
        blob = StoredFile(sha256, in_store, None, None)
    elif (in_store := stored_size(ctx.blobs, blob)) != blob.size:
        held = "nothing" if in_store is None else f"{in_store} bytes"
        if in_store is not None and not blob.chunked:
            _record(ctx, sha256, WRONG_SIZE)
        raise StorageUnavailable(
            f"blob {sha256}: the store holds {held}, the index says {blob.size} bytes (run fsck)"
        )
    facts.remember(facts.blobs, sha256, blob, generation)
    return blob


def read_blob(
    ctx: RegistryContext, blob: StoredFile, start: int = 0, end: int | None = None
) -> Iterator[bytes]:
    """The blob's bytes ``[start, end)`` (``end`` clamped to its size), in pieces of a MiB.

    Verified before they leave: a chunked file chunk by chunk
    (``chunkstore.verified``), a whole blob read whole against its sha256, its last
    piece held back until the hash checks out. Damage ends the stream with
    ``StorageUnavailable`` before the wrong bytes (a 503, or a response cut short).
    """
    stop = blob.size if end is None else min(end, blob.size)
    if start >= stop:
        return iter(())
    if blob.ranges is not None:
        return iter_verified(ctx, blob, start, stop)
    pieces = ctx.blobs.iter_chunks(blob.sha256, start, stop, READ_PIECE)
    return _whole_checked(ctx, blob.sha256, pieces, start, stop, start == 0 and stop == blob.size)


def _record(ctx: RegistryContext, sha256: str, reason: str) -> None:
    """Record a whole blob found damaged by a read; a failure to record never hides the
    damage from the reader (it still gets ``StorageUnavailable``)."""
    try:
        record_blob_damage(ctx, [sha256], reason, "read")
    except Exception:
        DAMAGE_LOG.exception("could not record blob %s as damaged", sha256)


def _whole_checked(
    ctx: RegistryContext,
    sha256: str,
    pieces: Iterator[bytes],
    start: int,
    stop: int,
    whole: bool,
) -> Iterator[bytes]:
    """A whole blob's pieces, the last one only once they are all there and (``whole``:
    the read is of the entire blob) hash to ``sha256``. Damage found is recorded
    (``wholedamage``): negotiation then asks for the bytes again, and a push replaces them."""
    h = hashlib.sha256() if whole else None
    held: bytes | None = None
    position = start
    try:
        for piece in pieces:
            if held is not None:
                yield held
            if h is not None:
                h.update(piece)
            position += len(piece)
            held = piece
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:
            close()
    if position < stop:
        _record(ctx, sha256, WRONG_SIZE)
        raise StorageUnavailable(
            f"blob {sha256} ends at byte {position} in the store, the index says "
            f"{stop} or more (run fsck)"
        )
    if h is not None and h.hexdigest() != sha256:
        DAMAGE_LOG.error("blob %s is damaged in the store: its bytes do not hash to it", sha256)
        _record(ctx, sha256, CORRUPT)
        raise StorageUnavailable(
            f"blob {sha256} is damaged in the store: its bytes do not hash to its name "
            "(recorded; a push of the same bytes replaces it)"
        )
    if held is not None:
        yield held


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
        if not blob.chunked:
            _record(ctx, blob.sha256, CORRUPT)
        raise StorageUnavailable(
            f"blob {blob.sha256} is damaged in the store: its bytes do not hash to its name "
            "(run fsck)"
        )
    facts.remember(facts.small_blobs, blob.sha256, data, generation)
    return data
