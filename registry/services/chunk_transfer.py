"""The chunk transfer verbs (docs/chunk-transfer.md): which chunks are missing, chunk
uploads, assembling a file from stored chunks, and a file's chunk list for pulls.

Nothing a client sends is trusted: every uploaded chunk is hashed against its
name, and an assembled file is read back from the store and hashed against its
sha256 before it exists as a blob.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import accumulate
from typing import Any, BinaryIO

from sqlalchemy import select

from registry.blobstore.chunking import chunk_hash
from registry.carton.digests import is_sha256
from registry.carton.streams import MiB
from registry.db.queries import in_chunks
from registry.db.tables import Chunk, Pack
from registry.errors import (
    ChunkMismatch,
    ChunksMissing,
    InvalidBody,
    InvalidDigest,
    ManifestMismatch,
    ReassemblyMismatch,
    UploadTooLarge,
)
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
from registry.services.leases import Lease
from registry.services.names import require_sha256
from registry.services.stored_blobs import stored_blob

MAX_BATCH_BYTES = 64 * MiB
MAX_QUERY = 100_000
MAX_ASSEMBLE = 1_048_576
"""Chunk names in one assembly: a 32 GiB file at the smallest chunks (about 64 GiB at
the average), in a JSON body of about 70 MiB."""
RECEIVE_PIECE = MiB
"""Bytes asked of an upload body at a time (it may give fewer: what arrived)."""
LOOKUP_WINDOW = 50_000
"""Chunk names looked up (and held as pack references) at a time while assembling."""
_RECORD = struct.Struct(">32sI")


def chunking(ctx: RegistryContext) -> dict[str, Any]:
    """What a client needs to cut files exactly as the registry does."""
    return {
        **ctx.chunk_params.as_json(),
        "min_file_bytes": ctx.settings.chunk_min_file_bytes,
        "max_batch_bytes": MAX_BATCH_BYTES,
        "max_query": MAX_QUERY,
        "max_assemble": MAX_ASSEMBLE,
    }


def _chunk_names(values: Iterable[object], limit: int) -> list[str]:
    names = list(values)
    if len(names) > limit:
        raise InvalidBody(f"at most {limit} chunks per request")
    for name in names:
        if not is_sha256(name):  # BLAKE3 names are 64 lowercase hex digits too
            raise InvalidDigest(f"invalid chunk name {name!r}: expected 64 lowercase hex digits")
    return names  # type: ignore[return-value]


def missing_chunks(ctx: RegistryContext, values: Iterable[object]) -> list[str]:
    """The chunks the registry cannot read from a live pack."""
    names = _chunk_names(values, MAX_QUERY)
    present: set[str] = set()
    with ctx.sessions() as session:
        for batch in in_chunks(sorted(set(names))):
            present.update(
                session.scalars(
                    select(Chunk.hash)
                    .join(Pack, Pack.id == Chunk.pack_id)
                    .where(Chunk.hash.in_(batch), Pack.retired_at.is_(None))
                )
            )
    return [n for n in dict.fromkeys(names) if n not in present]


class _Pieces:
    """A body read in the pieces its stream gives, handed out as views into them: a
    record's bytes are copied only when they span two pieces."""

    def __init__(self, body: BinaryIO) -> None:
        self._body = body
        self._piece = memoryview(b"")
        self._at = 0

    def take(self, n: int) -> bytes | memoryview:
        """The next ``n`` bytes (fewer only at the end of the body)."""
        if len(self._piece) - self._at >= n:
            self._at += n
            return self._piece[self._at - n : self._at]
        rest = self._piece[self._at :]
        parts = [rest] if len(rest) else []  # a record at a piece's start is not copied
        got = len(rest)
        while got < n:
            piece = self._body.read(RECEIVE_PIECE)
            if not piece:
                self._piece, self._at = memoryview(b""), 0
                return b"".join(parts)
            if got + len(piece) > n:  # the rest stays for the next record
                self._piece, self._at = memoryview(piece), n - got
                parts.append(self._piece[: self._at])
                break
            parts.append(piece)
            got += len(piece)
        else:
            self._piece, self._at = memoryview(b""), 0
        return parts[0] if len(parts) == 1 else b"".join(parts)


