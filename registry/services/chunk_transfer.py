"""The chunk transfer verbs (docs/chunk-transfer.md): which chunks are missing, chunk
uploads, assembling a file from stored chunks, and a file's chunk list for pulls.

Nothing a client sends is trusted: every uploaded chunk is hashed against its
name, and an assembled file is read back from the store and hashed against its
sha256 before it exists as a blob.

What one request may cost is bounded whatever it holds. An upload counts records as
well as bytes: a record shorter than the chunker's ``min_size`` can only be a file's
last chunk, and is charged as ``min_size`` bytes (so a body of tiny records holds no
more records than one of real chunks). An assembly is refused before a byte is hashed
when its chunks could not be FastCDC's cut of a file (a chunk before the last shorter
than ``min_size``, sizes that do not add up) or when the file would be mostly repeats
(``REGISTRY_MAX_ASSEMBLE_RATIO``); it runs in its caller's ingest slot. Errors name
what was wrong with the request, never sizes or digests of stored chunks.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import accumulate
from typing import Any

from sqlalchemy import select

from registry.carton.digests import is_sha256
from registry.carton.streams import MiB, PieceReader, Readable, crc32
from registry.chunking import CHUNK_RECORD, chunk_hash
from registry.db.queries import in_list
from registry.db.tables import Chunk, Pack
from registry.errors import (
    AmplifiedAssembly,
    ChunkMismatch,
    ChunksMissing,
    InvalidBody,
    InvalidDigest,
    ManifestMismatch,
    ReassemblyMismatch,
    UploadTooLarge,
)
from registry.services.access import require_blob_readable
from registry.services.chunkstore.damage import undamaged_copy
from registry.services.chunkstore.index import record_files
from registry.services.chunkstore.layout import (
    ChunkRef,
    FileLayout,
    parse_pack_table,
    segments_of,
)
from registry.services.chunkstore.reader import iter_file, stored_from_layout
from registry.services.chunkstore.writer import PackSession
from registry.services.context import RegistryContext
from registry.services.cut_upload import CUT_FILES_TYPE, CUT_UPLOAD_TYPE
from registry.services.leases import Lease
from registry.services.names import require_sha256
from registry.services.private_dedup import record_uploads, restricted, usable_blobs, usable_chunks
from registry.services.stored_blobs import stored_blob

MAX_BATCH_BYTES = 64 * MiB
MAX_QUERY = 100_000
MAX_ASSEMBLE = 1_048_576
"""Chunk names in one assembly: a 32 GiB file at the smallest chunks (about 64 GiB at
the average), in a JSON body of about 70 MiB."""
LOOKUP_WINDOW = 50_000
"""Chunk names looked up (and held as pack references) at a time while assembling."""


def max_batch_records(ctx: RegistryContext) -> int:
    """Records one upload may hold: ``MAX_BATCH_BYTES`` of chunks of at least ``min_size``."""
    return max(1, MAX_BATCH_BYTES // ctx.chunk_params.min_size)


def max_upload_body(ctx: RegistryContext) -> int:
    """The largest upload body: the most chunk bytes and records, with their headers."""
    return MAX_BATCH_BYTES + max_batch_records(ctx) * CHUNK_RECORD.size


def chunking(ctx: RegistryContext) -> dict[str, Any]:
    """What a client needs to cut files exactly as the registry does, and to send them."""
    settings = ctx.settings
    slots = settings.max_concurrent_pushes
    return {
        **ctx.chunk_params.as_json(),
        "min_file_bytes": settings.chunk_min_file_bytes,
        "max_batch_bytes": MAX_BATCH_BYTES,
        "max_batch_records": max_batch_records(ctx),
        "max_query": MAX_QUERY,
        "max_assemble": MAX_ASSEMBLE,
        "max_assemble_ratio": settings.max_assemble_ratio,
        "assemble_ratio_min_bytes": settings.assemble_ratio_min_bytes,
        "max_concurrent_uploads": min(settings.max_concurrent_pushes_per_client or slots, slots),
        "cut_upload_type": CUT_UPLOAD_TYPE,
        "cut_files_type": CUT_FILES_TYPE,
    }


def _chunk_names(values: Iterable[object], limit: int) -> list[str]:
    given = list(values)
    if len(given) > limit:
        raise InvalidBody(f"at most {limit} chunks per request")
    names: list[str] = []
    for name in given:
        if not is_sha256(name):  # BLAKE3 names are 64 lowercase hex digits too
            raise InvalidDigest(f"invalid chunk name {name!r}: expected 64 lowercase hex digits")
        names.append(name)
    return names


_PRESENT = (
    select(Chunk.hash)
    .join(Pack, Pack.id == Chunk.pack_id)
    .where(in_list(Chunk.hash, "hashes"), Pack.retired_at.is_(None), undamaged_copy())
)
"""One statement for a query's names, as the push's own lookup (``in_list``): up to
``MAX_QUERY`` of them were 200 statements of ``IN_CHUNK``."""


def missing_chunks(ctx: RegistryContext, values: Iterable[object]) -> list[str]:
    """The chunks the registry cannot read from a live pack (or only from a damaged copy)."""
    names = _chunk_names(values, MAX_QUERY)
    with ctx.sessions() as session:
        present = set(session.scalars(_PRESENT, {"hashes": sorted(set(names))}))
        if present and restricted(session):  # present only if the caller may already read it
            present &= usable_chunks(ctx, session, present)
    return [n for n in dict.fromkeys(names) if n not in present]


def _records(body: Readable, max_chunk: int) -> Iterable[tuple[str, bytes | memoryview]]:
    """(name, bytes) of each record of an upload body, each verified against its name."""
    pieces = PieceReader(body)
    while True:
        head = pieces.take(CHUNK_RECORD.size)
        if not head:
            return
        if len(head) != CHUNK_RECORD.size:
            raise InvalidBody("chunk upload ends inside a record header")
        digest, length = CHUNK_RECORD.unpack(head)
        name = digest.hex()
        if not 0 < length <= max_chunk:
            raise InvalidBody(f"chunk {name} is {length} bytes; chunks are 1 to {max_chunk}")
        data = pieces.take(length)
        if len(data) != length:
            raise InvalidBody(f"chunk upload ends inside chunk {name}")
        actual = chunk_hash(data)
        if actual != name:
            raise ChunkMismatch(f"chunk {name}: its {length} bytes hash to {actual}")
        yield name, data


def store_chunks(ctx: RegistryContext, body: Readable) -> dict[str, int]:
    """Store an upload's chunks (module doc); all of them, or none if one is bad."""
    min_size, max_records = ctx.chunk_params.min_size, max_batch_records(ctx)
    with Lease(ctx.sessions, ctx.settings.lease_timeout) as lease:
        packs = PackSession(ctx, lease)
        try:
            batch: list[tuple[str, bytes | memoryview]] = []
            size = charged = count = 0
            received: dict[str, int] = {}
            for record in _records(body, ctx.chunk_params.max_size):
                batch.append(record)
                received[record[0]] = len(record[1])
                size += len(record[1])
                charged += max(len(record[1]), min_size)
                count += 1
                if charged > MAX_BATCH_BYTES or count > max_records:
                    raise UploadTooLarge(
                        f"a chunk upload holds at most {max_records} records and "
                        f"{MAX_BATCH_BYTES} bytes of chunks, a chunk shorter than min_size "
                        f"({min_size}) counting as {min_size} bytes: only a file's last "
                        "chunk is shorter"
                    )
                if size >= 16 * MiB:
                    packs.place(batch)
                    batch, size = [], 0
            packs.place(batch)
            packs.keep_unused()
        except BaseException:
            packs.discard()
            raise
    healed = packs.healed_bytes
    stored, bytes_stored = packs.chunks_written, packs.chunk_bytes_written - healed
    with ctx.sessions() as session:
        if received and restricted(session):
            # Chunks held for others count as stored by this upload, as far as it may know
            # (healed ones too: that they were stored, damaged, is not the caller's to know).
            unknown = set(received) - usable_chunks(ctx, session, received)
            stored, bytes_stored = len(unknown), sum(received[n] for n in unknown)
            healed = sum(received[n] for n in packs.healed if n in received and n not in unknown)
    record_uploads(ctx, received)
    return {"chunks": count, "stored": stored, "bytes_stored": bytes_stored, "bytes_healed": healed}


