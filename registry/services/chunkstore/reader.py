"""Reading stored files, whole blobs or chunked, by byte range.

A file's ``StoredFile`` (size, CRC-32 and, when chunked, its segments as
ranges of packs) comes from the index in one query; reading a range then
touches only the packs and bytes it needs, and the blob store reads ahead
where that pays (ranged GETs in parallel on S3). The read path serves blobs
through ``registry.services.stored_blobs``, which builds on this.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from registry.blobstore.base import BlobStore, validate_range
from registry.carton.streams import CHUNK
from registry.db.queries import in_chunks
from registry.db.tables import Blob, BlobSegment, Pack
from registry.services.chunkstore.layout import FileLayout


@dataclass(frozen=True)
class PackRange:
    """``length`` bytes of a file at ``file_offset``, found at ``pack_offset`` in ``pack``."""

    pack: str
    file_offset: int
    pack_offset: int
    length: int


@dataclass(frozen=True)
class StoredFile:
    sha256: str
    size: int
    crc32: int | None  # None: an object the store holds without an index row
    ranges: tuple[PackRange, ...] | None  # None: a whole blob

    @property
    def chunked(self) -> bool:
        return self.ranges is not None

    def pack_ranges(self, start: int, end: int) -> list[tuple[str, int, int]]:
        """(pack, start, end) reads that yield the file's bytes ``[start, end)`` in order."""
        assert self.ranges is not None
        out: list[tuple[str, int, int]] = []
        for r in self.ranges:
            lo = max(start, r.file_offset)
            hi = min(end, r.file_offset + r.length)
            if lo < hi:
                shift = r.pack_offset - r.file_offset
                out.append((r.pack, lo + shift, hi + shift))
        return out


def stored_from_layout(layout: FileLayout) -> StoredFile:
    """How to read a file just written (before, or without, its rows)."""
    if layout.segments is None:
        return StoredFile(layout.sha256, layout.size, layout.crc32, None)
    ranges = tuple(
        PackRange(s.pack, s.file_offset, s.pack_offset, s.length) for s in layout.segments
    )
    return StoredFile(layout.sha256, layout.size, layout.crc32, ranges)


def load_files(session: Session, hashes: Iterable[str]) -> dict[str, StoredFile]:
    """The stored layout of every indexed file among ``hashes``."""
    wanted = sorted(set(hashes))
    rows: dict[str, tuple[int, int, bool]] = {}
    for batch in in_chunks(wanted):
        for r in session.execute(
            select(Blob.sha256, Blob.size, Blob.crc32, Blob.chunked).where(Blob.sha256.in_(batch))
        ):
            rows[r.sha256] = (int(r.size), int(r.crc32), bool(r.chunked))
    ranges: dict[str, list[PackRange]] = {}
    chunked = [sha for sha, (_, _, c) in rows.items() if c]
    for batch in in_chunks(chunked):
        for seg in session.execute(
            select(
                BlobSegment.blob_sha256,
                Pack.name,
                BlobSegment.file_offset,
                BlobSegment.pack_offset,
                BlobSegment.length,
            )
            .join(Pack, Pack.id == BlobSegment.pack_id)
            .where(BlobSegment.blob_sha256.in_(batch))
            .order_by(BlobSegment.blob_sha256, BlobSegment.seq)
        ):
            ranges.setdefault(seg.blob_sha256, []).append(
                PackRange(seg.name, int(seg.file_offset), int(seg.pack_offset), int(seg.length))
            )
    return {
        sha: StoredFile(sha, size, crc, tuple(ranges.get(sha, ())) if is_chunked else None)
        for sha, (size, crc, is_chunked) in rows.items()
    }


def load_file(session: Session, sha256: str) -> StoredFile | None:
    return load_files(session, [sha256]).get(sha256)


def iter_file(
    blobs: BlobStore,
    stored: StoredFile,
    start: int = 0,
    end: int | None = None,
    chunk_size: int = CHUNK,
) -> Iterator[bytes]:
    """The file's bytes ``[start, end)`` (clamped to its size), in pieces of ``chunk_size``."""
    validate_range(start, end)
    end = stored.size if end is None else min(end, stored.size)
    if start >= end:
        return iter(())
    if stored.ranges is None:
        return blobs.iter_chunks(stored.sha256, start, end, chunk_size)
    return blobs.iter_pack_ranges(stored.pack_ranges(start, end), chunk_size)


def read_file(
    blobs: BlobStore, stored: StoredFile, start: int = 0, end: int | None = None
) -> bytes:
    """A small file (or range) in memory."""
    return b"".join(iter_file(blobs, stored, start, end))


def stored_size(blobs: BlobStore, stored: StoredFile) -> int | None:
    """What the store holds of the file: its size when every object is there, else None."""
    if stored.ranges is None:
        return blobs.stat(stored.sha256)
    for pack in {r.pack for r in stored.ranges}:
        if blobs.pack_size(pack) is None:
            return None
    return stored.size