def _records(body: BinaryIO, max_chunk: int) -> Iterable[tuple[str, bytes | memoryview]]:
    """(name, bytes) of each record of an upload body, each verified against its name."""
    pieces = _Pieces(body)
    while True:
        head = pieces.take(_RECORD.size)
        if not head:
            return
        if len(head) != _RECORD.size:
            raise InvalidBody("chunk upload ends inside a record header")
        digest, length = _RECORD.unpack(head)
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


def store_chunks(ctx: RegistryContext, body: BinaryIO) -> dict[str, int]:
    """Store an upload's chunks (module doc); all of them, or none if one is bad."""
    with Lease(ctx.sessions, ctx.settings.lease_timeout) as lease:
        packs = PackSession(ctx, lease)
        try:
            batch: list[tuple[str, bytes | memoryview]] = []
            size = total = count = 0
            for record in _records(body, ctx.chunk_params.max_size):
                batch.append(record)
                size += len(record[1])
                total += len(record[1])
                count += 1
                if total > MAX_BATCH_BYTES:
                    raise UploadTooLarge(
                        f"a chunk upload holds at most {MAX_BATCH_BYTES} bytes of chunks"
                    )
                if size >= 16 * MiB:
                    packs.place(batch)
                    batch, size = [], 0
            packs.place(batch)
            packs.finish()
            with ctx.transaction() as session:
                lease.fence(session)
                packs.publish(session)
                lease.release(session)
            packs.published()
        except BaseException:
            packs.discard()
            raise
    return {
        "chunks": count,
        "stored": packs.chunks_written,
        "bytes_stored": packs.chunk_bytes_written,
    }


def assemble_blob(
    ctx: RegistryContext, sha256: str, size: object, chunks: Iterable[object]
) -> dict[str, Any]:
    """Make ``sha256`` a blob from stored chunks, verified by reading them back."""
    require_sha256(sha256, "sha256")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise InvalidBody('"size" must be a non-negative integer')
    names = _chunk_names(chunks, MAX_ASSEMBLE)
    if not names:
        raise InvalidBody("a file is assembled from at least one chunk")
    with Lease(ctx.sessions, ctx.settings.lease_timeout) as lease:
        packs = PackSession(ctx, lease)
        missing: list[str] = []
        segments = segments_of(_stored_in_order(packs, names, missing))
        if missing:
            missing = list(dict.fromkeys(missing))
            raise ChunksMissing(
                f"{len(missing)} of the file's chunks are not stored, e.g. {missing[0]}",
                missing=missing,
            )
        held = sum(s.length for s in segments)
        if held != size:
            raise ManifestMismatch(
                f"the chunks hold {held} bytes, not the {size} announced for {sha256}"
            )
        h, crc = hashlib.sha256(), 0
        for data in iter_file(ctx.blobs, stored_from_layout(FileLayout(sha256, size, 0, segments))):
            h.update(data)
            crc = zlib.crc32(data, crc)
        if h.hexdigest() != sha256:
            raise ReassemblyMismatch(
                f"the chunks reassemble to sha256 {h.hexdigest()}, not {sha256}",
                reassembled_sha256=h.hexdigest(),
            )
        layout = FileLayout(sha256, size, crc, segments)
        with ctx.transaction() as session:
            lease.fence(session)
            new = record_files(session, [layout], packs.publish(session))
            lease.release(session)
    ctx.caches.index_changed()
    return {"sha256": sha256, "size": size, "created": bool(new)}


def _stored_in_order(
    packs: PackSession, names: list[str], missing: list[str]
) -> Iterator[ChunkRef]:
    """Where each of ``names`` is stored, in order, a window at a time (a file of a
    million chunks never holds a million references); the absent go to ``missing``."""
    for start in range(0, len(names), LOOKUP_WINDOW):
        window = names[start : start + LOOKUP_WINDOW]
        found = packs.lookup(set(window))
        for name in window:
            ref = found.get(name)
            if ref is None:
                missing.append(name)
            else:
                yield ref


def reconstruction(ctx: RegistryContext, sha256: str) -> dict[str, Any]:
    """A file's chunks in order, with their offsets in the file, for clients with a cache."""
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