def assemble_blob(
    ctx: RegistryContext, sha256: str, size: object, chunks: Iterable[object]
) -> dict[str, Any]:
    """Make ``sha256`` a blob from stored chunks, verified by reading them back; refused
    before any hashing when the request cannot be a file FastCDC cut (module doc)."""
    require_sha256(sha256, "sha256")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise InvalidBody('"size" must be a non-negative integer')
    names = _chunk_names(chunks, MAX_ASSEMBLE)
    if not names:
        raise InvalidBody("a file is assembled from at least one chunk")
    _check_announced(ctx, sha256, size, names)
    usable: set[str] | None = None
    with ctx.sessions() as session:
        if restricted(session):  # chunks the caller may not read are not there for it
            usable = usable_chunks(ctx, session, names)
            hidden_before = sha256 not in usable_blobs(ctx, session, [sha256])
        else:
            hidden_before = False
    with Lease(ctx.sessions, ctx.settings.lease_timeout) as lease:
        packs = PackSession(ctx, lease)
        found = _Located(ctx.chunk_params.min_size, len(names), usable)
        segments = segments_of(found.refs(packs, names))
        found.check(ctx, sha256, size)
        h, crc = hashlib.sha256(), 0
        for data in iter_file(ctx.blobs, stored_from_layout(FileLayout(sha256, size, 0, segments))):
            h.update(data)
            crc = crc32(data, crc)
        if h.hexdigest() != sha256:
            raise ReassemblyMismatch(f"the chunks named do not reassemble to sha256 {sha256}")
        layout = FileLayout(sha256, size, crc, segments)
        with ctx.transaction() as session:
            lease.fence(session)
            new = record_files(session, [layout], packs.pack_ids(session))
            lease.release(session)
    ctx.caches.index_changed()
    record_uploads(ctx, [sha256])
    return {"sha256": sha256, "size": size, "created": bool(new) or hidden_before}


def _amplified(ctx: RegistryContext, sha256: str, size: int, distinct_bytes: int) -> None:
    """``AmplifiedAssembly`` unless ``size`` is within the ratio of ``distinct_bytes``."""
    settings = ctx.settings
    allowed = max(settings.assemble_ratio_min_bytes, settings.max_assemble_ratio * distinct_bytes)
    if size > allowed:
        raise AmplifiedAssembly(
            f"{sha256}: {size} bytes is too many repeats of too few distinct chunks; a file "
            f"assembled from chunks may be at most REGISTRY_MAX_ASSEMBLE_RATIO "
            f"({settings.max_assemble_ratio:g}) times the bytes of its distinct chunks past "
            f"REGISTRY_ASSEMBLE_RATIO_MIN_BYTES ({settings.assemble_ratio_min_bytes}): "
            f"upload it whole (PUT /api/v1/blobs/{sha256})"
        )


def _check_announced(ctx: RegistryContext, sha256: str, size: int, names: list[str]) -> None:
    """What the request alone shows, before the store is asked anything: a size that
    chunks this many cannot make, over the upload limit, or surely too amplified."""
    params, limit = ctx.chunk_params, ctx.settings.max_upload_bytes
    if size > limit:
        raise UploadTooLarge(
            f"{sha256}: a file assembled from chunks is at most REGISTRY_MAX_UPLOAD_BYTES "
            f"({limit} bytes), like one uploaded whole"
        )
    n = len(names)
    if not (n - 1) * params.min_size < size <= n * params.max_size:
        raise InvalidBody(
            f"{n} chunks cannot make {size} bytes: each is {params.min_size} to "
            f"{params.max_size} bytes (min_size, max_size), the last 1 to {params.max_size}"
        )
    _amplified(ctx, sha256, size, len(set(names)) * params.max_size)


class _Located:
    """Where each named chunk is stored, and what the request's list adds up to."""

    def __init__(self, min_size: int, count: int, usable: set[str] | None = None) -> None:
        self.min_size, self.last = min_size, count - 1
        self.usable = usable  # None: every stored chunk; else only these count as stored
        self.missing: list[str] = []
        self.held = self.distinct = 0
        self.short_at: int | None = None  # a chunk before the last, under min_size

    def refs(self, packs: PackSession, names: list[str]) -> Iterator[ChunkRef]:
        """Each found chunk in order, a window at a time (a file of a million chunks never
        holds a million references); the absent go to ``missing``."""
        seen: set[str] = set()
        for start in range(0, len(names), LOOKUP_WINDOW):
            window = names[start : start + LOOKUP_WINDOW]
            found = packs.lookup(set(window))
            for at, name in enumerate(window, start):
                ref = found.get(name)
                if ref is None or (self.usable is not None and name not in self.usable):
                    self.missing.append(name)
                    continue
                self.held += ref.length
                if name not in seen:
                    seen.add(name)
                    self.distinct += ref.length
                if ref.length < self.min_size and at != self.last and self.short_at is None:
                    self.short_at = at
                yield ref

    def check(self, ctx: RegistryContext, sha256: str, size: int) -> None:
        """Every chunk stored, only the last one short, the announced size, not too many
        repeats: what the list must be before its bytes are read."""
        if self.missing:
            missing = list(dict.fromkeys(self.missing))
            raise ChunksMissing(
                f"{len(missing)} of the file's chunks are not stored, e.g. {missing[0]}",
                missing=missing,
            )
        if self.short_at is not None:
            raise InvalidBody(
                f"chunk {self.short_at} of the list is shorter than min_size "
                f"({self.min_size}); only a file's last chunk may be"
            )
        if self.held != size:
            raise ManifestMismatch(
                f"the chunks named do not add up to the {size} bytes announced for {sha256}"
            )
        _amplified(ctx, sha256, size, self.distinct)


def reconstruction(ctx: RegistryContext, sha256: str) -> dict[str, Any]:
    """A file's chunks in order, with their offsets in the file, for clients with a cache."""
    require_blob_readable(ctx, sha256)
    stored = stored_blob(ctx, sha256)
    if stored.ranges is None:
        return {"sha256": sha256, "size": stored.size, "chunked": False}
    with ctx.sessions() as session:
        tables = {
            r.name: parse_pack_table(bytes(r.chunk_table))
            for r in session.execute(
                select(Pack.name, Pack.chunk_table).where(
                    Pack.name.in_(sorted({r.pack for r in stored.ranges}))
                )
            )
        }
    starts = {
        name: list(accumulate((n for _, n in table), initial=0)) for name, table in tables.items()
    }
    chunks: list[dict[str, Any]] = []
    offset = 0
    for r in stored.ranges:  # each range finds its first chunk by bisection, not a scan
        table, at = tables[r.pack], starts[r.pack]
        end = r.pack_offset + r.length
        for i in range(bisect_left(at, r.pack_offset), len(table)):
            if at[i] >= end:
                break
            name, length = table[i]
            chunks.append({"hash": name, "offset": offset, "size": length})
            offset += length
    return {"sha256": sha256, "size": stored.size, "chunked": True, "chunks": chunks}
